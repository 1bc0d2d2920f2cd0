"""Start-up that says what is wrong: connect(timeout=...), and the first-pass notice."""

from __future__ import annotations

import logging

import pytest
from failover_client.uri import BrokerAddress, FailoverOptions, parse, wrote_retry_options
from test_manager_support import A, B, C, assert_threads_gone, make, running

from failover_client import AllBrokersFailed, BrokerUnavailable, ConfigurationError
from failover_client._events import Connected, ReconnectWarning
from failover_client.engine._decide import Dial, Expire, Step, View, decide
from failover_client.engine._startup import StartupNotice, expired

# --- the decision -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("view", "now", "step"),
    [
        # The deadline passed: the run ends, whatever the schedule would still allow.
        (View(dialing=True, attempt_due=9.0, deadline=5.0), 5.0, Step(Expire())),
        (View(dialing=True, attempt_due=1.0, deadline=5.0), 6.0, Step(Expire())),
        # Before it: the next attempt's due time, or the deadline if that comes first.
        (View(dialing=True, attempt_due=9.0, deadline=5.0), 1.0, Step(wake_at=5.0)),
        (View(dialing=True, attempt_due=2.0, deadline=5.0), 1.0, Step(wake_at=2.0)),
        (View(dialing=True, attempt_due=2.0, deadline=5.0), 2.0, Step(Dial())),
        # Without one the schedule alone decides (as before).
        (View(dialing=True, attempt_due=9.0), 1.0, Step(wake_at=9.0)),
        # close() still wins.
        (View(stopping=True, dialing=True, deadline=0.0), 1.0, None),
    ],
)
def test_decide_ends_a_startup_run_at_its_deadline(
    view: View[str], now: float, step: Step[str] | None
) -> None:
    result = decide(view, now)
    if step is None:
        assert type(result.action).__name__ == "Stop"
    else:
        assert result == step


# --- connect(timeout=...) -----------------------------------------------------------------------


def test_connect_timeout_raises_all_brokers_failed_with_every_cause_and_closes() -> None:
    rig = make((A, B))  # Classic defaults: start-up retries for ever
    rig.connector.behave(A, "refuse")
    rig.connector.behave(B, "refuse")
    began = rig.clock.monotonic()
    with pytest.raises(AllBrokersFailed) as info:
        rig.conn.connect(timeout=3)
    assert rig.clock.monotonic() - began <= 3.0 + 1e-9
    assert set(info.value.causes) == {str(A), str(B)}
    assert all(isinstance(e, BrokerUnavailable) for e in info.value.causes.values())
    assert "connect(timeout=3)" in str(info.value)
    assert rig.conn.state == "closed"
    assert_threads_gone(rig.conn)


def test_a_hung_broker_does_not_hold_connect_past_its_timeout() -> None:
    # The connect to a hung broker is cut to the time left (its own timeout is 30 s), and
    # the broker it kept from being tried says so.
    rig = make((A, B), connect_timeout=30.0)
    rig.connector.behave(A, "hang")
    began = rig.clock.monotonic()
    with pytest.raises(AllBrokersFailed) as info:
        rig.conn.connect(timeout=2)
    assert rig.clock.monotonic() - began <= 2.0 + 0.1
    causes = info.value.causes
    assert "within 2s" in str(causes[str(A)])
    assert "not tried" in str(causes[str(B)])
    assert [key for key, _ in rig.connector.attempts] == [A.key]
    assert_threads_gone(rig.conn)


def test_connect_timeout_succeeds_when_a_broker_answers_in_time() -> None:
    rig = make((A, B))
    rig.connector.behave(A, "refuse")
    with running(rig, connect=False):
        rig.conn.connect(timeout=5)
        assert rig.conn.broker == str(B)
        rig.events.wait_for(Connected)


def test_connect_timeout_must_be_a_number_of_seconds() -> None:
    rig = make((A,))
    with running(rig, connect=False), pytest.raises(ConfigurationError, match="timeout"):
        rig.conn.connect(timeout=-1)


def test_a_schedule_that_gives_up_first_still_raises_its_own_error() -> None:
    rig = make((A,), startup_max_reconnect_attempts=1)
    rig.connector.behave(A, "refuse")
    with running(rig, connect=False), pytest.raises(AllBrokersFailed, match="gave up"):
        rig.conn.connect(timeout=60)


def test_a_plain_broker_uri_fails_after_one_pass() -> None:
    uri = parse("stomp://a:61613")
    rig = make((A,), **_fields(uri.options))
    rig.connector.behave(A, "refuse")
    with running(rig, connect=False), pytest.raises(AllBrokersFailed) as info:
        rig.conn.connect()
    assert list(info.value.causes) == [str(A)]
    assert len(rig.connector.attempts) == 1


def _fields(options: FailoverOptions) -> dict[str, object]:
    return {
        "startup_max_reconnect_attempts": options.startup_max_reconnect_attempts,
        "sources": options.sources,
    }


# --- the first-pass notice ----------------------------------------------------------------------


def test_a_failed_first_pass_warns_with_every_cause_when_no_retry_option_was_written(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rig = make((A, B, C))
    for broker in (A, B, C):
        rig.connector.behave(broker, "refuse")
    caplog.set_level(logging.WARNING, logger="failover_client")
    with pytest.raises(AllBrokersFailed):
        rig.conn.connect(timeout=150)
    notices = [r for r in caplog.records if "no broker answered at start-up" in r.getMessage()]
    schedule = [r for r in caplog.records if r.getMessage().startswith("reconnect attempt 1 ")]
    # Classic warns after its first attempt itself: that line names every broker, and the
    # notice adds nothing for that pass; then once a minute while the run goes on.
    assert len(schedule) == 1
    for broker in (A, B, C):
        assert str(broker) in schedule[0].getMessage()
    assert 1 <= len(notices) <= 3
    assert "startupMaxReconnectAttempts" in notices[0].getMessage()
    assert "connect(timeout=...)" in notices[0].getMessage()
    warnings = rig.events.of_type(ReconnectWarning)
    assert warnings[0].attempt == 1
    assert {b for b, _ in warnings[0].causes} == {str(A), str(B), str(C)}


def test_the_notice_comes_after_the_first_pass_for_every_style() -> None:
    # Qpid JMS warns only every warnAfterReconnectAttempts (10) itself.
    rig = make((A, B), dialect="qpid")
    rig.connector.behave(A, "refuse")
    rig.connector.behave(B, "refuse")
    with pytest.raises(AllBrokersFailed):
        rig.conn.connect(timeout=0.5)
    warnings = rig.events.of_type(ReconnectWarning)
    assert warnings
    assert warnings[0].attempt == 1


def test_no_notice_when_the_user_wrote_retry_options() -> None:
    uri = parse("failover:(stomp://a:61613,stomp://b:61613)?warnAfterReconnectAttempts=0")
    assert wrote_retry_options(uri.options)
    rig = make((A, B), warn_after_reconnect_attempts=0, sources=uri.options.sources)
    rig.connector.behave(A, "refuse")
    rig.connector.behave(B, "refuse")
    with pytest.raises(AllBrokersFailed):
        rig.conn.connect(timeout=5)
    assert rig.events.of_type(ReconnectWarning) == []


def test_the_notice_is_throttled_on_the_injected_clock() -> None:
    now = [0.0]
    emitted: list[object] = []
    notice = StartupNotice(
        enabled=True, clock=lambda: now[0], emit=emitted.append, describe=lambda b, e: b
    )
    causes = {"stomp://a:61613": BrokerUnavailable("refused")}
    assert notice.pass_failed(1, causes)
    now[0] = 59.0
    assert not notice.pass_failed(2, causes)
    now[0] = 60.0
    assert notice.pass_failed(3, causes)
    # The schedule's own warning for a pass counts as the notice's.
    now[0] = 200.0
    assert not notice.pass_failed(4, causes, warned=True)
    now[0] = 259.0
    assert not notice.pass_failed(5, causes)
    assert len(emitted) == 2
    assert notice.passes == 5


def test_expired_names_brokers_not_tried() -> None:
    error = expired(2.0, {"a": BrokerUnavailable("refused")}, ["a", "b"])
    assert list(error.causes) == ["a", "b"]
    assert "not tried" in str(error.causes["b"])
    assert "connect(timeout=2)" in str(error)


def test_no_startup_record_event_or_error_shows_a_password(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "pw9Secret"
    member = BrokerAddress("stomp", "a", 61613, user="app", password=secret)
    rig = make((member, B))
    rig.connector.behave(member, "refuse")
    rig.connector.behave(B, "hang")
    caplog.set_level(logging.DEBUG, logger="failover_client")
    with pytest.raises(AllBrokersFailed) as info:
        rig.conn.connect(timeout=70)
    shown = [r.getMessage() for r in caplog.records]
    shown += [str(info.value), repr(info.value), *map(str, info.value.causes.values())]
    shown += [repr(e) for e in rig.events.of_type(ReconnectWarning)]
    assert any("reconnect attempt 1 failed" in line for line in shown)
    assert any("no broker answered" in line for line in shown)
    assert not [line for line in shown if secret in line]
