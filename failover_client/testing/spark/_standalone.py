"""A real Spark standalone cluster on loopback: one master and N workers from the pip install.

Local mode runs tasks as threads of the driver's JVM, with Python workers forked beside it:
nothing is pickled across hosts and every task shares one process tree. A standalone cluster
is what users scale to: executors in their own JVMs (launched by the workers), with their own
Python workers. That is where a writer that holds a socket fails to pickle, where a per-worker
connection cache is really per worker, and where a spool must be readable from elsewhere.

The PySpark wheel carries ``bin/spark-class`` (its ``sbin/`` has no start scripts), which is
enough: ``spark-class org.apache.spark.deploy.master.Master`` and ``...worker.Worker``, each
as a :class:`~failover_client.testing.brokers._process.ManagedProcess` (own process group,
killed with the test process, logs under the cluster's directory), on ports from the broker
harness's allocator. A worker's executors and their Python workers are in the worker's
process group, so stopping a worker ends them too.

Measured on 2 cores (PySpark 4.3, Java 17): master and 2 workers ready in 6-16 s (slower
while brokers and other tests share the cores); about 250 MB resident per daemon JVM and
350 MB per executor JVM.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import sys
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from failover_client.testing.brokers._ports import allocate_ports
from failover_client.testing.brokers._process import ManagedProcess, log_tail
from failover_client.testing.brokers._readiness import Deadline, wait_until
from failover_client.testing.spark._session import LOOPBACK, SparkSessions, spark_environment

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SparkClusterError", "StandaloneCluster", "executor_pids", "spark_home"]

_EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def executor_pids(app_id: str, proc: Path = Path("/proc")) -> list[int]:
    """The pids of the executor JVMs of application ``app_id`` on this machine (Linux), sorted.

    Read from each process's command line (``... CoarseGrainedExecutorBackend ... --app-id
    <app_id> ...``): application ids are unique per master, so another cluster's executors,
    or another application's, are never matched.
    """
    found = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:  # the process ended meanwhile, or is not ours to read
            continue
        words = [word.decode(errors="replace") for word in argv]
        if _EXECUTOR_CLASS not in words or "--app-id" not in words:
            continue
        position = words.index("--app-id") + 1
        if position < len(words) and words[position] == app_id:
            found.append(int(entry.name))
    return sorted(found)


START_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0

# Daemons start faster on the client compiler and a small serial heap; they schedule, they
# do not compute.
_DAEMON_JAVA_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


class SparkClusterError(RuntimeError):
    """The cluster did not start (the message carries the logs' tails)."""


def spark_home() -> Path:
    """The installed ``pyspark`` package folder, which is a SPARK_HOME (it has bin/, jars/)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SparkClusterError("pyspark is not installed: pip install 'failover-client[spark]'")
    return Path(next(iter(spec.submodule_search_locations)))


class StandaloneCluster:
    """A master and ``workers`` workers on loopback, each worker offering ``cores`` cores.

    Use as a context manager, or :meth:`start` / :meth:`stop`. :meth:`session` returns a
    SparkSession running on it (executors of ``executor_memory``, one per worker).
    """

    def __init__(
        self,
        directory: Path,
        *,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        executor_memory: str = "512m",
    ) -> None:
        if workers < 1 or cores < 1:
            raise ValueError("a cluster needs at least one worker with at least one core")
        self.directory = directory
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.executor_memory = executor_memory
        ports = allocate_ports(2 + 2 * workers)
        self.port, self.web_port = ports[0], ports[1]
        self._worker_ports = [(ports[2 + 2 * i], ports[3 + 2 * i]) for i in range(workers)]
        self._processes: list[ManagedProcess] = []

    @property
    def master_url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    @property
    def web_url(self) -> str:
        return f"http://{LOOPBACK}:{self.web_port}"

    # --- lifecycle ------------------------------------------------------------------------

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Launch the master and the workers; return when every worker registered ALIVE."""
        if self._processes:
            raise SparkClusterError(f"{self!r} is already started")
        home = spark_home()
        env = self._environment(home)
        spark_class = str(home / "bin" / "spark-class")
        logs = self.directory / "logs"
        master = ManagedProcess(
            "spark-master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                LOOPBACK,
                "--port",
                str(self.port),
                "--webui-port",
                str(self.web_port),
            ],
            logs / "master.log",
            env=env,
            cwd=self.directory,
        )
        self._processes.append(master)
        master.spawn()
        for number, (port, web_port) in enumerate(self._worker_ports):
            worker = ManagedProcess(
                f"spark-worker-{number}",
                [
                    spark_class,
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    LOOPBACK,
                    "--port",
                    str(port),
                    "--webui-port",
                    str(web_port),
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--work-dir",
                    str(self.directory / f"work-{number}"),
                    self.master_url,
                ],
                logs / f"worker-{number}.log",
                env=env,
                cwd=self.directory,
            )
            self._processes.append(worker)
            worker.spawn()
        self._wait_ready(timeout)

    def _environment(self, home: Path) -> dict[str, str]:
        env = dict(os.environ)
        env.update(spark_environment())
        env.update(
            SPARK_HOME=str(home),
            SPARK_LOG_DIR=str(self.directory / "logs"),
            SPARK_PID_DIR=str(self.directory),
            SPARK_DAEMON_MEMORY="256m",
            SPARK_DAEMON_JAVA_OPTS=_DAEMON_JAVA_OPTS,
            SPARK_NO_DAEMONIZE="1",
        )
        return env

    def _wait_ready(self, timeout: float) -> None:
        def ready() -> bool:
            state = self.state()
            return state is not None and state.get("aliveworkers", 0) >= self.workers

        def gone() -> str | None:
            for process in self._processes:
                code = process.exit_code()
                if code is not None:
                    return f"{process.name} exited with status {code}"
            return None

        # Bounded poll (see brokers._readiness.wait_until): the master offers no event.
        reason = wait_until(ready, Deadline(timeout), step=0.2, give_up=gone)
        if reason is not None:
            tails = self.log_tails()
            self.stop()
            raise SparkClusterError(f"the Spark cluster did not start: {reason}\n{tails}")

    def state(self) -> dict[str, Any] | None:
        """The master's status (its web UI's JSON), or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.web_url}/json/", timeout=2) as answer:  # noqa: S310 - our own loopback URL
                data: dict[str, Any] = json.load(answer)
        except (OSError, ValueError):
            return None
        return data

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop the workers (with their executors), then the master; kill what does not stop."""
        for process in reversed(self._processes):
            process.terminate(timeout)
        self._processes.clear()

    def running(self) -> bool:
        return bool(self._processes) and all(p.running() for p in self._processes)

    def kill_executor(self, app_id: str) -> int:
        """SIGKILL one executor JVM of application ``app_id`` (the oldest); returns its pid.

        Its running tasks fail and Spark retries them; the worker reports the loss and the
        master starts a new executor for the application.
        """
        pids = executor_pids(app_id)
        if not pids:
            raise SparkClusterError(f"application {app_id} has no executor on this machine")
        os.kill(pids[0], signal.SIGKILL)
        return pids[0]

    def __enter__(self) -> StandaloneCluster:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # --- sessions and diagnostics ------------------------------------------------------------

    def session_conf(self, conf: Mapping[str, str] | None = None) -> dict[str, str]:
        """Conf for a session on this cluster: one executor per worker, ``executor_memory``."""
        settings = {
            "spark.executor.memory": self.executor_memory,
            "spark.executor.cores": str(self.cores),
            "spark.cores.max": str(self.cores * self.workers),
            "spark.task.maxFailures": "4",
            "spark.pyspark.python": sys.executable,
        }
        settings.update(conf or {})
        return settings

    def session(
        self, sessions: SparkSessions | None = None, conf: Mapping[str, str] | None = None
    ) -> SparkSession:
        """A SparkSession on this cluster (through ``sessions``, which keeps one alive)."""
        manager = sessions or SparkSessions()
        return manager.get(self.master_url, self.session_conf(conf))

    def log_tails(self, lines: int = 30) -> str:
        """The last lines of the master's and workers' logs, for a failure report."""
        parts = []
        for path in sorted((self.directory / "logs").glob("*.log")):
            parts.append(f"--- {path.name}\n{log_tail(path, lines)}")
        return "\n".join(parts)

    def __repr__(self) -> str:
        state = "running" if self.running() else "stopped"
        return f"<StandaloneCluster {self.master_url} workers={self.workers} {state}>"
