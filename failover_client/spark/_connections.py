"""One ``FailoverConnection`` per Python worker process, reused by the tasks it runs.

Spark reuses its Python workers across tasks and micro-batches, so a connection opened by the
first task of a worker serves every later one: no handshake per partition, and a fail-over
learned by one task is not paid again by the next. Connections are keyed by everything that
shapes them (the URI text and the confirmation window); a connection the reconnect loop gave
up on (``failed``) or that was closed is replaced on the next request, so a retried task gets
a fresh start.

Writers never hold a connection (it is not picklable, and the writer object travels from the
driver to the executors): they ask this module on the executor, inside ``write()``.

Closing: :func:`close_all` runs at interpreter exit (``atexit``). PySpark's daemon-forked
workers end with ``os._exit``, which skips ``atexit``; their sockets are closed by the kernel
then, which loses nothing, because a task returns only after every one of its messages was
confirmed.
"""

from __future__ import annotations

import atexit
import threading
from collections.abc import Callable

from failover_client import FailoverConnection
from failover_client.spark._options import SinkOptions
from failover_client.uri import parse

__all__ = ["ConnectionCache", "close_all", "connection_for", "open_connection"]

Key = tuple[str, int | None]
_UNUSABLE = frozenset({"failed", "closed"})


def open_connection(options: SinkOptions) -> FailoverConnection:
    """A connected ``FailoverConnection`` for ``options`` (closed again if connecting fails)."""
    target = parse(options.uri)
    settings = target.options
    if options.confirm_window is not None:
        settings = settings.replace(confirm_window=options.confirm_window)
    connection = FailoverConnection(target, options=settings)
    try:
        connection.connect()
    except BaseException:
        connection.close()
        raise
    return connection


class ConnectionCache:
    """Connections by key; ``factory`` opens a new one (tests pass a fake-backed factory)."""

    def __init__(self, factory: Callable[[SinkOptions], FailoverConnection]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._live: dict[Key, FailoverConnection] = {}

    def get(self, options: SinkOptions) -> FailoverConnection:
        """The cached connection for ``options``, or a new connected one."""
        key = options.connection_key()
        stale = None
        with self._lock:
            connection = self._live.get(key)
            if connection is not None and connection.state in _UNUSABLE:
                stale = self._live.pop(key)
                connection = None
        if stale is not None:
            stale.close()
        if connection is not None:
            return connection
        # Opened outside the lock (a connect can take the whole startup schedule). Two
        # threads asking at once both connect; the second result is closed, not leaked.
        fresh = self._factory(options)
        with self._lock:
            kept = self._live.setdefault(key, fresh)
        if kept is not fresh:
            fresh.close()
        return kept

    def close_all(self) -> None:
        """Close every cached connection (each close waits for the connection's threads)."""
        with self._lock:
            live = list(self._live.values())
            self._live.clear()
        for connection in live:
            connection.close()

    def __len__(self) -> int:
        with self._lock:
            return len(self._live)

    def __repr__(self) -> str:
        with self._lock:
            shown = ", ".join(f"{c.broker or '-'} {c.state}" for c in self._live.values())
        return f"ConnectionCache([{shown}])"


_cache = ConnectionCache(open_connection)
atexit.register(_cache.close_all)


def connection_for(options: SinkOptions) -> FailoverConnection:
    """This process's connection for ``options`` (see the module docstring)."""
    return _cache.get(options)


def close_all() -> None:
    """Close this process's cached connections (also done at interpreter exit)."""
    _cache.close_all()
