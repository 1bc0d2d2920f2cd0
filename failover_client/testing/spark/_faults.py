"""Faults injected from inside a running Spark job, at a chosen row, on the first attempt only.

A test of a Spark job's recovery needs the failure *inside* a task: half-way through a
partition, with part of it already sent. Two helpers, each a picklable callable to wrap in a
UDF (``udf(FailFirstAttempt("3000"), "string")``); they pass every value through unchanged:

* :class:`FailFirstAttempt` raises :class:`InjectedFailure` at one value on a task's first
  attempt, so Spark retries the task and the retry runs through. A UDF runs ahead of the
  operator that consumes its output (rows are buffered between them), so the failure can come
  before a sink downstream has seen any row; :class:`NullOnFirstAttempt`
  turns the value into a null there instead, a bad row for the *consumer* exactly at that row
  (the failover sink refuses it by its ``onRowError`` option, without failing the task);
* :class:`Tripwire` runs a callback in the *test* process (kill a broker, say) when a task
  reaches one value, and lets the task continue once the callback returned. It is a loopback
  TCP server; the UDF side (:meth:`Tripwire.at`) connects to it, so it works from executors in
  other processes (a standalone cluster) as well as in local mode.

Both live in the installed package so executors can import them (a UDF defined in a test
module is pickled by reference, and a test module is not importable on an executor).
"""

from __future__ import annotations

import socket
import socketserver
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType

__all__ = ["FailFirstAttempt", "InjectedFailure", "NullOnFirstAttempt", "Trip", "Tripwire"]

LOOPBACK = "127.0.0.1"


class InjectedFailure(RuntimeError):
    """The failure a test asked for (not a bug)."""


def _first_attempt() -> bool:
    from pyspark import TaskContext  # noqa: PLC0415 - executor side, Spark installed there

    context = TaskContext.get()
    return context is not None and context.attemptNumber() == 0


@dataclass(frozen=True)
class FailFirstAttempt:
    """Pass values through; raise at ``value`` when the task runs for the first time."""

    value: str

    def __call__(self, value: object) -> object:
        if str(value) == self.value and _first_attempt():
            raise InjectedFailure(f"injected failure at {self.value!r} (first attempt only)")
        return value


@dataclass(frozen=True)
class NullOnFirstAttempt:
    """Pass values through; return None for ``value`` when the task runs for the first time."""

    value: str

    def __call__(self, value: object) -> object:
        if str(value) == self.value and _first_attempt():
            return None
        return value


@dataclass(frozen=True)
class Trip:
    """The UDF side of a :class:`Tripwire`: at each of ``values`` (first attempt), call it."""

    port: int
    values: frozenset[str]
    timeout: float = 60.0

    def __call__(self, value: object) -> object:
        text = str(value)
        if text in self.values and _first_attempt():
            with socket.create_connection((LOOPBACK, self.port), timeout=self.timeout) as peer:
                peer.sendall(text.encode() + b"\n")
                peer.recv(1)  # the callback has run
        return value


class Tripwire:
    """A loopback server that runs ``callback(value)`` when a :class:`Trip` reaches it.

    ``fired`` is set after the first callback returned; ``values`` lists what tripped.
    """

    def __init__(self, callback: Callable[[str], None]) -> None:
        self._callback = callback
        self.fired = threading.Event()
        self.values: list[str] = []
        owner = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                value = self.rfile.readline().decode().strip()
                try:
                    owner._callback(value)
                finally:
                    owner.values.append(value)
                    owner.fired.set()
                    self.wfile.write(b"k")

        self._server = socketserver.ThreadingTCPServer((LOOPBACK, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="spark-tripwire", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def at(self, *values: object) -> Trip:
        """The UDF body that trips this wire at each of ``values`` (compared as text)."""
        return Trip(self.port, frozenset(str(v) for v in values))

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> Tripwire:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
