"""Which gRPC codes are retried and how (BEHAVIOUR.md, Retries)."""

import enum

import grpc


class Kind(enum.Enum):
    TRANSPORT = "transport"  # no answer: the entry may be stored; retried with the same id
    SHED = "shed"  # RESOURCE_EXHAUSTED: nothing stored; retried after the wait asked for
    REFUSAL = "refusal"  # the request is wrong or not allowed: a typed error, never retried


# The refusals of BEHAVIOUR.md: the request is wrong or not allowed, and nothing was stored.
# Every other code (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, INTERNAL, UNKNOWN, ABORTED,
# DATA_LOSS...) is a call that got no answer the client can trust: retried with the same id.
_REFUSALS = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.UNIMPLEMENTED,
    }
)

_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def kind(code: grpc.StatusCode) -> Kind:
    """How a non-OK code is handled: RESOURCE_EXHAUSTED is shed, the refusals are refused, and
    every other code is a transport failure (BEHAVIOUR.md, Retries)."""
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return Kind.SHED
    if code in _REFUSALS:
        return Kind.REFUSAL
    return Kind.TRANSPORT


def from_number(number: int) -> grpc.StatusCode:
    """The code of a batch result's `code` field; a number gRPC does not know is UNKNOWN."""
    return _BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)
