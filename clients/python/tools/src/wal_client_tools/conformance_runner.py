"""The conformance runner (clients/conformance/README.md): reads one plan on stdin, makes its
calls through wal_client, prints one result line per call as each ends. It checks nothing."""

import asyncio
import json
import logging
import sys
import time
from typing import Any

import wal_client

log = logging.getLogger("wal-conformance-runner")


def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        plan = json.load(sys.stdin)
        producers = plan["producers"]
        steps = plan["steps"]
        files = plan.get("tls")
        tls = (
            wal_client.Tls.from_files(files["ca"], files["certificate"], files["key"], files.get("domain"))
            if files
            else None
        )
    except (ValueError, KeyError, TypeError) as error:
        print(f"wal-conformance-runner: cannot read the plan: {error!r}", file=sys.stderr)
        sys.exit(2)
    try:
        asyncio.run(_run(producers, tls, steps))
    except Exception as error:  # a failure the result lines cannot say
        print(f"wal-conformance-runner: {error!r}", file=sys.stderr)
        sys.exit(1)


async def _run(
    producers: list[str], tls: "wal_client.Tls | None", steps: list[dict[str, Any]]
) -> None:
    async with wal_client.Client(producers, tls=tls) as client:
        for number, step in enumerate(steps):
            op = step["op"]
            log.info("step %d: %s", number, op)
            if op == "write":
                await _writes(client, number, step)
            elif op == "transaction":
                items = [item["payload"].encode() for item in step["items"]]
                await _one(number, 0, client.transaction(
                    step["namespace"], step["transaction_id"], items,
                    chunk=step.get("chunk"), deadline=_deadline(step)))
            elif op == "commit":
                await _one(number, 0, client.commit(
                    step["namespace"], step["transaction_id"], step["item_count"],
                    deadline=_deadline(step)))
            elif op == "abort":
                await _one(number, 0, client.abort(
                    step["namespace"], step["transaction_id"], deadline=_deadline(step)))
            else:
                raise ValueError(f"step {number}: unknown op {op!r}")


async def _writes(client: wal_client.Client, number: int, step: dict[str, Any]) -> None:
    def write(entry: dict[str, Any]):
        delay = entry.get("delay_millis")
        awaited = entry.get("await_destinations_millis", 0)
        return client.write(
            step["namespace"],
            entry["payload"].encode(),
            key=entry.get("key", ""),
            idempotency_id=entry.get("idempotency_id"),
            delay=None if delay is None else delay / 1000,
            deadline=_deadline(step),
            batch=bool(step.get("batch", False)),
            await_destinations=awaited / 1000 if awaited else None,
        )

    writes = step["writes"]
    if step.get("concurrent"):
        # Tasks start in list order, so the writes reach the batcher in that order.
        tasks = [asyncio.create_task(_one(number, i, write(e))) for i, e in enumerate(writes)]
        await asyncio.gather(*tasks)
        return
    pace = step.get("pace_millis", 0) / 1000
    for index, entry in enumerate(writes):
        if index and pace:
            await asyncio.sleep(pace)
        await _one(number, index, write(entry))


async def _one(step: int, index: int, call) -> None:
    """Awaits one call and prints its result line."""
    start = time.monotonic()
    line: dict[str, Any] = {"step": step, "index": index}
    try:
        result = await call
    except wal_client.Refused as refused:
        line |= {"outcome": "REFUSED", "code": refused.code.name, "field": refused.field,
                 "attempts": refused.attempts, "message": refused.message}
    except wal_client.DeadlineExceeded as unanswered:  # an abort nobody answered
        line |= {"outcome": "UNKNOWN", "attempts": unanswered.attempts,
                 "message": unanswered.message}
    else:
        if result is None:  # abort
            line |= {"outcome": "OK"}
        else:
            line |= {"outcome": result.outcome.value, "entry_id": result.entry_id,
                     "attempts": result.attempts}
            if result.message:
                line["message"] = result.message
            destinations = getattr(result, "destinations", ())
            if destinations:
                line["destinations"] = dict(destinations)
    line["elapsed_millis"] = round((time.monotonic() - start) * 1000)
    print(json.dumps(line), flush=True)


def _deadline(step: dict[str, Any]) -> float | None:
    millis = step.get("deadline_millis")
    return None if millis is None else millis / 1000
