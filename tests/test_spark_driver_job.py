"""DriverJob: a driver script in a process group of its own, its stdout line by line."""

from __future__ import annotations

import os
import select
import signal
import textwrap
from pathlib import Path

from failover_client.testing.spark import DriverJob

SAFETY = 60.0
"""Real seconds before a wait gives up (the scripts answer in milliseconds)."""


def script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_lines_arrive_in_order_and_follow_ends_with_the_job(tmp_path: Path) -> None:
    path = script(
        tmp_path,
        """
        import sys
        print("app one", flush=True)
        print("batch 0 5", flush=True)
        print("spark says", sys.argv[1], file=sys.stderr)
        print("batch 1 7", flush=True)
        """,
    )
    job = DriverJob(path, "hello", log=tmp_path / "driver.log")
    try:
        assert job.wait_line(lambda line: line.startswith("batch 1"), SAFETY) == "batch 1 7"
        assert list(job.follow(SAFETY)) == ["app one", "batch 0 5", "batch 1 7"]
        assert job.ended
        assert job.tail() == "app one\nbatch 0 5\nbatch 1 7\n--- driver log\nspark says hello"
    finally:
        job.kill()


def test_a_line_that_never_comes_is_none_once_the_job_ended(tmp_path: Path) -> None:
    job = DriverJob(script(tmp_path, 'print("only this")\n'))
    try:
        assert job.wait_line(lambda line: line == "never", SAFETY) is None
        assert job.printed() == ["only this"]
        assert job.tail() == "only this"
    finally:
        job.kill()


def test_kill_ends_the_whole_process_group(tmp_path: Path) -> None:
    path = script(
        tmp_path,
        """
        import signal, subprocess, sys
        # Both wait for a signal: only the kill of their process group ends them.
        child = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])
        print("child", child.pid, flush=True)
        signal.pause()
        """,
    )
    job = DriverJob(path)
    line = job.wait_line(lambda text: text.startswith("child "), SAFETY)
    assert line is not None
    child = os.pidfd_open(int(line.split()[1]))  # readable once that process has ended
    try:
        job.kill()
        assert job.process.returncode == -signal.SIGKILL
        assert job.ended
        # The child was in the job's process group: it ends with it.
        readable, _, _ = select.select([child], [], [], SAFETY)
        assert readable == [child]
    finally:
        os.close(child)
