"""Turning a caller's arguments into the proto's requests and gRPC metadata."""

from datetime import datetime, timedelta

from ._proto.wal.v1 import target_pb2, transaction_pb2, write_pb2
from .model import Item, Target

Seconds = float | timedelta
Metadata = tuple[tuple[str, str], ...]


def seconds(value: Seconds | None, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, timedelta):
        return value.total_seconds()
    return float(value)


def millis(value: Seconds) -> int:
    if isinstance(value, timedelta):
        return value // timedelta(milliseconds=1)
    return round(value * 1000)


def payload_bytes(payload: bytes | str) -> bytes:
    return payload.encode() if isinstance(payload, str) else bytes(payload)


def lifecycle(
    delay: Seconds | None, jitter: Seconds | None, original: datetime | None
) -> write_pb2.Lifecycle | None:
    if delay is None and jitter is None and original is None:
        return None
    return write_pb2.Lifecycle(
        delay_millis=millis(delay) if delay is not None else 0,
        jitter_millis=millis(jitter) if jitter is not None else 0,
        original_write_time_micros=round(original.timestamp() * 1_000_000) if original else 0,
    )


def target_message(target: Target | None) -> target_pb2.Target | None:
    if target is None:
        return None
    return target_pb2.Target(kind=target.kind, settings_json=target.settings_json)


def transaction_item(sequence: int, entry: bytes | str | Item) -> transaction_pb2.TransactionItem:
    if not isinstance(entry, Item):
        entry = Item(payload_bytes(entry))
    return transaction_pb2.TransactionItem(
        sequence=sequence, payload=payload_bytes(entry.payload), target=target_message(entry.target)
    )


def trace(traceparent: str | None, tracestate: str | None) -> Metadata:
    metadata = []
    if traceparent:
        metadata.append(("traceparent", traceparent))
        if tracestate:
            metadata.append(("tracestate", tracestate))
    return tuple(metadata)
