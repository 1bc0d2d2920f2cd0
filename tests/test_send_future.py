"""SendFuture: a Future whose condition is built on first use, settled without it otherwise.

Each test that races a waiter against the settler fixes the interleaving with events (no
sleeps): the waiter is inside its wait, or has not looked yet, when the settler runs.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, InvalidStateError, as_completed, wait

import pytest

from failover_client.engine._future import SendFuture, confirm_outcomes

SAFETY_TIMEOUT = 10.0


def test_it_is_a_running_future_that_cannot_be_cancelled() -> None:
    future = SendFuture()
    assert isinstance(future, Future)
    assert future.running()
    assert not future.done()
    assert not future.cancel()
    assert future._built is not None  # running() looked under the condition: built now


def test_settled_before_anyone_looked_it_builds_no_condition() -> None:
    future = SendFuture()
    future.set_result(None)
    assert future._built is None
    assert future.done()
    assert future._built is None  # done() reads the state without the condition
    assert future.result(timeout=0) is None
    assert future.exception(timeout=0) is None


def test_its_waiter_and_callback_lists_are_made_for_their_first_user() -> None:
    # Two empty lists per send in flight were two more objects for the garbage collector.
    future = SendFuture()
    assert future._waiter_list is None
    assert future._callback_list is None
    seen: list[Future[None]] = []
    future.add_done_callback(seen.append)
    assert future._callback_list == [seen.append]
    assert confirm_outcomes([future]) is None
    assert seen == [future]  # the callback added before settling ran once
    pending = SendFuture()
    assert wait([pending], timeout=0).not_done == {pending}
    assert pending._waiter_list == []  # wait() registered its waiter there, then removed it


def test_an_exception_set_before_anyone_looked_is_raised_by_result() -> None:
    future = SendFuture()
    error = RuntimeError("refused")
    future.set_exception(error)
    assert future._built is None
    with pytest.raises(RuntimeError, match="refused"):
        future.result(timeout=0)
    assert future.exception(timeout=0) is error


@pytest.mark.parametrize("outcome", [None, RuntimeError("refused")])
def test_a_second_outcome_is_refused_either_way(outcome: BaseException | None) -> None:
    for built in (False, True):
        future = SendFuture()
        if built:
            future.add_done_callback(lambda f: None)
        if outcome is None:
            future.set_result(None)
        else:
            future.set_exception(outcome)
        with pytest.raises(InvalidStateError):
            future.set_result(None)
        with pytest.raises(InvalidStateError):
            future.set_exception(RuntimeError("again"))


def test_a_callback_added_before_runs_once_on_the_settling_thread() -> None:
    future = SendFuture()
    calls: list[tuple[Future[None], str]] = []
    future.add_done_callback(lambda f: calls.append((f, threading.current_thread().name)))
    settler = threading.Thread(target=future.set_result, args=(None,), name="settler")
    settler.start()
    settler.join(SAFETY_TIMEOUT)
    assert calls == [(future, "settler")]


def test_a_callback_added_after_runs_at_once_on_the_adding_thread() -> None:
    future = SendFuture()
    future.set_exception(RuntimeError("refused"))
    calls: list[BaseException | None] = []
    future.add_done_callback(lambda f: calls.append(f.exception()))
    assert len(calls) == 1
    assert isinstance(calls[0], RuntimeError)


@pytest.mark.parametrize("outcome", [None, RuntimeError("refused")])
def test_a_thread_that_built_the_condition_first_is_answered(outcome: BaseException | None) -> None:
    future = SendFuture()
    got: list[object] = []

    def waiter() -> None:
        try:
            got.append(future.result(timeout=SAFETY_TIMEOUT))
        except RuntimeError as exc:
            got.append(exc)

    thread = threading.Thread(target=waiter)
    with future._condition:  # built here; the waiter blocks on it until the settling is done
        thread.start()
        if outcome is None:
            future.set_result(None)  # through the condition (re-entrant), as the base class
        else:
            future.set_exception(outcome)
    thread.join(SAFETY_TIMEOUT)
    assert not thread.is_alive()
    assert got == [outcome]


def test_futures_wait_and_as_completed_see_settled_and_pending_ones() -> None:
    settled, pending = SendFuture(), SendFuture()
    settled.set_result(None)
    done, not_done = wait([settled, pending], timeout=0, return_when=FIRST_COMPLETED)
    assert done == {settled}
    assert not_done == {pending}
    # wait() installed a waiter on the pending one: settling it lock-free would miss it, so
    # it goes through the condition and as_completed sees both.
    thread = threading.Thread(target=pending.set_exception, args=(RuntimeError("late"),))
    seen: list[Future[None]] = []
    iterator = as_completed([settled, pending], timeout=SAFETY_TIMEOUT)
    seen.append(next(iterator))
    thread.start()
    seen.append(next(iterator))
    thread.join(SAFETY_TIMEOUT)
    assert set(seen) == {settled, pending}


def test_many_racing_waiters_and_settlers_lose_no_wake_up() -> None:
    # Each round: a waiter and a settler start together; whoever comes first, the waiter
    # returns (a lost wake-up would leave it waiting until the safety timeout and fail).
    for _ in range(100):
        future = SendFuture()
        start = threading.Barrier(2)
        results: list[object] = []

        def waiter(
            f: SendFuture = future, b: threading.Barrier = start, results: list[object] = results
        ) -> None:
            b.wait(SAFETY_TIMEOUT)
            results.append(f.result(timeout=SAFETY_TIMEOUT))

        def settler(f: SendFuture = future, b: threading.Barrier = start) -> None:
            b.wait(SAFETY_TIMEOUT)
            f.set_result(None)

        threads = [threading.Thread(target=waiter), threading.Thread(target=settler)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(SAFETY_TIMEOUT)
        assert results == [None]


def test_confirm_outcomes_sets_every_kind_of_outcome_and_returns_the_first_error() -> None:
    quiet, watched, plain = SendFuture(), SendFuture(), Future[None]()
    plain.set_running_or_notify_cancel()
    seen: list[str] = []
    watched.add_done_callback(lambda _: seen.append("watched"))  # builds its condition

    settled_twice = SendFuture()
    settled_twice.set_result(None)
    error = confirm_outcomes([quiet, None, watched, plain, settled_twice])
    assert isinstance(error, InvalidStateError)  # the one already set; the others still are
    assert quiet.done()
    assert quiet._built is None  # nobody looked: no condition was built for it
    assert quiet.result(0) is None
    assert watched.result(0) is None
    assert seen == ["watched"]
    assert plain.result(0) is None


def test_a_waiter_that_builds_the_condition_during_confirm_outcomes_is_answered() -> None:
    future = SendFuture()
    answered = threading.Event()

    def wait() -> None:
        future.result(SAFETY_TIMEOUT)
        answered.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    # The waiter is inside result() (its condition exists) before the outcome is set.
    assert _wait_until(lambda: future._built is not None and bool(future._built._waiters))
    assert confirm_outcomes([future]) is None
    assert answered.wait(SAFETY_TIMEOUT)
    waiter.join(SAFETY_TIMEOUT)


def _wait_until(predicate: Callable[[], bool]) -> bool:
    ready = threading.Event()
    for _ in range(10_000):  # bounded: the waiter gets there within a few switches
        if predicate():
            return True
        ready.wait(0.001)
    return False
