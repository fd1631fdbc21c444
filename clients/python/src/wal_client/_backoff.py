"""The waits between attempts (BEHAVIOUR.md, Retries)."""

import random
from collections.abc import Callable


class Backoff:
    """Exponential from `initial`, doubling up to `maximum`, with full jitter: each wait is
    uniformly random between zero and the current step, so clients retrying together spread out.
    One per call: the step grows with that call's retries only."""

    def __init__(
        self,
        initial: float = 0.05,
        maximum: float = 2.0,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self._step = initial
        self._maximum = maximum
        self._rng = rng

    def next(self) -> float:
        wait = self._rng() * self._step
        self._step = min(self._step * 2, self._maximum)
        return wait


def shed_wait(retry_after: float, rng: Callable[[], float] = random.random) -> float:
    """The wait after a RESOURCE_EXHAUSTED that said how long to wait: that wait plus a random
    share of up to that wait again, so writes shed together do not come back together."""
    return retry_after * (1.0 + rng())
