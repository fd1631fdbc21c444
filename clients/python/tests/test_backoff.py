"""Backoff bounds: 50 ms doubling to 2 s, full jitter; the shed wait's random share."""

from wal_client._backoff import Backoff, shed_wait


def test_steps_double_from_50ms_to_2s():
    backoff = Backoff(rng=lambda: 1.0)  # the top of each step
    waits = [backoff.next() for _ in range(9)]
    assert waits == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0]


def test_full_jitter_can_wait_nothing():
    backoff = Backoff(rng=lambda: 0.0)
    assert [backoff.next() for _ in range(3)] == [0.0, 0.0, 0.0]


def test_real_jitter_stays_within_the_step():
    backoff = Backoff()
    step = 0.05
    for _ in range(50):
        assert 0.0 <= backoff.next() < step
        step = min(step * 2, 2.0)


def test_shed_wait_adds_up_to_the_wait_again():
    assert shed_wait(0.3, rng=lambda: 0.0) == 0.3
    assert shed_wait(0.3, rng=lambda: 1.0) == 0.6
    for _ in range(100):
        assert 0.3 <= shed_wait(0.3) <= 0.6
