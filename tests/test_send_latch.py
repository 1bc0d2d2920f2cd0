"""A blocking send's outcome: a latch instead of a future, on the real and the virtual clock."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from concurrent.futures import Future

import pytest
from failover_client.uri import BrokerAddress, FailoverOptions

from failover_client import SendRejected, SendTimeout
from failover_client._clock import SystemClock
from failover_client.adapter import ConfirmCallback
from failover_client.engine._latch import Latch
from failover_client.engine._outbox import MessageIds
from failover_client.engine._sender import Sender
from failover_client.engine._slot import Slot
from failover_client.engine._sync import ClockCondition
from failover_client.testing import FakeClock

A = BrokerAddress("stomp", "a", 61613)


def test_a_latch_on_the_real_clock_is_set_once_and_wakes_its_waiter() -> None:
    clock = SystemClock()
    latch = Latch(clock)
    assert not latch.done
    assert latch.wait(clock, 0.0) is False  # not set: the wait runs out at once
    setter = threading.Thread(target=latch.set_result, args=(None,))
    setter.start()
    assert latch.wait(clock, None) is True  # the setter's release ends this wait
    setter.join()
    assert latch.done
    latch.outcome()  # confirmed: returns
    with pytest.raises(RuntimeError, match="set twice"):
        latch.set_result(None)
    assert repr(latch) == "Latch(confirmed)"


def test_a_failed_latch_raises_its_error() -> None:
    clock = SystemClock()
    latch = Latch(clock)
    error = SendRejected("refused", message_id="m-1")
    latch.set_exception(error)
    assert latch.wait(clock, 1.0)
    with pytest.raises(SendRejected) as caught:
        latch.outcome()
    assert caught.value is error
    assert repr(latch) == "Latch(failed)"


def test_a_latch_on_a_virtual_clock_waits_in_virtual_time() -> None:
    clock = FakeClock(autojump=True)
    latch = Latch(clock)
    start = clock.monotonic()
    assert latch.wait(clock, 5.0) is False  # autojump: virtual time ran out, no real wait
    assert clock.monotonic() == start + 5.0
    latch.set_result(None)
    assert latch.wait(clock, 5.0) is True
    assert clock.monotonic() == start + 5.0


class StubSession:
    def __init__(self) -> None:
        self.confirms: list[ConfirmCallback] = []

    def send(
        self,
        destination: str,
        body: bytes,
        headers: Mapping[str, str],
        on_confirm: ConfirmCallback | None,
    ) -> None:
        assert on_confirm is not None
        self.confirms.append(on_confirm)


class StubLifecycle:
    def __init__(self, slot: Slot) -> None:
        self.slot = slot

    def connected_slot(self) -> Slot | None:
        return self.slot

    def is_over(self) -> bool:
        return False

    def phase(self) -> str:
        return "connected"

    def raise_unusable(self) -> None:
        return None

    def slot_lost(self, slot: Slot, cause: BaseException) -> None:
        raise AssertionError("no session is lost here")


def _sender(clock: SystemClock | FakeClock) -> tuple[Sender, StubSession]:
    session = StubSession()
    slot = Slot(1, A, role="current", session=session)  # type: ignore[arg-type]
    sender = Sender(
        options=FailoverOptions(),
        clock=clock,
        cond=ClockCondition(clock),
        lifecycle=StubLifecycle(slot),
        message_ids=MessageIds("t"),
    )
    return sender, session


def test_a_blocking_send_gets_a_latch_and_an_async_one_a_future() -> None:
    sender, session = _sender(SystemClock())
    blocking = sender.submit(
        "/queue/q", b"x", None, message_id=None, kind="confirmed", deadline=None, blocking=True
    )
    pipelined = sender.submit(
        "/queue/q", b"y", None, message_id=None, kind="confirmed", deadline=None
    )
    assert blocking is not None
    assert pipelined is not None
    assert isinstance(blocking.future, Latch)
    assert isinstance(pipelined.future, Future)
    first, second = session.confirms
    first(None)
    second(None)
    sender.wait_confirmed(blocking, None)  # already confirmed: returns at once
    assert pipelined.future.result(0) is None
    assert sender.in_flight() == 0


def test_a_blocking_send_returns_once_confirmed_from_another_thread() -> None:
    sender, session = _sender(SystemClock())
    confirmer = threading.Thread(target=lambda: _confirm_when_sent(session))
    confirmer.start()
    sender.send_blocking("/queue/q", b"x", None, None, None)  # ends: the confirmer confirms
    confirmer.join()
    assert sender.counters().confirmed == 1


def _confirm_when_sent(session: StubSession) -> None:
    done = threading.Event()
    while not session.confirms:  # bounded: the main thread sends at once
        done.wait(0.001)
    session.confirms[0](None)


def test_a_refused_blocking_send_raises_the_refusal() -> None:
    sender, session = _sender(SystemClock())
    message = sender.submit(
        "/queue/q", b"x", None, message_id="m-1", kind="confirmed", deadline=None, blocking=True
    )
    assert message is not None
    session.confirms[0](SendRejected("no", message_id="m-1"))
    with pytest.raises(SendRejected, match="no"):
        sender.wait_confirmed(message, None)
    assert sender.counters().rejected == 1


def test_an_unconfirmed_blocking_send_times_out_on_the_virtual_clock_and_is_forgotten() -> None:
    clock = FakeClock(autojump=True)
    sender, session = _sender(clock)
    deadline = clock.monotonic() + 3.0
    with pytest.raises(SendTimeout, match="not confirmed in time"):
        sender.send_blocking("/queue/q", b"x", None, "m-1", deadline)
    assert clock.monotonic() == deadline
    assert sender.in_flight() == 0  # abandoned: no longer replayed
    session.confirms[0](None)  # a late receipt changes nothing
    assert sender.counters().confirmed == 0
