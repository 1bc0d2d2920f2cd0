"""Keep ActiveMQ Classic paging a queue in for a subscription that holds its messages.

ActiveMQ Classic (5.17; ``Queue.iterate`` in activemq-broker) moves a queue's messages from its
store into memory ("pages them in") at most ``maxPageSize`` at a time (200 unless the broker's
destination policy says otherwise), and only when the queue is woken: by a message sent to it,
an acknowledgement, a consumer added or removed, a consumer's prefetch changed, or the expiry
scan (every 30 s). Dispatching a page wakes nothing. So a ``client`` / ``client-individual``
subscription with a prefetch above the page size, on a queue whose backlog is already stored,
gets one page per wake-up: if it holds its messages unacknowledged (a batch acknowledged once
processed), it gets 200-600 of them and then one page every 30 s, whatever its prefetch and
whatever client it is (raw stomp.py measured the same; see docs/receiving.md).

The broker's own remedy is a ``maxPageSize`` at least the prefetch. From the client, what wakes
the queue without consuming anything is a consumer added and removed: a SUBSCRIBE to the same
queue with ``activemq.prefetchSize:0`` (a consumer ActiveMQ counts as full, so it is never sent a
message) and its UNSUBSCRIBE, two wake-ups, up to two pages. :class:`PageIn` writes such a pair
after every :data:`PAGE_IN_STEP` messages a watched subscription received without an
acknowledgement written in between; acknowledgements wake the queue themselves, so a
subscription that acknowledges as it goes never causes one, and a queue that has nothing more
to page in ends the deliveries and so the pairs.

Two fallbacks keep a subscription from starving where the count alone would leave it. A pair
that cannot be written when its step comes (``write`` answers "not now": another thread holds
the session's write lock, maybe for a heart-beat or a frame of another subscription, which wake
nothing here) stays due and goes with the next delivery, one pending pair per subscription. And
a subscription that holds messages received since its last acknowledgement, and has had no
delivery for :data:`PAUSE_FIRST` seconds (the page ran out before the next step: 60
deliveries, then nothing), gets a pair from the session's timer (the process's shared timer
thread, never waited for: the pair is skipped like any other when the write lock is busy, and
tried again after the same pause). While pairs bring nothing the pause before the next doubles,
up to :data:`PAUSE_LONGEST`, so a queue that is simply empty, or a producer's slow trickle,
costs one pair per :data:`PAUSE_LONGEST` seconds, not a storm. A delivery starts the pauses
over; an acknowledgement (which wakes the queue itself), the end of the subscription and the
end of the session end them. With cumulative ``client`` acknowledgement, one ACK per processed
batch, these are the only wake-ups between two ACKs.

Subscriptions the engine acknowledges itself (a user's ``auto`` ones,
``SubscriptionSpec.engine_acks``) are not watched: their acknowledgements keep coming, and the
pairs a delivery burst ahead of the handler would cause cost a callback consumer about 15% of
its throughput at prefetch 1,000 (ActiveMQ adds and removes a consumer for each) for nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from functools import partial

from failover_client._clock import Clock
from failover_client._errors import BrokerUnavailable
from failover_client._timers import TimerEntry, Timers, timers_for
from failover_client.adapter import SubscriptionSpec
from failover_client.stomp._flow import BrokerKind

__all__ = [
    "ACTIVEMQ_PAGE_SIZE",
    "PAGE_IN_STEP",
    "PAUSE_FIRST",
    "PAUSE_LONGEST",
    "PageIn",
    "page_in_id",
]

ACTIVEMQ_PAGE_SIZE = 200
"""ActiveMQ Classic's default ``maxPageSize``: a prefetch up to it fits in the first page."""

PAGE_IN_STEP = 100
"""Unacknowledged deliveries between two wake-ups: half a default page, so the next page is
asked for while the current one is still arriving."""

PAUSE_FIRST = 0.5
"""Seconds without a delivery after which a subscription holding messages gets a pair: a page
of 200 arrives on loopback in a few milliseconds, so a pause this long means it ran out."""

PAUSE_LONGEST = 8.0
"""The longest pause between two pairs that brought nothing (the pause doubles until then)."""

_SUFFIX = "~page-in"

Write = Callable[[Sequence[tuple[str, dict[str, str]]]], bool]
"""Writes bodiless frames ``(command, headers)`` together without waiting; False: not now."""


def page_in_id(subscription_id: str) -> str:
    """The id of the prefetch-0 subscription that wakes ``subscription_id``'s queue."""
    return subscription_id + _SUFFIX


def _needs_waking(spec: SubscriptionSpec, kind: BrokerKind) -> bool:
    return (
        kind == "activemq"
        and not spec.engine_acks
        and spec.ack in ("client", "client-individual")
        and spec.destination.startswith("/queue/")
        and spec.prefetch > ACTIVEMQ_PAGE_SIZE
    )


def _pair(subscription_id: str, queue: str) -> tuple[tuple[str, dict[str, str]], ...]:
    nudge = page_in_id(subscription_id)
    # client-individual: were a message ever dispatched to it, the UNSUBSCRIBE would return it
    # to the queue unconsumed (auto would consume it).
    subscribe = {
        "destination": queue,
        "id": nudge,
        "ack": "client-individual",
        "activemq.prefetchSize": "0",
    }
    return (("SUBSCRIBE", subscribe), ("UNSUBSCRIBE", {"id": nudge}))


class _Watch:
    """One watched subscription's counts (guarded by its :class:`PageIn`'s lock)."""

    __slots__ = ("count", "last", "pause", "queue", "retry", "write")

    def __init__(self, queue: str, write: Write) -> None:
        self.queue = queue
        self.write = write
        self.count = 0
        """Deliveries since the last acknowledgement or pair."""
        self.retry = False
        """A step's pair was due and not written: the next delivery writes it."""
        self.last = 0.0
        """When the last delivery came or the last pause's pair was tried."""
        self.pause: float | None = None
        """How long after ``last`` the next pause's pair is due; None: holds nothing."""


class PageIn:
    """The subscriptions of one session whose queue may need waking, and their counts.

    Thread-safe: deliveries are counted on the I/O thread, acknowledgements on callers',
    pauses on the shared timer thread of ``clock`` (``timers``, by default the process's).
    """

    def __init__(self, clock: Clock, timers: Timers | None = None) -> None:
        self._clock = clock
        self._timers = timers
        self._lock = threading.Lock()
        self._watched: dict[str, _Watch] = {}
        self._entry: TimerEntry | None = None
        """The pause check on the timer, while a watched subscription holds messages."""
        self._due = 0.0
        """When the pause check runs next."""
        self._generation = 0
        """Which pause check is the current one (one replaced ends at its next run)."""
        self._closed = False
        self.wakeups = 0
        """Pairs written so far (SUBSCRIBE and UNSUBSCRIBE of a prefetch-0 consumer)."""

    def watch(self, spec: SubscriptionSpec, kind: BrokerKind, write: Write) -> None:
        """Start counting for ``spec`` if ActiveMQ may stop paging its queue in for it.

        ``write`` writes a pair together or not at all, without waiting (False when another
        thread is writing), and may raise :class:`BrokerUnavailable` (the session is gone).
        """
        if _needs_waking(spec, kind):
            with self._lock:
                self._watched[spec.id] = _Watch(spec.destination, write)

    def forget(self, subscription_id: str) -> None:
        """The subscription ended: its late deliveries and its pauses wake nothing."""
        with self._lock:
            self._watched.pop(subscription_id, None)

    def acknowledged(self, subscription_id: str) -> None:
        """An ACK or NACK was written for the subscription: the broker wakes its queue."""
        with self._lock:
            watch = self._watched.get(subscription_id)
            if watch is not None:
                watch.count, watch.retry, watch.pause = 0, False, None

    def delivered(self, subscription_id: str, count: int = 1) -> None:
        """Count ``count`` messages of the subscription (one read's); for every
        :data:`PAGE_IN_STEP` crossed, wake its queue once, as if counted one at a time.

        A pair not written now (another thread writing) is due again at the next delivery.
        Raises what ``write`` raises (:class:`BrokerUnavailable`).
        """
        with self._lock:
            watch = self._watched.get(subscription_id)
            if watch is None:
                return
            steps, watch.count = divmod(watch.count + count, PAGE_IN_STEP)
            watch.last = self._clock.monotonic()
            watch.pause = PAUSE_FIRST
            if watch.retry and not steps:
                steps, watch.count = 1, 0  # the late pair: the count starts again from it
            # Claimed here, under the lock: the timer never writes the same pair too.
            watch.retry = False
            replaced = self._check_by(watch.last + PAUSE_FIRST)
        if replaced is not None:
            replaced.cancel()  # never waits: the check that replaces it is scheduled already
        for _ in range(steps):
            written = watch.write(_pair(subscription_id, watch.queue))  # a raise: session gone
            with self._lock:
                if not written:
                    watch.retry = True  # one pending pair at most: a flag, not a count
                    return
                self.wakeups += 1

    def close(self) -> None:
        """The session ended: no pause writes anything from now on."""
        with self._lock:
            self._closed = True
            entry, self._entry = self._entry, None
        if entry is not None:
            entry.cancel()  # outside the lock: it may wait for a callback that takes it

    def _check_by(self, when: float) -> TimerEntry | None:
        """Have the pause check run by ``when`` (lock held); returns the check it replaces.

        While deliveries flow the check is already due sooner and stays; after pauses that
        grew, a delivery brings it forward, and the old one is cancelled.
        """
        if self._closed or (self._entry is not None and self._due <= when):
            return None
        if self._timers is None:
            self._timers = timers_for(self._clock)
        self._generation += 1
        replaced, self._due = self._entry, when
        self._entry = self._timers.schedule(when, partial(self._on_timer, self._generation))
        return replaced

    def _on_timer(self, generation: int, now: float) -> float | None:
        """The pause check (shared timer thread): write the pairs due, say when to look again."""
        with self._lock:
            if self._closed or generation != self._generation:
                return None  # closed, or replaced while it was about to run
            due: list[tuple[str, _Watch, float]] = []
            for subscription_id, watch in self._watched.items():
                pause = watch.pause
                if pause is not None and watch.last + pause <= now:
                    due.append((subscription_id, watch, pause))
                    watch.count, watch.retry, watch.last = 0, False, now
                    watch.pause = min(2 * pause, PAUSE_LONGEST)
        for subscription_id, watch, pause in due:
            try:
                written = watch.write(_pair(subscription_id, watch.queue))
            except BrokerUnavailable:
                written = False  # the session is gone: its teardown closes this
            with self._lock:
                if written:
                    self.wakeups += 1
                elif watch.pause is not None and watch.last == now:  # no delivery since
                    # Not written (another thread writing): tried again after the same pause,
                    # not a longer one, as it brought nothing only by not being sent.
                    watch.pause, watch.retry = pause, True
        with self._lock:
            following = min(
                (w.last + w.pause for w in self._watched.values() if w.pause is not None),
                default=None,
            )
            if generation != self._generation:
                return None
            if following is None or self._closed:
                self._entry = None  # the next delivery schedules a new check
                return None
            self._due = following
            return following
