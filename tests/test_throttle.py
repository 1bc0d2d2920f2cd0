"""LogThrottle: repeats of one complaint are counted, not written one line each."""

from __future__ import annotations

import logging

import pytest

from failover_client._throttle import LogThrottle


class Now:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def now() -> Now:
    return Now()


def test_repeats_inside_the_window_are_counted_and_reported_with_the_next_line(
    caplog: pytest.LogCaptureFixture, now: Now
) -> None:
    throttle = LogThrottle(logging.getLogger("t.throttle"), interval=10.0, clock=now)
    caplog.set_level(logging.WARNING, "t.throttle")
    assert throttle.log(logging.WARNING, "k", "bad advisory %d", 1)
    for i in range(3202):
        now.t += 0.001
        assert not throttle.log(logging.WARNING, "k", "bad advisory %d", i)
    assert throttle.pending("k") == 3202
    now.t = 10.5
    assert throttle.log(logging.WARNING, "k", "bad advisory %d", 99)
    assert [r.getMessage() for r in caplog.records] == [
        "bad advisory 1",
        "bad advisory 99 (3202 similar messages suppressed in the last 10 s)",
    ]
    assert throttle.pending("k") == 0


def test_keys_are_independent(caplog: pytest.LogCaptureFixture, now: Now) -> None:
    throttle = LogThrottle(logging.getLogger("t.throttle"), interval=10.0, clock=now)
    caplog.set_level(logging.INFO, "t.throttle")
    throttle.log(logging.INFO, "a", "a")
    throttle.log(logging.INFO, "b", "b")
    throttle.log(logging.INFO, "a", "a again")
    assert [r.getMessage() for r in caplog.records] == ["a", "b"]


def test_a_disabled_level_costs_nothing_and_counts_nothing(now: Now) -> None:
    logger = logging.getLogger("t.throttle.off")
    logger.setLevel(logging.ERROR)
    throttle = LogThrottle(logger, interval=10.0, clock=now)
    assert not throttle.log(logging.INFO, "k", "x")
    assert throttle.pending("k") == 0


def test_keys_from_a_peer_cannot_grow_memory_without_bound(now: Now) -> None:
    throttle = LogThrottle(logging.getLogger("t.throttle"), interval=10.0, clock=now)
    for i in range(10_000):
        now.t += 0.0001
        throttle.log(logging.WARNING, ("host", i), "x")
    assert "keys=256" in repr(throttle)


def test_a_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="interval must be > 0"):
        LogThrottle(logging.getLogger("t"), interval=0)
