"""Child processes that the harness owns: start, signal, stop, and never leak.

Each broker runs in its own session (``start_new_session=True``), so its pid is also its
process-group id and a signal to the group reaches every process it forked (RabbitMQ's
``erl_child_setup``, a JVM's children). That is what makes kill / hang / resume act on the
whole broker and not on a wrapper script.

Leaks are prevented on three paths:

* normal end: the owner (cluster, pytest session finalizer) stops what it started;
* interpreter exit and SIGTERM / SIGHUP: a registry of live groups is SIGKILLed from an
  ``atexit`` hook and from a signal handler that then hands the signal on;
* the test process itself SIGKILLed: children spawned from the main thread are started
  through ``setpriv --pdeathsig KILL`` (util-linux), so the kernel kills them with us. The
  kernel ties that signal to the *thread* that forked, so it is only set for spawns from the
  main thread, which lives as long as the process. (``setpriv`` execs the command, so the
  broker keeps the pid; a ``preexec_fn`` would do the same but is unsafe with threads.)
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import FrameType

__all__ = ["ManagedProcess", "kill_all", "log_tail"]


def log_tail(path: Path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file ('' when it does not exist yet)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read()
    except FileNotFoundError:
        return ""
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.splitlines()[-lines:])


def _pdeathsig_prefix() -> list[str]:
    """Command prefix that makes the kernel SIGKILL the child when we die (see above)."""
    if not sys.platform.startswith("linux"):
        return []
    if threading.current_thread() is not threading.main_thread():
        return []
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


class ManagedProcess:
    """One child process group whose output goes (appended) to ``log_path``."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self._popen: subprocess.Popen[bytes] | None = None
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """Pid (= process-group id) while running, else None."""
        popen = self._popen
        return popen.pid if popen is not None and popen.poll() is None else None

    def running(self) -> bool:
        return self.pid is not None

    def exit_code(self) -> int | None:
        popen = self._popen
        return None if popen is None else popen.poll()

    def spawn(self) -> None:
        """Start the process (it must not be running)."""
        with self._lock:
            if self._popen is not None and self._popen.poll() is None:
                raise RuntimeError(f"{self.name} is already running (pid {self._popen.pid})")
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("ab") as log:
                # The child keeps its own copy of the descriptor; ours can close at once.
                self._popen = subprocess.Popen(  # noqa: S603 - argv from the harness, no shell
                    [*_pdeathsig_prefix(), *self.argv],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=self.env,
                    cwd=self.cwd,
                    start_new_session=True,
                )
            _registry.add(self)

    def signal_group(self, sig: signal.Signals) -> bool:
        """Send ``sig`` to the whole group; False when the group no longer exists."""
        popen = self._popen
        if popen is None:
            return False
        try:
            os.killpg(popen.pid, sig)
        except ProcessLookupError:
            return False
        return True

    def freeze(self, timeout: float = 5.0) -> bool:
        """SIGSTOP the group and return once every thread of it is stopped (True) or not.

        kill(2) only queues a stop: a thread busy on another core (or, under gVisor, inside a
        system call) can still run briefly and, say, answer a frame sent right after. The
        caller wants "frozen from now on", so this waits for every thread's state to read
        stopped in /proc; a bounded poll, as nothing signals that to another process.
        """
        if not self.signal_group(signal.SIGSTOP):
            return False
        members = self.group_pids()  # a stopped group forks no more
        end = time.monotonic() + timeout
        while not self._all_stopped(members):
            if time.monotonic() >= end:
                return False
            time.sleep(0.005)
        return True

    @staticmethod
    def _all_stopped(members: list[int]) -> bool:
        for pid in members:
            for task in Path(f"/proc/{pid}/task").glob("*/stat"):
                try:
                    state = task.read_text().rsplit(")", 1)[1].split()[0]
                except (OSError, IndexError):
                    continue  # the thread ended while we looked
                if state not in ("T", "t"):
                    return False
        return True

    def kill(self) -> None:
        """SIGKILL the group and reap the leader."""
        popen = self._popen
        if popen is None:
            return
        self.signal_group(signal.SIGKILL)
        popen.wait()
        _registry.discard(self)

    def terminate(self, timeout: float) -> bool:
        """SIGTERM the group and wait; SIGKILL after ``timeout``. True if it exited by itself."""
        popen = self._popen
        if popen is None or popen.poll() is not None:
            self._sweep()
            return True
        # A stopped (SIGSTOPped) process cannot act on SIGTERM until it is continued.
        self.signal_group(signal.SIGTERM)
        self.signal_group(signal.SIGCONT)
        try:
            popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return False
        self._sweep()
        return True

    def group_pids(self) -> list[int]:
        """Every live process in this group (Linux /proc; [] elsewhere or when down)."""
        pgid = self.pid
        if pgid is None:
            return []
        members = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue  # exited while we looked
            # Fields after the parenthesised command: state, ppid, pgrp, ...
            if int(stat.rsplit(")", 1)[1].split()[2]) == pgid:
                members.append(int(entry.name))
        return members

    def rss_bytes(self) -> int:
        """Resident memory of the whole group, in bytes (0 when down)."""
        total = 0
        for pid in self.group_pids():
            try:
                status = Path(f"/proc/{pid}/status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        return total

    def _sweep(self) -> None:
        # The leader is gone; anything it left in its group (rare) goes too. Done right after
        # reaping it: the kernel hands out pids in sequence, so the group id cannot have been
        # reused by an unrelated group in between.
        self.signal_group(signal.SIGKILL)
        _registry.discard(self)

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.running() else f"exit={self.exit_code()}"
        return f"ManagedProcess({self.name!r}, {state})"


class _Registry:
    """Every group spawned and not yet reaped, for the last-resort cleanup."""

    def __init__(self) -> None:
        self._live: set[ManagedProcess] = set()
        self._lock = threading.Lock()
        self._hooks_installed = False

    def add(self, process: ManagedProcess) -> None:
        with self._lock:
            self._live.add(process)
            if not self._hooks_installed:
                self._install_hooks()
                self._hooks_installed = True

    def discard(self, process: ManagedProcess) -> None:
        with self._lock:
            self._live.discard(process)

    def kill_all(self) -> None:
        with self._lock:
            live = list(self._live)
            self._live.clear()
        for process in live:
            process.signal_group(signal.SIGKILL)
        for process in live:
            popen = process._popen
            if popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    popen.wait(5)

    def _install_hooks(self) -> None:
        atexit.register(self.kill_all)
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be installed from the main thread
        for sig in (signal.SIGTERM, signal.SIGHUP):
            previous = signal.getsignal(sig)
            signal.signal(sig, self._make_handler(sig, previous))

    def _make_handler(
        self, sig: signal.Signals, previous: Callable[[int, FrameType | None], object] | int | None
    ) -> Callable[[int, FrameType | None], None]:
        def handler(signum: int, frame: FrameType | None) -> None:
            self.kill_all()
            if callable(previous):
                previous(signum, frame)
                return
            if previous == signal.SIG_IGN:
                return
            # Default action: die of the same signal, as if we had never caught it.
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)

        return handler


_registry = _Registry()


def kill_all() -> None:
    """SIGKILL every process group this process started and has not reaped yet."""
    _registry.kill_all()
