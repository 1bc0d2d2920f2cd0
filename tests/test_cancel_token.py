"""The ``Cancel`` token: one-shot, thread-safe, callbacks exactly once."""

from __future__ import annotations

import logging
import threading

import pytest

from failover_client.adapter import Cancel


def test_a_fresh_token_is_not_cancelled_and_cancel_runs_callbacks_in_order():
    token = Cancel()
    ran: list[str] = []
    token.add_callback(lambda: ran.append("first"))
    token.add_callback(lambda: ran.append("second"))
    assert not token.cancelled
    assert ran == []
    assert repr(token) == "Cancel(cancelled=False, callbacks=2)"
    token.cancel()
    assert token.cancelled
    assert ran == ["first", "second"]
    assert repr(token) == "Cancel(cancelled=True, callbacks=0)"


def test_cancel_is_idempotent_and_callbacks_run_once():
    token = Cancel()
    ran: list[int] = []
    token.add_callback(lambda: ran.append(1))
    token.cancel()
    token.cancel()
    assert ran == [1]


def test_a_callback_added_after_cancel_runs_at_once_on_the_adding_thread():
    token = Cancel()
    token.cancel()
    threads: list[threading.Thread] = []
    remove = token.add_callback(lambda: threads.append(threading.current_thread()))
    assert threads == [threading.current_thread()]
    remove()  # a no-op: it already ran
    token.cancel()
    assert len(threads) == 1


def test_a_removed_callback_never_runs_and_removing_twice_is_harmless():
    token = Cancel()
    ran: list[str] = []
    remove = token.add_callback(lambda: ran.append("removed"))
    token.add_callback(lambda: ran.append("kept"))
    remove()
    remove()
    assert repr(token) == "Cancel(cancelled=False, callbacks=1)"
    token.cancel()
    assert ran == ["kept"]


def test_a_raising_callback_is_logged_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = Cancel()
    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("adapter bug")

    token.add_callback(broken)
    token.add_callback(lambda: ran.append("after"))
    with caplog.at_level(logging.ERROR, logger="failover_client"):
        token.cancel()  # does not raise
    assert ran == ["after"]
    assert [r.getMessage() for r in caplog.records] == ["a connect-cancel callback failed"]
    assert caplog.records[0].exc_info is not None
    assert isinstance(caplog.records[0].exc_info[1], RuntimeError)


def test_a_callback_added_after_cancel_that_raises_is_logged_too(
    caplog: pytest.LogCaptureFixture,
) -> None:
    token = Cancel()
    token.cancel()

    def broken() -> None:
        raise RuntimeError("late")

    with caplog.at_level(logging.ERROR, logger="failover_client"):
        token.add_callback(broken)
    assert [r.getMessage() for r in caplog.records] == ["a connect-cancel callback failed"]


def test_a_callback_may_register_another_while_cancel_runs():
    token = Cancel()
    ran: list[str] = []
    token.add_callback(lambda: token.add_callback(lambda: ran.append("nested")))
    token.cancel()  # the nested one is added after the cancel, so it runs at once
    assert ran == ["nested"]


def test_concurrent_cancels_run_each_callback_exactly_once():
    token = Cancel()
    counts = [0] * 50
    lock = threading.Lock()

    def count(index: int) -> None:
        with lock:
            counts[index] += 1

    for index in range(len(counts)):
        token.add_callback(lambda index=index: count(index))
    start = threading.Barrier(8)

    def cancel() -> None:
        start.wait()
        token.cancel()

    threads = [threading.Thread(target=cancel) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert counts == [1] * 50
