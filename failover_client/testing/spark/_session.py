"""SparkSessions for tests: on loopback, UI off, the test's own interpreter on every side.

A test of a Spark job must not depend on the machine's network set-up or leave a web UI
listening, and its Python workers must run the interpreter that has the library installed. So
every session made here has ``SPARK_LOCAL_IP=127.0.0.1``, driver host and bind address
127.0.0.1, no UI, and ``PYSPARK_PYTHON`` set to ``sys.executable``. The JVM inherits the
environment of the first SparkContext's process, so :func:`prepare_environment` runs before
any session is built.

One JVM holds one SparkContext at a time: :class:`SparkSessions` keeps at most one session
alive and switches between local mode and a standalone cluster by stopping the other.
PySpark is imported by the functions that use it, so importing this module needs no Spark.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "LOCAL_MASTER",
    "SparkSessions",
    "local_session",
    "prepare_environment",
    "session_conf",
    "spark_environment",
]

LOCAL_MASTER = "local[2,4]"
"""Two task threads, and a failed task retried up to 4 attempts: plain ``local[2]`` never
retries a task, which would hide exactly the failures a cluster recovers from."""

LOOPBACK = "127.0.0.1"


def spark_environment() -> dict[str, str]:
    """Environment variables for every Spark process of a test (driver, master, workers)."""
    return {
        "SPARK_LOCAL_IP": LOOPBACK,
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


def prepare_environment() -> None:
    """Put :func:`spark_environment` into ``os.environ`` (before the first SparkContext)."""
    os.environ.update(spark_environment())


def session_conf(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The configuration of a test session: loopback only, no UI, few partitions."""
    conf = {
        "spark.driver.host": LOOPBACK,
        "spark.driver.bindAddress": LOOPBACK,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executorEnv.SPARK_LOCAL_IP": LOOPBACK,
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.python.worker.faulthandler.enabled": "true",
        "spark.log.level": "WARN",
    }
    conf.update(extra or {})
    return conf


def build_session(
    master: str, app_name: str, conf: Mapping[str, str] | None = None
) -> SparkSession:
    """A new SparkSession for ``master`` with :func:`session_conf` (and ``conf`` over it)."""
    from pyspark.sql import SparkSession  # noqa: PLC0415 - Spark only when a session is made

    prepare_environment()
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in session_conf(conf).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def local_session(
    master: str = LOCAL_MASTER,
    *,
    app_name: str = "failover-client-tests",
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """A local-mode SparkSession (``local[2,4]`` by default) bound to loopback, UI off."""
    return build_session(master, app_name, conf)


class SparkSessions:
    """The process's one live SparkSession, switched between masters on request.

    ``get(master)`` returns the live session when it runs on ``master``; otherwise it stops
    the live one and builds a new one. ``stop()`` ends it. Thread-safe.
    """

    def __init__(self, *, app_name: str = "failover-client-tests") -> None:
        self._app_name = app_name
        self._lock = threading.Lock()
        self._session: SparkSession | None = None
        self._master: str | None = None
        self._conf: dict[str, str] = {}

    def get(
        self, master: str = LOCAL_MASTER, conf: Mapping[str, str] | None = None
    ) -> SparkSession:
        wanted = dict(conf or {})
        with self._lock:
            if self._session is not None and (self._master, self._conf) == (master, wanted):
                return self._session
            if self._session is not None:
                self._session.stop()
                self._session = None
            self._session = build_session(master, self._app_name, wanted)
            self._master, self._conf = master, wanted
            return self._session

    def local(self, conf: Mapping[str, str] | None = None) -> SparkSession:
        return self.get(LOCAL_MASTER, conf)

    @property
    def master(self) -> str | None:
        """The master of the live session (None when none is alive)."""
        return self._master if self._session is not None else None

    def stop(self) -> None:
        with self._lock:
            session, self._session, self._master = self._session, None, None
        if session is not None:
            session.stop()

    def __repr__(self) -> str:
        return f"SparkSessions(master={self.master!r})"
