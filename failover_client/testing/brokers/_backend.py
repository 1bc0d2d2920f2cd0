"""Which backend runs a cluster: local processes or containers.

Order of precedence: the ``backend`` argument (the pytest option ``--broker-backend``), then
the environment variable ``FAILOVER_BROKER_BACKEND``, then ``auto``. ``auto`` prefers local
processes (fast, no engine needed) and falls back to Docker; Artemis has no local install, so
for it ``auto`` means Docker. When nothing can run the kind, ``BackendUnavailable`` says why
(the pytest plugin turns that into a skip with that reason).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from ._activemq import activemq_missing, build_activemq_cluster
from ._cluster import Cluster
from ._docker import build_docker_cluster, docker_missing
from ._errors import BackendUnavailable, PortTakenError
from ._model import BrokerKind, ClusterSpec
from ._rabbitmq import build_rabbitmq_cluster, rabbitmq_missing

__all__ = ["BACKENDS", "BACKEND_ENV", "choose_backend", "start_cluster"]

_log = logging.getLogger(__name__)

BACKEND_ENV = "FAILOVER_BROKER_BACKEND"
BACKENDS = ("auto", "local", "docker")

_LOCAL: dict[BrokerKind, tuple[Callable[[], str | None], Callable[[ClusterSpec, Path], Cluster]]]
_LOCAL = {
    BrokerKind.ACTIVEMQ: (activemq_missing, build_activemq_cluster),
    BrokerKind.RABBITMQ: (rabbitmq_missing, build_rabbitmq_cluster),
}


def _local_missing(kind: BrokerKind) -> str | None:
    if kind not in _LOCAL:
        return f"{kind.value} has no local install (no Debian package); it needs Docker"
    return _LOCAL[kind][0]()


def choose_backend(kind: BrokerKind | str, requested: str | None = None) -> str:
    """``"local"`` or ``"docker"`` for ``kind``; raises BackendUnavailable with the reasons."""
    kind = BrokerKind(kind)
    choice = requested or os.environ.get(BACKEND_ENV) or "auto"
    if choice not in BACKENDS:
        source = "backend argument" if requested else BACKEND_ENV
        raise ValueError(f"{source}={choice!r}: choose one of {', '.join(BACKENDS)}")
    if choice in ("auto", "local"):
        local = _local_missing(kind)
        if local is None:
            return "local"
        if choice == "local":
            raise BackendUnavailable(f"local backend for {kind.value}: {local}")
    else:
        local = None
    remote = docker_missing(kind)
    if remote is None:
        return "docker"
    reasons = f"{local}; docker: {remote}" if local else remote
    raise BackendUnavailable(f"cannot run {kind.value} here: {reasons}")


PORT_ATTEMPTS = 3
"""Starts of a cluster, each on new ports, while another process takes one of its ports."""


def start_cluster(spec: ClusterSpec, root: Path, backend: str | None = None) -> Cluster:
    """Build and start the cluster ``spec`` under ``root``; brokers are ready on return.

    If start-up fails, whatever was started is stopped again before the error propagates.
    A port taken by another process between the probe and the broker's bind (two test runs
    on one machine start brokers at the same moment) is not this cluster's failure: it is
    built again on new ports (the allocator never hands out a port twice), in a fresh
    directory, up to ``PORT_ATTEMPTS`` times.
    """
    chosen = choose_backend(spec.kind, backend)
    for attempt in range(1, PORT_ATTEMPTS + 1):
        where = root if attempt == 1 else root / f"retry-{attempt}"
        if chosen == "local":
            cluster = _LOCAL[spec.kind][1](spec, where)
        else:
            cluster = build_docker_cluster(spec, where)
        try:
            cluster.start()
        except BaseException as exc:
            for broker in cluster:
                broker.kill()
            cluster.close()
            if isinstance(exc, PortTakenError) and attempt < PORT_ATTEMPTS:
                _log.warning("%s; starting %s again on other ports", exc.reason, spec.label)
                continue
            raise
        return cluster
    raise AssertionError("unreachable: the last attempt returns or raises")
