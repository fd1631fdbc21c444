"""The library's typed errors."""

import grpc


class WalError(Exception):
    """Base of the errors this library raises."""


class Refused(WalError):
    """The producer refused the request: nothing was stored, and the library did not retry.

    `code` is the gRPC code (`code.name` is its canonical name, e.g. ``"INVALID_ARGUMENT"``),
    `field` the request field the refusal is about (``"payload"``, ``"namespace"``,
    ``"lifecycle.delay_millis"``, ``"transaction_id"``...; empty when none was named),
    `message` the producer's words and `attempts` the attempts made. RESOURCE_EXHAUSTED is
    raised only when the deadline ended while the producer still shed every attempt.
    """

    def __init__(self, code: grpc.StatusCode, field: str, message: str, attempts: int) -> None:
        self.code = code
        self.field = field
        self.message = message
        self.attempts = attempts
        where = f" ({field})" if field else ""
        super().__init__(f"{code.name}{where}: {message}")


class DeadlineExceeded(WalError):
    """An abort got no answer before its deadline: it may or may not have been applied.
    (Writes and commits never raise this: they return UNKNOWN.)"""

    def __init__(self, message: str, attempts: int) -> None:
        self.message = message
        self.attempts = attempts
        super().__init__(message)
