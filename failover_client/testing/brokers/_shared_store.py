"""A shared-storage master/slave group of ActiveMQ Classic brokers.

Every broker of the group has its own ports and directory but one KahaDB directory: the first
to take the store's lock is the master and opens its connectors; the others log that they are
"in slave mode waiting a lock to be acquired" and open nothing (their ports refuse) until the
master dies and one of them takes the lock, recovers the store and opens its connectors. So
at most one broker of the group answers at a time, and a client fails over from the dead
master to whichever slave became master, finding the master's persistent messages there.

The lifecycle differs from a plain cluster's: a slave is started when it runs and waits on
the lock (its log says so), not when it answers, and ``heal`` brings the group back to one
master and every other broker a waiting slave.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ._broker import START_TIMEOUT, Broker
from ._cluster import Cluster
from ._errors import BrokerError, BrokerStartError
from ._local import LocalBroker
from ._model import ClusterSpec
from ._readiness import Deadline, wait_until

__all__ = ["SLAVE_LOG_LINE", "SharedStoreCluster"]

SLAVE_LOG_LINE = b"This broker is now in slave mode waiting a lock to be acquired"
"""What ActiveMQ 5.x's ``SharedFileLocker`` logs once when it finds the lock taken."""


class SharedStoreCluster(Cluster):
    """Brokers on one KahaDB directory; the one holding its lock is the master."""

    def __init__(self, spec: ClusterSpec, brokers: Sequence[LocalBroker], backend: str) -> None:
        super().__init__(spec, brokers, backend)
        self._local = tuple(brokers)
        self._log_marks: dict[str, int] = {}

    # -- who is who -------------------------------------------------------------------------

    def master(self, timeout: float = 1.0) -> Broker:
        """The broker that answers now (the lock holder); BrokerError when none does."""
        for broker in self._local:
            if broker.running() and not broker.hung and broker.probe(timeout):
                return broker
        raise BrokerError(f"no broker of {self!r} answers: the group has no master now")

    def slaves(self) -> list[Broker]:
        """The running brokers that wait on the lock (their log said so since they started,
        and they do not answer: a slave that took over logged the line too)."""
        return [b for b in self._local if b.running() and self._waiting(b) and not b.probe(0.5)]

    def wait_master(self, timeout: float = START_TIMEOUT, exclude: Broker | None = None) -> Broker:
        """Wait until a broker other than ``exclude`` answers (a slave took over); return it."""
        deadline = Deadline(timeout)
        found: list[Broker] = []

        def answers() -> bool:
            for broker in self._local:
                if broker is not exclude and broker.running() and broker.probe(0.5):
                    found.append(broker)
                    return True
            return False

        # Bounded poll: nothing signals "the slave took the lock and opened its connectors".
        reason = wait_until(answers, deadline, step=0.005)
        if reason is not None or not found:
            tails = "\n".join(b.log_tail(20) for b in self._local)
            raise BrokerStartError(self.spec.label, f"no master within {timeout:.0f}s", tails)
        return found[0]

    # -- lifecycle --------------------------------------------------------------------------

    def start_slave(self, broker: Broker, timeout: float = START_TIMEOUT) -> None:
        """Launch ``broker`` while another holds the lock; return once it waits on the lock."""
        local = self._member(broker)
        self._log_marks[local.name] = _size(local.log_path)
        local.launch()
        deadline = Deadline(timeout)

        def stopped() -> str | None:
            code = local.process.exit_code()
            return None if code is None else f"process exited with status {code}"

        # Bounded poll of its log: the lock wait is announced nowhere else.
        reason = wait_until(lambda: self._waiting(local), deadline, step=0.02, give_up=stopped)
        if reason is not None:
            raise BrokerStartError(local.name, f"not a waiting slave: {reason}", local.log_tail())

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start the first broker as master, then every other one as a waiting slave."""
        down = [b for b in self._local if not b.running()]
        if not down:
            return
        if not any(b.running() for b in self._local):
            first = down.pop(0)
            first.start(timeout)
        for broker in down:
            self.start_slave(broker, timeout)

    def heal(self, timeout: float = START_TIMEOUT) -> list[str]:
        """One master answering and every other broker a waiting slave; returns who needed it."""
        healed: list[str] = []
        for broker in self._local:
            if broker.hung:
                broker.resume()
                healed.append(broker.name)
        running = [b for b in self._local if b.running()]
        if running:
            try:
                self.master(timeout=2.0)
            except BrokerError:
                # Running, none answering: a slave may be taking over right now.
                try:
                    self.wait_master(timeout=min(timeout, 10.0))
                except BrokerStartError:
                    for broker in running:
                        broker.kill()
                        healed.append(broker.name)
        for broker in self._local:
            if (
                broker.running()
                and broker is not self._master_or_none()
                and not self._waiting(broker)
            ):
                broker.kill()  # neither master nor waiting: stuck somewhere; start it again
                healed.append(broker.name)
        healed += [b.name for b in self._local if not b.running() and b.name not in healed]
        self.start(timeout)
        return healed

    def _master_or_none(self) -> Broker | None:
        try:
            return self.master()
        except BrokerError:
            return None

    def _waiting(self, broker: LocalBroker) -> bool:
        """Whether ``broker``'s log says, since its last start, that it waits on the lock."""
        mark = self._log_marks.get(broker.name, 0)
        try:
            with broker.log_path.open("rb") as log:
                log.seek(mark)
                return SLAVE_LOG_LINE in log.read()
        except FileNotFoundError:
            return False

    def _member(self, broker: Broker) -> LocalBroker:
        for local in self._local:
            if local is broker:
                return local
        raise BrokerError(f"{broker!r} is not a broker of {self!r}")

    def note_start(self, broker: Broker) -> None:
        """Forget what ``broker`` logged before now (call before launching it yourself)."""
        local = self._member(broker)
        self._log_marks[local.name] = _size(local.log_path)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0
