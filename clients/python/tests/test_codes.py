"""Which gRPC codes are retried, which are shed, which are refusals."""

import grpc
import pytest

from wal_client._codes import Kind, from_number, kind

C = grpc.StatusCode


@pytest.mark.parametrize(
    "code",
    [C.UNAVAILABLE, C.DEADLINE_EXCEEDED, C.CANCELLED, C.INTERNAL, C.UNKNOWN, C.ABORTED, C.DATA_LOSS],
)
def test_transport_failures_are_retried(code):
    assert kind(code) is Kind.TRANSPORT


def test_resource_exhausted_is_shed():
    assert kind(C.RESOURCE_EXHAUSTED) is Kind.SHED


@pytest.mark.parametrize(
    "code",
    [
        C.INVALID_ARGUMENT,
        C.NOT_FOUND,
        C.PERMISSION_DENIED,
        C.UNAUTHENTICATED,
        C.FAILED_PRECONDITION,
        C.ALREADY_EXISTS,
        C.OUT_OF_RANGE,
        C.UNIMPLEMENTED,
    ],
)
def test_refusals_are_never_retried(code):
    assert kind(code) is Kind.REFUSAL


def test_batch_result_numbers():
    assert from_number(3) is C.INVALID_ARGUMENT
    assert from_number(5) is C.NOT_FOUND
    assert from_number(8) is C.RESOURCE_EXHAUSTED
    assert from_number(99) is C.UNKNOWN
