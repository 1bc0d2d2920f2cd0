"""pytest plugin: real broker clusters shared by a session, healed before every test.

Fixtures:

* ``broker_cluster(kind, size=..., **spec)`` -> ``Cluster``: a factory; equal specs share one
  running cluster for the whole session (fresh destinations per test keep tests apart);
* ``activemq_cluster`` (3 independent brokers), ``activemq_network`` (3 brokers in a full mesh
  network that advertises ``stomp://``), ``rabbitmq_cluster`` (2 nodes), ``artemis_cluster``
  (2 containers; Docker only);
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
from pathlib import Path
from typing import Any

import pytest

from ._backend import BACKENDS, start_cluster
from ._broker import Broker
from ._cluster import Cluster
from ._errors import BackendUnavailable, BrokerError
from ._model import BrokerKind, ClusterSpec

__all__ = [
    "ClusterPool",
    "activemq_cluster",
    "activemq_network",
    "artemis_cluster",
    "broker_cluster",
    "broker_pool",
    "rabbitmq_cluster",
    "unique_queue",
]

_USED_BROKERS = pytest.StashKey[list[Broker]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("brokers", "real-broker harness (integration/)")
    group.addoption(
        "--broker-backend",
        choices=BACKENDS,
        default=None,
        help="how to run brokers: local processes, docker containers, or auto "
        "(default: $FAILOVER_BROKER_BACKEND, else auto)",
    )


def pytest_configure(config: pytest.Config) -> None:
    # Registered here too so that the plugin works under --strict-markers on its own.
    config.addinivalue_line("markers", "integration: needs real brokers (the integration harness)")
    config.addinivalue_line("markers", "docker: needs a Docker engine; skipped without one")


class ClusterPool:
    """Running clusters by spec, started on first use and closed at the end."""

    def __init__(self, root: Path, backend: str | None = None) -> None:
        self.root = root
        self.backend = backend
        self._clusters: dict[tuple[ClusterSpec, str | None], Cluster] = {}
        self._unavailable: dict[tuple[ClusterSpec, str | None], BackendUnavailable] = {}

    def get(self, spec: ClusterSpec, backend: str | None = None) -> Cluster:
        """The running cluster for ``spec``; raises BackendUnavailable (and remembers it).

        ``backend`` overrides the session's choice for this cluster.
        """
        key = (spec, backend or self.backend)
        if key in self._unavailable:
            raise self._unavailable[key]
        cluster = self._clusters.get(key)
        if cluster is None:
            directory = self.root / f"{spec.label}-{len(self._clusters)}"
            try:
                cluster = start_cluster(spec, directory, key[1])
            except BackendUnavailable as exc:
                self._unavailable[key] = exc
                raise
            self._clusters[key] = cluster
        return cluster

    def close(self) -> None:
        errors = []
        for cluster in self._clusters.values():
            try:
                cluster.close()
            except BrokerError as exc:  # keep closing the others; report all at the end
                errors.append(str(exc))
        self._clusters.clear()
        if errors:
            raise BrokerError("some brokers had to be killed at session end: " + "; ".join(errors))

    def __repr__(self) -> str:
        return f"ClusterPool({list(self._clusters.values())!r})"


@pytest.fixture(scope="session")
def broker_pool(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ClusterPool]:
    pool = ClusterPool(
        tmp_path_factory.mktemp("brokers"), request.config.getoption("--broker-backend")
    )
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
    report = yield
    if report.failed:
        for broker in item.stash.get(_USED_BROKERS, []):
            title = f"broker log: {broker!r} ({broker.log_path})"
            report.sections.append((title, broker.log_tail()))
    return report
