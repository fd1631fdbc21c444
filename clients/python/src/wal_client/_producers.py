"""Round robin over several producers, skipping one that failed in transport for a while
(BEHAVIOUR.md, Several producers)."""

import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")


class Slot(Generic[T]):
    """One producer and its health: consecutive transport failures, the end of its pause, and
    whether the one call that tries it again after a pause is under way."""

    def __init__(self, endpoint: T) -> None:
        self.endpoint = endpoint
        self.failures = 0
        self.paused_until = 0.0
        self.probing = False

    def available(self, now: float) -> bool:
        return self.paused_until <= now and not self.probing


class Pool(Generic[T]):
    """Hands out the next producer for each call. A transport failure pauses a producer for
    `pause` seconds, doubling up to `max_pause` while it keeps failing; after the pause one call
    tries it (others skip it meanwhile) and its success puts it back. When every producer is
    skipped, the one whose pause ends first is tried."""

    def __init__(
        self,
        endpoints: Sequence[T],
        *,
        pause: float = 1.0,
        max_pause: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not endpoints:
            raise ValueError("at least one producer address is needed")
        self.slots = [Slot(endpoint) for endpoint in endpoints]
        self._next = 0
        self._pause = pause
        self._max_pause = max_pause
        self._clock = clock

    def pick(self, avoid: Slot[T] | None = None) -> Slot[T]:
        """The next available producer after the last one picked, other than `avoid` (the one a
        retried call just failed on) when there is another."""
        now = self._clock()
        count = len(self.slots)
        for offset in range(count):
            index = (self._next + offset) % count
            slot = self.slots[index]
            if slot is avoid and count > 1:
                continue
            if slot.available(now):
                self._next = index + 1
                if slot.failures:
                    slot.probing = True
                return slot
        others = [slot for slot in self.slots if slot is not avoid] or self.slots
        return min(others, key=lambda slot: slot.paused_until)

    def succeeded(self, slot: Slot[T]) -> None:
        """The producer answered (any answer, refusals included): back in the rotation."""
        slot.failures = 0
        slot.paused_until = 0.0
        slot.probing = False

    def failed(self, slot: Slot[T]) -> None:
        """A transport failure: skip the producer for a pause that doubles while it keeps failing."""
        slot.failures += 1
        pause = min(self._pause * 2 ** min(slot.failures - 1, 32), self._max_pause)
        slot.paused_until = self._clock() + pause
        slot.probing = False

    def abandoned(self, slot: Slot[T]) -> None:
        """The call was cancelled by the caller: it says nothing of the producer."""
        slot.probing = False
