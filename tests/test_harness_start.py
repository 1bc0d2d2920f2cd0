"""start_cluster: a port taken by another process meanwhile means new ports, not a failure."""

from __future__ import annotations

from pathlib import Path

import pytest

from failover_client.testing.brokers import BrokerStartError, ClusterSpec, PortTakenError, _backend


class _FakeCluster:
    """Enough of a Cluster for start_cluster: start() may fail, kill/close are recorded."""

    def __init__(self, root: Path, error: BaseException | None) -> None:
        self.root = root
        self.error = error
        self.closed = False

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(())

    def start(self) -> None:
        if self.error is not None:
            raise self.error

    def close(self) -> None:
        self.closed = True


def _with_starts(monkeypatch: pytest.MonkeyPatch, errors: list[BaseException | None]) -> list:
    built: list[_FakeCluster] = []

    def build(spec: ClusterSpec, root: Path) -> _FakeCluster:
        built.append(_FakeCluster(root, errors[len(built)]))
        return built[-1]

    monkeypatch.setattr(_backend, "choose_backend", lambda kind, requested=None: "local")
    monkeypatch.setitem(_backend._LOCAL, _backend.BrokerKind.ACTIVEMQ, (lambda: None, build))
    return built


def _taken() -> PortTakenError:
    return PortTakenError("activemq-0", 30607, "pid 1 (beam.smp)", "")


def test_a_port_taken_meanwhile_starts_the_cluster_again_on_new_ports(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    built = _with_starts(monkeypatch, [_taken(), None])
    cluster = _backend.start_cluster(ClusterSpec("activemq", size=1), tmp_path)
    assert cluster is built[1]
    assert built[0].closed
    assert [c.root for c in built] == [tmp_path, tmp_path / "retry-2"]


def test_a_port_taken_every_time_is_reported_after_the_last_attempt(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _with_starts(monkeypatch, [_taken()] * _backend.PORT_ATTEMPTS)
    with pytest.raises(PortTakenError):
        _backend.start_cluster(ClusterSpec("activemq", size=1), tmp_path)


def test_any_other_start_failure_is_not_retried(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    built = _with_starts(monkeypatch, [BrokerStartError("activemq-0", "exited", ""), None])
    with pytest.raises(BrokerStartError):
        _backend.start_cluster(ClusterSpec("activemq", size=1), tmp_path)
    assert len(built) == 1
