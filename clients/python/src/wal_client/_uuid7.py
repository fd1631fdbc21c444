"""UUIDv7 (RFC 9562) for idempotency ids: Python 3.11's uuid module has no uuid7."""

import os
import time
import uuid


def uuid7() -> str:
    """A fresh UUIDv7: 48 bits of Unix milliseconds, then 74 random bits."""
    millis = time.time_ns() // 1_000_000 & ((1 << 48) - 1)
    rand = int.from_bytes(os.urandom(10), "big")
    rand_a = rand >> 68  # 12 bits
    rand_b = rand & ((1 << 62) - 1)
    value = millis << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    return str(uuid.UUID(int=value))
