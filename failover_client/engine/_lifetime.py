"""How a connection ends: ``close()``, a finalizer for one dropped unclosed, and ``fork()``.

Only the application holds the :class:`~failover_client.FailoverConnection` facade. Its threads
(the reconnect loop, the dispatch thread, the adapters' I/O threads, the topology sources)
hold the parts below and never the facade: an :class:`Emitter` instead of a bound ``_emit``, a
:class:`SlotRouter` instead of the facade as the sessions' listener, a weak proxy as the topology
sink. So a connection the application dropped without ``close()`` becomes unreachable although
its threads still run, and its finalizer closes it with a ``ResourceWarning``, as an unclosed
file or socket does. Before, each dropped connection kept five threads and its reconnect loop
alive for good.

After ``fork()`` the child holds a copy of a connection whose threads did not follow it and
whose sockets are the parent's: a send would write into the parent's session, a close would end
it. A :class:`ProcessGuard` remembers the process that made the connection; in any other process
every call raises :class:`ConfigurationError`, and ``close()`` (also the finalizer's) touches
nothing, so the parent's session carries on. The guard reads the process id that
``os.register_at_fork`` keeps current (:func:`current_pid`), not ``os.getpid()``: every call of
the connection checks it, and a system call per send was a seventh of a pipelined send's CPU.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import warnings
import weakref
from collections.abc import Callable

from failover_client._clock import Clock
from failover_client._errors import ConfigurationError
from failover_client._events import Event, ListenerSet
from failover_client.adapter import AdvertisedBrokers, Received
from failover_client.engine._canary import Canary
from failover_client.engine._consumers import Consumers
from failover_client.engine._dial import Dialer
from failover_client.engine._dispatch import Dispatcher
from failover_client.engine._loop import ReconnectLoop
from failover_client.engine._placement import Redirects
from failover_client.engine._pool import BrokerPool
from failover_client.engine._slot import Slot
from failover_client.engine._state import ConnectionState
from failover_client.engine._topology import TopologyHub
from failover_client.uri import BrokerAddress

__all__ = [
    "SOURCES_STOP_TIMEOUT",
    "Emitter",
    "Parts",
    "ProcessGuard",
    "SlotRouter",
    "current_address",
    "current_pid",
    "finalize_dropped",
    "watch_dropped",
]

_log = logging.getLogger("failover_client")

SOURCES_STOP_TIMEOUT = 2.0
LISTENERS_STOP_TIMEOUT = 2.0
"""How long ``close()`` waits for the listeners to take the events queued before it."""
"""Seconds ``close()`` waits for the topology sources to stop (see :meth:`Parts.close`)."""


_pid = [os.getpid()]
"""This process's id (a list: the fork handler replaces its one item)."""


def _forked() -> None:
    _pid[0] = os.getpid()


os.register_at_fork(after_in_child=_forked)


def current_pid() -> int:
    """This process's id, without a system call (refreshed in a child right after fork())."""
    return _pid[0]


class ProcessGuard:
    """The process a connection was made in; every other process may not use it."""

    __slots__ = ("pid",)

    def __init__(self) -> None:
        self.pid = current_pid()

    def inherited(self) -> bool:
        """True in a child forked after the connection was made."""
        return current_pid() != self.pid

    def check(self) -> None:
        """Raise :class:`ConfigurationError` in a forked child (before any lock is taken: the
        thread that held one at the fork does not exist in the child)."""
        if current_pid() != self.pid:
            raise ConfigurationError(
                f"this connection was made in process {self.pid}; create a new one after "
                f"fork() (process {current_pid()} cannot use its sockets or threads)"
            )


class Emitter:
    """Hands an event to the listeners on the dispatch thread (what ``emit`` callers hold)."""

    __slots__ = ("_dispatcher", "_listeners", "observer")

    def __init__(self, dispatcher: Dispatcher, listeners: ListenerSet) -> None:
        self._dispatcher = dispatcher
        self._listeners = listeners
        self.observer: Callable[[Event], None] | None = None
        """The connection's own reaction to an event, on the emitting thread, before the
        listeners hear it (the consumers end a refused subscription's buffer)."""

    def __call__(self, event: Event) -> None:
        observer = self.observer
        if observer is not None:
            observer(event)
        self._dispatcher.submit(functools.partial(self._listeners.deliver, event))


class SlotRouter:
    """What sessions report (on adapter threads), routed to the connection's parts.

    Implements :class:`~failover_client.engine._slot.SlotEvents` and numbers the slots.
    """

    __slots__ = (
        "_canary",
        "_consumers",
        "_lock",
        "_numbers",
        "_pool",
        "_redirects",
        "_state",
        "_topology",
    )

    def __init__(
        self,
        *,
        state: ConnectionState,
        consumers: Consumers,
        topology: TopologyHub,
        pool: BrokerPool,
        redirects: Redirects,
        canary: Canary | None = None,
    ) -> None:
        self._state = state
        self._consumers = consumers
        self._canary = canary
        self._topology = topology
        self._pool = pool
        self._redirects = redirects
        self._lock = threading.Lock()
        self._numbers = 0

    def new_slot(self, address: BrokerAddress) -> Slot:
        with self._lock:
            self._numbers += 1
            return Slot(self._numbers, address)

    def _slot_message(self, slot: Slot, message: Received) -> None:
        if self._canary is not None and self._canary.on_message(slot, message):
            return  # handled here, on the adapter's thread: never behind a slow handler
        slot.note_delivery(self._state.clock.monotonic())
        # Into the subscription's own buffer: its worker (or receive()) takes it from there.
        self._consumers.deliver(slot, message)

    def _slot_lost(self, slot: Slot, cause: BaseException) -> None:
        self._state.slot_lost(slot, cause)

    def _slot_brokers(self, slot: Slot, advertised: AdvertisedBrokers) -> None:
        """A broker named others on the data connection (AMQP open frame or redirect)."""
        if not self._state.is_live(slot):
            return  # a retired or dead session no longer speaks for this connection
        self._topology.update(
            advertised.brokers,
            source=advertised.source,
            action=None,
            tiers=None,
            weights=None,
            pushed=True,
        )
        if not (advertised.redirect and advertised.brokers):
            return
        slot.redirected = True
        # Only where the merge let it in: an ignored list, or an entry the address map
        # dropped, is not followed, so a redirect cannot bypass the pool's rules.
        target = self._pool.entry_for(advertised.brokers[0])
        if target is not None:
            self._redirects.offer(target)


class Parts:
    """What ``close()`` ends, in order; none of it refers to the facade."""

    __slots__ = (
        "clock",
        "consumers",
        "dialer",
        "dispatcher",
        "loop",
        "name",
        "sources",
        "state",
        "topology_stop",
    )

    def __init__(
        self,
        *,
        state: ConnectionState,
        consumers: Consumers,
        topology_stop: Callable[[], None],
        sources: int,
        dialer: Dialer,
        dispatcher: Dispatcher,
        loop: ReconnectLoop,
        clock: Clock,
        name: str,
    ) -> None:
        self.state = state
        self.consumers = consumers
        self.topology_stop = topology_stop
        self.sources = sources
        self.dialer = dialer
        self.dispatcher = dispatcher
        self.loop = loop
        self.clock = clock
        self.name = name

    def close(self, drain: float = 0.0) -> None:
        """Stop consuming (handlers get ``max(drain, 1 s)``), then close and join.

        Handlers run on the subscriptions' workers, not on the dispatch thread: one that never
        returns is left on its daemon thread (``Consumers.stop`` warns), and the dispatch
        thread has only the listeners' events left to run.
        """
        if self.state.snapshot()[0] != "closed":
            self.consumers.stop(drain, reason="close", forget=False)
        self.state.close()
        self.consumers.close()
        self.stop_sources()
        # After the state closed: its stop event keeps the loop from starting another
        # connect; cancelling cuts the one under way.
        self.dialer.cancel()
        self.dispatcher.stop()
        self.loop.join()  # ends: stop is set and the dialer cancelled, its waits' two wakers
        # The events queued before close (``Closed`` last) reach the listeners; a listener that
        # never returns is left on the daemon thread rather than holding close().
        self.dispatcher.join(LISTENERS_STOP_TIMEOUT)
        thread = self.dispatcher.thread
        if thread is not None and thread.is_alive() and thread is not threading.current_thread():
            _log.warning(
                "%s: an event listener did not return within %g s; left on its daemon thread",
                self.name,
                LISTENERS_STOP_TIMEOUT,
            )

    def stop_sources(self) -> None:
        """Stop the topology sources, waiting at most :data:`SOURCES_STOP_TIMEOUT`.

        A source's ``stop()`` joins its thread, and that thread may be inside a call nothing can
        interrupt: a custom DNS resolver (``DnsSource(resolve=...)``) stuck in a lookup, a
        source written by the application. ``close()`` must not wait for those (it waited
        21.7 s for a slow resolver), so the stops run on a daemon thread of their own; one
        still stuck at the deadline is abandoned there, as a cut-short name lookup of a connect
        is, and ends with the process at the latest.
        """
        if not self.sources:
            self.topology_stop()  # nothing to wait for; it still wakes a dialer's delay
            return
        done = threading.Event()

        def stop() -> None:
            try:
                self.topology_stop()
            except Exception:  # noqa: BLE001 - the contract says never; close() goes on anyway
                _log.exception("%s: a topology source failed to stop", self.name)
            finally:
                done.set()

        threading.Thread(target=stop, name=f"{self.name}-topology-stop", daemon=True).start()
        if not self.clock.wait(done, SOURCES_STOP_TIMEOUT):
            _log.warning(
                "%s: topology sources did not stop within %gs (a lookup that does not "
                "return?); left to end on their daemon threads",
                self.name,
                SOURCES_STOP_TIMEOUT,
            )

    def running(self) -> bool:
        """Whether there is something to close: connect() ran and close() did not."""
        return self.state.snapshot()[0] not in ("new", "closed")


def finalize_dropped(parts: Parts, guard: ProcessGuard, name: str) -> None:
    """The finalizer of a connection the application dropped without closing it.

    Runs on whichever thread the garbage collector happened to run on (an adapter's I/O thread
    too), so the close, which joins threads and may wait for a broker's DISCONNECT receipt,
    runs on a thread of its own instead of stalling that one. The warning comes after the close
    has started: under ``-W error`` it raises, and the connection must close all the same.
    """
    if guard.inherited() or not parts.running():
        return
    threading.Thread(target=parts.close, name=f"{name}-finalize", daemon=True).start()
    warnings.warn(
        f"unclosed FailoverConnection ({name}); it is closed now, call close() or use 'with'",
        ResourceWarning,
        stacklevel=1,
    )


def current_address(state: ConnectionState) -> BrokerAddress | None:
    """The broker in use, for topology sources that follow the data connection.

    A function of the state, not a bound method of the facade: a source's thread holding it
    must not keep a dropped connection alive (its finalizer closes it).
    """
    current = state.snapshot()[1]
    return None if current is None else current.address


def watch_dropped(
    owner: object, parts: Parts, guard: ProcessGuard
) -> weakref.finalize[[Parts, ProcessGuard, str], object]:
    """Close ``parts`` once ``owner`` (the facade) is garbage: see :func:`finalize_dropped`."""
    finalizer = weakref.finalize(owner, finalize_dropped, parts, guard, parts.name)
    # At exit a connection still referenced is the application's to close (daemon threads
    # end with the process); the finalizer is for connections nobody can close any more.
    finalizer.atexit = False
    return finalizer
