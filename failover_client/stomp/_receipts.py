"""Outstanding STOMP receipts: which send is waiting for which RECEIPT.

Many receipts may be outstanding at once (the manager bounds the window); each confirmation
callback fires exactly once: with ``None`` on RECEIPT, with the rejection on an ERROR that names
the receipt, or with the loss cause when the session dies. The book changes its state under a
lock and *returns* the callbacks to run; the caller runs them outside the lock, so a callback
that sends again on the same session cannot deadlock.

A RECEIPT for an id the book does not hold (never handed out, or answered already) costs one
dictionary look-up and is counted in :attr:`ReceiptBook.unknown`: a peer flooding such frames
is visible in the session's repr without slowing the real confirmations behind them.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass

from failover_client.adapter import ConfirmCallback

__all__ = ["Completion", "ReceiptBook", "run_all"]


@dataclass(frozen=True)
class Completion:
    """One callback to run with its outcome (``None`` = confirmed)."""

    callback: ConfirmCallback
    outcome: BaseException | None

    def run(self) -> None:
        self.callback(self.outcome)


class ReceiptBook:
    """Receipt ids handed out for one session and the callbacks waiting on them.

    Ids are ``<prefix><n>`` with a per-session counter: unique within the connection, which
    is the scope STOMP gives a receipt id.
    """

    def __init__(self, prefix: str = "fc-") -> None:
        self._prefix = prefix
        self._counter = itertools.count(1)
        self._waiting: dict[str, ConfirmCallback] = {}
        self._closed_by: BaseException | None = None
        self._lock = threading.Lock()
        self.unknown = 0
        """RECEIPTs that named no outstanding receipt (only the I/O thread counts them)."""

    def add(self, callback: ConfirmCallback) -> str | None:
        """Register ``callback`` and return the receipt id to put on the frame.

        Returns None when the book was already failed (the session is dead): checked under the
        same lock as :meth:`fail_all`, so no callback can slip in after the session died and
        wait forever.
        """
        with self._lock:
            if self._closed_by is not None:
                return None
            receipt = f"{self._prefix}{next(self._counter)}"
            self._waiting[receipt] = callback
            return receipt

    def discard(self, receipt: str) -> bool:
        """Forget ``receipt`` without calling back; False if it was already completed."""
        with self._lock:
            return self._waiting.pop(receipt, None) is not None

    def confirm(self, receipt: str) -> Completion | None:
        """The broker confirmed ``receipt``; None if it is not ours (or already completed)."""
        with self._lock:
            callback = self._waiting.pop(receipt, None)
        return None if callback is None else Completion(callback, None)

    def note_unknown(self) -> int:
        """Count one RECEIPT that named nothing outstanding; the count so far."""
        self.unknown += 1
        return self.unknown

    def reject(self, receipt: str, error: BaseException) -> Completion | None:
        """The broker refused the frame carrying ``receipt``."""
        with self._lock:
            callback = self._waiting.pop(receipt, None)
        return None if callback is None else Completion(callback, error)

    def fail_all(
        self,
        cause: BaseException,
        *,
        spared: frozenset[str] = frozenset(),
        spared_cause: BaseException | None = None,
    ) -> list[Completion]:
        """Fail every outstanding receipt with ``cause`` and refuse new ones; idempotent.

        The receipts in ``spared`` get ``spared_cause`` instead (frames the broker cannot
        have read, see ``_teardown.lose``).
        """
        with self._lock:
            if self._closed_by is None:
                self._closed_by = cause
            waiting, self._waiting = self._waiting, {}
        other = spared_cause if spared_cause is not None else cause
        return [
            Completion(callback, other if receipt in spared else cause)
            for receipt, callback in waiting.items()
        ]

    @property
    def closed_by(self) -> BaseException | None:
        """The cause the book was failed with, or None while it is open."""
        with self._lock:
            return self._closed_by

    def is_ours(self, receipt: str) -> bool:
        """Whether ``receipt`` has our prefix (RECEIPTs for other frames are not sends)."""
        return receipt.startswith(self._prefix)

    @property
    def outstanding(self) -> int:
        with self._lock:
            return len(self._waiting)

    def __repr__(self) -> str:
        state = "failed" if self._closed_by is not None else "open"
        return f"ReceiptBook(outstanding={self.outstanding}, unknown={self.unknown}, {state})"


def run_all(
    completions: list[Completion] | Completion | None,
    on_error: Callable[[BaseException], None],
) -> None:
    """Run completions in order; a callback that raises is reported, never propagated."""
    if completions is None:
        return
    if isinstance(completions, Completion):
        completions = [completions]
    for completion in completions:
        try:
            completion.run()
        except Exception as exc:  # noqa: BLE001 - a manager bug must not kill the I/O thread
            on_error(exc)
