"""Brokers in containers (testcontainers), for kinds with no local install (Artemis).

Same interface as the local brokers: kill = ``docker kill`` (SIGKILL), hang = ``docker pause``
(the cgroup freezer: connections stay open and go silent), stop / start keep the container and
so its data. Host ports come from the harness's block and are bound explicitly, so a broker
keeps its URI across restarts (Docker would pick new random ports on every start otherwise).

Nothing here can run without an engine: ``docker_missing()`` says why, and the tests skip.
"""

from __future__ import annotations

import functools
import gc
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._broker import START_TIMEOUT, STOP_TIMEOUT, Broker
from ._cluster import Cluster
from ._errors import BackendUnavailable, BrokerStartError
from ._model import BrokerKind, ClusterSpec, Endpoint
from ._ports import allocate_ports
from ._process import log_tail
from ._readiness import Deadline, stomp_connected, wait_until

__all__ = ["ContainerBroker", "build_docker_cluster", "docker_missing"]


@dataclass(frozen=True)
class _Image:
    name: str
    ports: dict[str, int]  # endpoint name -> container port
    env: dict[str, str]
    credentials: tuple[str, str] | None
    # How this broker is told that /queue/x is a point-to-point queue (see ContainerBroker).
    stomp_queue_headers: dict[str, str] = field(default_factory=dict)
    amqp_queue_capabilities: tuple[str, ...] = ()


DEFAULT_SOCKET = Path("/var/run/docker.sock")


@functools.lru_cache(maxsize=1)
def _engine_problem() -> str | None:
    # Imported here, not at the top: most runs never need Docker, and the library stays usable
    # (local backend) where the docker packages are not installed.
    try:
        import docker  # noqa: PLC0415 - optional, see above
        from docker.errors import DockerException  # noqa: PLC0415 - optional
        from requests.exceptions import RequestException  # noqa: PLC0415 - optional
    except ImportError as exc:
        return f"the docker / testcontainers packages are not installed ({exc})"
    if not os.environ.get("DOCKER_HOST") and not DEFAULT_SOCKET.exists():
        return f"no Docker engine answers (DOCKER_HOST is unset and {DEFAULT_SOCKET} is missing)"
    # docker-py leaks the socket of a failed connect; its ResourceWarning would surface later
    # in an unrelated test (warnings are errors there), so it is collected here, silenced.
    problem: str | None = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            client = docker.from_env(timeout=2)
            try:
                client.ping()
            finally:
                client.close()
        except (DockerException, RequestException, OSError) as exc:
            problem = f"no Docker engine answers (docker.from_env(timeout=2).ping(): {exc})"
        gc.collect()
    return problem


@functools.cache
def _image_for(kind: BrokerKind) -> _Image:
    images = {
        BrokerKind.ARTEMIS: _Image(
            os.environ.get("FAILOVER_ARTEMIS_IMAGE", "apache/activemq-artemis:latest"),
            # One acceptor per protocol in the image's default broker.xml.
            {"stomp": 61613, "amqp": 5672, "tcp": 61616},
            {"ARTEMIS_USER": "artemis", "ARTEMIS_PASSWORD": "artemis"},
            ("artemis", "artemis"),
            # Artemis auto-creates addresses MULTICAST unless told otherwise; a queue that
            # drops what was sent before the first subscriber would make counts lie.
            {"destination-type": "ANYCAST", "subscription-type": "ANYCAST"},
            ("queue",),
        ),
        BrokerKind.ACTIVEMQ: _Image(
            os.environ.get("FAILOVER_ACTIVEMQ_IMAGE", "apache/activemq-classic:latest"),
            {"stomp": 61613, "amqp": 5672, "tcp": 61616},
            {},
            None,
        ),
    }
    try:
        return images[kind]
    except KeyError:
        raise BackendUnavailable(
            f"the docker backend has no image set up for {kind.value}"
        ) from None


def docker_missing(kind: BrokerKind) -> str | None:
    """Why ``kind`` cannot run in a container here, or None when it can."""
    problem = _engine_problem()
    if problem is not None:
        return problem
    try:
        _image_for(kind)
    except BackendUnavailable as exc:
        return str(exc)
    return None


class ContainerBroker(Broker):
    """One broker container."""

    def __init__(
        self, kind: BrokerKind, name: str, base_dir: Path, image: _Image, host_ports: dict[str, int]
    ) -> None:
        from testcontainers.core.container import (  # noqa: PLC0415 - optional, see _engine_problem
            DockerContainer,
        )

        self.kind = kind
        self.credentials = image.credentials
        self.amqp_queue_capabilities = image.amqp_queue_capabilities
        self._queue_headers = image.stomp_queue_headers
        container = DockerContainer(image.name)
        for key, container_port in image.ports.items():
            container = container.with_bind_ports(container_port, host_ports[key])
        for env_name, value in image.env.items():
            container = container.with_env(env_name, value)
        self._tc = container
        host = container.get_container_host_ip()
        super().__init__(name, {k: Endpoint(k, host, p) for k, p in host_ports.items()})
        self.base_dir = base_dir
        base_dir.mkdir(parents=True, exist_ok=True)
        self._log_path = base_dir / "broker.log"
        self._created = False

    def _wrapped(self) -> Any:
        return self._tc.get_wrapped_container()

    @property
    def pid(self) -> int | None:
        if not self.running():
            return None
        pid = self._wrapped().attrs["State"]["Pid"]
        return int(pid) if pid else None

    @property
    def log_path(self) -> Path:
        return self._log_path

    def log_tail(self, lines: int = 60) -> str:
        if self._created:
            self._log_path.write_bytes(self._wrapped().logs())
        return log_tail(self._log_path, lines)

    def running(self) -> bool:
        if not self._created:
            return False
        wrapped = self._wrapped()
        wrapped.reload()
        return wrapped.status in ("running", "paused")

    def launch(self) -> None:
        self.hung = False
        if self._created:
            self._wrapped().start()  # same container: same data
        else:
            self._tc.start()
            self._created = True

    def _declare_headers(self, destination: str) -> dict[str, str]:
        return dict(self._queue_headers) if destination.startswith("/queue/") else {}

    def probe(self, timeout: float = 1.0) -> bool:
        stomp = self.endpoint("stomp")
        login, passcode = self.credentials or (None, None)
        return stomp_connected(stomp.host, stomp.port, timeout, login=login, passcode=passcode)

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        def exited() -> str | None:
            return None if self.running() else "container is not running"

        # Bounded poll: the broker inside gives no sign of readiness but answering.
        reason = wait_until(lambda: self.probe(1.0), Deadline(timeout), step=0.2, give_up=exited)
        if reason is not None:
            raise BrokerStartError(self.name, f"{reason} ({timeout:.0f}s allowed)", self.log_tail())

    def _signal_kill(self) -> None:
        if self.running():
            self._wrapped().kill()

    def _signal_stop(self) -> None:
        self._wrapped().pause()

    def _signal_cont(self) -> None:
        self._wrapped().unpause()

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        if self.hung:
            self.resume()
        if self.running():
            self._wrapped().stop(timeout=int(timeout))

    def remove(self) -> None:
        """Delete the container (its data goes with it)."""
        if self._created:
            self.log_tail()  # keep the log beside the other brokers' logs
            self._tc.stop()
            self._created = False


def build_docker_cluster(spec: ClusterSpec, root: Path) -> Cluster:
    """Create (not start) ``spec.size`` broker containers."""
    problem = docker_missing(spec.kind)
    if problem is not None:
        raise BackendUnavailable(problem)
    if spec.network or spec.tls or spec.extra_connectors or spec.users or spec.max_page_size:
        raise BackendUnavailable(
            "the docker backend runs plain brokers only (no network, TLS, users or page size)"
        )
    image = _image_for(spec.kind)
    brokers: list[ContainerBroker] = []
    for i in range(spec.size):
        ports = allocate_ports(len(image.ports))
        host_ports = dict(zip(image.ports, ports, strict=True))
        name = f"{spec.label}-{i}"
        brokers.append(ContainerBroker(spec.kind, name, root / name, image, host_ports))

    def remove_all() -> None:
        for broker in brokers:
            broker.remove()

    return Cluster(spec, brokers, backend="docker", cleanups=[remove_all])
