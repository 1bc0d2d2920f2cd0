"""The code of README.md and the documentation site that needs real brokers, run as a user runs it.

``examples/quickstart.py`` (the quick start page shows it whole) starts two brokers of its own
with the shipped harness, kills one, and must end with every message received. Blocks marked
``<!-- run: brokers -->`` run the same way, in a fresh interpreter; blocks marked
``<!-- pytest: brokers -->`` are a user's own test file, run with ``pytest --failover-brokers``
from a directory with no conftest (tests/docblocks.py says how blocks are marked).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.docblocks import ROOT, Block, marked

pytestmark = pytest.mark.integration

# Safety nets against a hung run, not measurements: starting two or three brokers, a kill
# and the sends take well under a minute.
RUN_TIMEOUT = 300


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False
    )


def test_the_quick_start_script_survives_the_kill(tmp_path: Path) -> None:
    done = _run([sys.executable, str(ROOT / "examples" / "quickstart.py")], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("failed over: ") for line in lines), done.stdout
    assert lines[-1] == "every message received", done.stdout
    # The connection moved: the two "received" lines name different brokers.
    received = [line.rsplit(" ", 1)[1] for line in lines if line.startswith("received ")]
    assert len(received) == 2, done.stdout
    assert received[0] != received[1], done.stdout


@pytest.mark.parametrize("block", marked("run: brokers"), ids=lambda b: b.where)
def test_broker_block_runs(block: Block, tmp_path: Path) -> None:
    done = _run([sys.executable, "-c", block.code], tmp_path)
    assert done.returncode == 0, f"{block.where} failed:\n{done.stdout}{done.stderr}"


@pytest.mark.parametrize("block", marked("pytest: brokers"), ids=lambda b: b.where)
def test_users_test_block_passes(block: Block, tmp_path: Path) -> None:
    (tmp_path / "test_from_the_docs.py").write_text(block.code, encoding="utf-8")
    done = _run(
        [
            sys.executable, "-m", "pytest", "--failover-brokers", "-p", "no:cacheprovider",
            f"--basetemp={tmp_path / 'base'}", "-q", "test_from_the_docs.py",
        ],
        tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, f"{block.where} failed:\n{done.stdout}{done.stderr}"
    assert " passed" in done.stdout
    assert "failed" not in done.stdout
