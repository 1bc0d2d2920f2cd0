"""Quick start: two local brokers, a failover connection, a broker killed under it.

Needs ActiveMQ Classic installed (on Debian: ``apt-get install activemq default-jre-headless``)
and the package with its STOMP extra (``pip install 'failover-client[stomp]'``). It starts two
throw-away ActiveMQ brokers on free loopback ports with the harness that ships in the package,
and stops them at the end::

    python examples/quickstart.py

It sends and receives through one ``FailoverConnection``, SIGKILLs the broker in use, and sends
and receives again: the connection moves to the other broker, its subscription follows, and
every message is received. Exit status 0 means every message came back.
"""

from __future__ import annotations

import logging
import queue
import tempfile
from pathlib import Path

from failover_client import Event, FailedOver, FailoverConnection, Message
from failover_client.testing.brokers import Cluster, ClusterSpec, start_cluster

QUEUE = "/queue/quickstart"
ROUNDS = 5


def main() -> int:
    """Start the brokers, run the scenario, stop the brokers; 0 if every message came back."""
    # The library logs under "failover_client" and shows nothing unless the application
    # configures logging: here its warnings (a lost broker) go to stderr.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    with tempfile.TemporaryDirectory(prefix="failover-quickstart-") as workdir:
        print("starting two ActiveMQ brokers (a few seconds)...", flush=True)
        cluster = start_cluster(ClusterSpec("activemq", size=2), Path(workdir))
        try:
            # randomize=false: the first broker is used first, so we know which one to kill.
            return run(cluster.failover_uri(options={"randomize": False}), cluster)
        finally:
            cluster.close()


def run(uri: str, cluster: Cluster) -> int:
    """Send, receive, kill the broker in use, send and receive again."""
    received: queue.Queue[str] = queue.Queue()

    def on_message(message: Message) -> None:
        # Runs on the subscription's own thread; returning acknowledges the message.
        received.put(message.body.decode())

    def on_event(event: Event) -> None:
        if isinstance(event, FailedOver):
            print(f"failed over: {event.from_broker} -> {event.to_broker}", flush=True)

    with FailoverConnection(uri, listeners=[on_event]) as conn:
        print(f"connected to {conn.broker}", flush=True)
        orders = conn.subscribe(QUEUE, on_message)
        orders.wait_active(timeout=10)  # the broker confirmed the subscription

        sent = [f"before the kill {n}" for n in range(ROUNDS)]
        for body in sent:
            conn.send(QUEUE, body)  # returns once the broker confirmed it
        got = [received.get(timeout=10) for _ in sent]
        print(f"received {len(got)} messages from {conn.broker}", flush=True)

        victim = cluster.broker_at(conn.broker)
        print(f"SIGKILL {victim.name}", flush=True)
        victim.kill()

        after = [f"after the kill {n}" for n in range(ROUNDS)]
        for body in after:
            conn.send(QUEUE, body)  # waits while the connection moves, then confirmed
        orders.wait_active(timeout=10)  # restored on the broker it moved to
        got += [received.get(timeout=10) for _ in after]
        print(f"received {len(after)} more from {conn.broker}", flush=True)

    missing = sorted(set(sent + after) - set(got))
    print("every message received" if not missing else f"missing: {missing}", flush=True)
    return 0 if not missing else 1


if __name__ == "__main__":
    raise SystemExit(main())
