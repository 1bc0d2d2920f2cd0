"""Map what proton reports onto the project's error hierarchy.

proton reports failures as error *conditions* (a symbolic name, a description and an info
map) on the transport (SASL, TLS, socket, idle timeout) or on an endpoint the broker closed
(connection, session, link), not as exceptions. The functions here are pure: they take a
:class:`Condition` copied out of proton and return the error to raise or report, together
with :func:`cause`, a proton exception carrying the same words, to raise it ``from``.

Secrets the client sent (the password) are scrubbed from any text a broker echoes back.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from proton import ConnectionException

from failover_client._errors import (
    AuthenticationFailed,
    BrokerRefused,
    BrokerUnavailable,
    ConnectionFailure,
    SendRejected,
    SubscriptionRefused,
    TLSFailure,
)

__all__ = [
    "REDIRECT",
    "UNAUTHORIZED",
    "Condition",
    "cause",
    "closed_error",
    "handshake_error",
    "redact",
    "resolve_error",
    "send_rejection",
    "subscription_refusal",
    "transport_error",
]

REDIRECT = "amqp:connection:redirect"
"""The broker sends the client elsewhere (Artemis connection routers); info names where."""

UNAUTHORIZED = "amqp:unauthorized-access"
"""A refused SASL exchange (proton's transport condition), or a broker refusing the user."""

_IDLE_TIMEOUT = "local-idle-timeout expired"
"""proton's description when nothing arrived from the peer within our idle timeout."""

_TLS = re.compile(r"\bssl\b|\btls\b|certificate", re.IGNORECASE)
_TLS_OUTAGE = re.compile(r"eof|connection (aborted|reset)|unexpected end", re.IGNORECASE)
"""TLS failures that are the peer going away, not a verification problem (see STOMP's map)."""

_MAX_TEXT = 300


@dataclass(frozen=True)
class Condition:
    """An AMQP error condition, copied out of proton so the mapping stays pure."""

    name: str
    description: str | None = None
    info: Mapping[Any, Any] | None = None

    @classmethod
    def of(cls, condition: Any) -> Condition | None:
        """A copy of a ``proton.Condition`` (None stays None)."""
        if condition is None:
            return None
        info = condition.info
        return cls(
            str(condition.name),
            None if condition.description is None else str(condition.description),
            dict(info) if isinstance(info, Mapping) else None,
        )

    def text(self, secrets: Iterable[str | None] = ()) -> str:
        """``name: description``, secrets redacted, cut to a readable length."""
        text = f"{self.name}: {self.description}" if self.description else self.name
        text = redact(text, secrets)
        return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every non-empty secret replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def cause(condition: Condition | None, secrets: Iterable[str | None] = ()) -> ConnectionException:
    """A proton exception holding the condition's words: the ``__cause__`` of mapped errors."""
    text = condition.text(secrets) if condition is not None else "connection closed"
    return ConnectionException(text)


def handshake_error(
    condition: Condition | None, *, broker: str, secrets: Iterable[str | None] = ()
) -> ConnectionFailure:
    """The error for a connection that ended before (or instead of) the broker's open.

    Credentials refused (SASL or ``amqp:unauthorized-access``) -> AuthenticationFailed; a TLS
    verification or handshake failure -> TLSFailure; a redirect, a refused open, a socket
    error or silence -> BrokerUnavailable.
    """
    if condition is None:
        return BrokerUnavailable("connection closed during the AMQP handshake", broker=broker)
    text = condition.text(secrets)
    if condition.name == UNAUTHORIZED:
        return AuthenticationFailed(f"broker refused the credentials: {text}", broker=broker)
    if condition.name == REDIRECT:
        return BrokerUnavailable(f"broker redirected the connection: {text}", broker=broker)
    if _is_tls_failure(condition):
        return TLSFailure(f"TLS failure during the AMQP handshake: {text}", broker=broker)
    return BrokerUnavailable(f"AMQP handshake failed: {text}", broker=broker)


def transport_error(
    condition: Condition | None, *, broker: str, secrets: Iterable[str | None] = ()
) -> BrokerUnavailable:
    """The loss of an open connection at the transport: socket closed, reset, or silence."""
    if condition is None:
        return BrokerUnavailable("connection closed by the broker", broker=broker)
    if condition.description == _IDLE_TIMEOUT:
        return BrokerUnavailable(
            "no frame from the broker within the idle timeout; presumed hung", broker=broker
        )
    return BrokerUnavailable(f"connection lost: {condition.text(secrets)}", broker=broker)


def closed_error(
    condition: Condition | None,
    *,
    broker: str,
    what: str = "connection",
    secrets: Iterable[str | None] = (),
) -> BrokerUnavailable:
    """The loss of an open connection that the broker closed (``what``: connection, session).

    With an error condition the broker refused something it was sent: BrokerRefused (the
    engine then looks for the poison frame), except for a redirect, which is no one frame's
    fault. Without a condition it is an orderly shutdown: BrokerUnavailable.
    """
    if condition is None:
        return BrokerUnavailable(f"broker closed the {what}", broker=broker)
    text = condition.text(secrets)
    if condition.name == REDIRECT:
        return BrokerUnavailable(f"broker redirected the connection: {text}", broker=broker)
    return BrokerRefused(f"broker closed the {what} with an error: {text}", broker=broker)


def send_rejection(
    condition: Condition | None, *, broker: str, destination: str, message_id: str | None
) -> SendRejected:
    """The error for a send the broker rejected (rejected outcome or a refused sender link)."""
    text = condition.text() if condition is not None else "no reason given"
    return SendRejected(
        f"{broker}: broker rejected the message to {destination}: {text}",
        message_id=message_id,
        broker=broker,
        text=text,
    )


def subscription_refusal(
    condition: Condition | None, *, broker: str, destination: str, subscription_id: str
) -> SubscriptionRefused:
    """The error for a receiver link the broker refused to attach."""
    text = condition.text() if condition is not None else "attach answered without a source"
    return SubscriptionRefused(
        f"{broker}: broker refused the subscription to {destination}: {text}",
        subscription_id=subscription_id,
    )


def resolve_error(exc: OSError, *, broker: str) -> BrokerUnavailable:
    """The error for a host name that does not resolve."""
    if isinstance(exc, socket.gaierror):
        return BrokerUnavailable(f"cannot resolve the host name: {exc.strerror}", broker=broker)
    return BrokerUnavailable(f"name resolution failed: {exc}", broker=broker)


def _is_tls_failure(condition: Condition) -> bool:
    description = condition.description or ""
    return bool(_TLS.search(description)) and not _TLS_OUTAGE.search(description)
