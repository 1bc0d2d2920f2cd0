"""Properties of every reconnect schedule, for any valid settings.

Hypothesis runs derandomized and without a database, so the examples are the same on every run.
"""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from failover_client.engine._schedule import ReconnectSchedule

PROPERTY = settings(derandomize=True, database=None, max_examples=200, deadline=None)

delays = st.floats(min_value=0.0, max_value=60.0, allow_nan=False)
schedules = st.builds(
    ReconnectSchedule,
    style=st.sampled_from(["classic", "qpid", "artemis"]),
    unit=st.sampled_from(["pass", "broker"]),
    initial_delay=delays,
    delay=delays,
    max_delay=delays,
    exponential=st.booleans(),
    multiplier=st.floats(min_value=1.0, max_value=10.0),
    jitter=st.floats(min_value=0.0, max_value=1.0),
    max_attempts=st.integers(min_value=-1, max_value=40),
    startup_max_attempts=st.integers(min_value=-1, max_value=40),
    warn_after=st.integers(min_value=-1, max_value=20),
    rng=st.integers(0, 2**32).map(random.Random),
)


@PROPERTY
@given(schedule=schedules, startup=st.booleans(), brokers=st.integers(1, 5))
def test_a_run_makes_exactly_limit_attempts(
    schedule: ReconnectSchedule, startup: bool, brokers: int
) -> None:
    run = schedule.start(startup=startup, brokers=brokers)
    made = 0
    while made < 200 and run.next_delay() is not None:
        made += 1
    if run.limit is None:
        assert made == 200
    else:
        assert made == run.limit == run.attempts
        assert run.next_delay() is None


@PROPERTY
@given(schedule=schedules, startup=st.booleans())
def test_delays_are_bounded_and_start_immediately_at_startup(
    schedule: ReconnectSchedule, startup: bool
) -> None:
    upcoming = schedule.start(startup=startup, brokers=2).delays(60)
    assert all(d >= 0.0 for d in upcoming)
    if schedule.exponential:
        assert all(d <= schedule.max_delay for d in upcoming)
    if startup and upcoming:
        assert upcoming[0] == 0.0


@PROPERTY
@given(schedule=schedules, startup=st.booleans(), peek=st.integers(0, 30))
def test_looking_ahead_never_changes_what_comes(
    schedule: ReconnectSchedule, startup: bool, peek: int
) -> None:
    run = schedule.start(startup=startup, brokers=3)
    predicted = run.delays(peek)
    assert run.attempts == 0
    actual = [run.next_delay() for _ in range(len(predicted))]
    assert actual == predicted


@PROPERTY
@given(schedule=schedules)
def test_backoff_never_shrinks_after_the_second_attempt(schedule: ReconnectSchedule) -> None:
    # The first two waits may be I and R in either order (Qpid); from there on it only grows.
    steady = schedule.replace(exponential=True, jitter=0.0)
    upcoming = steady.start(startup=True).delays(40)[2:]
    assert upcoming == sorted(upcoming)
