"""The client's write paths over fake stubs (no network): ids kept across retries, batches
answered per write, refusals typed, the sync wrapper."""

import asyncio
from types import SimpleNamespace

import grpc
import pytest

import wal_client
from wal_client import client as client_module
from wal_client._proto.wal.v1 import write_pb2

TRUE, UNKNOWN = write_pb2.TRILEAN_TRUE, write_pb2.TRILEAN_UNKNOWN


class FakeProducer:
    """Answers UNKNOWN to the first attempt of each id, TRUE after; refuses empty payloads."""

    def __init__(self):
        self.calls = []  # ("one" | "batch", [ids])

    def _answer(self, request, seen):
        if not request.payload:
            return write_pb2.WriteResult(code=3, error="payload is empty", field="payload")
        durable = TRUE if request.idempotency_id in seen else UNKNOWN
        seen.add(request.idempotency_id)
        self.awaited = getattr(self, "awaited", []) + [request.await_destinations_millis]
        # A write that awaits its destinations hears of two: one applied, one still pending.
        destinations = [
            write_pb2.DestinationOutcome(destination="default", state=write_pb2.DESTINATION_STATE_APPLIED),
            write_pb2.DestinationOutcome(destination="cache", state=write_pb2.DESTINATION_STATE_PENDING),
        ]
        return write_pb2.WriteResult(
            response=write_pb2.WriteToLogResponse(
                durable=durable,
                entry_id=request.idempotency_id,
                destinations=destinations if durable == TRUE and request.await_destinations_millis else [],
            )
        )

    def stub(self):
        seen = set()

        async def write_to_log(request, timeout, metadata):
            self.calls.append(("one", [request.idempotency_id]))
            result = self._answer(request, seen)
            if result.code:
                raise grpc.aio.AioRpcError(
                    grpc.StatusCode.INVALID_ARGUMENT, grpc.aio.Metadata(), grpc.aio.Metadata(), result.error
                )
            return result.response

        async def write_to_log_batch(request, timeout, metadata):
            self.calls.append(("batch", [w.idempotency_id for w in request.writes]))
            await asyncio.sleep(0.01)
            return write_pb2.WriteToLogBatchResponse(results=[self._answer(w, seen) for w in request.writes])

        return SimpleNamespace(WriteToLog=write_to_log, WriteToLogBatch=write_to_log_batch)


@pytest.fixture
def producer(monkeypatch):
    fake = FakeProducer()
    stub = fake.stub()

    async def close():
        pass

    def endpoint(address, settings, tls):
        return client_module.Endpoint(address, SimpleNamespace(close=close), stub, None)

    monkeypatch.setattr(client_module, "open_endpoint", endpoint)
    return fake


def test_unknown_is_retried_with_the_same_id(producer):
    async def main():
        async with wal_client.Client(["fake:1"], batching=False) as client:
            return await client.write("ns", b"x", idempotency_id="mine")

    result = asyncio.run(main())
    assert result.outcome is wal_client.Outcome.TRUE and result.attempts == 2
    assert result.entry_id == "mine"
    assert producer.calls == [("one", ["mine"]), ("one", ["mine"])]


def test_every_write_gets_an_id_before_its_first_attempt(producer):
    async def main():
        async with wal_client.Client(["fake:1"], batching=False) as client:
            return await client.write("ns", "x")

    result = asyncio.run(main())
    first_id = producer.calls[0][1][0]
    assert first_id and result.entry_id == first_id and first_id[14] == "7"  # a UUIDv7


def test_concurrent_writes_share_batches_and_are_answered_each(producer):
    async def main():
        async with wal_client.Client(["fake:1"]) as client:
            tasks = [
                asyncio.create_task(client.write("ns", b"" if i == 2 else b"x", idempotency_id=f"w{i}"))
                for i in range(5)
            ]
            return await asyncio.gather(*tasks, return_exceptions=True)

    results = asyncio.run(main())
    assert isinstance(results[2], wal_client.Refused)
    assert results[2].field == "payload" and results[2].attempts == 1
    assert all(r.outcome is wal_client.Outcome.TRUE and r.attempts == 2 for i, r in enumerate(results) if i != 2)
    # One batch of all five in order; the four answered UNKNOWN come back in later batches
    # (each after its own jittered backoff), each once, with its id.
    assert producer.calls[0] == ("batch", ["w0", "w1", "w2", "w3", "w4"])
    retried = [i for kind, ids in producer.calls[1:] for i in ids if kind == "batch"]
    assert sorted(retried) == ["w0", "w1", "w3", "w4"]


def test_a_write_awaiting_its_destinations_goes_alone_and_hears_each(producer):
    async def main():
        async with wal_client.Client(["fake:1"]) as client:
            return await client.write("ns", b"x", idempotency_id="w", await_destinations=2.5)

    result = asyncio.run(main())
    assert result.outcome is wal_client.Outcome.TRUE
    assert result.destinations == (("default", "applied"), ("cache", "pending"))
    # Its own WriteToLog, though the client batches: in a batch it would hold back the others.
    assert [kind for kind, _ in producer.calls] == ["one", "one"]
    assert producer.awaited == [2500, 2500]


def test_refusal_of_a_single_write(producer):
    async def main():
        async with wal_client.Client(["fake:1"], batching=False) as client:
            await client.write("ns", b"")

    with pytest.raises(wal_client.Refused) as raised:
        asyncio.run(main())
    assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT


def test_sync_client(producer):
    with wal_client.SyncClient(["fake:1"]) as client:
        result = client.write("ns", b"x", idempotency_id="sync")
    assert result.outcome is wal_client.Outcome.TRUE and result.entry_id == "sync"


def test_closed_client_takes_no_calls(producer):
    async def main():
        client = wal_client.Client(["fake:1"])
        await client.close()
        await client.write("ns", b"x")

    with pytest.raises(RuntimeError):
        asyncio.run(main())
