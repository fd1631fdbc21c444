"""The caller's answer once a write's or a commit's attempts have ended."""

import grpc

from . import _retry
from ._proto.wal.v1 import write_pb2
from .errors import Refused
from .model import Outcome as Answer, WriteResult

_ANSWERS = {
    write_pb2.TRILEAN_TRUE: Answer.TRUE,
    write_pb2.TRILEAN_FALSE: Answer.FALSE,
}

_STATES = {
    write_pb2.DESTINATION_STATE_APPLIED: "applied",
    write_pb2.DESTINATION_STATE_DEAD_LETTERED: "dead_lettered",
}


def result(ended: _retry.Ended, entry_id: str, unsent: str) -> WriteResult:
    """The caller's answer: the final Trilean, or at the deadline what is known (UNKNOWN if any
    attempt may have stored it, RESOURCE_EXHAUSTED if every attempt was shed, FALSE when no
    attempt ever left)."""
    if ended.done is not None:
        response = ended.done.value
        destinations = getattr(response, "destinations", ())
        return WriteResult(
            _ANSWERS[response.durable],
            response.entry_id or entry_id,
            ended.attempts,
            response.message,
            tuple((d.destination, _STATES.get(d.state, "pending")) for d in destinations),
        )
    if ended.maybe_stored:
        return WriteResult(Answer.UNKNOWN, entry_id or ended.entry_id, ended.attempts, ended.message)
    if ended.shed:
        raise Refused(grpc.StatusCode.RESOURCE_EXHAUSTED, "", ended.message, ended.attempts)
    return WriteResult(Answer.FALSE, entry_id, ended.attempts, unsent)
