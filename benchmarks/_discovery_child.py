"""The measuring half of ``bench_discovery.py``: runs inside its network namespace.

``python benchmarks/_discovery_child.py '<json settings>'`` (started by the benchmark under ``ip
netns exec``). Broker 0 stays up and a ``FailoverConnection`` on ``discovery:(multicast://default)``
sits on it; beside it the ActiveMQ Java client's ``MulticastDiscoveryAgent`` listens on the same
group (``java/DiscoveryWatch.java``). Broker 1 is then started and SIGKILLed ``rounds`` times;
for each start and each kill the child records, on one clock (``time.monotonic()`` and Java's
``System.nanoTime()`` are both CLOCK_MONOTONIC): when the process was spawned (or killed), when
its STOMP port first answered (a 50 ms poll), when our connection's ``TopologyChanged`` came, and
when the Java agent's listener was called. Prints one JSON document.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from failover_client import FailoverConnection
from failover_client.testing.brokers._discovery_child import _await_ready, _broker, _Recorder

WAIT = 60.0


class JavaWatch:
    """The Java agent as a child process; its events in a queue, times in seconds."""

    def __init__(self, argv: list[str]) -> None:
        self._child = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.events: queue.Queue[tuple[str, float, str]] = queue.Queue()
        self._ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self._ready.wait(WAIT):
            raise RuntimeError("the Java discovery agent did not start")

    def _read(self) -> None:
        assert self._child.stdout is not None
        for line in self._child.stdout:  # ends when the Java process ends
            parts = line.split()
            if parts == ["ready"]:
                self._ready.set()
            elif len(parts) == 3:
                self.events.put((parts[0], int(parts[1]) / 1e9, parts[2]))

    def wait(self, change: str, service: str) -> float | None:
        deadline = time.monotonic() + WAIT
        while (left := deadline - time.monotonic()) > 0:
            try:
                kind, at, name = self.events.get(timeout=left)
            except queue.Empty:
                return None
            if kind == change and name == service:
                return at
        return None

    def close(self) -> None:
        assert self._child.stdin is not None
        self._child.stdin.close()
        try:
            self._child.wait(10)
        except subprocess.TimeoutExpired:
            self._child.kill()


def run(settings: dict[str, Any]) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="bench-discovery-"))
    first, second = (_broker(root, i, a) for i, a in enumerate(settings["addresses"]))
    service = f"tcp://{settings['addresses'][1]}:61616"
    ours = str(second.endpoint("stomp"))
    recorder = _Recorder()
    rows: list[dict[str, Any]] = []
    java = JavaWatch(settings["java"])
    try:
        _await_ready(first)
        conn = FailoverConnection("discovery:(multicast://default)", listeners=[recorder])
        conn.connect()
        try:
            for _ in range(settings["rounds"]):
                spawned = time.monotonic()
                _await_ready(second)
                ready = time.monotonic()
                rows.append(
                    {
                        "what": "start",
                        "at": spawned,
                        "ready": ready,
                        "ours": recorder.wait("added", ours, spawned),
                        "java": java.wait("added", service),
                    }
                )
                time.sleep(settings["settle"])  # a broker that runs a while, as in production
                killed = time.monotonic()
                second.kill()
                rows.append(
                    {
                        "what": "kill",
                        "at": killed,
                        "ours": recorder.wait("removed", ours, killed),
                        "java": java.wait("removed", service),
                    }
                )
        finally:
            conn.close()
    finally:
        java.close()
        first.kill()
        second.kill()
    return {"rows": rows}


if __name__ == "__main__":
    print(json.dumps(run(json.loads(sys.argv[1]))))
