"""Logins against ActiveMQ Classic brokers that require them (``ClusterSpec(users=...)``).

One pair of brokers with ``simpleAuthenticationPlugin`` serves the whole module (equal specs
share one running cluster). Shown here: the right login connects and a confirmed send arrives;
a refused login stops the reconnect loop after one pass with ``AuthenticationFailed`` naming
the broker; a member's own credentials beat the constructor's ``login`` / ``passcode``; after
a SIGKILL the connection fails over to the other secured broker with the same login; and the
passcode never shows in an error, an event, a log record or the connection's repr.

The passwords hold XML-special characters and a colon, so every start of the brokers also
proves that the generated broker.xml escapes them and that a CONNECT header carries them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from urllib.parse import quote

import pytest

from failover_client import (
    AllBrokersFailed,
    AuthenticationFailed,
    Connected,
    Disconnected,
    FailedOver,
    FailoverConnection,
    GaveUp,
    ReconnectAttempt,
)
from failover_client.testing import EventRecorder
from failover_client.testing.brokers import (
    Broker,
    BrokerKind,
    BrokerUser,
    ClientError,
    Cluster,
    StompClient,
)
from integration.test_failover_common import (
    FAST,
    SAFETY,
    Inbox,
    LeakCheck,
    broker_at,
    failover_uri,
)

pytestmark = pytest.mark.integration

APP = BrokerUser("app", "s3cr&t<pw>\"'x:1")
OPS = BrokerUser("ops", "0ps&am;p<")
WRONG = "wr0ng&<pass>"

# A loop that retried refused logins would give up with AllBrokersFailed after 20 quick passes
# (a failure the test reports) instead of hanging the run.
BOUNDED: dict[str, str | int | float | bool] = {
    **FAST,
    "maxReconnectDelay": 10,
    "startupMaxReconnectAttempts": 20,
}


@pytest.fixture
def secured(broker_cluster: Callable[..., Cluster]) -> Cluster:
    """Two independent ActiveMQ brokers that accept only APP and OPS."""
    return broker_cluster(BrokerKind.ACTIVEMQ, 2, users=(APP, OPS))


def _member(broker: Broker, login: str, passcode: str) -> str:
    ep = broker.endpoint()
    return f"stomp://{quote(login, safe='')}:{quote(passcode, safe='')}@{ep.host}:{ep.port}"


def _texts(*things: object) -> str:
    """str() and repr() of everything given, and of each exception's causes."""
    out: list[str] = []
    pending = list(things)
    while pending:
        thing = pending.pop()
        out += [str(thing), repr(thing)]
        if isinstance(thing, BaseException):
            pending += [e for e in (thing.__cause__, thing.__context__) if e is not None]
        if isinstance(thing, GaveUp):
            pending += [e for _, e in thing.causes]
        if isinstance(thing, Disconnected) and thing.cause is not None:
            pending.append(thing.cause)
    return "\n".join(out)


def _assert_secret_free(text: str, secrets: Iterable[str]) -> None:
    for secret in secrets:
        assert secret not in text, "a passcode leaked"
        assert quote(secret, safe="") not in text, "a percent-encoded passcode leaked"


def test_the_harness_logs_in_and_anonymous_or_wrong_logins_are_refused(
    secured: Cluster, unique_queue: str
) -> None:
    for broker in secured:
        assert broker.credentials == (APP.name, APP.password)
        assert broker.send(unique_queue, ["via the harness"]) == 1
        assert [m.text for m in broker.drain(unique_queue, expect=1)] == ["via the harness"]
    ep = secured[0].endpoint()
    with StompClient(ep.host, ep.port, OPS.name, OPS.password):
        pass  # the second account is real too
    for login, passcode in ((None, None), (APP.name, WRONG), ("nobody", APP.password)):
        with pytest.raises(ClientError, match="invalid") as info:
            StompClient(ep.host, ep.port, login, passcode)
        _assert_secret_free(_texts(info.value), [APP.password, WRONG])


def test_right_credentials_connect_and_a_confirmed_send_arrives(
    secured: Cluster, unique_queue: str
) -> None:
    leaks = LeakCheck()
    recorder = EventRecorder()
    with FailoverConnection(
        failover_uri(secured, FAST),
        login=APP.name,
        passcode=APP.password,
        listeners=[recorder],
    ) as conn:
        assert broker_at(secured, conn.broker) is secured[0]
        conn.send(unique_queue, "authenticated")
        assert conn.stats()["confirmed"] == 1
    assert [e.broker for e in recorder.of_type(ReconnectAttempt)] == [secured[0].uri()]
    leaks.assert_clean()
    assert [m.text for m in secured[0].drain(unique_queue, expect=1)] == ["authenticated"]


@pytest.mark.parametrize(
    ("login", "passcode"),
    [(APP.name, WRONG), ("nobody", WRONG), (None, None)],
    ids=["wrong-passcode", "unknown-user", "anonymous"],
)
def test_a_refused_login_stops_the_loop_after_one_pass(
    secured: Cluster, login: str | None, passcode: str | None
) -> None:
    leaks = LeakCheck()
    recorder = EventRecorder()
    conn = FailoverConnection(
        failover_uri(secured, BOUNDED), login=login, passcode=passcode, listeners=[recorder]
    )
    started = time.monotonic()
    try:
        with pytest.raises(AuthenticationFailed) as info:
            conn.connect()
    except BaseException:
        conn.close()
        raise
    took = time.monotonic() - started
    conn.close()
    print(f"\nrefused in {1000 * took:.1f} ms: {info.value}")

    error = info.value
    assert not isinstance(error, AllBrokersFailed)
    first = secured[0].uri()
    assert error.broker == first
    assert str(error).startswith(f"{first}: broker refused the credentials")
    assert "invalid" in str(error)  # the broker's own words
    # One pass over both brokers, each refused once, then a stop: no back-off, no retry.
    assert [e.broker for e in recorder.of_type(ReconnectAttempt)] == secured.members()
    gave_up = recorder.wait_for(GaveUp, timeout=SAFETY)
    assert gave_up.error is error
    assert [(b, type(e)) for b, e in gave_up.causes] == [
        (m, AuthenticationFailed) for m in secured.members()
    ]
    assert recorder.of_type(Connected) == []
    assert took < SAFETY  # generous: a retrying loop would not have raised this at all
    _assert_secret_free(_texts(error, conn, *recorder.events), [WRONG, APP.password, OPS.password])
    leaks.assert_clean()


def test_a_members_own_credentials_beat_the_constructors(
    secured: Cluster, unique_queue: str
) -> None:
    first, second = secured
    uri = (
        f"failover:({_member(first, OPS.name, OPS.password)},"
        f"{_member(second, APP.name, APP.password)})?randomize=false"
    )
    recorder = EventRecorder()
    # The constructor's passcode is wrong: only the member's login can get in.
    with FailoverConnection(uri, login=APP.name, passcode=WRONG, listeners=[recorder]) as conn:
        assert broker_at(secured, conn.broker) is first
        assert (
            conn.broker == f"stomp://{OPS.name}:***@{first.endpoint().host}:{first.endpoint().port}"
        )
        conn.send(unique_queue, "member login")
    assert len(recorder.of_type(ReconnectAttempt)) == 1
    assert [m.text for m in first.drain(unique_queue, expect=1)] == ["member login"]


def test_a_member_with_wrong_credentials_is_refused_while_the_others_use_the_constructors(
    secured: Cluster,
) -> None:
    first, second = secured
    uri = f"failover:({_member(first, APP.name, WRONG)},{second.uri()})?randomize=false"
    leaks = LeakCheck()
    recorder = EventRecorder()
    with FailoverConnection(
        uri, login=APP.name, passcode=APP.password, listeners=[recorder]
    ) as conn:
        assert broker_at(secured, conn.broker) is second
    refused = f"stomp://{APP.name}:***@{first.endpoint().host}:{first.endpoint().port}"
    assert [e.broker for e in recorder.of_type(ReconnectAttempt)] == [refused, second.uri()]
    _assert_secret_free(_texts(*recorder.events), [WRONG, APP.password])
    leaks.assert_clean()


def test_failover_after_sigkill_logs_in_to_the_other_broker_and_leaks_no_passcode(
    secured: Cluster, unique_queue: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    first, second = secured
    leaks = LeakCheck()
    recorder = EventRecorder()
    inbox = Inbox()
    conn = FailoverConnection(
        failover_uri(secured, FAST),
        login=APP.name,
        passcode=APP.password,
        listeners=[recorder],
    )
    try:
        conn.subscribe(unique_queue, inbox)
        conn.connect()
        assert broker_at(secured, conn.broker) is first
        conn.send(unique_queue, "before")
        inbox.wait_for_bodies(["before"])

        first.kill()
        moved = recorder.wait_for(FailedOver, timeout=SAFETY)
        assert (moved.from_broker, moved.to_broker) == (first.uri(), second.uri())
        assert broker_at(secured, conn.broker) is second
        # The send and the restored subscription both run on the second broker's login.
        conn.send(unique_queue, "after")
        inbox.wait_for_bodies(["before", "after"])
        assert conn.stats()["failovers"] == 1
        shown = _texts(conn, conn.stats(), conn.broker)
    finally:
        conn.close()
    assert [e.broker for e in recorder.of_type(Connected)] == [first.uri(), second.uri()]
    assert len(recorder.of_type(Disconnected)) == 1
    _assert_secret_free(_texts(*recorder.events) + shown + caplog.text, [APP.password])
    leaks.assert_clean()
