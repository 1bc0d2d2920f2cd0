"""pytest fixtures for Spark jobs: one SparkSession at a time, and a standalone cluster.

Register them in a conftest with ``pytest_plugins = ["failover_client.testing.spark_fixtures"]``
(or import the fixtures into it). Beside the broker fixtures
(:mod:`failover_client.testing.broker_fixtures`) a test of a job that must survive a broker
kill reads::

    def test_job(spark_local, activemq_cluster, unique_queue):
        register(spark_local)
        df.write.format("failover").option("uri", activemq_cluster.failover_uri())...

Fixtures:

* ``spark_sessions``: the session-wide :class:`SparkSessions` (one live SparkSession; asking
  for another master stops the current one), stopped at the end;
* ``spark_local``: a ``local[2,4]`` session on loopback;
* ``spark_standalone``: a real standalone cluster (master + 2 one-core workers) started on
  first use and stopped at the end of the session; its logs go to the test report's temp dir;
* ``spark_on_standalone``: a session running on that cluster.

Tests that use both deployments should group by deployment (e.g. a module-scoped
parametrized fixture), since switching costs a new SparkContext (a few seconds).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from failover_client.testing.spark import SparkSessions, StandaloneCluster

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "spark_each",
    "spark_local",
    "spark_on_standalone",
    "spark_sessions",
    "spark_standalone",
]


@pytest.fixture(scope="session")
def spark_sessions() -> Iterator[SparkSessions]:
    """The process's one live SparkSession, switched between masters; stopped at the end."""
    sessions = SparkSessions()
    yield sessions
    sessions.stop()


@pytest.fixture(scope="session")
def spark_standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A standalone cluster on loopback: a master and two workers of one core each."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"))
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture
def spark_local(spark_sessions: SparkSessions) -> SparkSession:
    """A ``local[2,4]`` SparkSession (shared; stops a cluster session if one is live)."""
    return spark_sessions.local()


@pytest.fixture
def spark_on_standalone(
    spark_sessions: SparkSessions, spark_standalone: StandaloneCluster
) -> SparkSession:
    """A SparkSession on the standalone cluster (shared; stops a local one if live)."""
    return spark_standalone.session(spark_sessions)


@pytest.fixture(scope="module", params=["local", "standalone"])
def spark_each(request: pytest.FixtureRequest, spark_sessions: SparkSessions) -> SparkSession:
    """A module's tests run twice: in ``local[2,4]``, then on the standalone cluster; the
    ``failover`` format is registered and Spark logs only errors."""
    from failover_client.spark import register  # noqa: PLC0415 - the data source under test

    if request.param == "local":
        session = spark_sessions.local()
    else:
        cluster = request.getfixturevalue("spark_standalone")
        session = cluster.session(spark_sessions)
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    return session
