"""The demo end to end on real brokers: nothing confirmed is lost, and nothing is left running."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from failover_client.testing.brokers import choose_backend

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _demo(*args: str, **kwargs: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "failover_client.demo", "--plain", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        **kwargs,  # type: ignore[call-overload]
    )


@pytest.fixture
def activemq_installed() -> None:
    _skip_unless_installed("activemq")


@pytest.fixture
def rabbitmq_installed() -> None:
    _skip_unless_installed("rabbitmq")


def _skip_unless_installed(kind: str) -> None:
    try:
        choose_backend(kind, "local")
    except Exception as exc:
        pytest.skip(str(exc))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purposes (its parent has exited).
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()


def _pids(output: str) -> list[int]:
    return [int(p) for p in re.findall(r"\(pid (\d+)\)", output)]


@pytest.mark.usefixtures("activemq_installed")
def test_quick_demo_loses_nothing_and_draws_the_timeline(tmp_path: Path) -> None:
    out = tmp_path / "timeline.png"
    process = _demo("--quick", "--out", str(out), cwd=tmp_path)
    output, _ = process.communicate(timeout=150)
    assert process.returncode == 0, output
    assert "no confirmed message lost" in output
    summary = output.split("summary:\n")[1].splitlines()
    header, values = summary[0].split(), summary[1].split()
    assert header[:2] == ["sent", "confirmed"]
    assert values[5] == "0"  # lost
    assert int(values[1]) > 0  # confirmed
    assert "failed over A -> B" in output
    assert "back on priority broker A" in output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [pid for pid in _pids(output) if _alive(pid)]


@pytest.mark.usefixtures("rabbitmq_installed")
def test_quick_amqp_demo_on_rabbitmq_loses_nothing(tmp_path: Path) -> None:
    out = tmp_path / "timeline.png"
    process = _demo("--quick", "--protocol", "amqp", "--out", str(out), cwd=tmp_path)
    output, _ = process.communicate(timeout=240)
    assert process.returncode == 0, output
    assert "independent RabbitMQ nodes with AMQP 1.0" in output
    assert "producer: failover:(amqp://" in output
    assert "no confirmed message lost" in output
    summary = output.split("summary:\n")[1].splitlines()
    header, values = summary[0].split(), summary[1].split()
    assert header[:2] == ["sent", "confirmed"]
    assert values[5] == "0"  # lost
    assert int(values[1]) > 0  # confirmed
    assert int(values[3]) > 0  # received by the consumer, not only drained at the end
    assert "failed over A -> B" in output
    assert "back on priority broker A" in output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [pid for pid in _pids(output) if _alive(pid)]


@pytest.mark.usefixtures("activemq_installed")
def test_ctrl_c_stops_every_broker(tmp_path: Path) -> None:
    process = _demo("--quick", "--out", str(tmp_path / "t.png"), cwd=tmp_path)
    assert process.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 120
    for line in process.stdout:
        seen.append(line)
        if "traffic started" in line or time.monotonic() > deadline:
            break
    assert any("traffic started" in line for line in seen), "".join(seen)
    pids = _pids("".join(seen))
    assert len(pids) == 3
    process.send_signal(signal.SIGINT)
    rest, _ = process.communicate(timeout=60)
    assert process.returncode == 130, "".join(seen) + rest
    assert "interrupted" in rest
    assert not [pid for pid in pids if _alive(pid)]
    assert not (tmp_path / "t.png").exists()
