"""Spark for tests of Spark jobs: local sessions and a real standalone cluster, on loopback.

For this library's tests and for users testing their own jobs against brokers that fail
over (with :mod:`failover_client.testing.brokers`)::

    from failover_client.testing.spark import StandaloneCluster, local_session

    spark = local_session()                    # local[2,4], loopback, UI off
    ...
    with StandaloneCluster(tmp_path) as cluster:   # master + 2 workers from the pip install
        spark = cluster.session()

Faults from inside a task, at a chosen row, on the first attempt only (wrap them in a UDF):
:class:`FailFirstAttempt` raises there, :class:`NullOnFirstAttempt` nulls the value there
(failing the sink downstream exactly at that row), :class:`Tripwire` runs a callback in the
test process there (kill a broker mid-partition). :class:`LoopbackS3` is an S3-compatible
server on loopback for jobs that checkpoint on ``s3a://``. :class:`DriverJob` runs a driver
script in a process group of its own (one SIGKILL ends it with its JVM) and collects what it
prints.

The pytest fixtures are in :mod:`failover_client.testing.spark_fixtures`. Importing this
package needs no PySpark; building a session or a cluster does (the ``spark`` extra), and a
cluster needs a Java runtime (17 or later) on the PATH.
"""

from __future__ import annotations

from failover_client.testing.spark._faults import (
    FailFirstAttempt,
    InjectedFailure,
    NullOnFirstAttempt,
    Trip,
    Tripwire,
)
from failover_client.testing.spark._job import DriverJob
from failover_client.testing.spark._s3 import LoopbackS3
from failover_client.testing.spark._session import (
    LOCAL_MASTER,
    SparkSessions,
    local_session,
    prepare_environment,
    session_conf,
    spark_environment,
)
from failover_client.testing.spark._standalone import (
    SparkClusterError,
    StandaloneCluster,
    executor_pids,
    spark_home,
)

__all__ = [
    "LOCAL_MASTER",
    "DriverJob",
    "FailFirstAttempt",
    "InjectedFailure",
    "LoopbackS3",
    "NullOnFirstAttempt",
    "SparkClusterError",
    "SparkSessions",
    "StandaloneCluster",
    "Trip",
    "Tripwire",
    "executor_pids",
    "local_session",
    "prepare_environment",
    "session_conf",
    "spark_environment",
    "spark_home",
]
