"""The retry loop: what is retried, with which waits, and what the deadline leaves."""

import asyncio

import grpc
import pytest

from wal_client._attempt import Again, Done, Refusal
from wal_client._backoff import Backoff
from wal_client._retry import run
from wal_client.errors import Refused


class FakeTime:
    """A clock that moves only when the loop sleeps (or an attempt takes time)."""

    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def clock(self):
        return self.now

    async def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def go(outcomes, end=10.0, per_attempt=0.0, rng=lambda: 0.5):
    """Runs the loop over scripted outcomes; returns (ended, timeouts given, fake time)."""
    time = FakeTime()
    script = iter(outcomes)
    timeouts = []

    async def attempt(timeout):
        timeouts.append(timeout)
        time.now += per_attempt
        return next(script)

    ended = asyncio.run(
        run(attempt, end, Backoff(rng=rng), clock=time.clock, sleep=time.sleep, rng=rng)
    )
    return ended, timeouts, time


UNKNOWN = Again(maybe_stored=True, message="lost ack")
SHED = Again(maybe_stored=False, shed=True, message="rate", retry_after=0.2)


def test_unknown_is_retried_until_true():
    ended, _, time = go([UNKNOWN, UNKNOWN, Done("true")])
    assert ended.done == Done("true") and ended.attempts == 3
    assert time.sleeps == [0.025, 0.05]  # half of 50 ms, then of 100 ms


def test_false_is_returned_after_one_attempt():
    ended, _, time = go([Done("false")])
    assert ended.attempts == 1 and time.sleeps == []


def test_refusal_is_raised_at_once_with_its_attempts():
    with pytest.raises(Refused) as raised:
        go([UNKNOWN, Refusal(grpc.StatusCode.INVALID_ARGUMENT, "payload", "empty")])
    assert raised.value.attempts == 2 and raised.value.field == "payload"
    assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT


def test_shed_waits_what_the_producer_asked_plus_a_share():
    ended, _, time = go([SHED, Done("true")])
    assert ended.attempts == 2 and time.sleeps == [pytest.approx(0.3)]


def test_each_attempt_gets_the_time_left():
    _, timeouts, _ = go([UNKNOWN, UNKNOWN, Done("true")], end=1.0, per_attempt=0.1)
    assert timeouts == pytest.approx([1.0, 0.875, 0.725])


def test_deadline_ends_in_unknown_when_an_attempt_may_have_stored():
    ended, _, time = go([UNKNOWN] * 100, end=1.5, per_attempt=0.01)
    assert ended.done is None and ended.maybe_stored and ended.attempts >= 2
    assert time.now <= 1.5  # no attempt starts after the deadline, and no sleep runs past it


def test_deadline_with_every_attempt_shed_is_shed_only():
    ended, _, _ = go([SHED] * 100, end=1.0)
    assert ended.done is None and ended.shed and not ended.maybe_stored


def test_shed_then_unknown_is_unknown_at_the_deadline():
    ended, _, _ = go([SHED] + [UNKNOWN] * 100, end=1.0, per_attempt=0.01)
    assert ended.maybe_stored
