"""Gathers writes made concurrently into WriteToLogBatch calls (BEHAVIOUR.md, Batching).

The batcher only carries attempts: each write's own retry loop hands it one attempt at a time
and awaits that attempt's outcome, so a write to retry simply comes back, in a later batch."""

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ._attempt import Outcome


@dataclass(eq=False)
class Pending:
    """One attempt of one write waiting for a batch: its request, its trace metadata, when its
    write's deadline ends (monotonic), and the future its outcome is set on."""

    request: object
    metadata: tuple[tuple[str, str], ...]
    end: float
    future: asyncio.Future[Outcome]
    queued_at: float = 0.0
    sent: bool = False


Send = Callable[[list[Pending]], Awaitable[None]]


class Batcher:
    """A batch leaves when it holds `max_writes` attempts or when its first has waited `linger`
    seconds; at most `max_in_flight` batches are in flight at once, and attempts leave in the
    order they were submitted. `send` must set every attempt's future."""

    def __init__(
        self,
        send: Send,
        *,
        linger: float = 0.001,
        max_writes: int = 500,
        max_in_flight: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._send = send
        self._linger = linger
        self._max_writes = max_writes
        self._slots = asyncio.Semaphore(max_in_flight)
        self._clock = clock
        self._queue: deque[Pending] = deque()
        self._wake = asyncio.Event()
        self._loop_task: asyncio.Task[None] | None = None
        self._in_flight: set[asyncio.Task[None]] = set()
        self._closed = False

    def submit(self, pending: Pending) -> None:
        """Queues an attempt. Synchronous, so attempts queue in the order their writes started."""
        if self._closed:
            raise RuntimeError("the client is closed")
        pending.queued_at = self._clock()
        self._queue.append(pending)
        self._wake.set()
        if self._loop_task is None:
            self._loop_task = asyncio.get_running_loop().create_task(self._run())

    def withdraw(self, pending: Pending) -> bool:
        """Takes back an attempt not yet sent (its deadline ended, or its caller gave up); False
        when it is already in a batch."""
        if pending.sent:
            return False
        try:
            self._queue.remove(pending)
        except ValueError:
            return False
        return True

    async def close(self) -> None:
        """Takes no more attempts, sends those queued, waits for every batch, then stops."""
        self._closed = True
        while self._queue or self._in_flight:
            if self._in_flight:
                await asyncio.gather(*list(self._in_flight), return_exceptions=True)
            else:
                await asyncio.sleep(self._linger)
        if self._loop_task is not None:
            self._loop_task.cancel()
            try:
                await self._loop_task
            except asyncio.CancelledError:
                pass
            self._loop_task = None

    async def _run(self) -> None:
        while True:
            await self._linger_for_batch()
            await self._slots.acquire()
            batch = self._take()
            if not batch:
                self._slots.release()
                continue
            task = asyncio.get_running_loop().create_task(self._send_one(batch))
            self._in_flight.add(task)
            task.add_done_callback(self._in_flight.discard)

    async def _linger_for_batch(self) -> None:
        """Returns once the queue holds a full batch or its first attempt has lingered enough."""
        while True:
            if not self._queue:
                self._wake.clear()
                await self._wake.wait()
                continue
            if len(self._queue) >= self._max_writes:
                return
            left = self._queue[0].queued_at + self._linger - self._clock()
            if left <= 0:
                return
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), left)
            except TimeoutError:
                pass

    def _take(self) -> list[Pending]:
        batch = []
        while self._queue and len(batch) < self._max_writes:
            pending = self._queue.popleft()
            pending.sent = True
            batch.append(pending)
        return batch

    async def _send_one(self, batch: list[Pending]) -> None:
        try:
            await self._send(batch)
        except Exception as error:  # send must answer every attempt; never leave one hanging
            for pending in batch:
                if not pending.future.done():
                    pending.future.set_exception(error)
        except BaseException:
            for pending in batch:
                pending.future.cancel()
            raise
        finally:
            self._slots.release()
