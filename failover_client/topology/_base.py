"""The topology-source interface: where changes to the broker list come from at run time.

A :class:`TopologySource` watches something beside the data connection (a file, DNS, a
broker's control channel) and pushes whole broker lists into a :class:`TopologySink`.
:class:`~failover_client.FailoverConnection` is a sink: its ``update_brokers`` merges a list
into the pool (seeds are never removed; ``action`` replaces, adds or ignores).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, runtime_checkable

from failover_client.uri import BrokerAddress, ServerListAction

__all__ = ["SourceThread", "TopologySink", "TopologySource"]


@runtime_checkable
class TopologySink(Protocol):
    """Receives broker lists; ``FailoverConnection.update_brokers`` has this signature."""

    def update_brokers(
        self,
        update: Iterable[BrokerAddress],
        *,
        source: str,
        action: ServerListAction | None = None,
        tiers: Mapping[str, int] | None = None,
        weights: Mapping[str, float] | None = None,
        pushed: bool = False,
    ) -> None:
        """Merge ``update`` (the source's whole current list) into the known brokers.

        ``tiers`` and ``weights`` map broker keys (``BrokerAddress.key``) of ``update`` to a
        priority tier (0 is best) and a relative weight (> 0), e.g. from DNS SRV records.
        ``pushed`` says a broker sent the list (the connection ignores such lists under
        ``updateURIsSupported=false``); a list the user configured (a file, DNS) is not pushed.
        Called on the source's own thread; it must not block for long.

        A sink may also offer ``request_rebalance(*, source: str)``: sources whose brokers ask
        clients to rebalance (ActiveMQ's ``rebalanceConnection``) call it when it is there.
        """


@runtime_checkable
class TopologySource(Protocol):
    """Pushes broker lists to a sink from its own thread until stopped."""

    name: str
    """Shown as the ``source`` of every update (and so in ``TopologyChanged`` events)."""

    def start(self, sink: TopologySink) -> None:
        """Begin watching and push lists to ``sink``; returns at once (work runs on a thread)."""

    def stop(self) -> None:
        """Stop watching and join the source's threads. Idempotent; never raises."""


class SourceThread:
    """The one daemon thread a topology source works on: started once, stopped and joined.

    ``stopping`` is set by :meth:`stop`; the source's loop waits on it (through its clock), so
    a stop interrupts a wait at once.
    """

    def __init__(self, name: str) -> None:
        self._name = f"failover-client-topology-{name}"
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.stopping = threading.Event()

    def start(self, target: Callable[[], None], owner: object) -> None:
        """Run ``target`` on the thread; RuntimeError naming ``owner`` if it was started."""
        with self._lock:
            started = self._thread is not None
            if not started:
                self._thread = threading.Thread(target=target, name=self._name, daemon=True)
                self._thread.start()
        if started:
            raise RuntimeError(f"{owner!r} was already started")

    def stop(self) -> None:
        """Set ``stopping`` and join the thread (not from the thread itself). Idempotent."""
        self.stopping.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    @property
    def state(self) -> str:
        """``new``, ``running`` or ``stopped``, for reprs."""
        with self._lock:
            started = self._thread is not None
        if not started:
            return "new"
        return "stopped" if self.stopping.is_set() else "running"
