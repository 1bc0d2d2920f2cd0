"""A transaction's sends settled in one pass: receipt book, adapter helper and engine together."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from failover_client.uri import BrokerAddress, FailoverOptions

from failover_client._clock import SystemClock
from failover_client.adapter import ConfirmCallback
from failover_client.engine._outbox import MessageIds
from failover_client.engine._sender import Sender
from failover_client.engine._settle import Confirmation
from failover_client.engine._slot import Slot
from failover_client.engine._sync import ClockCondition
from failover_client.net._completions import confirm_all
from failover_client.stomp._receipts import ReceiptBook
from tests.test_send_latch import StubLifecycle, StubSession

A = BrokerAddress("stomp", "a", 61613)


class CountingCondition(ClockCondition):
    """Counts the lock's acquisitions and the wake-ups."""

    def __init__(self) -> None:
        super().__init__(SystemClock())
        self.entered = 0
        self.notified = 0

    def __enter__(self) -> ClockCondition:
        self.entered += 1
        return super().__enter__()

    def notify_all(self) -> None:
        self.notified += 1
        super().notify_all()


def _sender() -> tuple[Sender, StubSession, CountingCondition]:
    session = StubSession()
    slot = Slot(1, A, role="current", session=session)  # type: ignore[arg-type]
    cond = CountingCondition()
    sender = Sender(
        options=FailoverOptions(),
        clock=SystemClock(),
        cond=cond,
        lifecycle=StubLifecycle(slot),
        message_ids=MessageIds("t"),
    )
    return sender, session, cond


def test_the_receipt_book_hands_over_a_commits_callbacks_in_order_once() -> None:
    book = ReceiptBook(nonce="")
    calls: list[str] = []
    ids = [book.hold(lambda error, n=n: calls.append(f"{n}")) for n in range(3)]
    assert None not in ids
    assert book.outstanding == 3
    first = book.committed_all([i for i in ids if i is not None])
    assert len(first) == 3
    assert book.outstanding == 0
    assert book.committed_all([i for i in ids if i is not None]) == []  # answered already
    for callback in first:
        callback(None)
    assert calls == ["0", "1", "2"]
    assert book.premature == 0
    assert book.unknown == 0


def test_a_commit_settles_every_send_of_the_run_with_one_lock_and_one_wake_up() -> None:
    sender, session, cond = _sender()
    messages = [
        sender.submit("/queue/q", b"x", None, message_id=None, kind="confirmed", deadline=None)
        for _ in range(5)
    ]
    assert all(isinstance(c, Confirmation) for c in session.confirms)
    entered, notified = cond.entered, cond.notified
    confirm_all(session.confirms, _fail)
    assert cond.entered - entered == 1
    assert cond.notified - notified == 1
    assert sender.in_flight() == 0
    assert sender.counters().confirmed == 5
    for message in messages:
        assert message is not None
        assert message.future is not None
        assert message.future.done()
    confirm_all(session.confirms, _fail)  # a second verdict changes nothing
    assert sender.counters().confirmed == 5


def test_a_send_settled_before_its_commit_is_not_counted_twice() -> None:
    sender, session, _ = _sender()
    for _ in range(3):
        sender.submit("/queue/q", b"x", None, message_id=None, kind="confirmed", deadline=None)
    session.confirms[1](None)  # settled on its own first (e.g. written again alone)
    confirm_all(session.confirms, _fail)
    assert sender.counters().confirmed == 3
    assert sender.in_flight() == 0


def test_confirm_all_calls_plain_callbacks_each_and_groups_the_engines() -> None:
    sender, session, cond = _sender()
    for _ in range(2):
        sender.submit("/queue/q", b"x", None, message_id=None, kind="confirmed", deadline=None)
    plain: list[BaseException | None] = []
    callbacks: list[ConfirmCallback] = [plain.append, *session.confirms, plain.append]
    entered = cond.entered
    confirm_all(callbacks, _fail)
    assert plain == [None, None]
    assert cond.entered - entered == 1  # the engine's two in one call
    assert sender.counters().confirmed == 2


def test_a_raising_callback_is_reported_and_the_others_still_run() -> None:
    reported: list[BaseException] = []
    calls: list[str] = []

    def boom(error: BaseException | None) -> None:
        raise RuntimeError("bug")

    def together(callbacks: Sequence[object]) -> None:
        calls.append(f"together {len(callbacks)}")
        raise ValueError("also a bug")

    class Grouped:
        confirm_together = staticmethod(together)

        def __call__(self, error: BaseException | None) -> None:
            raise AssertionError("grouped callbacks are confirmed together")

    confirm_all([boom, Grouped(), Grouped(), lambda e: calls.append("last")], reported.append)
    assert calls == ["together 2", "last"]
    assert [type(e) for e in reported] == [RuntimeError, ValueError]


def _fail(error: BaseException) -> None:
    pytest.fail(f"a callback raised: {error!r}")
