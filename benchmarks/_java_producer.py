"""The ActiveMQ Java client as a failover benchmark driver (``java/FailoverProducer.java``).

The Java program holds one ``ActiveMQConnection`` on a ``failover:(tcp://...)`` URI of the
same brokers (OpenWire, the Java client's own protocol) and sends one persistent message per
``send`` command: ActiveMQ sends persistent messages synchronously, so the reply comes once the
broker stored it, as a STOMP receipt says. Each send costs a pipe round trip to the child
(tens of microseconds, the same for every message), which is the only difference from a loop
inside the JVM. Compiled at benchmark time against the Debian package's client jars (see
``_rebalance_java``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from benchmarks._rebalance_java import JavaUnavailable, _tool, client_classpath
from failover_client.testing.brokers import Cluster

__all__ = ["JavaDriver", "JavaUnavailable"]

SOURCE = Path(__file__).resolve().parent / "java" / "FailoverProducer.java"
MAIN_CLASS = "FailoverProducer"


def _compile(workdir: Path) -> Path:
    classes = workdir / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    classpath = os.pathsep.join(str(p) for p in client_classpath())
    done = subprocess.run(
        [_tool("javac"), "-nowarn", "-d", str(classes), "-cp", classpath, str(SOURCE)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise JavaUnavailable(f"javac failed on {SOURCE.name}:\n{done.stderr.strip()}")
    return classes


class JavaDriver:
    """A ``Driver`` (see ``_drivers``) over the Java client's ``failover:`` transport."""

    def __init__(self, cluster: Cluster, options: Mapping[str, object], name: str) -> None:
        self.name = name
        self.cluster = cluster
        self.uri = cluster.failover_uri("tcp", dict(options))  # type: ignore[arg-type]
        self._ports = {b.endpoint("tcp").port: i for i, b in enumerate(cluster)}
        self._workdir = Path(tempfile.mkdtemp(prefix="fc-java-producer-"))
        classes = _compile(self._workdir)
        classpath = os.pathsep.join([str(classes), *(str(p) for p in client_classpath())])
        self._log = (self._workdir / "java.log").open("w")
        self._child = subprocess.Popen(
            [
                _tool("java"),
                "-Xmx256m",
                "-XX:+UseSerialGC",
                "-Djava.net.preferIPv4Stack=true",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                "-cp",
                classpath,
                MAIN_CLASS,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            bufsize=1,
        )
        self._current: int | None = None
        self._reply("startup")

    def _reply(self, what: str) -> str:
        assert self._child.stdout is not None
        line = self._child.stdout.readline()  # ends: the child answers every command or exits
        if not line:
            raise RuntimeError(f"Java producer ended during {what} (exit {self._child.wait()})")
        if not line.startswith("ok"):
            raise RuntimeError(f"Java producer: {what}: {line.strip()}")
        return line[2:].strip()

    def _command(self, line: str) -> str:
        assert self._child.stdin is not None
        self._child.stdin.write(line + "\n")
        self._child.stdin.flush()
        return self._reply(line.split("\t", 1)[0])

    def connect(self) -> None:
        self._command(f"open\t{self.uri}")

    def send(self, destination: str, body: bytes, headers: Mapping[str, str]) -> int:
        queue = destination.removeprefix("/queue/")
        broker = self._command(f"send\t{queue}\t{headers['bench-id']}")
        port = int(broker.rsplit(":", 1)[1].split("?", 1)[0].rstrip("/"))
        self._current = self._ports[port]
        return self._current

    def current(self) -> int | None:
        return self._current

    def extra(self) -> dict[str, Any]:
        return {"uri": self.uri}

    def close(self) -> None:
        try:
            if self._child.poll() is None:
                self._command("quit")
        except (RuntimeError, OSError):
            self._child.kill()
        finally:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._child.wait(10.0)
            if self._child.poll() is None:
                self._child.kill()
                self._child.wait()
            self._log.close()
