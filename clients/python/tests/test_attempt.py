"""Reading an attempt's outcome from answers, batch results and rich gRPC statuses."""

import grpc
from google.protobuf import any_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2

from wal_client._attempt import Again, Done, Refusal, from_answer, from_batch_result, from_error
from wal_client._proto.wal.v1 import write_pb2


def answer(durable, message="", entry_id="e"):
    return write_pb2.WriteToLogResponse(durable=durable, message=message, entry_id=entry_id)


def test_true_and_false_are_final():
    assert isinstance(from_answer(answer(write_pb2.TRILEAN_TRUE)), Done)
    assert isinstance(from_answer(answer(write_pb2.TRILEAN_FALSE)), Done)


def test_unknown_and_unspecified_are_retried_as_maybe_stored():
    for durable in (write_pb2.TRILEAN_UNKNOWN, write_pb2.TRILEAN_UNSPECIFIED):
        outcome = from_answer(answer(durable, "lost ack"))
        assert isinstance(outcome, Again) and outcome.maybe_stored and not outcome.shed


def test_batch_refusal_names_its_field():
    result = write_pb2.WriteResult(code=3, error="payload is empty", field="payload")
    assert from_batch_result(result) == Refusal(
        grpc.StatusCode.INVALID_ARGUMENT, "payload", "payload is empty"
    )


def test_batch_shed_carries_its_wait():
    outcome = from_batch_result(write_pb2.WriteResult(code=8, error="over", retry_after_millis=250))
    assert outcome == Again(maybe_stored=False, message="over", shed=True, retry_after=0.25)
    outcome = from_batch_result(write_pb2.WriteResult(code=8, error="in flight"))
    assert outcome.shed and outcome.retry_after is None


def test_batch_answer():
    result = write_pb2.WriteResult(code=0, response=answer(write_pb2.TRILEAN_TRUE))
    assert isinstance(from_batch_result(result), Done)


def rich_error(code, message, *details):
    status = status_pb2.Status(code=code.value[0], message=message)
    for detail in details:
        packed = any_pb2.Any()
        packed.Pack(detail)
        status.details.append(packed)
    trailing = grpc.aio.Metadata(("grpc-status-details-bin", status.SerializeToString()))
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), trailing, message)


def test_refusal_field_from_bad_request():
    bad = error_details_pb2.BadRequest(
        field_violations=[error_details_pb2.BadRequest.FieldViolation(field="namespace")]
    )
    outcome = from_error(rich_error(grpc.StatusCode.NOT_FOUND, "no such namespace", bad))
    assert outcome == Refusal(grpc.StatusCode.NOT_FOUND, "namespace", "no such namespace")


def test_shed_wait_from_retry_info():
    info = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(nanos=40_000_000))
    outcome = from_error(rich_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "rate", info))
    assert outcome.shed and not outcome.maybe_stored and abs(outcome.retry_after - 0.04) < 1e-9


def test_transport_failure_may_have_stored():
    outcome = from_error(rich_error(grpc.StatusCode.UNAVAILABLE, "connection reset"))
    assert isinstance(outcome, Again) and outcome.maybe_stored and not outcome.shed


def test_refusal_without_details_has_no_field():
    outcome = from_error(rich_error(grpc.StatusCode.PERMISSION_DENIED, "no"))
    assert outcome == Refusal(grpc.StatusCode.PERMISSION_DENIED, "", "no")
