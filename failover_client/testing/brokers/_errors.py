"""Errors raised by the broker harness.

::

    BrokerError                    anything the harness could not do
    ├── BackendUnavailable         no way to run this kind of broker here (tests skip on it)
    ├── BrokerStartError           a broker did not answer its protocol before the deadline
    │   └── PortTakenError         another process listens on a port meant for the broker
    ├── BrokerStopError            a broker ignored a graceful stop and had to be killed
    └── ClientError                a raw client (stomp.py / proton) call failed

Every error about one broker carries the tail of that broker's log, because the log is
nearly always where the reason is.
"""

from __future__ import annotations

__all__ = [
    "BackendUnavailable",
    "BrokerError",
    "BrokerStartError",
    "BrokerStopError",
    "ClientError",
    "PortTakenError",
]


class BrokerError(Exception):
    """Base class of every harness error."""


class BackendUnavailable(BrokerError):
    """The requested backend (local install or Docker engine) cannot run this broker kind."""


class BrokerStartError(BrokerError):
    """A broker process exited or did not answer its protocol handshake in time."""

    def __init__(self, broker: str, reason: str, log_tail: str) -> None:
        super().__init__(f"broker {broker}: {reason}\n--- last lines of its log ---\n{log_tail}")
        self.broker = broker
        self.reason = reason
        self.log_tail = log_tail


class PortTakenError(BrokerStartError):
    """A process that is not the started broker listens on one of the broker's ports.

    Typically a broker left over from another run: it would answer every probe, so without
    this check a test would run against a broker it does not control.
    """

    def __init__(self, broker: str, port: int, holder: str, log_tail: str) -> None:
        super().__init__(
            broker,
            f"port {port} is held by {holder}, not by the broker started here; a broker left "
            "over from another run? Stop that process and start again",
            log_tail,
        )
        self.port = port
        self.holder = holder


class BrokerStopError(BrokerError):
    """A broker did not stop within its grace period (it was killed instead)."""


class ClientError(BrokerError):
    """A raw protocol client used by the harness (to probe, send or drain) failed."""
