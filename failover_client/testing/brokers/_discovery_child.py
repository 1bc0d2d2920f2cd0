"""ActiveMQ multicast discovery with real brokers, run inside a network namespace.

``python -m failover_client.testing.brokers._discovery_child '<json settings>'`` is started by
the integration test and the benchmark under ``ip netns exec`` (see :mod:`._netns`): every
process it starts (the brokers, the client's threads) lives in that namespace, so the multicast
announcements stay there. It starts ActiveMQ Classic brokers that announce their OpenWire
connector with ``discoveryUri="multicast://default"``, each on its own address of the
namespace with the standard ports (so the default scheme map, tcp 61616 -> stomp 61613,
applies), and a :class:`FailoverConnection` on ``discovery:(multicast://default)``; then
brokers join, are SIGKILLed, come back and stop cleanly, and the connection's
``TopologyChanged`` events are timed against each of those moments (``time.monotonic()``).
It prints one JSON document: the steps with their times, every event, and what the
connection did.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from failover_client import FailoverConnection, TopologyChanged
from failover_client._events import Event

from ._activemq import FAST_JVM_OPTIONS, LocalActiveMQ
from ._activemq_config import ActiveMQConfig
from ._broadcast import DatagramPeer, encode_artemis_broadcast, encode_artemis_connector
from ._model import Endpoint
from ._netns import NetworkNamespace
from ._readiness import Deadline, wait_until

__all__ = ["main", "run_in_namespace"]

WAIT = 60.0  # seconds any one step may take before the run reports it as missing


class _Recorder:
    """Every TopologyChanged with the time it reached the listener."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.events: list[tuple[float, str, str, str]] = []

    def __call__(self, event: Event) -> None:
        if not isinstance(event, TopologyChanged):
            return
        now = time.monotonic()
        with self.cond:
            self.events += [(now, "added", a, event.source) for a in event.added]
            self.events += [(now, "removed", r, event.source) for r in event.removed]
            self.cond.notify_all()

    def wait(self, change: str, broker: str, after: float) -> float | None:
        """When ``broker`` was ``change``d (added/removed) at or after ``after``; None: never."""

        def seen() -> float | None:
            return next(
                (t for t, c, b, _ in self.events if c == change and b == broker and t >= after),
                None,
            )

        with self.cond:
            self.cond.wait_for(lambda: seen() is not None, WAIT)
            return seen()


def _broker(root: Path, index: int, address: str) -> LocalActiveMQ:
    name = f"disc-{index}"
    config = ActiveMQConfig(
        broker_name=name,
        data_dir=str(root / name / "data"),
        host=address,
        stomp_port=61613,
        openwire_port=61616,
        discovery_uri="multicast://default",
    )
    endpoints = {
        "stomp": Endpoint("stomp", address, 61613),
        "tcp": Endpoint("tcp", address, 61616),
    }
    return LocalActiveMQ(name, root / name, config, endpoints, FAST_JVM_OPTIONS)


def _await_ready(broker: LocalActiveMQ) -> None:
    """Launch ``broker`` and return once its STOMP connector answers."""
    broker.launch()
    # Not broker.wait_ready(): it checks who holds a port by its number alone, and here every
    # broker has the same ports on its own address.
    reason = wait_until(
        lambda: broker.probe(timeout=1.0),
        Deadline(WAIT),
        give_up=lambda: None if broker.running() else "the broker exited",
    )
    if reason is not None:
        raise RuntimeError(f"{broker.name}: {reason}\n{broker.log_tail()}")


def _start(broker: LocalActiveMQ, recorder: _Recorder, what: str) -> dict[str, Any]:
    address = str(broker.endpoint("stomp"))
    spawned = time.monotonic()
    _await_ready(broker)
    ready = time.monotonic()
    added = recorder.wait("added", address, spawned)
    return {"what": what, "broker": address, "at": spawned, "ready": ready, "changed": added}


def _end(broker: LocalActiveMQ, recorder: _Recorder, how: str) -> dict[str, Any]:
    address = str(broker.endpoint("stomp"))
    at = time.monotonic()
    if how == "kill":
        broker.kill()
    else:
        broker.stop()
    removed = recorder.wait("removed", address, at)
    return {"what": how, "broker": address, "at": at, "changed": removed}


def run(settings: dict[str, Any]) -> dict[str, Any]:
    """The scenario ``settings["mode"]`` names (``activemq``, the default, or ``artemis``)."""
    if settings.get("mode") == "artemis":
        return run_artemis(settings)
    return run_activemq(settings)


def run_artemis(settings: dict[str, Any]) -> dict[str, Any]:
    """Artemis broadcasts from the harness peer (the bytes a 2.x broker sends), advertising a
    real broker's STOMP port on the namespace, to a connection on ``settings["uri"]``
    (``udp://231.7.7.7:9876?...``): a node is heard, connected to and sent to; a second node
    joins; it falls silent and is dropped after ``refreshTimeout``."""
    root = Path(settings["root"])
    address, absent = settings["addresses"][0], settings["addresses"][1]
    broker = _broker(root, 0, address)
    recorder = _Recorder()
    steps: list[dict[str, Any]] = []
    result: dict[str, Any] = {"steps": steps}
    group, port = settings.get("group", "231.7.7.7"), settings.get("port", 9876)

    def peer(node: str, host: str) -> DatagramPeer:
        connector = encode_artemis_connector("artemis", [("port", "61613"), ("host", host)])
        packet = encode_artemis_broadcast(node, f"{node}-unique", [connector])
        return DatagramPeer(group, port, packet, period=settings.get("period", 1.0))

    first, second = peer("node-1", address), peer("node-2", absent)
    try:
        _await_ready(broker)
        conn = FailoverConnection(settings["uri"], listeners=[recorder])
        connected: list[BaseException | None] = []
        connecting = threading.Thread(target=lambda: connected.append(_connect(conn)))
        try:
            connecting.start()  # waits for the first broadcast (initialWaitTimeout)
            at = time.monotonic()
            first.start()
            steps.append(_heard(recorder, "added", f"stomp://{address}:61613", at, "broadcast"))
            connecting.join(WAIT)
            result["connect_error"] = repr(connected[0]) if connected and connected[0] else None
            result["connected_to"] = conn.broker
            conn.send("/queue/discovery", b"over udp discovery", timeout=10.0)
            at = time.monotonic()
            second.start()
            steps.append(_heard(recorder, "added", f"stomp://{absent}:61613", at, "broadcast"))
            at = time.monotonic()
            second.stop()
            steps.append(_heard(recorder, "removed", f"stomp://{absent}:61613", at, "silent"))
            result["pool"] = [str(s.address) for s in conn.pool.states()]
        finally:
            conn.close()
    finally:
        first.stop()
        second.stop()
        broker.kill()
    result["events"] = recorder.events
    return result


def _heard(recorder: _Recorder, change: str, broker: str, at: float, what: str) -> dict[str, Any]:
    return {"what": what, "broker": broker, "at": at, "changed": recorder.wait(change, broker, at)}


def run_activemq(settings: dict[str, Any]) -> dict[str, Any]:
    """The ActiveMQ scenario (see the module); brokers are stopped whatever happens."""
    root = Path(settings["root"])
    brokers = [_broker(root, i, a) for i, a in enumerate(settings["addresses"])]
    recorder = _Recorder()
    conn = FailoverConnection(settings["uri"], listeners=[recorder])
    steps: list[dict[str, Any]] = []
    result: dict[str, Any] = {"steps": steps}
    connected: list[BaseException | None] = []
    connecting = threading.Thread(target=lambda: connected.append(_connect(conn)), daemon=True)
    try:
        connecting.start()  # no broker yet: the connection waits for the first announcement
        for broker in brokers:
            steps.append(_start(broker, recorder, "start"))
        connecting.join(WAIT)
        result["connect_error"] = repr(connected[0]) if connected and connected[0] else None
        result["connected_to"] = conn.broker
        conn.send("/queue/discovery", b"first", timeout=10.0)
        for _ in range(settings.get("rounds", 1)):
            steps.append(_end(brokers[1], recorder, "kill"))
            steps.append(_start(brokers[1], recorder, "restart"))
        steps.append(_end(brokers[2], recorder, "stop"))
        conn.send("/queue/discovery", b"after stop", timeout=30.0)  # connected again, if moved
        # The broker in use dies: the connection moves to one it discovered, and sends there.
        current = next(b for b in brokers if str(b.endpoint("stomp")) == conn.broker)
        steps.append(_end(current, recorder, "kill"))
        conn.send("/queue/discovery", b"after failover", timeout=30.0)
        result["failed_over_to"] = conn.broker
    finally:
        conn.close()
        for broker in brokers:
            broker.kill()
    result["events"] = recorder.events
    result["pool"] = [str(s.address) for s in conn.pool.states()]
    return result


def _connect(conn: FailoverConnection) -> BaseException | None:
    try:
        conn.connect()
    except Exception as exc:  # noqa: BLE001 - reported in the JSON, asserted by the test
        return exc
    return None


def run_in_namespace(
    settings: dict[str, Any], addresses: Sequence[str], timeout: float = 300.0
) -> dict[str, Any]:
    """Make a namespace with ``addresses``, run the scenario there in a child process and
    return its JSON; RuntimeError with the child's output when it fails. The brokers die with
    the child (they are started with a parent-death signal); the namespace is deleted."""
    with NetworkNamespace(addresses) as namespace:
        argv = [sys.executable, "-m", __name__, json.dumps({**settings, "addresses": [*addresses]})]
        try:
            done = subprocess.run(  # noqa: S603 - our own interpreter and module, no shell
                namespace.argv(argv), capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"the discovery scenario took more than {timeout:g} s") from exc
    if done.returncode != 0:
        raise RuntimeError(
            f"the discovery scenario failed ({done.returncode}):\n{done.stderr[-4000:]}"
        )
    document: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    document["log"] = done.stderr[-4000:]
    return document


def main() -> None:
    """Run the scenario whose settings are the JSON in ``argv[1]``; print the result."""
    result = run(json.loads(sys.argv[1]))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
