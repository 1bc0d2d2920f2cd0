"""The repository's broker harness (``integration.brokers``), loaded at run time.

The demo runs real brokers through the harness the integration tests use. That harness lives
in the repository, not in the installed package, so it is imported by name when the demo runs
and typed here by the small part the demo uses.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, cast

__all__ = ["BrokerHandle", "ClusterHandle", "HarnessMissing", "load_harness", "start_network"]


class HarnessMissing(RuntimeError):
    """The harness (or the brokers it needs) is not available here; the message says why."""


class BrokerHandle(Protocol):
    """One broker the harness started."""

    name: str
    hung: bool

    @property
    def pid(self) -> int | None: ...

    def running(self) -> bool: ...

    def kill(self) -> None: ...

    def hang(self) -> None: ...

    def resume(self) -> None: ...

    def start(self, timeout: float = ...) -> None: ...

    def uri(self, name: str = ...) -> str: ...

    def drain(
        self, destination: str, timeout: float = ..., idle: float = ..., expect: int | None = ...
    ) -> list[Any]: ...


class ClusterHandle(Protocol):
    """A started group of brokers."""

    def __len__(self) -> int: ...

    def __iter__(self) -> Iterator[BrokerHandle]: ...

    def __getitem__(self, index: int) -> BrokerHandle: ...

    def heal(self, timeout: float = ...) -> list[str]: ...

    def close(self, timeout: float = ...) -> None: ...


def load_harness() -> ModuleType:
    """Import ``integration.brokers``; from a checkout also when run from another directory."""
    try:
        return importlib.import_module("integration.brokers")
    except ImportError:
        pass
    # An editable install runs the package from the checkout: the harness sits beside it.
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "integration" / "brokers.py").is_file():
        sys.path.insert(0, str(checkout))
        return importlib.import_module("integration.brokers")
    raise HarnessMissing(
        "the demo needs the repository's broker harness (integration/): run it from a "
        "checkout of failover-client, e.g. with: bash .ci/demo"
    )


def start_network(size: int, root: Path, backend: str | None) -> ClusterHandle:
    """Start ``size`` ActiveMQ Classic brokers in a full-mesh network of brokers under ``root``.

    Raises :class:`HarnessMissing` when this machine cannot run them (the reason included).
    """
    harness = load_harness()
    spec = harness.ClusterSpec("activemq", size=size, network=True, advertise="stomp")
    try:
        cluster = harness.start_cluster(spec, root, backend)
    except harness.BackendUnavailable as exc:
        raise HarnessMissing(f"{exc} (bash .ci/install-brokers installs them)") from exc
    return cast("ClusterHandle", cluster)


def broker_ports(cluster: Sequence[BrokerHandle] | ClusterHandle) -> list[int]:
    """Each broker's STOMP port, in cluster order."""
    ports = []
    for broker in cluster:
        authority = broker.uri("stomp").rsplit("/", 1)[-1]
        ports.append(int(authority.rsplit(":", 1)[-1]))
    return ports
