"""Events and listener isolation."""

from __future__ import annotations

import dataclasses
import logging
import threading

import pytest
from test_manager_support import A, make, running

from failover_client._events import (
    Closed,
    Connected,
    Disconnected,
    ListenerError,
    ListenerSet,
    listener_name,
)
from failover_client.testing import EventRecorder


def broken(event: object) -> None:
    raise RuntimeError("listener bug")


def test_events_are_frozen_values():
    event = Connected("stomp://a:61613", 1, 0.5)
    assert event == Connected("stomp://a:61613", 1, 0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.attempt = 2  # type: ignore[misc]
    assert hash(Disconnected("stomp://a:61613", None)) == hash(
        Disconnected("stomp://a:61613", None)
    )


def test_a_raising_listener_is_isolated_logged_once_and_reported_to_others(caplog):
    listeners = ListenerSet()
    recorder = EventRecorder()
    listeners.add(broken)
    listeners.add(recorder)
    with caplog.at_level(logging.ERROR, logger="failover_client"):
        listeners.deliver(Closed())
        listeners.deliver(Closed())
    assert listeners.failures == 2
    records = [r for r in caplog.records if "test_events.broken" in r.getMessage()]
    assert len(records) == 1
    assert recorder.events[0] == Closed()
    report = recorder.events[1]
    assert isinstance(report, ListenerError)
    assert (report.listener, report.event) == ("test_events.broken", "Closed")
    assert isinstance(report.error, RuntimeError)
    assert len(recorder.events) == 4


def test_listener_errors_about_listener_errors_do_not_recurse():
    listeners = ListenerSet()
    calls: list[object] = []

    def also_broken(event: object) -> None:
        calls.append(event)
        raise ValueError("second bug")

    listeners.add(broken)
    listeners.add(also_broken)
    listeners.deliver(Closed())
    # Both fail on Closed (2); each then fails on the report about the other (2 more), and
    # those failures are counted but not reported again.
    assert [type(c).__name__ for c in calls] == ["Closed", "ListenerError"]
    assert listeners.failures == 4


def test_remove_is_idempotent():
    listeners = ListenerSet()
    recorder = EventRecorder()
    listeners.add(recorder)
    listeners.remove(recorder)
    listeners.remove(recorder)
    listeners.deliver(Closed())
    assert recorder.events == []


def test_listener_name_of_a_callable_object():
    assert listener_name(EventRecorder()).endswith("EventRecorder")


def test_a_broken_listener_cannot_stop_the_connection():
    rig = make((A,))
    rig.conn.add_listener(broken)
    with running(rig):
        rig.conn.send("/queue/q", b"x")
        rig.connector.session(A).kill()
        rig.events.wait_for(Connected, 2)
        assert rig.events.of_type(ListenerError)
        assert rig.conn.state == "connected"
        assert rig.conn.stats()["listener_errors"] >= 3


def test_events_are_delivered_on_the_dispatch_thread_in_order():
    rig = make((A,))
    names: list[str] = []
    rig.conn.add_listener(lambda e: names.append(threading.current_thread().name))
    with running(rig):
        rig.events.wait_for(Connected)
    assert names
    assert all(n.startswith("failover-client-dispatch-") for n in names)
    assert isinstance(rig.events.events[-1], Closed)
