"""Reconnect schedules: exact delays and limits per system. Nothing sleeps."""

from __future__ import annotations

import random

import pytest

from failover_client import FailoverOptions, OptionError
from failover_client.engine._schedule import ReconnectSchedule, ScheduleRun, infer_style


def exact(**fields: object) -> FailoverOptions:
    """Options without the default jitter: the systems' exact delays (``reconnectJitter=0``)."""
    return FailoverOptions(**{"reconnect_jitter": 0.0, **fields})  # type: ignore[arg-type]


CLASSIC_GROWTH = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 30.0]


def drain(run: ScheduleRun, most: int = 100) -> list[float]:
    """Call next_delay() until it gives up (at most ``most`` times)."""
    delays: list[float] = []
    for _ in range(most):
        delay = run.next_delay()
        if delay is None:
            return delays
        delays.append(delay)
    return delays


# --- ActiveMQ Classic ------------------------------------------------------------------------


def test_classic_defaults_at_startup() -> None:
    run = ReconnectSchedule.from_options(exact()).start(startup=True)
    assert run.delays(16) == [0.0, *CLASSIC_GROWTH, 30.0, 30.0]


def test_classic_after_a_loss_waits_the_initial_delay_first() -> None:
    # doReconnect calls doDelay() before the first pass after a loss, which also advances the
    # backoff: the runtime run is the startup run without its leading 0.
    run = ReconnectSchedule.from_options(exact()).start(startup=False)
    assert run.delays(15) == [*CLASSIC_GROWTH, 30.0, 30.0]


def test_classic_without_exponential_backoff_always_waits_the_initial_delay() -> None:
    options = exact(use_exponential_backoff=False, initial_reconnect_delay=0.5, reconnect_delay=7.0)
    schedule = ReconnectSchedule.from_options(options)
    assert schedule.start(startup=True).delays(5) == [0.0, 0.5, 0.5, 0.5, 0.5]
    assert schedule.start(startup=False).delays(4) == [0.5, 0.5, 0.5, 0.5]


def test_classic_custom_multiplier_and_cap() -> None:
    options = exact(initial_reconnect_delay=1.0, backoff_multiplier=3.0, max_reconnect_delay=20.0)
    schedule = ReconnectSchedule.from_options(options)
    assert schedule.start(startup=True).delays(6) == [0.0, 1.0, 3.0, 9.0, 20.0, 20.0]
    assert schedule.start(startup=False).delays(5) == [1.0, 3.0, 9.0, 20.0, 20.0]


def test_classic_reconnect_delay_seeds_the_startup_backoff_only() -> None:
    # reconnectDelay is Classic's current-delay field: a non-default value survives the first
    # resetReconnectDelay() and drives startup; a successful connection resets it to I.
    options = exact(initial_reconnect_delay=0.1, reconnect_delay=0.5)
    schedule = ReconnectSchedule.from_options(options)
    assert schedule.start(startup=True).delays(4) == [0.0, 0.5, 1.0, 2.0]
    assert schedule.start(startup=False).delays(3) == [0.1, 0.2, 0.4]


def test_classic_default_reconnect_delay_is_replaced_by_the_initial_delay() -> None:
    options = exact(initial_reconnect_delay=0.1, reconnect_delay=0.01)
    schedule = ReconnectSchedule.from_options(options)
    assert schedule.start(startup=True).delays(4) == [0.0, 0.1, 0.2, 0.4]


def test_classic_zero_initial_delay_reconnects_at_once() -> None:
    schedule = ReconnectSchedule.from_options(exact(initial_reconnect_delay=0.0))
    assert schedule.start(startup=False).delays(4) == [0.0, 0.0, 0.0, 0.0]


def test_classic_max_reconnect_attempts_counts_passes() -> None:
    schedule = ReconnectSchedule.from_options(exact(max_reconnect_attempts=3))
    run = schedule.start(startup=False)
    assert drain(run) == [0.01, 0.02, 0.04]
    assert run.attempts == 3
    assert run.exhausted
    assert run.next_delay() is None
    assert run.attempts == 3


def test_classic_zero_attempts_after_a_loss_means_no_reconnect() -> None:
    schedule = ReconnectSchedule.from_options(exact(max_reconnect_attempts=0))
    run = schedule.start(startup=False)
    assert run.next_delay() is None
    assert run.attempts == 0


def test_startup_limit_applies_before_the_first_connection_only() -> None:
    options = exact(startup_max_reconnect_attempts=2, max_reconnect_attempts=4)
    schedule = ReconnectSchedule.from_options(options)
    assert drain(schedule.start(startup=True)) == [0.0, 0.01]
    assert drain(schedule.start(startup=False)) == [0.01, 0.02, 0.04, 0.08]


def test_startup_limit_unset_falls_back_to_max_reconnect_attempts() -> None:
    # Classic and Qpid JMS: startupMaxReconnectAttempts -1 means "not set", not "unlimited".
    options = exact(startup_max_reconnect_attempts=-1, max_reconnect_attempts=3)
    run = ReconnectSchedule.from_options(options).start(startup=True)
    assert drain(run) == [0.0, 0.01, 0.02]


def test_startup_limit_zero_still_makes_the_first_pass() -> None:
    options = exact(startup_max_reconnect_attempts=0, max_reconnect_attempts=0)
    schedule = ReconnectSchedule.from_options(options)
    assert drain(schedule.start(startup=True)) == [0.0]
    assert drain(schedule.start(startup=False)) == []


def test_unlimited_never_gives_up_and_stays_at_the_cap() -> None:
    run = ReconnectSchedule.from_options(exact()).start(startup=False)
    assert run.limit is None
    delays = drain(run, most=5000)
    assert len(delays) == 5000
    assert delays[-1] == 30.0
    # Far past float overflow of m**n the cap still holds (tenacity guards the power).
    assert run.delays(1) == [30.0]


def test_classic_warns_after_the_first_failure_and_every_nth() -> None:
    run = ReconnectSchedule.from_options(exact(warn_after_reconnect_attempts=3)).start(
        startup=False
    )
    warned = []
    for _ in range(10):
        run.next_delay()
        warned.append(run.should_warn())
    assert warned == [True, False, True, False, False, True, False, False, True, False]


def test_no_warning_before_any_attempt_or_when_disabled() -> None:
    schedule = ReconnectSchedule.from_options(exact(warn_after_reconnect_attempts=0))
    run = schedule.start(startup=True)
    assert not run.should_warn()
    drain(run, most=30)
    assert not run.should_warn()
    assert not ReconnectSchedule().start(startup=True).should_warn()


# --- Qpid JMS --------------------------------------------------------------------------------

QPID_DEFAULTS = exact(
    initial_reconnect_delay=0.0,
    reconnect_delay=0.01,
    max_reconnect_delay=30.0,
    backoff_multiplier=2.0,
    sources=(("reconnect_delay", "failover.reconnectDelay"),),
)


def test_qpid_options_are_recognised_by_their_spelling() -> None:
    assert infer_style(QPID_DEFAULTS) == "qpid"
    assert ReconnectSchedule.from_options(QPID_DEFAULTS).style == "qpid"


def test_qpid_defaults_at_startup_and_after_a_loss() -> None:
    schedule = ReconnectSchedule.from_options(QPID_DEFAULTS)
    assert schedule.start(startup=True).delays(15) == [0.0, *CLASSIC_GROWTH, 30.0]
    assert schedule.start(startup=False).delays(15) == [0.0, *CLASSIC_GROWTH, 30.0]


def test_qpid_initial_delay_replaces_the_plain_reconnect_delay() -> None:
    # Qpid waits initialReconnectDelay before attempt 2 at startup (before attempt 1 after a
    # loss); the next wait is already reconnectDelay * multiplier.
    schedule = ReconnectSchedule.from_options(QPID_DEFAULTS.replace(initial_reconnect_delay=0.5))
    assert schedule.start(startup=True).delays(5) == [0.0, 0.5, 0.02, 0.04, 0.08]
    assert schedule.start(startup=False).delays(5) == [0.5, 0.01, 0.02, 0.04, 0.08]


def test_qpid_without_backoff() -> None:
    options = QPID_DEFAULTS.replace(use_exponential_backoff=False, initial_reconnect_delay=0.25)
    schedule = ReconnectSchedule.from_options(options)
    assert schedule.start(startup=True).delays(4) == [0.0, 0.25, 0.01, 0.01]
    assert schedule.start(startup=False).delays(4) == [0.25, 0.01, 0.01, 0.01]


def test_qpid_limits_count_passes() -> None:
    schedule = ReconnectSchedule.from_options(
        QPID_DEFAULTS.replace(max_reconnect_attempts=3, startup_max_reconnect_attempts=1)
    )
    assert drain(schedule.start(startup=True)) == [0.0]
    assert drain(schedule.start(startup=False)) == [0.0, 0.01, 0.02]


def test_qpid_warns_only_on_multiples() -> None:
    run = ReconnectSchedule.from_options(
        QPID_DEFAULTS.replace(warn_after_reconnect_attempts=2)
    ).start(startup=False)
    warned = []
    for _ in range(5):
        run.next_delay()
        warned.append(run.should_warn())
    assert warned == [False, True, False, True, False]


# --- Artemis ---------------------------------------------------------------------------------

ARTEMIS = exact(
    attempt_unit="broker",
    reconnect_delay=2.0,
    backoff_multiplier=1.5,
    max_reconnect_delay=10.0,
    max_reconnect_attempts=5,
    startup_max_reconnect_attempts=1,
)


def test_artemis_reconnect_attempts_five_is_exactly_five_tries() -> None:
    schedule = ReconnectSchedule.from_options(ARTEMIS)
    assert schedule.style == "artemis"
    assert schedule.unit == "broker"
    run = schedule.start(startup=False)
    assert run.unit == "broker"
    assert [run.next_delay() for _ in range(7)] == [0.0, 2.0, 3.0, 4.5, 6.75, None, None]
    assert run.attempts == 5


def test_artemis_interval_is_capped() -> None:
    run = ReconnectSchedule.from_options(ARTEMIS.replace(max_reconnect_attempts=-1)).start(
        startup=False
    )
    assert run.delays(8) == [0.0, 2.0, 3.0, 4.5, 6.75, 10.0, 10.0, 10.0]


def test_artemis_zero_reconnect_attempts_means_no_reconnect() -> None:
    run = ReconnectSchedule.from_options(ARTEMIS.replace(max_reconnect_attempts=0)).start(
        startup=False
    )
    assert run.next_delay() is None
    assert run.delays(3) == []


def test_artemis_defaults_wait_two_seconds_between_tries() -> None:
    options = exact(
        attempt_unit="broker",
        reconnect_delay=2.0,
        backoff_multiplier=1.0,
        max_reconnect_delay=2.0,
        max_reconnect_attempts=3,
    )
    run = ReconnectSchedule.from_options(options).start(startup=False)
    assert drain(run) == [0.0, 2.0, 2.0]


def test_artemis_ignores_the_initial_delay() -> None:
    run = ReconnectSchedule.from_options(ARTEMIS.replace(initial_reconnect_delay=9.0)).start(
        startup=False
    )
    assert run.delays(2) == [0.0, 2.0]


def test_artemis_startup_tries_each_broker_per_initial_connect_attempt() -> None:
    schedule = ReconnectSchedule.from_options(ARTEMIS.replace(startup_max_reconnect_attempts=2))
    run = schedule.start(startup=True, brokers=3)
    assert run.limit == 6
    assert drain(run) == [0.0, 2.0, 3.0, 4.5, 6.75, 10.0]


def test_artemis_startup_zero_initial_attempts_is_one_round() -> None:
    schedule = ReconnectSchedule.from_options(ARTEMIS.replace(startup_max_reconnect_attempts=0))
    assert drain(schedule.start(startup=True, brokers=2)) == [0.0, 2.0]


def test_artemis_startup_unlimited() -> None:
    schedule = ReconnectSchedule.from_options(ARTEMIS.replace(startup_max_reconnect_attempts=-1))
    run = schedule.start(startup=True, brokers=2)
    assert run.limit is None
    assert len(drain(run, most=50)) == 50


# --- every style -----------------------------------------------------------------------------


def test_a_new_run_starts_from_the_initial_delay_again() -> None:
    schedule = ReconnectSchedule.from_options(exact())
    first = schedule.start(startup=True)
    assert drain(first, most=6) == [0.0, 0.01, 0.02, 0.04, 0.08, 0.16]
    # Connected; later the connection is lost: the manager starts a new run.
    second = schedule.start(startup=False)
    assert second.attempts == 0
    assert second.next_delay() == 0.01
    third = schedule.start(startup=False)
    assert third.delays(2) == [0.01, 0.02]


def test_delays_looks_ahead_without_changing_the_run() -> None:
    run = ReconnectSchedule.from_options(exact(max_reconnect_attempts=4)).start(startup=False)
    run.next_delay()
    assert run.delays(10) == [0.02, 0.04, 0.08]
    assert run.attempts == 1
    assert drain(run) == [0.02, 0.04, 0.08]
    assert run.delays(3) == []


def test_jitter_is_exact_for_a_seeded_generator() -> None:
    schedule = ReconnectSchedule.from_options(exact(reconnect_jitter=0.5), rng=random.Random(42))
    run = schedule.start(startup=True)
    assert run.delays(5) == [
        0.0,
        0.009874946223886665,
        0.01724970681630881,
        0.03553578523702355,
        0.050541151433439506,
    ]
    # The n-th draw belongs to attempt n: d * (1 - j * u_n); jitter only ever shortens.
    check = random.Random(42)
    draws = [check.random() for _ in range(5)]
    expected = [
        d * (1 - 0.5 * u) if d else 0.0
        for d, u in zip([0.0, 0.01, 0.02, 0.04, 0.08], draws, strict=True)
    ]
    assert [run.next_delay() for _ in range(5)] == expected


def test_jitter_keeps_the_cap_a_hard_bound() -> None:
    schedule = ReconnectSchedule.from_options(
        exact(reconnect_jitter=1.0, max_reconnect_delay=0.05), rng=random.Random(1)
    )
    delays = schedule.start(startup=False).delays(50)
    assert all(0.0 <= d <= 0.05 for d in delays)


def test_without_jitter_the_generator_is_not_used() -> None:
    rng = random.Random(3)
    state = rng.getstate()
    drain(ReconnectSchedule.from_options(exact(), rng=rng).start(startup=True), 20)
    assert rng.getstate() == state


def test_from_options_copies_every_schedule_field() -> None:
    options = exact(
        initial_reconnect_delay=0.1,
        reconnect_delay=0.2,
        max_reconnect_delay=3.0,
        use_exponential_backoff=False,
        backoff_multiplier=1.5,
        reconnect_jitter=0.25,
        max_reconnect_attempts=7,
        startup_max_reconnect_attempts=2,
        warn_after_reconnect_attempts=4,
    )
    assert ReconnectSchedule.from_options(options) == ReconnectSchedule(
        style="classic",
        unit="pass",
        initial_delay=0.1,
        delay=0.2,
        max_delay=3.0,
        exponential=False,
        multiplier=1.5,
        jitter=0.25,
        max_attempts=7,
        startup_max_attempts=2,
        warn_after=4,
    )


def test_explicit_style_overrides_the_guess() -> None:
    schedule = ReconnectSchedule.from_options(exact(), style="qpid")
    assert schedule.style == "qpid"
    assert infer_style(exact(attempt_unit="broker")) == "artemis"
    assert infer_style(exact()) == "classic"
    classic_spelling = exact(sources=(("reconnect_delay", "initialReconnectDelay"),))
    assert infer_style(classic_spelling) == "classic"


@pytest.mark.parametrize(
    ("changes", "option"),
    [
        ({"style": "hornetq"}, "style"),
        ({"unit": "host"}, "unit"),
        ({"initial_delay": -1.0}, "initial_delay"),
        ({"delay": -0.5}, "delay"),
        ({"max_delay": -2.0}, "max_delay"),
        ({"multiplier": 0.5}, "multiplier"),
        ({"jitter": 1.5}, "jitter"),
        ({"max_attempts": -2}, "max_attempts"),
        ({"startup_max_attempts": -5}, "startup_max_attempts"),
    ],
)
def test_invalid_schedule_names_the_field(changes: dict[str, object], option: str) -> None:
    with pytest.raises(OptionError) as caught:
        ReconnectSchedule().replace(**changes)
    assert caught.value.option == option
    assert option in str(caught.value)


def test_start_needs_at_least_one_broker() -> None:
    with pytest.raises(OptionError, match="brokers must be >= 1, got 0"):
        ReconnectSchedule().start(startup=True, brokers=0)


def test_repr_shows_the_run_state() -> None:
    run = ReconnectSchedule.from_options(ARTEMIS).start(startup=False)
    run.next_delay()
    assert repr(run) == (
        "ScheduleRun(style='artemis', unit='broker', startup=False, attempts=1, limit=5)"
    )
    assert "unlimited" in repr(ReconnectSchedule().start(startup=True))
    assert "rng" not in repr(ReconnectSchedule())
