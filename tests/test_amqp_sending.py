"""The broker's dispositions for a confirmed send, and the confirmation book."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from proton import Delivery

from failover_client.amqp._book import Book
from failover_client.amqp._sending import MAX_RESENDS, verdict
from failover_client.net._completions import Completion, run_all


def tell(completions: Iterable[Completion | None]) -> list[BaseException]:
    """Run ``completions``; the errors their callbacks raised, in order."""
    reported: list[BaseException] = []
    run_all(completions, reported.append)
    return reported


@pytest.mark.parametrize(
    ("outcome", "settled", "resends", "expected"),
    [
        (Delivery.ACCEPTED, True, 0, "accepted"),
        (Delivery.ACCEPTED, False, 0, "accepted"),
        (Delivery.REJECTED, True, 0, "rejected"),
        (Delivery.RELEASED, True, 0, "resend"),
        (Delivery.MODIFIED, True, MAX_RESENDS - 1, "resend"),
        (Delivery.RELEASED, True, MAX_RESENDS, "released"),
        (Delivery.MODIFIED, True, MAX_RESENDS, "released"),
        (0, False, 0, "wait"),
        (Delivery.RECEIVED, False, 0, "wait"),
        (0, True, 0, "accepted"),
    ],
)
def test_a_disposition_decides_the_send(
    outcome: int, settled: bool, resends: int, expected: str
) -> None:
    assert verdict(outcome, settled=settled, resends=resends) == expected


def test_the_resend_bound_is_three() -> None:
    assert MAX_RESENDS == 3


def test_each_callback_runs_once_and_none_after_the_book_failed() -> None:
    book = Book()
    outcomes: list[tuple[str, BaseException | None]] = []
    first = book.add(lambda error: outcomes.append(("first", error)))
    second = book.add(lambda error: outcomes.append(("second", error)))
    assert first is not None
    assert second is not None
    tell([book.complete(first, None), book.complete(first, None)])
    cause = RuntimeError("lost")
    tell(book.fail_all(cause))
    tell(book.fail_all(cause))
    assert outcomes == [("first", None), ("second", cause)]
    assert book.add(lambda error: None) is None
    assert book.outstanding == 0
    assert repr(book) == "Book(outstanding=0, failed)"


def test_a_discarded_callback_never_runs() -> None:
    book = Book()
    token = book.add(lambda error: pytest.fail("must not run"))
    assert token is not None
    assert book.discard(token)
    assert not book.discard(token)
    tell(book.fail_all(RuntimeError("lost")))


def test_a_raising_callback_does_not_stop_the_others() -> None:
    book = Book()
    seen: list[BaseException | None] = []

    def broken(error: BaseException | None) -> None:
        raise ValueError("engine bug")

    book.add(broken)
    book.add(seen.append)
    cause = RuntimeError("lost")
    (reported,) = tell(book.fail_all(cause))
    assert seen == [cause]
    assert isinstance(reported, ValueError)


def test_decided_answers_wait_to_be_told_in_order_and_each_once() -> None:
    book = Book()
    outcomes: list[tuple[int, BaseException | None]] = []
    tokens = [book.add(lambda error, n=n: outcomes.append((n, error))) for n in range(3)]
    assert None not in tokens
    refused = ValueError("rejected")
    book.decide(tokens[1], refused)  # type: ignore[arg-type]
    book.decide(tokens[0], None)  # type: ignore[arg-type]
    book.decide(tokens[0], None)  # type: ignore[arg-type]
    assert outcomes == []
    assert book.outstanding == 3  # decided but not told yet: still outstanding
    tell(book.take_decided())
    tell(book.take_decided())
    assert outcomes == [(1, refused), (0, None)]
    assert book.outstanding == 1


def test_a_session_that_ends_tells_the_decided_answers_first_then_fails_the_rest() -> None:
    book = Book()
    outcomes: list[tuple[str, BaseException | None]] = []
    accepted = book.add(lambda error: outcomes.append(("accepted", error)))
    waiting = book.add(lambda error: outcomes.append(("waiting", error)))
    assert accepted is not None
    assert waiting is not None
    book.decide(accepted, None)
    cause = RuntimeError("lost")
    tell(book.fail_all(cause))
    tell(book.take_decided())
    book.decide(waiting, None)  # an answer after the end: already failed
    tell(book.take_decided())
    assert outcomes == [("accepted", None), ("waiting", cause)]
    assert book.outstanding == 0
