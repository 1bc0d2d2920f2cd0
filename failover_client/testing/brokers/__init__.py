"""Real brokers for tests, demos and benchmarks: start clusters, kill, hang and restart them.

Usable as a plain library (``from integration.brokers import start_cluster, ClusterSpec``)
and through the pytest plugin ``integration.plugin`` (fixtures that share running clusters
across a session). A minimal script::

    import tempfile
    from pathlib import Path
    from integration.brokers import ClusterSpec, start_cluster

    cluster = start_cluster(ClusterSpec("activemq", size=3), Path(tempfile.mkdtemp()))
    try:
        print(cluster.failover_uri("stomp"))
        cluster[0].kill()
        cluster[0].start()
    finally:
        cluster.close()

Every process started is stopped by ``cluster.close()``, and as a last resort at interpreter
exit or on SIGTERM / SIGHUP (``kill_all``).
"""

from __future__ import annotations

from ._backend import BACKEND_ENV, BACKENDS, choose_backend, start_cluster
from ._broker import Broker
from ._clients import StompSession
from ._cluster import Cluster
from ._errors import (
    BackendUnavailable,
    BrokerError,
    BrokerStartError,
    BrokerStopError,
    ClientError,
)
from ._local import LocalBroker
from ._model import (
    BrokerKind,
    BrokerUser,
    ClusterSpec,
    Connector,
    Endpoint,
    ReceivedMessage,
    TlsOptions,
)
from ._ports import allocate_ports
from ._process import kill_all
from ._readiness import amqp_open, stomp_connected, tcp_accepts

__all__ = [
    "BACKENDS",
    "BACKEND_ENV",
    "BackendUnavailable",
    "Broker",
    "BrokerError",
    "BrokerKind",
    "BrokerStartError",
    "BrokerStopError",
    "BrokerUser",
    "ClientError",
    "Cluster",
    "ClusterSpec",
    "Connector",
    "Endpoint",
    "LocalBroker",
    "ReceivedMessage",
    "StompSession",
    "TlsOptions",
    "allocate_ports",
    "amqp_open",
    "choose_backend",
    "kill_all",
    "start_cluster",
    "stomp_connected",
    "tcp_accepts",
]
