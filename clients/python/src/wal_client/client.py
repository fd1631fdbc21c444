"""The asyncio client: writes, the two-phase helper, aborts (BEHAVIOUR.md, all of it)."""

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

import grpc

from . import _attempt, _codes, _retry
from ._attempt import Again, Done, Outcome
from ._backoff import Backoff
from ._batcher import Batcher, Pending
from ._channels import Endpoint, open_endpoint
from ._producers import Pool, Slot
from ._requests import (
    Metadata,
    Seconds,
    lifecycle,
    millis,
    payload_bytes,
    seconds,
    target_message,
    trace,
    transaction_item,
)
from ._proto.wal.v1 import transaction_pb2, write_pb2
from ._results import result as _result
from ._uuid7 import uuid7
from .errors import DeadlineExceeded, Refused
from .model import Item, Outcome as Answer, Target, WriteResult
from .settings import Settings, Tls

class Client:
    """A client of one or more producers, used from one asyncio event loop::

        async with Client(["127.0.0.1:50051"]) as client:
            result = await client.write("pds", b"...", key="objects/7")

    Settings are a `Settings` or its fields as keywords (``Client(addrs, deadline=5)``).
    """

    def __init__(
        self,
        producers: Sequence[str] | str,
        *,
        settings: Settings | None = None,
        tls: Tls | None = None,
        **overrides: Any,
    ) -> None:
        addresses = [producers] if isinstance(producers, str) else list(producers)
        if not addresses:
            raise ValueError("at least one producer address is needed")
        self._addresses = addresses
        self._settings = dataclasses.replace(settings or Settings(), **overrides)
        self._tls = tls
        self._pool: Pool[Endpoint] | None = None
        self._batcher: Batcher | None = None
        self._closed = False
        self._clock = time.monotonic

    @property
    def settings(self) -> Settings:
        return self._settings

    async def __aenter__(self) -> "Client":
        self._open()
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Sends the writes already queued, waits for the batches in flight, then closes the
        channels. The client takes no more calls."""
        self._closed = True
        if self._batcher is not None:
            await self._batcher.close()
            self._batcher = None
        if self._pool is not None:
            for slot in self._pool.slots:
                await slot.endpoint.channel.close()
            self._pool = None

    async def write(
        self,
        namespace: str,
        payload: bytes | str,
        *,
        key: str = "",
        idempotency_id: str | None = None,
        delay: Seconds | None = None,
        jitter: Seconds | None = None,
        original_write_time: datetime | None = None,
        target: Target | None = None,
        deadline: Seconds | None = None,
        batch: bool | None = None,
        traceparent: str | None = None,
        tracestate: str | None = None,
        await_destinations: Seconds | None = None,
    ) -> WriteResult:
        """Writes one entry and answers TRUE, FALSE or UNKNOWN (UNKNOWN only when the deadline
        ended first); raises `Refused` when the producer refuses it.

        `payload` (a str is sent as UTF-8), `key` (partition key: one key's entries keep their
        order), `idempotency_id` (a UUIDv7 when not given; every retry carries the same),
        `delay`/`jitter` (seconds or timedelta), `target` (the namespace's default when unset),
        `deadline` (seconds or timedelta from now; the client's default when unset), `batch`
        (False: its own WriteToLog even when the client batches), `traceparent`/`tracestate`
        (W3C trace context, sent as gRPC metadata), `await_destinations` (seconds or timedelta,
        60 s at most: once stored, the producer waits within the deadline for every destination
        of the namespace to apply it and the result's `destinations` says what each did; such a
        write goes as its own WriteToLog, so it holds back no batch; needs the namespace's
        durable storage).
        """
        pool = self._open()
        end = self._clock() + seconds(deadline, self._settings.deadline)
        entry_id = idempotency_id or uuid7()
        request = write_pb2.WriteToLogRequest(
            namespace=namespace,
            payload=payload_bytes(payload),
            idempotency_id=entry_id,
            key=key,
            lifecycle=lifecycle(delay, jitter, original_write_time),
            target=target_message(target),
            await_destinations_millis=millis(await_destinations) if await_destinations else 0,
        )
        metadata = trace(traceparent, tracestate)
        batched = self._settings.batching if batch is None else batch
        if batched and not await_destinations:
            attempt = self._batched(request, metadata)
        else:
            attempt = self._unary(
                pool,
                lambda endpoint, timeout: endpoint.write.WriteToLog(
                    request, timeout=timeout, metadata=metadata
                ),
                _attempt.from_answer,
            )
        ended = await _retry.run(attempt, end, self._backoff(), clock=self._clock)
        return _result(ended, entry_id, "the deadline passed before the write could be sent")

    async def transaction(
        self,
        namespace: str,
        transaction_id: str,
        items: Iterable[bytes | str | Item],
        *,
        chunk: int | None = None,
        deadline: Seconds | None = None,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> WriteResult:
        """Stages `items` as sequences 0 to n-1 in chunks of `chunk` (AppendItems, each sent
        again identically after a transport failure or UNAVAILABLE), then commits them; answers
        as `commit` does. One deadline covers the whole. Calling it again with the same id and
        items after any failure completes the transaction, applied once.

        Answers FALSE when the deadline ends before every item is staged: nothing was
        committed."""
        pool = self._open()
        end = self._clock() + seconds(deadline, self._settings.deadline)
        size = chunk or self._settings.transaction_chunk
        if size < 1:
            raise ValueError("chunk must be at least 1")
        staged = [transaction_item(sequence, entry) for sequence, entry in enumerate(items)]
        metadata = trace(traceparent, tracestate)
        for start in range(0, len(staged), size):
            request = transaction_pb2.AppendItemsRequest(
                namespace=namespace,
                transaction_id=transaction_id,
                items=staged[start : start + size],
            )
            attempt = self._unary(
                pool,
                lambda endpoint, timeout, request=request: endpoint.transactions.AppendItems(
                    request, timeout=timeout, metadata=metadata
                ),
                Done,
            )
            try:
                ended = await _retry.run(attempt, end, self._backoff(), clock=self._clock)
            except Refused as refused:
                # An append to a transaction already committed (or aborted, or expired) is
                # refused: resuming after a commit whose answer was lost goes on to the commit,
                # which answers TRUE for a committed transaction and names why otherwise.
                if refused.code != grpc.StatusCode.FAILED_PRECONDITION:
                    raise
                break
            if ended.done is None:
                if ended.shed and not ended.maybe_stored:
                    raise Refused(grpc.StatusCode.RESOURCE_EXHAUSTED, "", ended.message, ended.attempts)
                return WriteResult(
                    Answer.FALSE,
                    "",
                    ended.attempts,
                    f"the deadline passed while staging items from sequence {start} "
                    f"({ended.message}); nothing was committed: call again with the same "
                    "transaction id and items to resume",
                )
        return await self._commit(pool, namespace, transaction_id, len(staged), end, metadata)

    async def commit(
        self,
        namespace: str,
        transaction_id: str,
        item_count: int,
        *,
        deadline: Seconds | None = None,
        traceparent: str | None = None,
        tracestate: str | None = None,
    ) -> WriteResult:
        """Commits a transaction of `item_count` staged items, sent again after UNKNOWN or a
        transport failure until TRUE or the deadline. `entry_id` is the commit marker's id."""
        pool = self._open()
        end = self._clock() + seconds(deadline, self._settings.deadline)
        return await self._commit(
            pool, namespace, transaction_id, item_count, end, trace(traceparent, tracestate)
        )

    async def abort(
        self,
        namespace: str,
        transaction_id: str,
        *,
        deadline: Seconds | None = None,
    ) -> None:
        """Drops a transaction that is not committed (an unknown id is recorded as aborted).
        Raises `Refused` (FAILED_PRECONDITION once committed), or `DeadlineExceeded` when no
        attempt was answered by the deadline."""
        pool = self._open()
        end = self._clock() + seconds(deadline, self._settings.deadline)
        request = transaction_pb2.AbortTransactionRequest(
            namespace=namespace, transaction_id=transaction_id
        )
        attempt = self._unary(
            pool,
            lambda endpoint, timeout: endpoint.transactions.AbortTransaction(request, timeout=timeout),
            Done,
        )
        ended = await _retry.run(attempt, end, self._backoff(), clock=self._clock)
        if ended.done is not None:
            return
        if ended.shed and not ended.maybe_stored:
            raise Refused(grpc.StatusCode.RESOURCE_EXHAUSTED, "", ended.message, ended.attempts)
        raise DeadlineExceeded(
            f"abort unanswered by its deadline: {ended.message}", ended.attempts
        )

    async def _commit(
        self,
        pool: Pool[Endpoint],
        namespace: str,
        transaction_id: str,
        item_count: int,
        end: float,
        metadata: Metadata,
    ) -> WriteResult:
        request = transaction_pb2.CommitTransactionRequest(
            namespace=namespace, transaction_id=transaction_id, item_count=item_count
        )
        attempt = self._unary(
            pool,
            lambda endpoint, timeout: endpoint.transactions.CommitTransaction(
                request, timeout=timeout, metadata=metadata
            ),
            _attempt.from_answer,
        )
        ended = await _retry.run(attempt, end, self._backoff(), clock=self._clock)
        return _result(ended, "", "the deadline passed before the commit could be sent")

    def _unary(
        self,
        pool: Pool[Endpoint],
        invoke: Callable[[Endpoint, float], Awaitable[Any]],
        answer: Callable[[Any], Outcome],
    ) -> Callable[[float], Awaitable[Outcome]]:
        """One call per attempt, each to the next producer; after a transport failure, to
        another producer than the one that failed when there is one."""
        failed_on: Slot[Endpoint] | None = None

        async def attempt(timeout: float) -> Outcome:
            nonlocal failed_on
            slot = pool.pick(avoid=failed_on)
            try:
                response = await invoke(slot.endpoint, timeout)
            except grpc.aio.AioRpcError as error:
                outcome = _attempt.from_error(error)
                if _codes.kind(error.code()) is _codes.Kind.TRANSPORT:
                    pool.failed(slot)
                    failed_on = slot
                else:
                    pool.succeeded(slot)
                    failed_on = None
                return outcome
            except BaseException:
                pool.abandoned(slot)
                raise
            pool.succeeded(slot)
            failed_on = None
            return answer(response)

        return attempt

    def _batched(
        self, request: write_pb2.WriteToLogRequest, metadata: Metadata
    ) -> Callable[[float], Awaitable[Outcome]]:
        """Each attempt rides in the batcher's next batch. An attempt whose deadline ends while
        still queued is taken back (it stored nothing); one whose batch is in flight may have."""
        batcher = self._batcher
        assert batcher is not None

        async def attempt(timeout: float) -> Outcome:
            loop = asyncio.get_running_loop()
            future: asyncio.Future[Outcome] = loop.create_future()
            pending = Pending(request, metadata, self._clock() + timeout, future)

            def expire() -> None:
                # A timer rather than asyncio.wait_for, which costs a task per attempt.
                if future.done():
                    return
                if batcher.withdraw(pending):
                    future.set_result(Again(maybe_stored=False, message="the deadline passed before its batch left"))
                else:
                    future.set_result(Again(maybe_stored=True, message="the deadline passed while its batch was in flight"))

            batcher.submit(pending)
            timer = loop.call_later(timeout, expire)
            try:
                return await future
            except asyncio.CancelledError:
                batcher.withdraw(pending)
                raise
            finally:
                timer.cancel()

        return attempt

    async def _send_batch(self, batch: list[Pending]) -> None:
        """One WriteToLogBatch call for the batch; every write gets its own outcome. The call's
        deadline is the latest of its writes' (each write still returns by its own)."""
        pool = self._pool
        assert pool is not None
        timeout = max(max(p.end for p in batch) - self._clock(), _retry.MIN_ATTEMPT_TIMEOUT)
        request = write_pb2.WriteToLogBatchRequest(writes=[p.request for p in batch])
        slot = pool.pick()
        try:
            response = await slot.endpoint.write.WriteToLogBatch(
                request, timeout=timeout, metadata=batch[0].metadata
            )
        except grpc.aio.AioRpcError as error:
            if _codes.kind(error.code()) is _codes.Kind.TRANSPORT:
                pool.failed(slot)
            else:
                pool.succeeded(slot)
            outcomes = [_attempt.from_error(error)] * len(batch)
        except BaseException:
            pool.abandoned(slot)
            raise
        else:
            pool.succeeded(slot)
            if len(response.results) == len(batch):
                outcomes = [_attempt.from_batch_result(r) for r in response.results]
            else:
                wrong = Again(
                    maybe_stored=True,
                    message=f"the batch of {len(batch)} writes was answered with {len(response.results)} results",
                )
                outcomes = [wrong] * len(batch)
        for pending, outcome in zip(batch, outcomes):
            if not pending.future.done():
                pending.future.set_result(outcome)

    def _backoff(self) -> Backoff:
        return Backoff(self._settings.backoff_initial, self._settings.backoff_max)

    def _open(self) -> Pool[Endpoint]:
        """Opens the channels on first use: grpc.aio channels belong to the running loop."""
        if self._closed:
            raise RuntimeError("the client is closed")
        if self._pool is None:
            endpoints = [open_endpoint(address, self._settings, self._tls) for address in self._addresses]
            self._pool = Pool(
                endpoints,
                pause=self._settings.producer_pause,
                max_pause=self._settings.producer_max_pause,
                clock=self._clock,
            )
            self._batcher = Batcher(
                self._send_batch,
                linger=self._settings.linger,
                max_writes=self._settings.max_batch,
                max_in_flight=self._settings.max_batches_in_flight,
                clock=self._clock,
            )
        return self._pool
