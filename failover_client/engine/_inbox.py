"""A subscription's buffer: what its broker delivered and nobody has handled or settled yet.

The adapters' I/O threads put messages in; the subscription's handler worker (or the
application, through ``receive()``) takes them out. The inbox itself never blocks the I/O thread
and never drops a message: its bound is the broker's flow control. Every subscription goes on
the wire with client acknowledgement and a prefetch, so the broker sends at most ``prefetch``
messages that it has not seen settled; the engine settles a message only once it was handled
(or hands it back), and so the inbox holds at most ``prefetch`` per session. A broker that
ignores the window is reported once per session (``PrefetchExceeded``) and its messages are kept
all the same: dropping one would lose it.

Besides the buffer it counts, per delivering session, the messages not yet settled (buffered,
running, or taken by the application and not acknowledged): ``in_flight`` and the prefetch
check read that count. In ``client`` mode an acknowledgement is cumulative on the wire (it
settles every earlier message of the subscription on that session), and the count follows it.

A handler worker takes what is buffered in batches (:meth:`Inbox.take_batch`: one lock for up
to a bound of messages, not one per message) and finishes a run of handled messages together
(:meth:`Inbox.finish_all`). The batch stays the inbox's until the worker starts each message
(:meth:`Inbox.next_taken`): a stop puts what the worker did not start back at the front of the
buffer, in order, so it is handed back as the buffered ones are, never acknowledged unhandled.
Until then those messages count as buffered, not as running.

Waits: the worker waits without a deadline (it ends when the inbox stops: close, drain,
unsubscribe), ``receive(timeout)`` waits on the connection's clock.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from failover_client._clock import Clock

if TYPE_CHECKING:
    from failover_client.engine._subscriptions import Message

__all__ = ["Inbox"]


class Inbox:
    """The bounded buffer of one subscription (see the module docstring)."""

    def __init__(self, clock: Clock, prefetch: int, changed: Callable[[], None]) -> None:
        self._clock = clock
        self.prefetch = prefetch
        self._changed = changed
        """Told after every change a stopping connection waits for (taken, finished)."""
        self._lock = threading.Lock()
        self._waiters: set[threading.Event] = set()
        self._items: collections.deque[Message] = collections.deque()
        self._batch: collections.deque[Message] = collections.deque()
        """Taken by the worker (:meth:`take_batch`), not started yet, oldest first."""
        self._unsettled: dict[object, dict[Message, None]] = {}
        """Per delivering session (its slot), the messages not settled yet, oldest first."""
        self._warned: set[object] = set()
        self._running = 0
        """Taken and not finished, the worker's batch included (``running`` leaves it out)."""
        self._holding: dict[object, int] = {}
        """Per delivering session, its messages buffered or taken and not finished (what a
        session being left waits for before it closes)."""
        self._taking = True
        """False once stopped: takers get None, the worker ends."""
        self._open = True
        """False once the connection closed: late deliveries are not kept."""
        self.last_delivery_at: float | None = None
        self.handled = 0

    # --- the I/O thread's side ---------------------------------------------------------------

    def put(self, message: Message) -> tuple[bool, int | None]:
        """Keep ``message``: (kept, how many its session holds if that first passed prefetch).

        Not kept once closed (unsubscribed, drained): the caller hands it back to the broker.
        """
        slot = message.session
        with self._lock:
            if not self._open:
                return False, None
            self._items.append(message)
            self._holding[slot] = self._holding.get(slot, 0) + 1
            pending = self._unsettled.setdefault(slot, {})
            pending[message] = None
            self.last_delivery_at = self._clock.monotonic()
            over = len(pending) > self.prefetch and slot not in self._warned
            if over:
                self._warned.add(slot)
            self._wake_locked()
            return True, (len(pending) if over else None)

    # --- the takers' side --------------------------------------------------------------------

    def take(self, timeout: float | None) -> Message | None:
        """The oldest buffered message, waiting up to ``timeout`` (None: until stopped).

        None when stopped, or on timeout. The taker calls :meth:`finish` once it handled it.
        """
        with self._lock:
            if not self._wait_locked(timeout):
                return None
            self._running += 1
            message = self._items.popleft()
        self._changed()
        return message

    def take_batch(self, timeout: float | None, limit: int) -> bool:
        """Take up to ``limit`` buffered messages at once, waiting as :meth:`take` does.

        False when stopped, or on timeout. The worker starts them one by one with
        :meth:`next_taken` and finishes them (:meth:`finish_all`, :meth:`finish`).
        """
        with self._lock:
            if not self._wait_locked(timeout):
                return False
            items = self._items
            count = min(limit, len(items))
            if count == len(items):
                self._batch.extend(items)
                items.clear()
            else:
                for _ in range(count):
                    self._batch.append(items.popleft())
            self._running += count
        # No ``changed``: what a stop or a session being left waits for (buffered or running
        # messages, the ones held per session) is the same before and after.
        return True

    def next_taken(self) -> Message | None:
        """The next message of the batch, now running; None once the batch is over or the
        inbox stopped (:meth:`stop` put the rest back in the buffer)."""
        # Without the lock, once per message: the flag is read atomically, and the batch is a
        # deque that only this (the worker's) thread pops from the left and a stop from the
        # right, one message at a time, so each goes to exactly one of them. A message started
        # just as the inbox stops is a message taken just before it stopped.
        if not self._taking:
            return None
        try:
            return self._batch.popleft()
        except IndexError:
            return None

    def _wait_locked(self, timeout: float | None) -> bool:
        """Wait (lock held, released while waiting) until something is buffered: False if
        stopped or on ``timeout`` (None: until stopped)."""
        deadline = None if timeout is None else self._clock.monotonic() + timeout
        while True:
            if not self._taking:
                return False
            if self._items:
                return True
            remaining = None if deadline is None else deadline - self._clock.monotonic()
            if remaining is not None and remaining <= 0:
                return False
            event = threading.Event()
            self._waiters.add(event)
            self._lock.release()
            try:
                # Ends: put() and stop() set every waiter; else the deadline (clock time).
                self._clock.wait(event, remaining)
            finally:
                self._lock.acquire()
                self._waiters.discard(event)

    def finish(self, message: Message, *, handled: bool = True) -> None:
        """A taken message was handled (whatever its outcome), or handed back unhandled."""
        with self._lock:
            self._running -= 1
            self._unhold_locked(message.session)
            if handled:
                self.handled += 1
        self._changed()

    def finish_all(self, messages: list[Message]) -> None:
        """Taken messages of one session were all handled (one lock, one ``changed``)."""
        if not messages:
            return
        with self._lock:
            self._running -= len(messages)
            self._unhold_locked(messages[0].session, len(messages))
            self.handled += len(messages)
        self._changed()

    def settled(self, message: Message, *, cumulative: bool) -> None:
        """``message`` was acknowledged, rejected or released (or its ack dropped).

        ``cumulative``: a ``client``-mode acknowledgement, which settles every earlier message
        its session delivered on this subscription too (they are marked settled).
        """
        with self._lock:
            pending = self._unsettled.get(message.session)
            if pending is None or message not in pending:
                return
            if cumulative:
                for earlier in list(pending):
                    del pending[earlier]
                    if earlier is message:
                        break
                    earlier.mark_settled()
            else:
                del pending[message]
            if not pending:
                del self._unsettled[message.session]
        self._changed()

    # --- stopping ----------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop taking (the worker ends, ``receive`` returns None); deliveries are still kept."""
        with self._lock:
            self._taking = False
            self._put_back_locked()
            self._wake_locked()
        self._changed()

    def close(self) -> list[Message]:
        """Stop for good: later deliveries are not kept. Returns what was still buffered."""
        with self._lock:
            self._open = False
            self._taking = False
            self._put_back_locked()
            left = list(self._items)
            self._items.clear()
            for message in left:
                self._unhold_locked(message.session)
            self._wake_locked()
        self._changed()
        return left

    def resume(self) -> None:
        """Take again (a drain that ended with the subscription still wanted)."""
        with self._lock:
            self._taking = True

    def _put_back_locked(self) -> None:
        """The worker's batch, not started, back at the front of the buffer, in order."""
        moved = 0
        while True:
            try:
                message = self._batch.pop()  # the newest first: its worker pops the oldest
            except IndexError:
                break
            self._items.appendleft(message)
            moved += 1
        self._running -= moved

    def _unhold_locked(self, slot: object, finished: int = 1) -> None:
        count = self._holding.get(slot, 0) - finished
        if count > 0:
            self._holding[slot] = count
        else:
            self._holding.pop(slot, None)

    # --- what the connection reads -----------------------------------------------------------

    def more_from(self, slot: object, unfinished: int = 0) -> bool:
        """Whether another message of ``slot`` waits besides the one being handled and the
        ``unfinished`` ones of ``slot`` handled before it (a run :meth:`finish_all` ends)."""
        # Read without the lock (once per message handled): a dict lookup is atomic, and the
        # answer may change right after it with or without the lock.
        return self._holding.get(slot, 0) - unfinished > 1

    def idle(self) -> bool:
        """Whether nothing is buffered (the message being handled, if any, was the last)."""
        # Read without the lock, as ``more_from``: ``len`` of a deque is atomic.
        return not self._items and not self._batch

    def holds(self, slot: object) -> bool:
        """Whether a message of session ``slot`` is buffered here or still being handled."""
        with self._lock:
            return slot in self._holding

    @property
    def buffered(self) -> int:
        """Messages not started: in the buffer or in the worker's batch."""
        with self._lock:
            return len(self._items) + len(self._batch)

    @property
    def running(self) -> int:
        """Messages started and not finished (being handled, or handled in a run not ended)."""
        with self._lock:
            return self._running - len(self._batch)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return sum(len(pending) for pending in self._unsettled.values())

    @property
    def taking(self) -> bool:
        with self._lock:
            return self._taking

    def _wake_locked(self) -> None:
        # Each waiter is woken once and forgotten: the puts that follow, before it runs again
        # (a burst read from one socket chunk), find no one to wake and skip the Event.set, a
        # lock and a notify each, on the I/O thread's path. A woken taker that finds nothing
        # (another took it) waits on a new event.
        if self._waiters:
            for event in self._waiters:
                event.set()
            self._waiters.clear()
