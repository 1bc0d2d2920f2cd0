"""A Spark driver program run as a job of its own: :class:`DriverJob`.

A test that kills the driver (a driver crash, a restart from the checkpoint) cannot run the
query in its own process: it starts a script with ``python script.py args...`` in a process
group of its own, so one SIGKILL ends the Python driver, the JVM it started and their
children, as a crashed machine would. What the script prints on stdout arrives here line by
line (a thread reads it, so a chatty driver never blocks on a full pipe); its stderr, Spark's
log, goes to a file when one is given, for the failure report (:meth:`DriverJob.tail`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

__all__ = ["DriverJob"]

KILL_WAIT = 60.0
"""Seconds :meth:`DriverJob.kill` waits for the process group to be reaped and stdout read."""


class DriverJob:
    """``python script *args`` in a process group of its own; stdout collected line by line.

    ``log``: where its stderr goes (None: discarded). Each line is kept stripped in
    :attr:`lines`, in order; :meth:`wait_line` waits for one that matches, :meth:`follow`
    yields them as they come.
    """

    def __init__(
        self, script: Path, *args: str, log: Path | None = None, python: str = sys.executable
    ) -> None:
        self._cond = threading.Condition()
        self.lines: list[str] = []
        """Every line printed so far (from another thread, take a copy: :meth:`printed`)."""
        self.ended = False
        """The job closed its stdout (it exited, or was killed)."""
        self.log = log
        with contextlib.ExitStack() as stack:
            errors = stack.enter_context(log.open("w")) if log is not None else subprocess.DEVNULL
            self.process = subprocess.Popen(  # noqa: S603 - the test's own script, no shell
                [python, str(script), *args],
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
                start_new_session=True,
            )
        self._pump_thread = threading.Thread(
            target=self._pump, name=f"job-{self.process.pid}-stdout", daemon=True
        )
        self._pump_thread.start()

    def _pump(self) -> None:
        assert self.process.stdout is not None
        with self.process.stdout:
            for line in self.process.stdout:  # ends when the job closes stdout (exit, kill)
                with self._cond:
                    self.lines.append(line.strip())
                    self._cond.notify_all()
        with self._cond:
            self.ended = True
            self._cond.notify_all()

    def printed(self) -> list[str]:
        """A copy of the lines printed so far."""
        with self._cond:
            return list(self.lines)

    def wait_line(self, matches: Callable[[str], bool], timeout: float) -> str | None:
        """The first line so far or to come that ``matches`` (None if the job ended or
        ``timeout`` seconds passed first)."""
        with self._cond:
            self._cond.wait_for(lambda: self.ended or any(map(matches, self.lines)), timeout)
            return next(filter(matches, self.lines), None)

    def follow(self, quiet: float) -> Iterator[str]:
        """Every line from the first, as it comes; ends once the job ended and all were
        yielded, or when no new line came for ``quiet`` seconds."""
        index = 0
        while True:
            with self._cond:
                if not self._cond.wait_for(partial(self._beyond, index), quiet):
                    return
                if index >= len(self.lines):
                    return  # ended, everything yielded
                line = self.lines[index]
            index += 1
            yield line

    def _beyond(self, index: int) -> bool:
        """Whether a line past ``index`` came, or the job ended (under the condition)."""
        return self.ended or len(self.lines) > index

    def tail(self, lines: int = 40) -> str:
        """The last lines it printed and (with a ``log``) of its log, for a failure report."""
        printed = self.printed()[-lines:]
        if self.log is None:
            return "\n".join(printed)
        logged = self.log.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join([*printed, "--- driver log", *logged])

    def kill(self) -> None:
        """SIGKILL the job's process group: the Python driver, its JVM, their children."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=KILL_WAIT)
        self._pump_thread.join(timeout=KILL_WAIT)

    def __repr__(self) -> str:
        state = "ended" if self.ended else "running"
        return f"DriverJob(pid={self.process.pid}, {state}, lines={len(self.printed())})"
