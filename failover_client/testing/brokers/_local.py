"""Brokers that run as local child processes (the default backend)."""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

from ._broker import START_TIMEOUT, STOP_TIMEOUT, Broker
from ._errors import BrokerError, BrokerStartError, BrokerStopError
from ._model import Endpoint
from ._process import ManagedProcess
from ._readiness import Deadline, wait_until

__all__ = ["LocalBroker"]


class LocalBroker(Broker):
    """A broker whose whole process group the harness owns."""

    def __init__(
        self,
        name: str,
        endpoints: Mapping[str, Endpoint],
        argv: Sequence[str],
        env: Mapping[str, str] | None,
        base_dir: Path,
    ) -> None:
        super().__init__(name, endpoints)
        self.base_dir = base_dir
        self.process = ManagedProcess(name, argv, base_dir / "broker.log", env, cwd=base_dir)

    @property
    def pid(self) -> int | None:
        return self.process.pid

    @property
    def log_path(self) -> Path:
        return self.process.log_path

    def running(self) -> bool:
        return self.process.running()

    def rss_bytes(self) -> int:
        """Resident memory of the broker's whole process group."""
        return self.process.rss_bytes()

    def launch(self) -> None:
        self.hung = False
        self.process.spawn()

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        deadline = Deadline(timeout)

        def exited() -> str | None:
            code = self.process.exit_code()
            return None if code is None else f"process exited with status {code} while starting"

        # Bounded poll (see wait_until): nothing signals "the JVM / Erlang VM bound its port".
        reason = wait_until(lambda: self.probe(timeout=1.0), deadline, give_up=exited)
        if reason is not None:
            raise BrokerStartError(self.name, f"{reason} ({timeout:.0f}s allowed)", self.log_tail())

    def _signal_kill(self) -> None:
        self.process.kill()

    def _signal_stop(self) -> None:
        if not self.process.freeze():
            self.process.signal_group(signal.SIGCONT)
            raise BrokerError(f"{self.name}: SIGSTOP did not stop every thread within 5 s")

    def _signal_cont(self) -> None:
        self.process.signal_group(signal.SIGCONT)

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        self.hung = False
        if not self.process.terminate(timeout):
            raise BrokerStopError(
                f"{self.name} ignored SIGTERM for {timeout:.0f}s and was killed\n{self.log_tail()}"
            )
