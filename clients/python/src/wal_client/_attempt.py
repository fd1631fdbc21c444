"""What one attempt of a call came to, read from the gRPC status or the batch result."""

from dataclasses import dataclass
from typing import Any

import grpc
from google.rpc import error_details_pb2, status_pb2

from . import _codes
from ._proto.wal.v1 import write_pb2


@dataclass(frozen=True)
class Done:
    """A final answer: a write's or commit's TRUE or FALSE, an append staged, an abort done."""

    value: Any


@dataclass(frozen=True)
class Again:
    """Not final: retried until the deadline. `maybe_stored` is false only when the producer
    said nothing was stored (shed) or the attempt never left (withdrawn from the batcher)."""

    maybe_stored: bool
    message: str = ""
    shed: bool = False
    retry_after: float | None = None  # seconds the producer asked to wait (shed only)
    entry_id: str = ""


@dataclass(frozen=True)
class Refusal:
    """A refusal: raised as `Refused`, never retried."""

    code: grpc.StatusCode
    field: str
    message: str


Outcome = Done | Again | Refusal

_DETAILS_KEY = "grpc-status-details-bin"


def from_answer(response: write_pb2.WriteToLogResponse) -> Outcome:
    """TRUE and FALSE end the call; UNKNOWN and TRILEAN_UNSPECIFIED are retried."""
    if response.durable in (write_pb2.TRILEAN_TRUE, write_pb2.TRILEAN_FALSE):
        return Done(response)
    message = response.message or "the producer answered UNKNOWN"
    return Again(maybe_stored=True, message=message, entry_id=response.entry_id)


def from_error(error: grpc.aio.AioRpcError) -> Outcome:
    """A failed call: transport failure, shed or refusal, with the status details' field and
    wait (google.rpc.BadRequest, google.rpc.RetryInfo)."""
    code = error.code()
    message = error.details() or code.name
    field, retry_after = _details(error)
    match _codes.kind(code):
        case _codes.Kind.TRANSPORT:
            return Again(maybe_stored=True, message=f"{code.name}: {message}")
        case _codes.Kind.SHED:
            return Again(maybe_stored=False, message=message, shed=True, retry_after=retry_after)
        case _:
            return Refusal(code, field, message)


def from_batch_result(result: write_pb2.WriteResult) -> Outcome:
    """One write of a batch: answered as WriteToLog would have been."""
    if result.code == 0:
        return from_answer(result.response)
    code = _codes.from_number(result.code)
    message = result.error or code.name
    match _codes.kind(code):
        case _codes.Kind.TRANSPORT:
            return Again(maybe_stored=True, message=f"{code.name}: {message}")
        case _codes.Kind.SHED:
            wait = result.retry_after_millis / 1000 if result.retry_after_millis else None
            return Again(maybe_stored=False, message=message, shed=True, retry_after=wait)
        case _:
            return Refusal(code, result.field, message)


def _details(error: grpc.aio.AioRpcError) -> tuple[str, float | None]:
    """The first BadRequest field violation's field and the RetryInfo delay in seconds."""
    field, retry_after = "", None
    for key, value in error.trailing_metadata() or ():
        if key != _DETAILS_KEY:
            continue
        status = status_pb2.Status()
        try:
            status.ParseFromString(value)
        except Exception:  # a malformed detail is ignored: the code alone still types the error
            continue
        for detail in status.details:
            if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
                bad = error_details_pb2.BadRequest()
                detail.Unpack(bad)
                if bad.field_violations and not field:
                    field = bad.field_violations[0].field
            elif detail.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
                info = error_details_pb2.RetryInfo()
                detail.Unpack(info)
                delay = info.retry_delay.seconds + info.retry_delay.nanos / 1e9
                if delay > 0:
                    retry_after = delay
    return field, retry_after
