"""A connection's lifetime against a real broker: fork() after connect(), and dropped unclosed.

* fork(): the child inherits the connection's sockets but not its threads. Its calls must fail
  with a clear error and its close() must leave the parent's STOMP session alone: the parent
  keeps sending confirmed messages, with no disconnect and no failover.
* 10 connections dropped without close(): each is closed by its finalizer (ResourceWarning),
  and every thread of the library ends.
"""

from __future__ import annotations

import gc
import os
import threading

import pytest

from failover_client import ConfigurationError, Disconnected, FailedOver, FailoverConnection
from failover_client.testing.brokers import Cluster
from integration.test_failover_common import (
    FAST,
    SAFETY,
    Events,
    Inbox,
    credentials,
    failover_uri,
    library_threads,
)

pytestmark = pytest.mark.integration

QUEUE = "/queue/fork-test"


def _child(conn: FailoverConnection, parent: int) -> int:
    """What a forked child does with the inherited connection; its exit status (0: as wanted)."""
    try:
        # Bounded: without the guard this waits for a confirmation no thread of the child reads.
        conn.send(QUEUE, b"from-the-child", timeout=5.0)
    except ConfigurationError as exc:
        if f"made in process {parent}" not in str(exc) or "after fork()" not in str(exc):
            return 2
    except Exception:
        return 1
    else:
        return 1  # written on the parent's socket
    conn.close()  # must not send DISCONNECT on, or close, the parent's session
    del conn
    gc.collect()  # the finalizer too
    return 0


def test_a_forked_child_cannot_use_the_connection_and_its_close_spares_the_parent(
    activemq_cluster: Cluster,
) -> None:
    events = Events()
    inbox = Inbox()
    conn = FailoverConnection(
        failover_uri(activemq_cluster, FAST, order=[0]),
        listeners=[events],
        **credentials(activemq_cluster),
    )
    try:
        conn.connect()
        conn.subscribe(QUEUE, inbox)
        conn.send(QUEUE, b"before")
        inbox.wait_for_bodies(["before"])
        mark = events.mark()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the child: never return into pytest
            status = 3
            try:
                status = _child(conn, parent)
            finally:
                os._exit(status)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        after = [f"after-{n}".encode() for n in range(20)]
        for body in after:
            conn.send(QUEUE, body)  # confirmed: the parent's session is alive
        inbox.wait_for_bodies([b.decode() for b in after])
        assert "from-the-child" not in inbox.bodies()
        assert events.of(Disconnected, after=mark) == []
        assert events.of(FailedOver, after=mark) == []
        assert conn.stats()["failovers"] == 0
        assert conn.state == "connected"
    finally:
        conn.close()


def _drop_connected(cluster: Cluster, count: int) -> None:
    uri = failover_uri(cluster, FAST, order=[0])
    for _ in range(count):
        conn = FailoverConnection(uri, **credentials(cluster))
        conn.connect()
        del conn
    gc.collect()
    for thread in threading.enumerate():
        if thread.name.endswith("-finalize"):
            thread.join(SAFETY)


def test_dropped_connections_are_closed_by_their_finalizers(activemq_cluster: Cluster) -> None:
    before = set(library_threads())
    with pytest.warns(ResourceWarning, match="unclosed FailoverConnection") as caught:
        _drop_connected(activemq_cluster, 10)
    assert len([w for w in caught if w.category is ResourceWarning]) == 10
    for thread in library_threads():
        if thread not in before:
            thread.join(SAFETY)  # a safety net: each ends as soon as its connection closed
    left = [t.name for t in library_threads() if t not in before]
    assert left == []
