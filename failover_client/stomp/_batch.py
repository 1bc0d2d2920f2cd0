"""Group commit for confirmed STOMP sends: the sends written together share one transaction.

A broker that stores each persistent message before its RECEIPT (ActiveMQ Classic with KahaDB
syncs the journal) spends most of a confirmed send waiting for its disk, one message at a time:
one STOMP connection is served by one broker thread, so pipelining receipts gains little.
Inside a transaction the broker syncs once, at COMMIT. So the writer, when it takes the frames
queued since its last write, wraps each run of consecutive confirmed sends in ``BEGIN``,
the ``SEND`` frames (with ``transaction``, without ``receipt``) and a ``COMMIT`` that asks for
one receipt. That receipt confirms every send of the run. The runs follow the load: a lone
send is written as before (``SEND`` with its own receipt), a burst becomes one transaction per
write of at most ``max_batch`` sends, and nothing waits on a timer.

Every send keeps its own receipt id in the session's :class:`ReceiptBook` from the moment it
is queued, so losing the connection fails each one exactly as without batching, and the
manager replays them. What changes is only what confirms them:

* RECEIPT of the COMMIT: every send of the run is confirmed.
* ERROR naming the COMMIT (ActiveMQ marks a transaction rollback-only when one of its sends
  failed, and then refuses the COMMIT): nothing of the run was stored. Each send of the run
  is written again *alone, with its own receipt*, so the broker's answer names the one it
  refuses and the others are confirmed.
* An ERROR that names no receipt while runs are unanswered: it names no send, so the oldest
  unanswered run is *in doubt*. When its COMMIT is answered, either way, its sends are written
  again alone with their own receipts instead of being confirmed. The oldest, because the
  broker handles one connection's frames in order: a SEND refused by its STOMP layer is
  answered before the COMMIT of its own run, after the COMMIT of the run before; a SEND
  refused inside the broker makes its run's COMMIT fail anyway, however late its ERROR comes
  (then a later run may be put in doubt needlessly, which costs duplicates, never a loss). A
  send of an in-doubt run that did commit arrives twice, with the same
  ``failover-message-id``: a recognisable duplicate. Sends written again go after whatever
  was already queued, so their order relative to later sends is not kept (at-least-once, as
  after a fail-over).

This is only safe where a COMMIT receipt means "stored", and where a refused send inside a
transaction makes the COMMIT fail or produces an ERROR before the COMMIT's receipt. ActiveMQ
Classic 5.14 and later (``rollbackOnlyOnAsyncException``, on by default) is such a broker;
:func:`batching_supported` recognises it from the CONNECTED frame. RabbitMQ's STOMP adapter
replays a transaction's frames at COMMIT and answers before its queues confirm them, so it
keeps one receipt per send.
"""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from failover_client.net._writer import Item
from failover_client.stomp._receipts import with_nonce
from failover_client.uri import ConfirmMode

__all__ = [
    "DEFAULT_MAX_BATCH",
    "Batch",
    "ConfirmMode",
    "GroupCommit",
    "Outcome",
    "PendingSend",
    "batching_supported",
]

DEFAULT_MAX_BATCH = 500
"""Sends per transaction at most: bounds what one refused COMMIT sends again one by one."""

_FRAME_OVERHEAD = 48
"""About the bytes a SEND's frame adds to its header lines and body (command, the
``transaction`` or ``receipt`` line, NUL), for the writer's buffer accounting."""

_ACTIVEMQ_CLASSIC = re.compile(r"ActiveMQ/(\d+)\.(\d+)")
_FIRST_SAFE_CLASSIC = (5, 14)  # rollbackOnlyOnAsyncException arrived in 5.14.0

Encode = Callable[[str, Mapping[str, str], bytes], bytes]
"""(command, headers, body) -> one encoded frame; headers already escaped."""

Written = Callable[[str], None]
"""Told the receipt id of each send about to be written alone (``ReceiptBook.written``)."""


def _nothing(receipt: str) -> None:
    """The default ``written``: nobody to tell."""


def batching_supported(mode: ConfirmMode, connected_headers: Mapping[str, str]) -> bool:
    """Whether a session whose broker answered with ``connected_headers`` batches sends.

    ``receipt`` never, ``transaction`` always (the user vouches for the broker), ``auto`` only
    for ActiveMQ Classic 5.14 or later, named by the ``server`` header (Artemis says
    ``ActiveMQ-Artemis/...`` and is not matched).
    """
    if mode == "receipt":
        return False
    if mode == "transaction":
        return True
    match = _ACTIVEMQ_CLASSIC.match(connected_headers.get("server", ""))
    if match is None:
        return False
    return (int(match.group(1)), int(match.group(2))) >= _FIRST_SAFE_CLASSIC


class PendingSend:
    """One confirmed SEND queued for the writer, its headers already encoded.

    ``head`` is the SEND's header lines without ``receipt`` and ``transaction``, values
    escaped, followed by the blank line that ends a frame's headers
    (``_encode.header_block``): the writer puts the frame together around it with the
    ``transaction`` or ``receipt`` line it chooses, and encodes nothing per send.
    """

    __slots__ = ("alone", "body", "head", "nbytes", "receipt")

    def __init__(self, receipt: str, head: bytes, body: bytes, alone: bool = False) -> None:
        self.receipt = receipt
        """Its own id in the session's receipt book (confirmation is always counted per send)."""
        self.head = head
        self.body = body
        self.alone = alone
        """Write it outside any transaction, with its own receipt (a retry after doubt)."""
        self.nbytes = len(head) + len(body) + _FRAME_OVERHEAD
        """About the bytes of its frame, for the writer's buffer accounting."""

    def __repr__(self) -> str:
        return f"PendingSend({self.receipt!r}, {len(self.body)} bytes, alone={self.alone})"


@dataclass(eq=False)
class Batch:
    """One transaction written and not yet answered."""

    commit_receipt: str
    sends: tuple[PendingSend, ...]
    in_doubt: bool = field(default=False)


Outcome = tuple[Literal["confirm", "retry"], tuple[PendingSend, ...]]
"""What the session does with a run's sends: confirm them, or write each again alone."""


class GroupCommit:
    """Renders queued items into frames and settles the transactions they became.

    :param encode: encodes one frame (``_encode.encode_frame`` in the session).
    :param max_batch: sends per transaction at most (>= 2).
    :param prefix: of transaction ids (``<prefix>t<n>``) and COMMIT receipt ids; must differ
        from the receipt book's prefix, so a RECEIPT tells at once which kind it answers.
    :param nonce: follows the prefix in COMMIT receipt ids, so a peer cannot name a COMMIT it
        has not read (a RECEIPT for ``fx-1`` would otherwise confirm a transaction still
        being written); None: a new random one (``_receipts.new_nonce``), "": none.
        Transaction ids carry none: the broker names no transaction back to us, and every
        SEND of a run repeats its transaction id, whose bytes the broker parses each time
        (``benchmarks/probe_send_headers.py``).

    ``render`` runs on the writing thread, the ``on_*`` methods on the reader thread: the
    table of unanswered transactions is shared under a lock. Nothing here writes or calls
    back; the session acts on the outcomes.
    """

    __slots__ = ("_encode", "_lock", "_max_batch", "_numbers", "_open", "_prefix", "_tx_prefix")

    def __init__(
        self,
        encode: Encode,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        prefix: str,
        nonce: str | None = None,
    ) -> None:
        if max_batch < 2:  # a transaction of one send is just a slower send
            raise ValueError(f"max_batch must be >= 2, got {max_batch}")
        self._encode = encode
        self._max_batch = max_batch
        self._prefix = with_nonce(prefix, nonce)
        self._tx_prefix = f"{prefix}t"
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._open: dict[str, Batch] = {}

    # -- writing ---------------------------------------------------------------------------

    def render(self, items: Sequence[Item], written: Written = _nothing) -> bytes:
        """The bytes for ``items`` in order: frames as they are, runs of sends as transactions.

        ``written(receipt)`` is told of each send written alone, with its own receipt, before
        the bytes are returned to be written (a RECEIPT for it counts from then on).
        """
        out: list[bytes] = []
        run: list[PendingSend] = []
        for item in items:
            if isinstance(item, PendingSend) and not item.alone:
                run.append(item)
                if len(run) == self._max_batch:
                    self._flush(run, out, written)
                    run = []
                continue
            self._flush(run, out, written)
            run = []
            if isinstance(item, bytes):
                out.append(item)
            elif isinstance(item, PendingSend):
                out.append(self._alone(item, written))
            else:
                raise TypeError(f"cannot render {type(item).__name__} as a STOMP frame")
        self._flush(run, out, written)
        return out[0] if len(out) == 1 else b"".join(out)

    def _alone(self, send: PendingSend, written: Written) -> bytes:
        written(send.receipt)
        receipt = send.receipt.encode()
        return b"".join((b"SEND\nreceipt:", receipt, b"\n", send.head, send.body, b"\0"))

    def _flush(self, run: list[PendingSend], out: list[bytes], written: Written) -> None:
        if not run:
            return
        if len(run) == 1:
            out.append(self._alone(run[0], written))
            return
        number = next(self._numbers)
        tx = f"{self._tx_prefix}{number}"
        commit = f"{self._prefix}{number}"
        encode = self._encode
        out.append(encode("BEGIN", {"transaction": tx}, b""))
        # Each SEND is its encoded head behind the one line that names the transaction.
        start = b"SEND\ntransaction:" + tx.encode() + b"\n"
        for send in run:
            out += (start, send.head, send.body, b"\0")
        out.append(encode("COMMIT", {"transaction": tx, "receipt": commit}, b""))
        with self._lock:
            self._open[commit] = Batch(commit, tuple(run))

    # -- answers from the broker -----------------------------------------------------------

    def is_ours(self, receipt: str) -> bool:
        """Whether ``receipt`` is one of our COMMIT receipts (answered or not)."""
        return receipt.startswith(self._prefix)

    def committed(self, receipt: str) -> Outcome | None:
        """RECEIPT for COMMIT ``receipt``: confirm its sends, or retry them if in doubt."""
        with self._lock:
            batch = self._open.pop(receipt, None)
        if batch is None:
            return None
        return ("retry" if batch.in_doubt else "confirm", batch.sends)

    def refused(self, receipt: str) -> Outcome | None:
        """ERROR naming COMMIT ``receipt``: nothing of it was stored; retry each send alone."""
        with self._lock:
            batch = self._open.pop(receipt, None)
        return None if batch is None else ("retry", batch.sends)

    def unattributed_error(self) -> str | None:
        """An ERROR naming no receipt: the oldest unanswered run is in doubt; its COMMIT id."""
        with self._lock:
            oldest = next(iter(self._open.values()), None)  # dicts keep insertion order
            if oldest is None:
                return None
            oldest.in_doubt = True
            return oldest.commit_receipt

    def after_the_doubt(self) -> frozenset[str]:
        """The send receipts of every unanswered run but the oldest.

        After an ERROR that named nothing, the broker stopped reading at the frame it refused:
        a run written after the oldest unanswered one was never read (the refused frame is in
        that oldest run, or was written alone before it), so nothing of it can be the culprit.
        """
        with self._lock:
            later = list(self._open.values())[1:]
        return frozenset(send.receipt for batch in later for send in batch.sends)

    def clear(self) -> None:
        """The session is over (its receipt book fails every send): forget the transactions."""
        with self._lock:
            self._open.clear()

    @property
    def unanswered(self) -> int:
        with self._lock:
            return len(self._open)

    def __repr__(self) -> str:
        return f"GroupCommit(max_batch={self._max_batch}, unanswered={self.unanswered})"
