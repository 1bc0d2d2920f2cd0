"""The topology-source interface: where changes to the broker list come from at run time.

A :class:`TopologySource` watches something beside the data connection (a file, DNS, a
broker's control channel) and pushes whole broker lists into a :class:`TopologySink`. Both
protocols are the engine's (:mod:`failover_client.engine._topology`): the sink declares every
member a source may use. A connection hands its sources its own sink; a source started by hand
takes any sink, such as a :class:`BaseSink` subclass.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping

from failover_client._events import Listener
from failover_client.engine._topology import TopologySink, TopologySource
from failover_client.uri import BrokerAddress, FailoverOptions, ServerListAction

__all__ = [
    "BaseSink",
    "SourceThread",
    "TopologySink",
    "TopologySource",
    "check_sink",
    "report_failure",
]

_log = logging.getLogger("failover_client.topology")

STOP_TIMEOUT = 2.0
"""Seconds a source's ``stop()`` waits for its thread (``close()`` waits as long for all)."""


class BaseSink:
    """A sink with no data connection behind it: subclasses implement :meth:`update_brokers`.

    The other members of :class:`TopologySink` do what a plain list-taker can: rebalance
    requests and failures are dropped, there are no events to listen to and no broker to
    follow, and the options are the defaults.
    """

    follows_connection = False
    client_id = "failover-client"
    options = FailoverOptions()

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
        raise NotImplementedError

    def request_rebalance(self, *, source: str) -> None:
        return None

    def source_failed(
        self, *, source: str, error: str, failures: int, retry_in: float | None
    ) -> None:
        return None

    def add_listener(self, listener: Listener) -> None:
        return None

    def remove_listener(self, listener: Listener) -> None:
        return None

    def current_broker(self) -> BrokerAddress | None:
        return None


def check_sink(sink: object, owner: object) -> None:
    """TypeError naming ``owner`` unless ``sink`` has every member of :class:`TopologySink`.

    A FailoverConnection is not a sink: it hands its own to the sources it is given.
    """
    if not isinstance(sink, TopologySink):
        raise TypeError(
            f"{owner!r} needs a TopologySink, got {type(sink).__name__}; give a source to a "
            "connection as FailoverConnection(uri, topology=[source]), or subclass "
            "failover_client.topology.BaseSink"
        )


def report_failure(
    sink: TopologySink,
    source: str,
    error: BaseException | str,
    failures: int,
    retry_in: float | None,
) -> None:
    """Tell ``sink`` that ``source`` failed (a connection emits ``TopologySourceFailed``).

    ``error``'s text must hold no secret; the library's errors never do. A sink that raises
    is logged, never allowed to end the source's thread.
    """
    text = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    try:
        sink.source_failed(source=source, error=text, failures=failures, retry_in=retry_in)
    except Exception:  # noqa: BLE001 - a sink's bug must not end the source's thread
        _log.exception("%s: %r failed to take the report of a failure", source, sink)


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

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Set ``stopping`` and join the thread (not from the thread itself). Idempotent.

        The join has a deadline: the thread may sit in a call nothing can interrupt (a custom
        resolver's lookup); it is a daemon, and is left to end there, with a warning.
        """
        self.stopping.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                _log.warning(
                    "topology source thread %s did not stop within %g s; left to end by itself",
                    thread.name,
                    timeout,
                )

    @property
    def state(self) -> str:
        """``new``, ``running`` or ``stopped``, for reprs."""
        with self._lock:
            started = self._thread is not None
        if not started:
            return "new"
        return "stopped" if self.stopping.is_set() else "running"
