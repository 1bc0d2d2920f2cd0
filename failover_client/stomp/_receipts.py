"""Outstanding STOMP receipts: which send is waiting for which RECEIPT.

Many receipts may be outstanding at once (the manager bounds the window); each confirmation
callback fires exactly once: with ``None`` on RECEIPT, with the rejection on an ERROR that names
the receipt, or with the loss cause when the session dies. The book changes its state under a
lock and *returns* the callbacks to run; the caller runs them outside the lock, so a callback
that sends again on the same session cannot deadlock.

A RECEIPT confirms only a frame that was written with its id, because a peer that answers
ahead (or a confused one that answers ids it never read) would otherwise confirm sends the
broker never stored, and their callers would be told "stored":

* Ids carry a random per-session nonce (``fc-<nonce>-<n>``): a peer cannot name the id of a
  frame it has not read.
* A group-committed send's own id goes on the wire only when the send is written alone (see
  ``_batch``); until then it is *held* (:meth:`ReceiptBook.hold`), and a RECEIPT naming it is
  ignored and counted in :attr:`ReceiptBook.premature` (its transaction's COMMIT receipt
  confirms it: :meth:`ReceiptBook.committed`). Frames written directly are registered just
  before they are handed to the transport (:meth:`ReceiptBook.add`).

A RECEIPT for an id the book does not hold (never handed out, or answered already) costs one
dictionary look-up and is counted in :attr:`ReceiptBook.unknown`: a peer flooding such frames
is visible in the session's repr without slowing the real confirmations behind them.
"""

from __future__ import annotations

import itertools
import secrets
import threading
from collections.abc import Iterable

from failover_client.adapter import ConfirmCallback
from failover_client.net._completions import Completion

__all__ = ["ReceiptBook", "new_nonce", "with_nonce"]

_NONCE_BYTES = 6
"""48 random bits per session: a peer guesses a live id with odds of one in 2**48 per try."""


def new_nonce() -> str:
    """A fresh random nonce for one session's ids (module-level, so tests can pin it)."""
    return secrets.token_hex(_NONCE_BYTES)


def with_nonce(prefix: str, nonce: str | None) -> str:
    """``prefix`` followed by ``nonce`` (a new one when None) and a dash; "" adds nothing."""
    if nonce is None:
        nonce = new_nonce()
    return f"{prefix}{nonce}-" if nonce else prefix


class ReceiptBook:
    """Receipt ids handed out for one session and the callbacks waiting on them.

    Ids are ``<prefix><nonce>-<n>``: unique within the connection (the scope STOMP gives a
    receipt id) and unguessable by the peer (``nonce``: a new random one when None).
    """

    __slots__ = (
        "_closed_by",
        "_counter",
        "_held",
        "_lock",
        "_prefix",
        "_waiting",
        "premature",
        "unknown",
    )

    def __init__(self, prefix: str = "fc-", nonce: str | None = None) -> None:
        self._prefix = with_nonce(prefix, nonce)
        self._counter = itertools.count(1)
        self._waiting: dict[str, ConfirmCallback] = {}
        self._held: set[str] = set()
        """Ids in ``_waiting`` not written yet (group-committed sends, see :meth:`hold`)."""
        self._closed_by: BaseException | None = None
        self._lock = threading.Lock()
        self.unknown = 0
        """RECEIPTs that named no outstanding receipt."""
        self.premature = 0
        """RECEIPTs (and ERRORs) that named an id of ours not written yet."""

    def add(self, callback: ConfirmCallback) -> str | None:
        """Register ``callback`` and return the receipt id to put on the frame.

        For a frame written right away, with this id on it: a RECEIPT for it counts from now.
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

    def hold(self, callback: ConfirmCallback) -> str | None:
        """Like :meth:`add`, for a send queued for group commit: its id is not on the wire.

        A RECEIPT naming it is ignored until :meth:`written` says the send went out alone with
        it; the COMMIT receipt of its transaction confirms it through :meth:`committed`.
        """
        with self._lock:
            if self._closed_by is not None:
                return None
            receipt = f"{self._prefix}{next(self._counter)}"
            self._waiting[receipt] = callback
            self._held.add(receipt)
            return receipt

    def written(self, receipt: str) -> None:
        """The frame carrying ``receipt`` is being written (the writer, before its write).

        Without the lock: one set operation is atomic, and :meth:`confirm` reads the set under
        the lock, so a RECEIPT racing this call is either early (ignored) or on time; the
        writer must not queue behind the reader on the lock for every lone send.
        """
        self._held.discard(receipt)

    def discard(self, receipt: str) -> bool:
        """Forget ``receipt`` without calling back; False if it was already completed."""
        with self._lock:
            self._held.discard(receipt)
            return self._waiting.pop(receipt, None) is not None

    def confirm(self, receipt: str) -> Completion | None:
        """A RECEIPT named ``receipt``; None (and counted) unless it answers a written frame."""
        with self._lock:
            if receipt in self._held:
                self.premature += 1
                return None
            callback = self._waiting.pop(receipt, None)
            if callback is None:
                self.unknown += 1
                return None
        return Completion(callback, None)

    def note_unknown(self) -> None:
        """Count a RECEIPT that named no id of this book (a COMMIT id nobody asked for)."""
        with self._lock:
            self.unknown += 1

    def committed(self, receipt: str) -> Completion | None:
        """The COMMIT of the transaction that carried the send of ``receipt`` was confirmed."""
        with self._lock:
            self._held.discard(receipt)
            callback = self._waiting.pop(receipt, None)
        return None if callback is None else Completion(callback, None)

    def committed_all(self, receipts: Iterable[str]) -> list[ConfirmCallback]:
        """A COMMIT's receipt confirmed the sends of ``receipts``: their callbacks, in order,
        taken out of the book in one pass (those already answered or failed are skipped)."""
        receipts = receipts if isinstance(receipts, list | tuple) else list(receipts)
        pop = self._waiting.pop
        with self._lock:
            # Two passes in C (a set difference, a comprehension over dict.pop) rather than
            # three Python calls per send: a COMMIT confirms hundreds of them.
            self._held.difference_update(receipts)
            found = [pop(receipt, None) for receipt in receipts]
        return [callback for callback in found if callback is not None]

    def reject(self, receipt: str, error: BaseException) -> Completion | None:
        """An ERROR named ``receipt``: the broker refused the frame carrying it.

        None for an id not written yet (counted: no frame of ours carried it) or answered.
        """
        with self._lock:
            if receipt in self._held:
                self.premature += 1
                return None
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
            self._held.clear()
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
        """Receipts awaited. Without the lock: the length of a dict is read atomically, and
        every queued send asks (a lone one goes inline)."""
        return len(self._waiting)

    def __repr__(self) -> str:
        state = "failed" if self._closed_by is not None else "open"
        return (
            f"ReceiptBook(outstanding={self.outstanding}, unknown={self.unknown}, "
            f"premature={self.premature}, {state})"
        )
