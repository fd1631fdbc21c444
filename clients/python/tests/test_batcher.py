"""Batch splitting, order, linger, one batch in flight, and taking back unsent attempts."""

import asyncio

from wal_client._batcher import Batcher, Pending


def pending(name, loop):
    return Pending(name, (), 1e9, loop.create_future())


def test_batches_split_at_the_cap_in_submission_order():
    sent = []

    async def send(batch):
        sent.append([p.request for p in batch])
        await asyncio.sleep(0)
        for p in batch:
            p.future.set_result(p.request)

    async def main():
        loop = asyncio.get_running_loop()
        batcher = Batcher(send, max_writes=500)
        items = [pending(i, loop) for i in range(1200)]
        for item in items:
            batcher.submit(item)
        results = await asyncio.gather(*(p.future for p in items))
        await batcher.close()
        return results

    results = asyncio.run(main())
    assert [len(b) for b in sent] == [500, 500, 200]
    assert [r for b in sent for r in b] == list(range(1200)) == results


def test_one_batch_in_flight_and_later_writes_wait_for_the_next():
    in_flight = 0
    most = 0
    sizes = []

    async def send(batch):
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        sizes.append(len(batch))
        await asyncio.sleep(0.02)
        in_flight -= 1
        for p in batch:
            p.future.set_result(None)

    async def main():
        loop = asyncio.get_running_loop()
        batcher = Batcher(send)
        first = [pending(i, loop) for i in range(3)]
        for p in first:
            batcher.submit(p)
        await asyncio.sleep(0.005)  # the first batch has left and is in flight
        later = [pending(i, loop) for i in range(5)]
        for p in later:
            batcher.submit(p)
        await asyncio.gather(*(p.future for p in first + later))
        await batcher.close()

    asyncio.run(main())
    assert most == 1 and sizes == [3, 5]


def test_a_lone_write_leaves_after_the_linger():
    async def send(batch):
        for p in batch:
            p.future.set_result(None)

    async def main():
        loop = asyncio.get_running_loop()
        batcher = Batcher(send, linger=0.001)
        p = pending("x", loop)
        started = loop.time()
        batcher.submit(p)
        await p.future
        await batcher.close()
        return loop.time() - started

    assert asyncio.run(main()) < 0.5


def test_an_unsent_attempt_can_be_withdrawn_and_a_sent_one_cannot():
    release = None

    async def send(batch):
        await release.wait()
        for p in batch:
            p.future.set_result(None)

    async def main():
        nonlocal release
        release = asyncio.Event()
        loop = asyncio.get_running_loop()
        batcher = Batcher(send)
        first, second = pending("a", loop), pending("b", loop)
        batcher.submit(first)
        await asyncio.sleep(0.01)  # first is in flight; second will queue behind it
        batcher.submit(second)
        assert batcher.withdraw(second) is True
        assert batcher.withdraw(first) is False
        release.set()
        await first.future
        await batcher.close()
        return second.future.done()

    assert asyncio.run(main()) is False


def test_a_failing_send_fails_its_attempts_instead_of_hanging():
    async def send(batch):
        raise RuntimeError("boom")

    async def main():
        loop = asyncio.get_running_loop()
        batcher = Batcher(send)
        p = pending("x", loop)
        batcher.submit(p)
        try:
            await p.future
        except RuntimeError as error:
            return str(error)
        finally:
            await batcher.close()

    assert asyncio.run(main()) == "boom"
