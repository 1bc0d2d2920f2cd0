"""Running clusters shared by spec, so a test session starts each kind of cluster once."""

from __future__ import annotations

from pathlib import Path

from ._backend import start_cluster
from ._cluster import Cluster
from ._errors import BackendUnavailable, BrokerError
from ._model import ClusterSpec

__all__ = ["ClusterPool"]


class ClusterPool:
    """Running clusters by spec, started on first use and closed together at the end.

    A spec that cannot run here is remembered with its reason, so a session asks the backends
    once and every later request fails at once with the same ``BackendUnavailable``.
    """

    def __init__(self, root: Path, backend: str | None = None) -> None:
        self.root = root
        self.backend = backend
        self._clusters: dict[tuple[ClusterSpec, str | None], Cluster] = {}
        self._unavailable: dict[tuple[ClusterSpec, str | None], BackendUnavailable] = {}

    def get(self, spec: ClusterSpec, backend: str | None = None) -> Cluster:
        """The running cluster for ``spec``; raises BackendUnavailable (and remembers it).

        ``backend`` overrides the pool's choice for this cluster.
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
        """Stop every cluster; raise once all are down if any broker had to be killed."""
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
