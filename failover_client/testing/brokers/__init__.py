"""Real brokers for tests, demos and benchmarks: start clusters, kill, hang and restart them.

Usable as a plain library and, for pytest, through the opt-in fixtures of
:mod:`failover_client.testing.broker_fixtures` (``pytest --failover-brokers``, the ini key
``failover_brokers = true``, or ``pytest_plugins = ["failover_client.testing.broker_fixtures"]``
in a conftest). A minimal script::

    import tempfile
    from pathlib import Path
    from failover_client.testing.brokers import ClusterSpec, start_cluster

    cluster = start_cluster(ClusterSpec("activemq", size=3), Path(tempfile.mkdtemp()))
    try:
        print(cluster.failover_uri("stomp"))
        cluster[0].kill()
        cluster[0].start()
    finally:
        cluster.close()

Brokers run as local processes (ActiveMQ Classic and RabbitMQ from their Debian packages) or in
containers (``testcontainers``; Artemis only runs there). A broker counts as started only when
it answers its protocol on ports that its own process holds, so a broker left over from another
run on a reused port is reported, never mistaken for the new one.

Importing this package needs no third-party library: stomp.py, python-qpid-proton,
testcontainers, trustme and cryptography are imported by the functions that use them (the
``test`` extra installs them all).

Every process started is stopped by ``cluster.close()``, and as a last resort at interpreter
exit or on SIGTERM / SIGHUP (``kill_all``).
"""

from __future__ import annotations

from ._activemq import FAST_JVM_OPTIONS
from ._amqp_client import amqp_drain, amqp_send
from ._amqp_peer import AmqpPeer
from ._amqp_peer_config import (
    AMQP_REDIRECT,
    FAILOVER_SERVER_LIST,
    AmqpPeerConfig,
    PeerCondition,
    PeerMessage,
    PeerOpen,
    PeerOutcome,
    artemis_server_list,
    redirect_condition,
    router_server_list,
)
from ._backend import BACKEND_ENV, BACKENDS, choose_backend, start_cluster
from ._broker import Broker
from ._cluster import Cluster
from ._errors import (
    BackendUnavailable,
    BrokerError,
    BrokerStartError,
    BrokerStopError,
    ClientError,
    PortTakenError,
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
from ._pool import ClusterPool
from ._ports import allocate_ports
from ._process import kill_all
from ._proxy import TO_BROKER, TO_CLIENT, Direction, FaultProxy, proxied_failover_uri
from ._readiness import amqp_open, stomp_connected, tcp_accepts
from ._shared_store import SharedStoreCluster
from ._stomp_client import StompClient
from ._tls import broker_tls, fresh_ca_and_broker_tls

__all__ = [
    "AMQP_REDIRECT",
    "BACKENDS",
    "BACKEND_ENV",
    "FAILOVER_SERVER_LIST",
    "FAST_JVM_OPTIONS",
    "TO_BROKER",
    "TO_CLIENT",
    "AmqpPeer",
    "AmqpPeerConfig",
    "BackendUnavailable",
    "Broker",
    "BrokerError",
    "BrokerKind",
    "BrokerStartError",
    "BrokerStopError",
    "BrokerUser",
    "ClientError",
    "Cluster",
    "ClusterPool",
    "ClusterSpec",
    "Connector",
    "Direction",
    "Endpoint",
    "FaultProxy",
    "LocalBroker",
    "PeerCondition",
    "PeerMessage",
    "PeerOpen",
    "PeerOutcome",
    "PortTakenError",
    "ReceivedMessage",
    "SharedStoreCluster",
    "StompClient",
    "TlsOptions",
    "allocate_ports",
    "amqp_drain",
    "amqp_open",
    "amqp_send",
    "artemis_server_list",
    "broker_tls",
    "choose_backend",
    "fresh_ca_and_broker_tls",
    "kill_all",
    "proxied_failover_uri",
    "redirect_condition",
    "router_server_list",
    "start_cluster",
    "stomp_connected",
    "tcp_accepts",
]
