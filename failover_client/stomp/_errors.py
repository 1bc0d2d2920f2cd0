"""Map what stomp.py, ``ssl`` and ``socket`` report onto the project's error hierarchy.

Pure functions: they look at an exception or at the headers and body of an ERROR frame and
return the error to raise (the caller raises it ``from`` the original). Secrets the client sent
(the passcode) are scrubbed from any text a broker echoes back, so no password reaches a
message even if a broker quotes the CONNECT frame.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qsl, urlsplit

from failover_client._errors import (
    AuthenticationFailed,
    BrokerUnavailable,
    ConnectionFailure,
    SendRejected,
    TLSFailure,
)
from failover_client.net._dial import describe_failure

__all__ = [
    "NamedRefusal",
    "broker_error_text",
    "connect_error_from_frame",
    "redact",
    "send_rejection_from_frame",
    "transport_error",
]

# What ActiveMQ ("User name [x] or password is invalid.", java.lang.SecurityException),
# RabbitMQ ("Access refused for user 'x'", "Bad CONNECT" + "Virtual host '/v' access denied")
# and Artemis ("AMQ229031: Unable to validate user") say when they refuse credentials.
_AUTH_PATTERN = re.compile(
    r"password|access refused|access denied|securityexception|not authori[sz]ed|"
    r"unauthori[sz]ed|authenticat|credentials|unable to validate user|login failed",
    re.IGNORECASE,
)

# RabbitMQ's STOMP adapter reads the CONNECT ``host`` header as the virtual host and answers a
# vhost it cannot grant with this body (under "Bad CONNECT"); a ``server: RabbitMQ/<version>``
# header, where a frame carries one, names it too.
_RABBITMQ_VHOST = re.compile(r"virtual host '[^']*' access denied", re.IGNORECASE)

_RABBITMQ_HINT = (
    " (RabbitMQ takes the virtual host from the CONNECT host header, which is the broker's"
    " host name unless the member sets one: add ?vhost=/ for the default virtual host, or"
    " ?vhost=<name>)"
)

# ActiveMQ Classic refuses a CONNECT whose client-id one of its connections has already
# (javax.jms.InvalidClientIDException, "Client: <id> already connected from tcp://...").
_CLIENT_ID_TAKEN = re.compile(r"InvalidClientIDException|already connected", re.IGNORECASE)

_CLIENT_ID_HINT = (
    " (the broker still holds a connection with this client id: this client's previous one,"
    " until the broker notices that it ended, or another client's with the same client id;"
    " tried again on the reconnect schedule)"
)

_MAX_TEXT = 300
"""Broker error bodies can hold whole Java stack traces; messages keep the useful start."""


def _as_text(body: bytes | str | None) -> str:
    if isinstance(body, bytes):
        return body.decode("utf-8", errors="replace")
    return body or ""


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """``text`` with every non-empty secret replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def broker_error_text(
    headers: Mapping[str, str], body: bytes | str | None, secrets: Iterable[str | None] = ()
) -> str:
    """One line describing an ERROR frame: its ``message`` header plus the body's first line."""
    message = headers.get("message", "").strip()
    stripped = _as_text(body).strip()
    first_line = stripped.splitlines()[0].strip() if stripped else ""
    if first_line and first_line != message:
        text = f"{message}: {first_line}" if message else first_line
    else:
        text = message or "ERROR frame without a message"
    text = redact(text, secrets)
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 3] + "..."


def connect_error_from_frame(
    headers: Mapping[str, str],
    body: bytes | str | None,
    *,
    broker: str,
    secrets: Iterable[str | None] = (),
) -> ConnectionFailure:
    """The error for an ERROR frame that answered CONNECT.

    A refusal of the credentials becomes :class:`AuthenticationFailed` (retrying the same
    credentials cannot help); anything else :class:`BrokerUnavailable` with the broker's words.
    """
    text = broker_error_text(headers, body, secrets)
    # Classify on the message header and the body's first line only: ActiveMQ appends stack
    # traces whose frames name its authentication filters even when the error is unrelated.
    # (Before redaction: a passcode that happens to be "password" must not hide the reason.)
    raw = broker_error_text(headers, body)
    if _AUTH_PATTERN.search(raw):
        # A RabbitMQ vhost refusal reads like a credentials problem; say what to change.
        hint = _RABBITMQ_HINT if _rabbitmq(headers, raw) and _vhost_of(broker) is None else ""
        return AuthenticationFailed(f"broker refused the credentials: {text}{hint}", broker=broker)
    hint = _CLIENT_ID_HINT if _CLIENT_ID_TAKEN.search(raw) else ""
    return BrokerUnavailable(f"broker refused the connection: {text}{hint}", broker=broker)


def _rabbitmq(headers: Mapping[str, str], text: str) -> bool:
    return headers.get("server", "").startswith("RabbitMQ/") or bool(_RABBITMQ_VHOST.search(text))


def _vhost_of(broker: str) -> str | None:
    """The ``vhost`` param of a member, read from its (redacted) URI, the form ``broker`` has."""
    try:
        query = urlsplit(broker).query
    except ValueError:
        return None
    return dict(parse_qsl(query, keep_blank_values=True)).get("vhost")


def send_rejection_from_frame(
    headers: Mapping[str, str],
    body: bytes | str | None,
    *,
    broker: str,
    message_id: str | None = None,
    secrets: Iterable[str | None] = (),
) -> SendRejected:
    """The error for an ERROR frame that names the receipt of one SEND (or SUBSCRIBE)."""
    text = broker_error_text(headers, body, secrets)
    return SendRejected(
        f"{broker}: broker rejected the message: {text}",
        message_id=message_id,
        broker=broker,
        text=text,
    )


NamedRefusal = SendRejected
"""An ERROR naming one frame's receipt. Once a class of its own that escaped to users as a
``SendRejected`` outside the drawn error tree; every ``SendRejected`` now keeps the broker and
its words (what a SUBSCRIBE's refusal is built from), and this name stays for the session."""


def transport_error(exc: BaseException, *, broker: str, during: str) -> ConnectionFailure:
    """The error for an exception raised by the socket / TLS layer.

    ``during`` says what was going on ("TCP connect", "TLS handshake", "SEND write"), so the
    message tells where it failed. TLS verification and handshake errors are
    :class:`TLSFailure`; everything else is :class:`BrokerUnavailable`.
    """
    if isinstance(exc, ssl.SSLCertVerificationError):
        reason = getattr(exc, "verify_message", None) or getattr(exc, "reason", None) or str(exc)
        return TLSFailure(
            f"certificate verification failed during {during}: {reason}", broker=broker
        )
    if isinstance(exc, ssl.SSLEOFError | ssl.SSLZeroReturnError | ssl.SSLSyscallError):
        # The peer went away mid-handshake: an outage, not a verification problem.
        return BrokerUnavailable(f"connection closed during {during}: {exc}", broker=broker)
    if isinstance(exc, ssl.SSLError):
        reason = getattr(exc, "reason", None) or str(exc)
        return TLSFailure(f"TLS error during {during}: {reason}", broker=broker)
    # The cause in words, as every adapter says it ("connection refused", "cannot resolve the
    # host name (...)"): the reconnect warning shows this message.
    return BrokerUnavailable(f"{describe_failure(exc)} during {during}", broker=broker)
