"""``updateURIsURL`` against real ActiveMQ brokers: the whole broker list read from a file or URL.

``failover:()?updateURIsURL=...`` names no broker at all: the connection learns every broker
from the list, which it re-reads when its broker is lost (as ActiveMQ's own failover transport
does before each reconnect). The list is a real file, or a real HTTP server on loopback whose
answer the test changes while the connection runs; the brokers are killed for real.
"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from failover_client import FailoverConnection, TopologyChanged
from failover_client.testing.brokers import Broker, Cluster
from failover_client.topology import URI_SOURCE_NAME
from integration.test_failover_common import FAST, SAFETY, Events, credentials

pytestmark = pytest.mark.integration


def list_uri(location: str) -> str:
    options = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in FAST.items()}
    return f"failover:()?{urlencode({'updateURIsURL': location, **options}, safe=':/')}"


class ListServer:
    """Serves one broker list over HTTP on loopback; ``body`` may change at any time."""

    def __init__(self, body: str) -> None:
        self.body = body
        self.requests = 0
        self._lock = threading.Lock()
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with owner._lock:
                    owner.requests += 1
                    data = owner.body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass  # the test counts requests; stderr stays quiet

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, args=(0.05,), name="list-server", daemon=True
        )
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/brokers.txt"

    def serve(self, body: str) -> None:
        with self._lock:
            self.body = body

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(SAFETY)


@pytest.fixture
def list_server() -> Iterator[ListServer]:
    server = ListServer("")
    try:
        yield server
    finally:
        server.close()


def sent_through(broker: Broker, queue: str, body: bytes) -> bool:
    return [m.body for m in broker.drain(queue, expect=1)] == [body]


def test_a_connection_without_members_takes_every_broker_from_the_file(
    activemq_cluster: Cluster, tmp_path: Path, unique_queue: str
) -> None:
    first, second, never = activemq_cluster
    path = tmp_path / "brokers.txt"
    # ActiveMQ's own format: one comma-separated line.
    path.write_text(f"{first.uri('stomp')},{second.uri('stomp')}\n", encoding="utf-8")
    events = Events()
    with FailoverConnection(
        list_uri(f"file:{path}"), listeners=[events], **credentials(activemq_cluster)
    ) as conn:
        listed = events.wait_for(TopologyChanged, lambda e: e.source == URI_SOURCE_NAME)
        assert listed.added == (first.uri("stomp"), second.uri("stomp"))
        assert activemq_cluster.broker_at(conn.broker) is first  # randomize=false: list order
        conn.send(unique_queue, b"to the first listed", timeout=SAFETY)

        first.kill()
        conn.send(unique_queue, b"to the second listed", timeout=SAFETY)
        assert activemq_cluster.broker_at(conn.broker) is second
        assert [s.address.key for s in conn.pool.states()] == [
            f"127.0.0.1:{first.endpoint('stomp').port}",
            f"127.0.0.1:{second.endpoint('stomp').port}",
        ]
    assert sent_through(second, unique_queue, b"to the second listed")
    assert never.drain(unique_queue) == []


def test_a_broker_added_to_the_served_list_takes_over_when_the_connection_s_broker_dies(
    activemq_cluster: Cluster, list_server: ListServer, unique_queue: str
) -> None:
    first, unlisted, added = activemq_cluster
    list_server.serve(f"# the cluster today\n{first.uri('stomp')}\n")
    events = Events()
    with FailoverConnection(
        list_uri(list_server.url), listeners=[events], **credentials(activemq_cluster)
    ) as conn:
        assert activemq_cluster.broker_at(conn.broker) is first
        conn.send(unique_queue, b"before", timeout=SAFETY)
        reads = list_server.requests

        # The operators replace the broker in the list; the connection hears of it when its
        # broker goes away (its periodic read is 30 s off), and goes to the new one.
        list_server.serve(f"{added.uri('stomp')}\n")
        mark = events.mark()
        first.kill()
        moved = events.wait_for(TopologyChanged, lambda e: e.source == URI_SOURCE_NAME, after=mark)
        assert moved.added == (added.uri("stomp"),)
        assert moved.removed == (first.uri("stomp"),)
        conn.send(unique_queue, b"after", timeout=SAFETY)
        assert activemq_cluster.broker_at(conn.broker) is added
        assert list_server.requests > reads
    assert sent_through(added, unique_queue, b"after")
    assert unlisted.drain(unique_queue) == []
