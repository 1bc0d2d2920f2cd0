"""Headers of the frames the adapter sends, and MESSAGE frames turned into :class:`Received`.

Pure: dictionaries in, dictionaries out. stomp.py escapes header *values* of STOMP 1.1+ frames
(except CONNECT, which the protocol leaves unescaped) but writes header *names* as given, so
names and CONNECT values are checked here: a colon, line break or NUL in them would split or
end the frame.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from failover_client._errors import ConfigurationError, ProtocolViolation
from failover_client.adapter import Received, SubscriptionSpec
from failover_client.stomp._encode import header_block
from failover_client.stomp._flow import BrokerKind, prefetch_headers

__all__ = [
    "SUPPORTED_VERSIONS",
    "ack_headers",
    "check_destination",
    "check_handshake_bytes",
    "connect_headers",
    "received_from_frame",
    "send_block",
    "send_headers",
    "subscribe_headers",
    "unsubscribe_headers",
]

SUPPORTED_VERSIONS = ("1.1", "1.2")
"""STOMP 1.0 has no heart-beats and no NACK: a broker that only speaks it is refused."""

# One compiled search per header instead of a generator per character: these checks run on
# every SEND, where they were most of the adapter's own cost.
_BAD_NAME = re.compile("[:\n\r\0]")
_BAD_RAW_VALUE = re.compile("[\n\r\0]")


_BARE_PREFIXES = frozenset(
    {"/queue/", "/topic/", "/temp-queue/", "/temp-topic/", "/exchange/", "/amq/queue/"}
)
"""Destination prefixes that name nothing on their own. ActiveMQ drops the connection on a
SEND to ``/queue/`` without an ERROR, so the message would be replayed, and the connection
dropped, after every reconnect: refused here instead, before anything is written."""


def check_destination(destination: str, where: str) -> None:
    """Refuse an empty destination or a bare prefix (ConfigurationError naming the frame)."""
    if not destination:
        raise ConfigurationError(f"{where}: the destination is empty")
    if destination in _BARE_PREFIXES:
        raise ConfigurationError(
            f"{where}: destination {destination!r} is only a prefix; name the queue or topic "
            f"after it (e.g. {destination}orders)"
        )


_GOOD_NAMES: set[str] = set()
"""Header names already found valid: an application sends the same few on every message."""

_GOOD_NAMES_MAX = 4096
"""Names remembered at most (a caller inventing names per message must not grow memory)."""


def _check_name(name: str, where: str) -> None:
    if name in _GOOD_NAMES:
        return
    if not name or _BAD_NAME.search(name):
        raise ConfigurationError(
            f"{where} header name {name!r} is empty or contains ':', a line break or NUL"
        )
    if len(_GOOD_NAMES) < _GOOD_NAMES_MAX:
        _GOOD_NAMES.add(name)


def _check_value(name: str, value: str, where: str, *, escaped: bool, secret: bool = False) -> None:
    # Escaped values (every frame but CONNECT) may hold line breaks; a NUL would still end
    # the frame because stomp.py does not escape it.
    if ("\0" in value) if escaped else bool(_BAD_RAW_VALUE.search(value)):
        shown = "the value" if secret else repr(value)
        what = "NUL" if escaped else "a line break or NUL"
        raise ConfigurationError(f"{where} header {name!r}: {shown} contains {what}")


def connect_headers(
    *,
    host: str,
    login: str | None,
    passcode: str | None,
    heart_beat: str,
    client_id: str | None = None,
) -> dict[str, str]:
    """Headers of the CONNECT frame (values are not escaped on CONNECT, so they are checked)."""
    headers = {"accept-version": ",".join(SUPPORTED_VERSIONS), "host": host}
    if heart_beat != "0,0":
        headers["heart-beat"] = heart_beat
    if login is not None:
        headers["login"] = login
    if passcode is not None:
        headers["passcode"] = passcode
    if client_id is not None:
        headers["client-id"] = client_id
    for name, value in headers.items():
        _check_value(name, value, "CONNECT", escaped=False, secret=name == "passcode")
    return headers


def _check_text(name: object, value: object, where: str) -> None:
    # The types say str, but callers pass what they have: a number would otherwise fail in
    # the checks that follow with a TypeError that names nothing.
    if not isinstance(name, str) or not isinstance(value, str):
        wrong = value if isinstance(name, str) else name
        raise ConfigurationError(
            f"{where} header {name!r}: header names and values must be str, "
            f"not {type(wrong).__name__} (e.g. {str(wrong)!r})"
        )


def _merge_user_headers(base: dict[str, str], extra: Mapping[str, str], where: str) -> None:
    # The common case in one pass, in C: every name one already found valid (so a str), every
    # value a str (join refuses anything else) without NUL. Anything else is checked header by
    # header below, which names the first bad one.
    if _GOOD_NAMES.issuperset(extra):
        try:
            clean = "\0" not in "".join(extra.values())
        except TypeError:
            clean = False
        if clean:
            base.update(extra)
            return
    for name, value in extra.items():
        _check_text(name, value, where)
        _check_name(name, where)
        _check_value(name, value, where, escaped=True)
        base[name] = value


def send_headers(
    destination: str, headers: Mapping[str, str], receipt: str | None, *, body_length: int
) -> dict[str, str]:
    """Headers of a SEND: persistent unless the caller says otherwise; our receipt wins.

    ``content-length`` is always the real body length (a body may hold NUL bytes; a caller's
    own value could lie), and left out for an empty body, as stomp.py does.
    """
    check_destination(destination, "SEND")
    result = {"persistent": "true"}
    _merge_user_headers(result, headers, "SEND")
    result.pop("content-length", None)
    if body_length:
        result["content-length"] = str(body_length)
    result["destination"] = destination
    if receipt is not None:
        result["receipt"] = receipt
    else:
        result.pop("receipt", None)
    return result


_OURS = frozenset({"content-length", "destination", "receipt", "transaction"})
"""SEND headers the adapter sets itself (a caller's are replaced or dropped)."""

_PLAIN_SEND_NAMES: set[str] = set()
"""Names found valid on a SEND that are none of :data:`_OURS` (at most ``_GOOD_NAMES_MAX``)."""

_SEND_TAILS: dict[str, bytes] = {}
"""destination -> its encoded ``destination`` line and the blank line: the end of every
group-committed SEND's header block to it. Only destinations checked and with nothing to
escape get one."""

_SEND_TAILS_MAX = 1024
"""Destinations kept at most: a caller sending to a new one per message must not grow memory
(the table starts again when full)."""


def send_block(
    destination: str, headers: Mapping[str, str], *, body_length: int, version: str
) -> bytes:
    """The encoded header block of a group-committed SEND (``_batch``): the headers of
    :func:`send_headers` without ``receipt`` and ``transaction`` (the writer adds the one it
    chooses; a send with the caller's own ``transaction`` is written alone, never batched),
    values escaped for ``version``, then the blank line.

    The usual send (a destination seen before, names seen before, plain values, none of the
    headers the adapter sets) is checked and encoded in a few passes in C, in front of the
    destination line encoded for the sends before it; any other goes the general way, with
    the same checks and errors as :func:`send_headers`.
    """
    tail = _SEND_TAILS.get(destination)
    if tail is not None and _PLAIN_SEND_NAMES.issuperset(headers):
        try:
            scanned = "".join(headers.values())
        except TypeError:  # a value that is no str: the general way names it
            scanned = "\0"
        if (  # nothing to refuse (NUL) or to escape
            "\0" not in scanned
            and ":" not in scanned
            and "\\" not in scanned
            and "\n" not in scanned
            and "\r" not in scanned
        ):
            lines = "\n".join(map(":".join, headers.items()))
            if "persistent" not in headers:
                lines = "persistent:true\n" + lines if lines else "persistent:true"
            if body_length:
                lines = f"{lines}\ncontent-length:{body_length}"
            return (lines + "\n").encode("utf-8", "replace") + tail
    frame = send_headers(destination, headers, None, body_length=body_length)
    frame.pop("transaction", None)
    block = header_block(frame, version)
    _remember_send(destination, headers)
    return block


def _remember_send(destination: str, headers: Mapping[str, str]) -> None:
    """After ``send_headers`` accepted a SEND: keep what the next one to the same place reuses."""
    if len(_PLAIN_SEND_NAMES) < _GOOD_NAMES_MAX:
        # send_headers added every one of these names to _GOOD_NAMES (if there was room).
        _PLAIN_SEND_NAMES.update(
            name for name in headers if name in _GOOD_NAMES and name not in _OURS
        )
    if any(c in destination for c in "\0:\\\n\r"):
        return  # escaped or refused each time, the general way
    if len(_SEND_TAILS) >= _SEND_TAILS_MAX:
        _SEND_TAILS.clear()
    _SEND_TAILS[destination] = f"destination:{destination}\n\n".encode("utf-8", "replace")


def subscribe_headers(
    spec: SubscriptionSpec, client_id: str | None, kind: BrokerKind = "unknown"
) -> dict[str, str]:
    """Headers of a SUBSCRIBE, including the durable-subscription headers each broker wants.

    A durable subscription needs a stable client id on ActiveMQ (``client-id`` on CONNECT
    plus ``activemq.subscriptionName``); without one ActiveMQ would invent a new id per
    connection and silently start a fresh subscription after every failover.

    ``spec.prefetch`` becomes the ``kind`` broker's flow-control header (``_flow``); a header
    of the same name in ``spec.headers`` wins.
    """
    check_destination(spec.destination, "SUBSCRIBE")
    headers = {"destination": spec.destination, "id": spec.id, "ack": spec.ack}
    headers.update(prefetch_headers(spec, kind))
    if spec.durable_name is not None:
        if not client_id:
            raise ConfigurationError(
                f"durable subscription {spec.durable_name!r} needs a client id: pass client_id="
                "to StompConnector (the broker keys durable subscriptions by client id and name)"
            )
        headers["activemq.subscriptionName"] = spec.durable_name  # ActiveMQ Classic
        headers["durable-subscription-name"] = spec.durable_name  # Artemis
        headers["durable"] = "true"  # RabbitMQ (with auto-delete:false)
        headers["auto-delete"] = "false"
    _merge_user_headers(headers, dict(spec.headers), "SUBSCRIBE")
    headers["id"] = spec.id
    return headers


def unsubscribe_headers(subscription_id: str) -> dict[str, str]:
    """Headers of an UNSUBSCRIBE (a durable subscription stays on the broker, inactive)."""
    return {"id": subscription_id}


def ack_headers(version: str, message: Received) -> dict[str, str]:
    """Headers of an ACK / NACK: STOMP 1.2 ``id``; 1.1 ``message-id`` and ``subscription``."""
    if message.ack_id is None:
        raise ConfigurationError(
            f"message {message.message_id!r} on subscription {message.subscription_id!r} has no "
            "ack id (it was delivered on an auto-ack subscription)"
        )
    if version == "1.2":
        return {"id": message.ack_id}
    return {"message-id": message.ack_id, "subscription": message.subscription_id}


_HANDSHAKE_REPLIES = (b"CONNECTED", b"ERROR")


def check_handshake_bytes(prefix: bytes) -> bool | None:
    """Whether the first bytes a broker sent after CONNECT can start a STOMP reply.

    True: they start CONNECTED or ERROR; False: they cannot (an HTTP or AMQP server, a TLS
    port spoken to in clear text, junk); None: too few bytes to tell yet.
    """
    data = prefix.lstrip(b"\r\n")
    line, newline, _ = data.partition(b"\n")
    line = line.removesuffix(b"\r")
    if newline:
        return line in _HANDSHAKE_REPLIES
    if any(reply.startswith(line) for reply in _HANDSHAKE_REPLIES):
        return None
    return False


def received_from_frame(
    headers: Mapping[str, str], body: bytes | str | None, version: str, *, own: bool = False
) -> Received:
    """A MESSAGE frame's headers and body as the manager sees it.

    ``own``: ``headers`` is a dictionary made for this frame alone (the parser's), kept as it
    is rather than copied: this runs once per message consumed, on the I/O thread.

    Raises :class:`ProtocolViolation` when the frame lacks the headers STOMP requires.
    """
    try:
        subscription_id = headers["subscription"]
        destination = headers["destination"]
        message_id = headers["message-id"]
    except KeyError:
        missing = [h for h in ("destination", "message-id", "subscription") if h not in headers]
        raise ProtocolViolation(
            f"MESSAGE frame without the {', '.join(missing)} header(s)"
        ) from None
    if body is None:
        data = b""
    elif isinstance(body, str):
        data = body.encode("utf-8")
    else:
        data = bytes(body)
    redelivered = headers.get("redelivered")
    return Received(
        subscription_id=subscription_id,
        destination=destination,
        body=data,
        headers=headers if own and type(headers) is dict else dict(headers),
        message_id=message_id,
        ack_id=headers.get("ack") if version == "1.2" else message_id,
        redelivered=redelivered is not None and redelivered.strip().lower() == "true",
    )


def private_destination(connected: Mapping[str, str], name: str) -> tuple[str, dict[str, str]]:
    """(destination, SUBSCRIBE headers) of a destination only one session reads, per broker.

    ``connected`` is the broker's CONNECTED headers (its ``server`` names the broker); see
    :meth:`StompSession.private_destination <failover_client.stomp.StompSession>`.
    """
    server = connected.get("server", "")
    if server.startswith("RabbitMQ/"):
        return f"/queue/{name}", {"exclusive": "true", "auto-delete": "true", "durable": "false"}
    if server.startswith("ActiveMQ/"):  # Classic; Artemis says ActiveMQ-Artemis/
        return f"/temp-queue/{name}", {}
    return f"/topic/{name}", {}
