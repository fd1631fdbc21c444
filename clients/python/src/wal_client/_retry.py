"""The retry loop every call shares: attempts until a final answer, a refusal or the deadline."""

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ._attempt import Again, Done, Outcome, Refusal
from ._backoff import Backoff, shed_wait
from .errors import Refused

# The shortest gRPC deadline an attempt is given: one started just before the caller's deadline
# still gets a real chance to answer rather than failing at once.
MIN_ATTEMPT_TIMEOUT = 0.001


@dataclass(frozen=True)
class Ended:
    """How a call ended: `done` holds the final answer, or is None when the deadline came first,
    with what the attempts said: could any have stored it, was any shed, the last message."""

    done: Done | None
    attempts: int
    maybe_stored: bool
    shed: bool
    message: str
    entry_id: str


async def run(
    attempt: Callable[[float], Awaitable[Outcome]],
    end: float,
    backoff: Backoff,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rng: Callable[[], float] = random.random,
) -> Ended:
    """Calls `attempt(timeout)` until it is Done, raising `Refused` on a refusal.

    No attempt starts after `end` (the monotonic deadline): a call whose deadline has passed
    before its first attempt ends at once with nothing sent, and a later attempt starts only
    when its wait ends before `end`; when it would not, the call ends at once with what is
    known, rather than sleeping to the deadline for nothing."""
    attempts = 0
    maybe_stored = shed = False
    message = entry_id = ""
    while True:
        if clock() >= end:
            return Ended(None, attempts, maybe_stored, shed, message, entry_id)
        attempts += 1
        outcome = await attempt(max(end - clock(), MIN_ATTEMPT_TIMEOUT))
        if isinstance(outcome, Done):
            return Ended(outcome, attempts, maybe_stored, shed, message, entry_id)
        if isinstance(outcome, Refusal):
            raise Refused(outcome.code, outcome.field, outcome.message, attempts)
        assert isinstance(outcome, Again)
        maybe_stored |= outcome.maybe_stored
        shed |= outcome.shed
        message = outcome.message or message
        entry_id = outcome.entry_id or entry_id
        if outcome.retry_after is not None:
            wait = shed_wait(outcome.retry_after, rng)
        else:
            wait = backoff.next()
        if clock() + wait >= end:
            return Ended(None, attempts, maybe_stored, shed, message, entry_id)
        await sleep(wait)
