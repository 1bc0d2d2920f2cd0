"""Shared builders for the connection tests (no tests of its own)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from failover_client.uri import BrokerAddress, FailoverOptions

from failover_client.engine._connection import FailoverConnection
from failover_client.testing import EventRecorder, FakeClock, FakeConnector

A = BrokerAddress("stomp", "a", 61613)
B = BrokerAddress("stomp", "b", 61613)
C = BrokerAddress("stomp", "c", 61613)


@dataclass
class Rig:
    """A connection wired to a fake clock, a fake connector and an event recorder."""

    conn: FailoverConnection
    clock: FakeClock
    connector: FakeConnector
    events: EventRecorder
    helpers: list[threading.Thread] = field(default_factory=list)


def make(
    members: tuple[BrokerAddress, ...] = (A, B),
    *,
    autojump: bool = True,
    auto_confirm: bool = True,
    connector_type: type[FakeConnector] = FakeConnector,
    **options: Any,
) -> Rig:
    clock = FakeClock(autojump=autojump)
    connector = connector_type(clock=clock, auto_confirm=auto_confirm)
    events = EventRecorder()
    # Exact virtual timelines: without the default reconnect jitter unless a test asks for it.
    opts = FailoverOptions(**{"randomize": False, "reconnect_jitter": 0.0, **options})
    conn = FailoverConnection(
        members,
        options=opts,
        connector=connector,
        clock=clock,
        client_id="c",
        listeners=[events],
    )
    return Rig(conn, clock, connector, events)


def assert_threads_gone(conn: FailoverConnection) -> None:
    ours = {t for t in (conn._loop.thread, conn._dispatcher.thread) if t is not None}
    assert not [t for t in threading.enumerate() if t in ours]
    assert not [t for t in ours if t.is_alive()]


@contextmanager
def running(rig: Rig, *, connect: bool = True) -> Iterator[Rig]:
    """Connect (optionally), and on exit close and check that every thread ended."""
    try:
        if connect:
            rig.conn.connect()
        yield rig
    finally:
        rig.conn.close()
        for helper in rig.helpers:
            helper.join(5)
            assert not helper.is_alive()
        assert_threads_gone(rig.conn)


class Outcome:
    """The result or exception of a call made on a helper thread."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: object = None
        self.error: BaseException | None = None


def in_thread(rig: Rig, call: Callable[[], object]) -> Outcome:
    """Run ``call`` on a helper thread (joined by ``running``)."""
    outcome = Outcome()

    def run() -> None:
        try:
            outcome.value = call()
        except BaseException as exc:
            outcome.error = exc
        finally:
            outcome.done.set()

    thread = threading.Thread(target=run, name="test-helper")
    rig.helpers.append(thread)
    thread.start()
    return outcome
