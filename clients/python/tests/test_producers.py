"""Round robin, the pause after a transport failure, and the one call that tries again."""

import pytest

from wal_client._producers import Pool


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def pool(n=3):
    clock = Clock()
    return Pool([f"p{i}" for i in range(n)], clock=clock), clock


def test_round_robin():
    p, _ = pool()
    assert [p.pick().endpoint for _ in range(5)] == ["p0", "p1", "p2", "p0", "p1"]


def test_failed_producer_is_skipped_for_a_pause_that_doubles_to_30s():
    p, clock = pool(2)
    slot = p.slots[0]
    pauses = []
    for _ in range(7):
        p.failed(slot)
        pauses.append(slot.paused_until - clock.now)
    assert pauses == [1, 2, 4, 8, 16, 30, 30]
    p.succeeded(slot)
    p.failed(slot)
    assert slot.paused_until - clock.now == 1


def test_skipped_then_tried_by_one_call_then_back():
    p, clock = pool(2)
    first = p.pick()
    p.failed(first)
    assert [p.pick().endpoint for _ in range(3)] == ["p1"] * 3
    clock.now += 1.0
    probe = p.pick()
    assert probe is first and probe.probing
    # While its one trial call is out, the others skip it.
    assert [p.pick().endpoint for _ in range(2)] == ["p1", "p1"]
    p.succeeded(probe)
    assert {p.pick().endpoint for _ in range(2)} == {"p0", "p1"}


def test_failed_trial_doubles_the_pause():
    p, clock = pool(2)
    slot = p.slots[0]
    p.failed(slot)
    clock.now += 1.0
    assert p.pick() is slot
    p.failed(slot)
    assert slot.paused_until == clock.now + 2


def test_every_producer_skipped_tries_the_one_whose_pause_ends_first():
    p, clock = pool(3)
    p.failed(p.slots[0])
    p.failed(p.slots[0])  # 2 s
    p.failed(p.slots[1])  # 1 s
    p.failed(p.slots[2])
    p.failed(p.slots[2])
    p.failed(p.slots[2])  # 4 s
    assert p.pick() is p.slots[1]


def test_a_retry_after_a_transport_failure_goes_elsewhere():
    p, _ = pool(2)
    failed = p.pick()
    p.failed(failed)
    for _ in range(3):
        assert p.pick(avoid=failed) is not failed
    # All paused: still another one than the one that failed, when there is one.
    p.failed(p.slots[1])
    assert p.pick(avoid=p.slots[1]) is p.slots[0]


def test_single_producer_is_always_tried():
    p, _ = pool(1)
    slot = p.pick()
    p.failed(slot)
    assert p.pick(avoid=slot) is slot


def test_abandoned_trial_frees_the_producer():
    p, clock = pool(2)
    slot = p.slots[0]
    p.failed(slot)
    clock.now += 1
    assert p.pick() is slot
    p.abandoned(slot)
    assert slot.available(clock.now)


def test_no_producers():
    with pytest.raises(ValueError):
        Pool([])
