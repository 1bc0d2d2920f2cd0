"""How a control channel's failures become the project's errors (``failover_client._errors``).

Socket and TLS exceptions map as the STOMP adapter maps them (refused, reset, timed out and
unresolvable are :class:`BrokerUnavailable`; a failed verification is :class:`TLSFailure`); a
ConnectionInfo the broker answered with an exception is :class:`AuthenticationFailed` when a
security exception is in its cause chain (ActiveMQ's authentication plugins throw
``java.lang.SecurityException``) and :class:`BrokerRefused` otherwise. The broker's message is
kept, with the passcode cut out should the broker ever echo it.
"""

from __future__ import annotations

import socket
import ssl

from failover_client._errors import (
    AuthenticationFailed,
    BrokerRefused,
    BrokerUnavailable,
    ConnectionFailure,
    TLSFailure,
)

from ._commands import RemoteException

__all__ = ["redact", "refusal", "transport_failure"]

_OS_ERRORS: tuple[tuple[type[OSError], str], ...] = (
    (ConnectionRefusedError, "connection refused"),
    (ConnectionResetError, "connection reset"),
    (TimeoutError, "timed out"),
    (socket.gaierror, "cannot resolve the host name"),
)


def transport_failure(exc: BaseException, *, broker: str, during: str) -> ConnectionFailure:
    """The project's error for a socket or TLS exception during ``during``."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        reason = getattr(exc, "verify_message", None) or exc.reason or str(exc)
        return TLSFailure(
            f"certificate verification failed during {during}: {reason}", broker=broker
        )
    if isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError | ssl.SSLSyscallError):
        # The peer went away mid-handshake: an outage, not a verification problem.
        return BrokerUnavailable(f"connection closed during {during}", broker=broker)
    if isinstance(exc, ssl.SSLError):
        return TLSFailure(f"TLS error during {during}: {exc.reason or exc}", broker=broker)
    words = next((w for kind, w in _OS_ERRORS if isinstance(exc, kind)), None)
    if words is None:
        words = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
    return BrokerUnavailable(f"{words} during {during}", broker=broker)


def _security(error: RemoteException | None) -> bool:
    while error is not None:
        if (error.class_name or "").endswith("SecurityException"):
            return True
        error = error.cause
    return False


def redact(text: str, passcode: str | None) -> str:
    """``text`` without ``passcode``."""
    return text.replace(passcode, "***") if passcode else text


def refusal(
    error: RemoteException | None, *, login: str | None, passcode: str | None, broker: str
) -> ConnectionFailure:
    """The error for a ConnectionInfo the broker refused with ``error``."""
    reason = redact(str(error), passcode) if error is not None else "no reason given"
    if _security(error):
        return AuthenticationFailed(
            f"the broker refused the control channel's login {login!r}: {reason}", broker=broker
        )
    return BrokerRefused(f"the broker refused the control channel: {reason}", broker=broker)
