"""Writes at a fixed rate for a few seconds to the producers given and prints the writes/s
answered TRUE and the latency percentiles. Bounded in rate and time: it stops by itself."""

import argparse
import asyncio
import collections
import time

import wal_client


def main() -> None:
    parser = argparse.ArgumentParser(prog="wal-bench", description=__doc__)
    parser.add_argument("producers", nargs="+", help="producer addresses, host:port")
    parser.add_argument("--namespace", default="python-demo")
    parser.add_argument("--rate", type=float, default=1000.0, help="writes per second (at most 50000)")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long to write (at most 60)")
    parser.add_argument("--payload-bytes", type=int, default=100)
    parser.add_argument("--keys", type=int, default=16, help="distinct partition keys")
    parser.add_argument("--no-batch", action="store_true", help="every write its own WriteToLog")
    args = parser.parse_args()
    if not 0 < args.rate <= 50_000 or not 0 < args.seconds <= 60:
        parser.error("--rate must be in (0, 50000] and --seconds in (0, 60]")
    asyncio.run(_bench(args))


async def _bench(args: argparse.Namespace) -> None:
    payload = b"x" * args.payload_bytes
    latencies: list[float] = []
    outcomes: collections.Counter[str] = collections.Counter()

    async def one(client: wal_client.Client, number: int) -> None:
        start = time.monotonic()
        try:
            result = await client.write(args.namespace, payload, key=f"bench-{number % args.keys}")
            outcomes[result.outcome.value] += 1
        except wal_client.Refused as refused:
            outcomes[f"REFUSED {refused.code.name}"] += 1
        latencies.append(time.monotonic() - start)

    count = int(args.rate * args.seconds)
    async with wal_client.Client(args.producers, batching=not args.no_batch) as client:
        started = time.monotonic()
        tasks = []
        for number in range(count):
            # Open loop: each write starts at its time, whether or not earlier ones are answered.
            wait = started + number / args.rate - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            tasks.append(asyncio.create_task(one(client, number)))
        await asyncio.gather(*tasks)
        elapsed = time.monotonic() - started

    latencies.sort()
    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000
    print(f"{count} writes in {elapsed:.2f} s, asked {args.rate:g}/s: "
          f"{outcomes['TRUE'] / elapsed:.0f} TRUE writes/s")
    print(f"latency p50 {pct(0.50):.1f} ms, p99 {pct(0.99):.1f} ms, max {latencies[-1] * 1000:.1f} ms")
    print("outcomes: " + ", ".join(f"{name} {n}" for name, n in sorted(outcomes.items())))
