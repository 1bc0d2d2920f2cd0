"""The ActiveMQ Java client beside ours: compile ``java/RebalanceClients.java`` and drive it.

The Java program holds one ``ActiveMQConnection`` per client id on a ``failover:`` URI and
records, with ``System.nanoTime()`` (CLOCK_MONOTONIC on Linux, the clock of Python's
``time.monotonic()``), every broker each connection was on. This module compiles it at
benchmark time against the client jars of the Debian ``activemq`` package, runs it as a child
process and talks to it over stdin/stdout, one command a line (see the Java file's header).
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks._common import log
from benchmarks._rebalance_fleet import Snapshot

__all__ = ["JavaFleet", "JavaUnavailable", "client_classpath", "compile_clients", "java_tool"]

SOURCE = Path(__file__).resolve().parent / "java" / "RebalanceClients.java"
MAIN_CLASS = "RebalanceClients"

# Where the Debian package puts its jars (the lib/ entries are links into /usr/share/java).
JAR_DIRS = (Path("/usr/share/activemq/lib"), Path("/usr/share/java"))

# What activemq-client needs at run time: the JMS 1.1 API, the J2EE management interfaces its
# connection statistics implement, hawtbuf (OpenWire's buffers) and slf4j's API.
CLIENT_JARS = (
    "activemq-client.jar",
    "geronimo-jms_1.1_spec.jar",
    "geronimo-j2ee-management-1.1-spec.jar",
    "hawtbuf.jar",
    "slf4j-api.jar",
)
# Optional: a logging backend, so the failover transport's warnings reach the log file (without
# it slf4j says once that it logs nothing, and the program still runs).
LOG_JAR = "slf4j-simple.jar"

REPLY_TIMEOUT = 120.0


class JavaUnavailable(RuntimeError):
    """javac, java or a client jar is missing; the message names what and where it was sought."""


def _tool(name: str) -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / name).is_file():
        return str(Path(java_home) / "bin" / name)
    found = shutil.which(name)
    if found is None:
        raise JavaUnavailable(
            f"no {name!r} on PATH or in JAVA_HOME: install a JDK (apt-get install default-jdk)"
        )
    return found


def java_tool(name: str) -> str:
    """The path of the JDK tool ``name`` (``java``, ``javac``); JavaUnavailable without it."""
    return _tool(name)


def _find(jar: str) -> Path | None:
    for directory in JAR_DIRS:
        if (directory / jar).is_file():
            return directory / jar
    return None


def client_classpath() -> list[Path]:
    """The jars the Java clients compile and run against; JavaUnavailable names any missing."""
    found = {jar: _find(jar) for jar in CLIENT_JARS}
    missing = [jar for jar, path in found.items() if path is None]
    if missing:
        where = " or ".join(str(d) for d in JAR_DIRS)
        raise JavaUnavailable(
            f"ActiveMQ Java client jars missing: {', '.join(missing)} (sought in {where}; "
            "they come with the Debian package activemq and its dependencies)"
        )
    jars = [p for p in found.values() if p is not None]
    log_jar = _find(LOG_JAR)
    return jars + ([log_jar] if log_jar is not None else [])


def compile_clients(workdir: Path, source: Path = SOURCE) -> Path:
    """Compile the Java program ``source`` into ``workdir/classes``; returns that directory."""
    javac = _tool("javac")
    classes = workdir / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    classpath = os.pathsep.join(str(p) for p in client_classpath())
    done = subprocess.run(
        [javac, "-nowarn", "-d", str(classes), "-cp", classpath, str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise JavaUnavailable(f"javac failed on {source.name}:\n{done.stderr.strip()}")
    return classes


class JavaFleet:
    """A Java child process holding the Java clients of one scenario; a ``Fleet``."""

    name = "java"

    def __init__(
        self, classes: Path, index_of: Callable[[str], int | None], log_path: Path
    ) -> None:
        self._index_of = index_of
        self._log = log_path.open("a")
        classpath = os.pathsep.join([str(classes), *(str(p) for p in client_classpath())])
        self._child = subprocess.Popen(
            [
                _tool("java"),
                "-Xmx256m",
                "-XX:TieredStopAtLevel=1",
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
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="java-clients-reader", daemon=True)
        self._reader.start()
        self._expect_ok("startup", REPLY_TIMEOUT)
        self.size = 0

    def _read(self) -> None:
        assert self._child.stdout is not None
        for line in self._child.stdout:
            self._lines.put(line.rstrip("\n"))
        self._lines.put(None)

    def _expect_ok(self, what: str, timeout: float) -> tuple[list[str], str]:
        """Lines up to the closing ``ok ...``; raises on ``error`` or when the child ends."""
        lines: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"Java clients: no answer to {what} in {timeout:g} s") from None
            if line is None:
                self._log.flush()
                tail = Path(self._log.name).read_text(errors="replace").splitlines()[-15:]
                raise RuntimeError(
                    f"Java clients ended during {what} (exit {self._child.wait()}); the end of "
                    "their log:\n" + "\n".join(tail)
                )
            if line.startswith("ok"):
                return lines, line
            if line.startswith("error"):
                raise RuntimeError(f"Java clients: {what}: {line[6:]}")
            lines.append(line)

    def _command(self, line: str, timeout: float = REPLY_TIMEOUT) -> tuple[list[str], str]:
        assert self._child.stdin is not None
        self._child.stdin.write(line + "\n")
        self._child.stdin.flush()
        return self._expect_ok(line.split(" ", 1)[0], timeout)

    def open(self, uri: str, client_ids: Sequence[str]) -> None:
        """One connection per id on ``uri``; returns when every one is on a broker."""
        if any(" " in part for part in (uri, *client_ids)):
            raise ValueError("the URI and the client ids must not contain spaces")
        self._command(f"open {uri} {' '.join(client_ids)}")
        self.size += len(client_ids)

    def snapshot(self) -> Snapshot:
        lines, _ = self._command("report")
        current: list[int | None] = []
        histories: list[tuple[tuple[float, int], ...]] = []
        for line in lines:
            _, _, now, seen = line.split(" ")
            current.append(None if now == "-" else self._index_of(now))
            history: list[tuple[float, int]] = []
            for entry in seen.split(",") if seen != "-" else []:
                nanos, uri = entry.split("=", 1)
                index = self._index_of(uri)
                if index is not None:
                    history.append((int(nanos) / 1e9, index))
            histories.append(tuple(history))
        return Snapshot(tuple(current), tuple(histories))

    def status(self) -> tuple[float, int]:
        """(monotonic time of the last change of broker, clients on a broker now)."""
        _, line = self._command("status")
        _, _now, last, connected, _total = line.split(" ")
        return int(last) / 1e9, int(connected)

    def close(self) -> None:
        """Close the connections and end the child (killed if it does not end in time)."""
        try:
            if self._child.poll() is None:
                self._command("quit", timeout=30.0)
        except (RuntimeError, OSError) as exc:
            log(f"Java clients did not quit when asked ({exc}); ending the process")
        finally:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._child.wait(10.0)
            if self._child.poll() is None:
                self._child.kill()
                self._child.wait()
            self._log.close()
