"""Confirmed sends, the window, replay after fail-over, timeouts, fire-and-forget."""

from __future__ import annotations

import pytest
from test_manager_support import A, B, in_thread, make, running

from failover_client import ConnectionClosed, SendRejected, SendTimeout
from failover_client._events import FailedOver


def test_send_returns_after_confirmation_with_a_message_id():
    rig = make((A,))
    with running(rig):
        rig.conn.send("/queue/q", "héllo", {"k": "v"})
        (sent,) = rig.connector.session(A).sent
        assert sent.destination == "/queue/q"
        assert sent.body == "héllo".encode()
        assert sent.headers == {"k": "v", "failover-message-id": "c-1", "_AMQ_DUPL_ID": "c-1"}
        assert rig.conn.stats()["confirmed"] == 1


def test_application_supplied_ids_are_kept():
    rig = make((A,))
    with running(rig):
        rig.conn.send("/queue/q", b"1", message_id="order-7")
        rig.conn.send("/queue/q", b"2", {"failover-message-id": "order-8"})
        assert rig.connector.session(A).message_ids() == ["order-7", "order-8"]


def test_unconfirmed_sends_are_replayed_in_order_with_the_same_ids_before_new_sends():
    rig = make((A, B), auto_confirm=False)
    with running(rig):
        futures = [rig.conn.send_async("/queue/q", f"m{i}".encode()) for i in range(1, 4)]
        session_a = rig.connector.session(A)
        assert session_a.confirm(1) == 1
        assert futures[0].result(5) is None
        rig.connector.behave(A, "refuse")
        session_a.kill()
        rig.events.wait_for(FailedOver)
        late = rig.conn.send_async("/queue/q", b"m4")
        session_b = rig.connector.session(B)
        assert session_b.message_ids() == ["c-2", "c-3", "c-4"]
        assert [m.body for m in session_b.sent] == [b"m2", b"m3", b"m4"]
        assert not futures[1].done()
        session_b.confirm()
        assert [f.result(5) for f in (*futures, late)] == [None] * 4
        stats = rig.conn.stats()
        assert (stats["sent"], stats["confirmed"], stats["replayed"]) == (4, 4, 2)
        assert stats["in_flight"] == 0


def test_a_late_confirmation_from_the_dead_session_still_counts():
    rig = make((A, B), auto_confirm=False)
    with running(rig):
        future = rig.conn.send_async("/queue/q", b"x")
        session_a = rig.connector.session(A)
        rig.connector.behave(A, "refuse")
        [sent] = session_a.sent
        session_a.kill()
        rig.events.wait_for(FailedOver)
        # The broker had it after all: its receipt, read just before the socket broke, is
        # handed over after the loss was noticed.
        assert sent.on_confirm is not None
        sent.on_confirm(None)
        assert future.result(5) is None
        rig.connector.session(B).confirm()
        assert rig.conn.stats()["confirmed"] == 1


def test_window_full_blocks_until_a_confirmation_frees_a_slot():
    rig = make((A,), auto_confirm=False, confirm_window=2)
    with running(rig):
        rig.conn.send_async("/queue/q", b"1")
        rig.conn.send_async("/queue/q", b"2")
        session = rig.connector.session(A)
        third = in_thread(rig, lambda: rig.conn.send_async("/queue/q", b"3"))
        # The loop and the blocked sender both wait on the clock.
        assert rig.clock.wait_for_waiters(2)
        assert len(session.sent) == 2
        assert not third.done.is_set()
        session.confirm(1)
        assert third.done.wait(5)
        assert len(session.sent) == 3
        session.confirm()


def test_window_full_times_out():
    rig = make((A,), autojump=False, auto_confirm=False, confirm_window=1)
    with running(rig):
        rig.conn.send_async("/queue/q", b"1")
        blocked = in_thread(rig, lambda: rig.conn.send_async("/queue/q", b"2", timeout=3.0))
        assert rig.clock.wait_for_waiters(1, timed=True)
        rig.clock.advance(3.0)
        assert blocked.done.wait(5)
        assert isinstance(blocked.error, SendTimeout)
        assert "confirmation window full" in str(blocked.error)
        assert "c-2" in str(blocked.error)


def test_window_full_times_out_after_the_options_timeout_counted_from_the_wait():
    # send_async without timeout= reads the clock only once it has to wait: the options'
    # timeout still bounds that wait, counted from its start (not from an earlier moment).
    rig = make((A,), autojump=False, auto_confirm=False, confirm_window=1, timeout=4.0)
    with running(rig):
        rig.conn.send_async("/queue/q", b"1")  # room: no wait, no deadline
        rig.clock.advance(10.0)  # longer than the timeout, before the next send waits
        blocked = in_thread(rig, lambda: rig.conn.send_async("/queue/q", b"2"))
        assert rig.clock.wait_for_waiters(1, timed=True)
        rig.clock.advance(4.0)
        assert blocked.done.wait(5)
        assert isinstance(blocked.error, SendTimeout)
        assert "confirmWindow=1" in str(blocked.error)


def test_byte_budget_limits_the_window_but_lets_one_large_message_through():
    rig = make((A,), auto_confirm=False, max_cache_size=10)
    with running(rig):
        rig.conn.send_async("/queue/q", b"x" * 20)  # alone: allowed although over budget
        blocked = in_thread(rig, lambda: rig.conn.send_async("/queue/q", b"y" * 5))
        assert rig.clock.wait_for_waiters(2)
        session = rig.connector.session(A)
        assert len(session.sent) == 1
        session.confirm()
        assert blocked.done.wait(5)
        assert [len(m.body) for m in session.sent] == [20, 5]


def test_a_send_held_by_the_byte_bound_says_so_when_it_times_out():
    # maxCacheSize bounds the bytes of the confirmation window too: a timeout that blamed the
    # window (1024 sends) while two sends were in flight would send the reader to the wrong
    # option.
    rig = make((A,), autojump=False, auto_confirm=False, confirm_window=1024, max_cache_size=10)
    with running(rig):
        rig.conn.send_async("/queue/q", b"x" * 8)
        blocked = in_thread(rig, lambda: rig.conn.send_async("/queue/q", b"y" * 5, timeout=3.0))
        assert rig.clock.wait_for_waiters(1, timed=True)
        rig.clock.advance(3.0)
        assert blocked.done.wait(5)
        assert isinstance(blocked.error, SendTimeout)
        message = str(blocked.error)
        assert "maxCacheSize=10" in message
        assert "8 bytes" in message
        assert "1 send(s)" in message
        assert "c-2" in message


def test_a_send_held_by_the_count_bound_names_confirm_window():
    rig = make((A,), autojump=False, auto_confirm=False, confirm_window=1)
    with running(rig):
        rig.conn.send_async("/queue/q", b"1")
        blocked = in_thread(rig, lambda: rig.conn.send_async("/queue/q", b"2", timeout=3.0))
        assert rig.clock.wait_for_waiters(1, timed=True)
        rig.clock.advance(3.0)
        assert blocked.done.wait(5)
        assert "confirmWindow=1" in str(blocked.error)
        assert "maxCacheSize" not in str(blocked.error)


def test_send_while_disconnected_blocks_then_times_out():
    rig = make((A,), autojump=False, initial_reconnect_delay=20.0, timeout=5.0)
    with running(rig):
        rig.connector.session(A).kill()
        blocked = in_thread(rig, lambda: rig.conn.send("/queue/q", b"x"))  # options.timeout
        # The reconnect loop waits 20 s, the sender 5 s.
        assert rig.clock.wait_for_waiters(2, timed=True)
        assert rig.clock.deadlines() == [5.0, 20.0]
        rig.clock.advance(5.0)
        assert blocked.done.wait(5)
        assert isinstance(blocked.error, SendTimeout)
        assert "not connected (reconnecting)" in str(blocked.error)
        rig.clock.advance(15.0)
        assert rig.connector.wait_for_sessions(2)
        rig.conn.send("/queue/q", b"y")
        assert rig.connector.sessions[1].message_ids() == ["c-2"]


def test_send_waits_for_the_reconnect_when_no_timeout():
    rig = make((A,), autojump=False, initial_reconnect_delay=20.0)
    with running(rig):
        rig.connector.session(A).kill()
        assert rig.clock.wait_for_waiters(1, timed=True)  # the loop's back-off
        blocked = in_thread(rig, lambda: rig.conn.send("/queue/q", b"x"))
        assert rig.clock.wait_for_waiters(2)
        rig.clock.advance(20.0)
        assert blocked.done.wait(5)
        assert blocked.error is None
        assert rig.connector.sessions[0].sent == []
        assert rig.connector.sessions[-1].message_ids() == ["c-1"]


def test_unconfirmed_send_times_out_and_is_no_longer_replayed():
    rig = make((A, B), autojump=False, auto_confirm=False)
    with running(rig):
        blocked = in_thread(rig, lambda: rig.conn.send("/queue/q", b"x", timeout=2.0))
        assert rig.connector.wait_until(lambda: len(rig.connector.session(A).sent) == 1)
        assert rig.clock.wait_for_waiters(1, timed=True)
        rig.clock.advance(2.0)
        assert blocked.done.wait(5)
        assert isinstance(blocked.error, SendTimeout)
        assert rig.conn.stats()["in_flight"] == 0
        rig.connector.behave(A, "refuse")
        rig.connector.session(A).kill()
        rig.events.wait_for(FailedOver)  # b is another broker: tried at once
        assert rig.connector.session(B).sent == []


def test_rejected_send_raises_send_rejected():
    rig = make((A,), auto_confirm=False)
    with running(rig):
        blocked = in_thread(rig, lambda: rig.conn.send("/queue/q", b"x"))
        session = rig.connector.session(A)
        assert rig.connector.wait_until(lambda: len(session.sent) == 1)
        session.reject(1, "not authorised to write /queue/q")
        assert blocked.done.wait(5)
        assert isinstance(blocked.error, SendRejected)
        assert "not authorised" in str(blocked.error)
        assert rig.conn.stats()["rejected"] == 1


def test_flush_waits_for_every_confirmation():
    rig = make((A,), autojump=False, auto_confirm=False)
    with running(rig):
        rig.conn.send_async("/queue/q", b"1")
        rig.conn.send_async("/queue/q", b"2")
        flushing = in_thread(rig, lambda: rig.conn.flush(timeout=10.0))
        assert rig.clock.wait_for_waiters(1, timed=True)
        session = rig.connector.session(A)
        session.confirm(1)
        assert not flushing.done.is_set()
        session.confirm(1)
        assert flushing.done.wait(5)
        assert flushing.error is None
        rig.conn.send_async("/queue/q", b"3")
        late = in_thread(rig, lambda: rig.conn.flush(timeout=1.0))
        assert rig.clock.wait_for_waiters(1, timed=True)
        rig.clock.advance(1.0)
        assert late.done.wait(5)
        assert isinstance(late.error, SendTimeout)
        assert "1 confirmation(s) still outstanding" in str(late.error)


def test_fire_and_forget_is_not_replayed_without_tracking():
    rig = make((A, B), auto_confirm=False)
    with running(rig):
        rig.conn.send("/queue/q", b"x", confirm=False)
        session_a = rig.connector.session(A)
        assert [m.state for m in session_a.sent] == ["untracked"]
        rig.connector.behave(A, "refuse")
        assert rig.conn.stats()["in_flight"] == 0
        session_a.kill()
        rig.events.wait_for(FailedOver)
        assert rig.connector.sessions[-1].sent == []


def test_tracked_fire_and_forget_is_replayed_best_effort_oldest_evicted():
    rig = make((A, B), auto_confirm=False, track_messages=True, max_cache_size=10)
    with running(rig):
        for body in (b"aaaa", b"bbbb", b"cccc"):  # 12 bytes > 10: the oldest is evicted
            rig.conn.send("/queue/q", body, confirm=False)
        session_a = rig.connector.session(A)
        assert len(session_a.unconfirmed()) == 3  # confirmation was requested internally
        assert rig.conn.stats()["evicted"] == 1
        session_a.kill()
        rig.events.wait_for(FailedOver)
        session = rig.connector.sessions[-1]
        assert [m.body for m in session.sent] == [b"bbbb", b"cccc"]
        assert session.message_ids() == ["c-2", "c-3"]
        session.confirm()
        assert rig.conn.stats()["in_flight"] == 0


def test_close_fails_waiting_and_pending_sends():
    rig = make((A,), autojump=False, auto_confirm=False, confirm_window=1)
    with running(rig):
        pending = rig.conn.send_async("/queue/q", b"1")
        blocked = in_thread(rig, lambda: rig.conn.send("/queue/q", b"2"))
        assert rig.clock.wait_for_waiters(2)
        rig.conn.close()
        assert blocked.done.wait(5)
        assert isinstance(blocked.error, ConnectionClosed)
        assert isinstance(pending.exception(5), ConnectionClosed)
        assert "c-1" in str(pending.exception(5))


def test_sends_from_many_threads_are_all_confirmed_once():
    rig = make((A,))
    with running(rig):
        workers = [
            in_thread(rig, lambda n=n: [rig.conn.send("/queue/q", f"{n}-{i}") for i in range(25)])
            for n in range(4)
        ]
        for worker in workers:
            assert worker.done.wait(5)
            assert worker.error is None
        ids = rig.connector.session(A).message_ids()
        assert len(ids) == 100
        assert len(set(ids)) == 100
        assert rig.conn.stats()["confirmed"] == 100


def test_futures_cannot_be_cancelled():
    rig = make((A,), auto_confirm=False)
    with running(rig):
        future = rig.conn.send_async("/queue/q", b"x")
        assert future.cancel() is False
        rig.connector.session(A).confirm()
        assert future.result(5) is None


def test_send_rejected_by_adapter_synchronously_fails_only_that_message():
    rig = make((A,))
    with running(rig):
        session = rig.connector.session(A)
        original = session.send

        def refusing(destination, body, headers, on_confirm):
            if destination == "/bad":
                raise SendRejected("destination not allowed")
            original(destination, body, headers, on_confirm)

        session.send = refusing  # type: ignore[method-assign]
        with pytest.raises(SendRejected, match="not allowed"):
            rig.conn.send("/bad", b"x")
        rig.conn.send("/queue/q", b"y")
        assert rig.conn.state == "connected"


def test_untracked_fire_and_forget_carries_no_id_unless_given():
    rig = make((A,))
    with running(rig):
        rig.conn.send("/queue/x", b"plain", confirm=False)
        rig.conn.send("/queue/x", b"named", confirm=False, message_id="order-7")
        rig.conn.send("/queue/x", b"confirmed")
        sent = rig.connector.session(A).sent
        assert [m.message_id for m in sent] == [None, "order-7", "c-1"]
        assert [m.state for m in sent[:2]] == ["untracked", "untracked"]
