"""No secret of a URI reaches the connection's repr, events or log records.

``?login=&passcode=`` on a member (stomp.py's names) are that member's credentials: they reach
the connector as its user and password, and are never shown.
"""

from __future__ import annotations

import logging

import pytest

from failover_client import FailoverConnection
from failover_client._events import TopologyChanged
from failover_client.testing import EventRecorder, FakeClock, FakeConnector

SECRET = "pc1xQ"
URI = (
    f"failover:(stomp://a:61613?login=app&passcode={SECRET},"
    f"stomp://b:61613?login=app&passcode={SECRET})"
    "?randomize=false&warnAfterReconnectAttempts=1&maxReconnectAttempts=3"
)


def test_member_passcode_is_used_as_the_credentials_and_never_shown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="failover_client")
    clock = FakeClock(autojump=True)
    connector = FakeConnector(clock=clock)
    connector.behave("a:61613", "refuse")
    events = EventRecorder()
    conn = FailoverConnection(URI, connector=connector, clock=clock, listeners=[events])
    try:
        conn.connect()
        session = connector.session("b:61613")
        assert (session.address.user, session.address.password) == ("app", SECRET)
        assert session.address.params == ()
        connector.behave("b:61613", "refuse", "refuse", "refuse", "refuse")
        session.kill()
        connector.wait_until(lambda: len(connector.attempted()) >= 4)
        shown = [repr(conn), str(conn), str(conn.broker), repr(conn.pool), repr(conn.options)]
    finally:
        conn.close()
    shown += [repr(e) for e in events.events] + [str(e) for e in events.events]
    shown += [r.getMessage() for r in caplog.records]
    assert len(events.events) > 3
    assert not [text for text in shown if SECRET in text]


def test_a_passcode_in_an_update_uris_list_is_never_logged(
    tmp_path: pytest.TempPathFactory, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="failover_client")
    listed = tmp_path / "brokers.txt"  # type: ignore[operator]
    listed.write_text(f"stomp://b:61613?login=app&passcode={SECRET}\n")
    clock = FakeClock(autojump=True)
    events = EventRecorder()
    conn = FailoverConnection(
        f"failover:(stomp://a:61613)?updateURIsURL=file:{listed}",
        connector=FakeConnector(clock=clock),
        clock=clock,
        listeners=[events],
    )
    with conn:
        changed = events.wait_for(TopologyChanged)
        shown = [repr(conn), repr(conn.pool), repr(changed), str(changed)]
    shown += [r.getMessage() for r in caplog.records]
    assert any("b:61613" in text for text in shown)
    assert not [text for text in shown if SECRET in text]
