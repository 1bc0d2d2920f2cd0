"""Bookkeeping of sent-but-unconfirmed messages: the confirmation window and the replay list.

The :class:`Outbox` holds every message whose confirmation is still outstanding, in send order,
with the session it was last written to. After a fail-over the connection asks it for the messages
not yet written to the new session (:meth:`Outbox.take_for`) and writes them again, in the
original order and with the same ``failover-message-id``, before any new send: nothing confirmed
is lost and every duplicate is recognisable by its id.

Two kinds of entries:

* ``confirmed``: sends whose caller waits for (or holds a future of) the confirmation. They are
  bounded by the window, which has two bounds: at most ``confirm_window`` messages *and* at most
  ``max_cache_size`` bytes outstanding (one message larger than the byte budget is let through
  alone, or it could never be sent); a send that does not fit waits, which is the
  backpressure, and its timeout names the bound that held it (:meth:`Outbox.why_full`).
* ``tracked``: fire-and-forget sends with ``track_messages=True``. Confirmation is requested so
  they can be forgotten once the broker has them, but nobody waits: they never block, and when
  their bytes exceed ``max_cache_size`` the oldest are evicted and will not be replayed
  (best-effort, like ActiveMQ Classic's message cache).

No locking here: the :class:`~failover_client.engine._sender.Sender` calls it under the
connection state's lock.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from failover_client.engine._observe import SendObservation

from failover_client.engine._latch import Latch

__all__ = ["MESSAGE_ID_HEADER", "MessageIds", "OutboundMessage", "Outbox"]

MESSAGE_ID_HEADER = "failover-message-id"
"""The header carrying the message id that stays the same across replays.

A plain custom header: ActiveMQ Classic, Artemis and RabbitMQ all pass unknown STOMP headers /
AMQP application properties through unchanged (the brokers' own ``message-id`` is rewritten).
"""

Kind = Literal["confirmed", "tracked"]


class MessageIds:
    """``<prefix>-<n>`` ids: unique per connection, readable in logs, deterministic in tests."""

    __slots__ = ("_counter", "_prefix")

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._counter = itertools.count(1)

    def next(self) -> str:
        return f"{self._prefix}-{next(self._counter)}"


@dataclass(eq=False, slots=True)  # slots: made once per send, read on every settle
class OutboundMessage:
    """One message the application handed over, with where it was last written."""

    seq: int
    message_id: str
    destination: str
    body: bytes
    headers: Mapping[str, str]
    kind: Kind
    future: Future[None] | Latch | None = None
    """Its outcome: a future (``send_async``), a latch (a blocking ``send``) or None."""
    duplicate_id: bool = False
    """The engine owns its ``_AMQ_DUPL_ID`` (``dedup=auto``, none set by the application):
    ``headers`` carry it exactly when last written to a broker that may drop copies by it."""
    session: object | None = None
    """The session slot this message was last written to (opaque to the outbox)."""
    writes: int = 0
    losses: int = 0
    """Sessions that died while this message was unconfirmed on them (see ``_poison``)."""
    suspect: bool = False
    """Replayed alone, waiting for its confirmation, on the next session (see ``_poison``)."""
    refused_with: bool = False
    """Its last session failed it with a refusal (the broker may have read it), not with a
    plain loss (the adapter knows the broker never read it): see ``_poison``."""
    done: bool = field(default=False)
    observation: SendObservation | None = None
    """What the connection's observer follows of this send (``_observe``), if it has one."""

    @property
    def size(self) -> int:
        return len(self.body)


class Outbox:
    """Outstanding confirmations in send order, with the window and the replay cache."""

    __slots__ = (
        "_confirmed_bytes",
        "_confirmed_count",
        "_max_bytes",
        "_pending",
        "_seq",
        "_tracked_bytes",
        "_window",
    )

    def __init__(self, *, window: int, max_bytes: int) -> None:
        if window < 1:
            raise ValueError(f"confirm window must be >= 1, got {window}")
        self._window = window
        self._max_bytes = max_bytes
        self._seq = itertools.count(1)
        self._pending: dict[int, OutboundMessage] = {}
        self._confirmed_count = 0
        self._confirmed_bytes = 0
        self._tracked_bytes = 0

    def new(  # noqa: PLR0917 - positional on the send path: keywords cost every send more
        self,
        message_id: str,
        destination: str,
        body: bytes,
        headers: Mapping[str, str],
        kind: Kind,
        future: Future[None] | Latch | None = None,
        duplicate_id: bool = False,
    ) -> OutboundMessage:
        """A message not yet in the outbox (it enters with :meth:`add`)."""
        # Positional: keyword arguments cost a send a tenth of a microsecond more here.
        return OutboundMessage(
            next(self._seq), message_id, destination, body, headers, kind, future, duplicate_id
        )

    # --- the window ------------------------------------------------------------------------

    def has_room(self, size: int) -> bool:
        """Whether a confirmed send of ``size`` bytes fits the window now."""
        if self._confirmed_count == 0:
            return True
        return (
            self._confirmed_count < self._window and self._confirmed_bytes + size <= self._max_bytes
        )

    def why_full(self, size: int) -> str:
        """Which bound holds a confirmed send of ``size`` bytes back, in the options' names.

        Both bounds hold every confirmed send: a window of 1024 sends of 64 KiB would be
        64 MiB in flight, so the bytes are bounded as well, and with the default budget
        (128 KiB) the byte bound is the one a send of more than 128 bytes meets first.
        """
        if self._confirmed_count >= self._window:
            return (
                f"confirmation window full: {self._confirmed_count} send(s) await confirmation "
                f"(confirmWindow={self._window})"
            )
        return (
            f"confirmation window full: {self._confirmed_count} send(s) of "
            f"{self._confirmed_bytes} bytes await confirmation and this one has {size} "
            f"(maxCacheSize={self._max_bytes} bounds the bytes in flight)"
        )

    def add(self, message: OutboundMessage, session: object) -> Sequence[OutboundMessage]:
        """Record ``message`` as written to ``session``; returns tracked messages evicted."""
        message.session = session
        message.writes += 1
        self._pending[message.seq] = message
        if message.kind == "confirmed":
            self._confirmed_count += 1
            self._confirmed_bytes += len(message.body)
            return ()  # a confirmed send evicts nothing (and allocates no list for it)
        self._tracked_bytes += message.size
        evicted = []
        for seq, old in list(self._pending.items()):
            if self._tracked_bytes <= self._max_bytes:
                break
            if old.kind == "tracked":
                del self._pending[seq]
                self._forget(old)
                evicted.append(old)
        return evicted

    # --- outcomes --------------------------------------------------------------------------

    def settle(self, message: OutboundMessage) -> bool:
        """Remove ``message`` (confirmed, rejected or abandoned); False if it was not pending."""
        if self._pending.pop(message.seq, None) is None:
            return False
        self._forget(message)
        return True

    def settle_all(self, messages: Iterable[OutboundMessage]) -> list[OutboundMessage]:
        """:meth:`settle` for many at once (one COMMIT's sends): those that were pending."""
        pop = self._pending.pop
        settled = [message for message in messages if pop(message.seq, None) is not None]
        count = confirmed_bytes = tracked_bytes = 0
        for message in settled:
            message.done = True
            if message.kind == "confirmed":
                count += 1
                confirmed_bytes += len(message.body)
            else:
                tracked_bytes += len(message.body)
        self._confirmed_count -= count
        self._confirmed_bytes -= confirmed_bytes
        self._tracked_bytes -= tracked_bytes
        return settled

    def _forget(self, message: OutboundMessage) -> None:
        message.done = True
        if message.kind == "confirmed":
            self._confirmed_count -= 1
            self._confirmed_bytes -= message.size
        else:
            self._tracked_bytes -= message.size

    def take_for(self, session: object) -> list[OutboundMessage]:
        """Pending messages not yet written to ``session``, oldest first, now assigned to it."""
        replay = [m for m in self._pending.values() if m.session is not session]
        for message in replay:
            message.session = session
            message.writes += 1
        return replay

    def clear(self) -> list[OutboundMessage]:
        """Remove and return everything pending (the connection is closing or gave up)."""
        pending = list(self._pending.values())
        for message in pending:
            self._forget(message)
        self._pending.clear()
        return pending

    # --- reading ---------------------------------------------------------------------------

    def pending(self) -> list[OutboundMessage]:
        """Every pending message, oldest first."""
        return list(self._pending.values())

    def on(self, session: object) -> list[OutboundMessage]:
        """The pending messages last written to ``session``, oldest first."""
        return [m for m in self._pending.values() if m.session is session]

    def first_not_on(self, session: object) -> OutboundMessage | None:
        """The oldest pending message not yet written to ``session`` (the next to replay)."""
        for message in self._pending.values():
            if message.session is not session:
                return message
        return None

    def written_to(self, session: object) -> int:
        """How many pending messages were last written to ``session``."""
        return sum(m.session is session for m in self._pending.values())

    def __len__(self) -> int:
        return len(self._pending)

    @property
    def pending_bytes(self) -> int:
        return self._confirmed_bytes + self._tracked_bytes

    def __repr__(self) -> str:
        return (
            f"<Outbox pending={len(self._pending)} window={self._confirmed_count}/{self._window}"
            f" bytes={self.pending_bytes}>"
        )
