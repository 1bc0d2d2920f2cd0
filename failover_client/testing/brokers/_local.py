"""Brokers that run as local child processes (the default backend)."""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from pathlib import Path

from ._broker import START_TIMEOUT, STOP_TIMEOUT, Broker
from ._errors import BrokerError, BrokerStartError, BrokerStopError, PortTakenError
from ._model import Endpoint
from ._ownership import Ownership, PortState, port_owner
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

    def ports(self) -> list[Ownership]:
        """Who holds each endpoint's port now (see ``_ownership``)."""
        group = self.process.group_pids()
        return [port_owner(ep.port, group) for ep in self.endpoints.values()]

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Return when every port is held by this broker's processes and its protocol answers.

        Raises PortTakenError at once (after killing what it started) when another process
        listens on one of the ports, BrokerStartError when the broker exits or the time is up.
        """
        deadline = Deadline(timeout)
        taken: list[Ownership] = []

        def answers() -> bool:
            owners = self.ports()
            taken.extend(o for o in owners if o.state is PortState.FOREIGN)
            if taken or any(o.state is PortState.FREE for o in owners):
                return False
            return self.probe(timeout=1.0)

        def stopped() -> str | None:
            if taken:
                return "port taken"
            code = self.process.exit_code()
            return None if code is None else f"process exited with status {code} while starting"

        # Bounded poll (see wait_until): nothing signals "the JVM / Erlang VM bound its port".
        reason = wait_until(answers, deadline, give_up=stopped)
        if taken:
            # It cannot serve on a port someone else holds; leave nothing of it running.
            self.process.kill()
            raise PortTakenError(self.name, taken[0].port, taken[0].holder, self.log_tail())
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
