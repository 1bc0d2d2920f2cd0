"""pytest fixtures: real broker clusters shared by a session, healed before every test.

Registered only on request (see :mod:`failover_client.testing.pytest_plugin`):
``pytest --failover-brokers``, ``failover_brokers = true`` in the ini file, or
``pytest_plugins = ["failover_client.testing.broker_fixtures"]`` in a root conftest. A test
of an application's failover then reads::

    def test_sends_survive_a_broker_kill(activemq_cluster, unique_queue):
        with FailoverConnection(activemq_cluster.failover_uri()) as conn:
            conn.send(unique_queue, "before")
            activemq_cluster[0].kill()
            conn.send(unique_queue, "after")  # confirmed by another broker

Fixtures:

* ``broker_cluster(kind, size=..., **spec)`` -> ``Cluster``: a factory; equal specs share one
  running cluster for the whole session (fresh destinations per test keep tests apart);
* ``activemq_cluster`` (3 independent brokers), ``activemq_network`` (3 brokers in a full mesh
  network that advertises ``stomp://``), ``activemq_master_slave`` (a shared-storage pair:
  ``cluster.master()`` answers, the other waits on the store's lock), ``rabbitmq_cluster``
  (2 nodes), ``artemis_cluster`` (2 containers; Docker only);
* ``unique_queue``: ``/queue/<test name>-<random>``;
* ``broker_pool``: the session's ``ClusterPool`` (for specs the factory does not cover).

Before a test gets a cluster, every broker in it is made healthy again (a hung one resumed, a
dead one restarted), so a test may kill, hang or stop brokers and leave them that way.
A cluster that cannot run here (not installed, no Docker engine) makes the test SKIP with the
reason. When a test that used brokers fails, the tail of each one's log is added to its report.

Options: ``--broker-backend=auto|local|docker`` (else ``$FAILOVER_BROKER_BACKEND``, else auto).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

from failover_client.testing.brokers import (
    BackendUnavailable,
    Broker,
    BrokerKind,
    Cluster,
    ClusterPool,
    ClusterSpec,
    SharedStoreCluster,
)

__all__ = [
    "activemq_cluster",
    "activemq_master_slave",
    "activemq_network",
    "artemis_cluster",
    "broker_cluster",
    "broker_pool",
    "pytest_configure",
    "pytest_runtest_makereport",
    "rabbitmq_cluster",
    "unique_queue",
]

_USED_BROKERS = pytest.StashKey[list[Broker]]()


def pytest_configure(config: pytest.Config) -> None:
    """Register the markers the harness's own tests use (so --strict-markers accepts them)."""
    config.addinivalue_line("markers", "integration: needs real brokers (the integration harness)")
    config.addinivalue_line("markers", "docker: needs a Docker engine; skipped without one")


@pytest.fixture(scope="session")
def broker_pool(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterPool]:
    """The session's running clusters, closed at the end of the session."""
    # The default covers a run where only this module was registered (pytest_plugins) and
    # the option-adding plugin was disabled: the backend then comes from the environment.
    backend = request.config.getoption("--broker-backend", default=None)
    pool = ClusterPool(tmp_path_factory.mktemp("brokers"), backend)
    yield pool
    pool.close()


@pytest.fixture
def broker_cluster(
    request: pytest.FixtureRequest, broker_pool: ClusterPool
) -> Callable[..., Cluster]:
    """Factory: ``broker_cluster("activemq", 3, network=True)`` -> a healthy shared Cluster.

    Keyword arguments are ``ClusterSpec`` fields, plus ``backend`` ("local" / "docker").
    """

    def get(
        kind: BrokerKind | str, size: int = 3, backend: str | None = None, **spec: Any
    ) -> Cluster:
        cluster_spec = ClusterSpec(BrokerKind(kind), size, **spec)
        try:
            cluster = broker_pool.get(cluster_spec, backend)
        except BackendUnavailable as exc:
            pytest.skip(str(exc))
        request.node.stash.setdefault(_USED_BROKERS, []).extend(cluster)
        cluster.heal()
        return cluster

    return get


@pytest.fixture
def activemq_cluster(broker_cluster: Callable[..., Cluster]) -> Cluster:
    """Three independent ActiveMQ Classic brokers."""
    return broker_cluster(BrokerKind.ACTIVEMQ, 3)


@pytest.fixture
def activemq_network(broker_cluster: Callable[..., Cluster]) -> Cluster:
    """Three ActiveMQ brokers in a full-mesh network of brokers, advertising stomp:// URIs."""
    return broker_cluster(BrokerKind.ACTIVEMQ, 3, network=True, advertise="stomp")


@pytest.fixture
def activemq_master_slave(broker_cluster: Callable[..., Cluster]) -> SharedStoreCluster:
    """Two ActiveMQ brokers on one KahaDB directory: the master answers, the slave waits on
    the store's lock (its ports refuse) until the master dies."""
    cluster = broker_cluster(BrokerKind.ACTIVEMQ, 2, shared_store=True)
    assert isinstance(cluster, SharedStoreCluster)
    return cluster


@pytest.fixture
def rabbitmq_cluster(broker_cluster: Callable[..., Cluster]) -> Cluster:
    """Two independent RabbitMQ nodes with STOMP and AMQP 1.0."""
    return broker_cluster(BrokerKind.RABBITMQ, 2)


@pytest.fixture
def artemis_cluster(broker_cluster: Callable[..., Cluster]) -> Cluster:
    """Two Artemis containers (skipped without a Docker engine)."""
    return broker_cluster(BrokerKind.ARTEMIS, 2)


@pytest.fixture
def unique_queue(request: pytest.FixtureRequest) -> str:
    """A queue destination no other test (or earlier run of this one) uses."""
    stem = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name).strip("-")[:40]
    return f"/queue/{stem}-{uuid.uuid4().hex[:8]}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Add the log tail of every broker the test used to the report of a failed test."""
    report = yield
    if report.failed:
        for broker in item.stash.get(_USED_BROKERS, []):
            title = f"broker log: {broker!r} ({broker.log_path})"
            report.sections.append((title, broker.log_tail()))
    return report
