"""The engine's observer hooks (``engine._observe``), without OpenTelemetry."""

from __future__ import annotations

import threading
from collections.abc import MutableMapping

import pytest
from failover_client.uri import BrokerAddress
from test_manager_support import A, make, running

from failover_client import Message, NotConnected


class Recorder:
    """An observer that writes down what it is told (and raises when asked to)."""

    def __init__(self, *, fail: bool = False) -> None:
        self.fail = fail
        self.calls: list[tuple[object, ...]] = []

    def sending(
        self, destination: str, headers: MutableMapping[str, str], message_id: str | None
    ) -> Recorder:
        self.calls.append(("sending", destination, message_id))
        if self.fail:
            raise RuntimeError("observer broken")
        headers["x-seen"] = "yes"
        return self

    def resent(self, from_broker: BrokerAddress | None, to_broker: BrokerAddress) -> None:
        self.calls.append(("resent", from_broker, to_broker))

    def finished(self, error: BaseException | None, broker: BrokerAddress | None = None) -> None:
        self.calls.append(("finished", type(error).__name__ if error else None, broker))
        if self.fail:
            raise RuntimeError("observer broken")

    def handling(self, message: Message, broker: BrokerAddress | None) -> Recorder:
        self.calls.append(("handling", message.body, broker))
        return self

    def received(self, message: Message, broker: BrokerAddress | None) -> None:
        self.calls.append(("received", message.body, broker))


def test_the_observer_sees_hand_over_headers_and_outcome() -> None:
    rig = make((A,))
    observer = Recorder()
    rig.conn.set_observer(observer)
    with running(rig):
        rig.conn.send("/queue/q", b"x", message_id="m-1")
        [message] = rig.connector.session(A).sent
        assert message.headers["x-seen"] == "yes"
    assert observer.calls == [("sending", "/queue/q", "m-1"), ("finished", None, A)]


def test_a_send_refused_before_its_write_is_finished_with_the_error() -> None:
    rig = make((A,))
    observer = Recorder()
    rig.conn.set_observer(observer)
    with pytest.raises(NotConnected):
        rig.conn.send("/queue/q", b"x", timeout=0.5)  # before connect()
    assert observer.calls == [("sending", "/queue/q", "c-1"), ("finished", "NotConnected", None)]
    rig.conn.close()


def test_an_observer_that_raises_breaks_no_send_and_no_handler() -> None:
    rig = make((A,))
    rig.conn.set_observer(Recorder(fail=True))
    handled = threading.Event()
    with running(rig):
        rig.conn.send("/queue/q", b"x")
        rig.conn.subscribe("/queue/in", lambda m: handled.set(), id="s1")
        rig.connector.session(A).deliver("s1", b"y")
        assert handled.wait(5)
        assert rig.conn.stats()["confirmed"] == 1


def test_handler_calls_and_pulled_messages_are_observed_with_their_broker() -> None:
    rig = make((A,))
    observer = Recorder()
    rig.conn.set_observer(observer)
    handled = threading.Event()
    with running(rig):
        rig.conn.subscribe("/queue/in", lambda m: handled.set(), id="s1")
        pull = rig.conn.subscribe("/queue/pull", id="p1")
        session = rig.connector.session(A)
        session.deliver("s1", b"pushed")
        assert handled.wait(5)
        session.deliver("p1", b"pulled")
        assert pull.receive(5) is not None
        assert rig.connector.wait_until(lambda: len(observer.calls) == 3)
    assert ("handling", b"pushed", A) in observer.calls
    assert ("finished", None, None) in observer.calls
    assert ("received", b"pulled", A) in observer.calls
