"""Raw AMQP 1.0 functions (python-qpid-proton) that put messages into one broker and take them out.

Like :mod:`._stomp_client` they speak to ONE broker with the plain library, never through
failover_client, and each send waits for the broker to settle the delivery. proton is imported
by the functions that use it, so importing the harness does not need it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, cast

from ._errors import ClientError
from ._model import ReceivedMessage
from ._stomp_client import as_bytes

if TYPE_CHECKING:
    from proton import Link
    from proton.reactor import LinkOption
    from proton.utils import BlockingConnection

__all__ = ["Capabilities", "amqp_drain", "amqp_send"]


class Capabilities:
    """Terminus capabilities, e.g. ``queue`` (Artemis then routes ANYCAST, as for a JMS queue).

    A link option by proton's protocol (``test`` and ``apply``), not by inheritance, so that
    this module can be imported without proton.
    """

    def __init__(self, *capabilities: str) -> None:
        self.capabilities = capabilities

    def test(self, link: Link) -> bool:
        """Every link gets the capabilities."""
        return True

    def apply(self, link: Link) -> None:
        """Write the capabilities into the link's local terminus."""
        from proton import Data, symbol  # noqa: PLC0415 - optional dependency, see module doc

        terminus = link.target if link.is_sender else link.source
        data = terminus.capabilities
        data.put_array(False, Data.SYMBOL)
        data.enter()
        for capability in self.capabilities:
            data.put_symbol(symbol(capability))
        data.exit()


def amqp_send(
    url: str,
    address: str,
    bodies: Iterable[bytes | str],
    *,
    durable: bool = True,
    properties: Mapping[str, str] | None = None,
    user: str | None = None,
    password: str | None = None,
    timeout: float = 5.0,
    capabilities: Sequence[str] = (),
) -> int:
    """Send each body and return once each delivery is settled (accepted) by the broker."""
    from proton import Message, ProtonException  # noqa: PLC0415 - optional, see module doc

    conn = _amqp_connect(url, user, password, timeout)
    count = 0
    try:
        sender = conn.create_sender(
            address, options=cast("LinkOption", Capabilities(*capabilities))
        )
        for body in bodies:
            # BlockingSender.send waits for the disposition and raises unless accepted.
            sender.send(Message(body=body, durable=durable, properties=dict(properties or {})))
            count += 1
    except ProtonException as exc:
        raise ClientError(f"{url}: send to {address} failed after {count}: {exc!r}") from exc
    finally:
        conn.close()
    return count


def amqp_drain(
    url: str,
    address: str,
    *,
    timeout: float = 5.0,
    idle: float = 0.5,
    expect: int | None = None,
    user: str | None = None,
    password: str | None = None,
    capabilities: Sequence[str] = (),
) -> list[ReceivedMessage]:
    """Receive and accept messages until ``idle`` s pass without one (see StompClient.collect)."""
    from proton import ProtonException, Timeout  # noqa: PLC0415 - optional, see module doc

    conn = _amqp_connect(url, user, password, timeout)
    got: list[ReceivedMessage] = []
    end = time.monotonic() + timeout
    try:
        receiver = conn.create_receiver(
            address, credit=256, options=cast("LinkOption", Capabilities(*capabilities))
        )
        while (left := end - time.monotonic()) > 0:
            need_more = expect is not None and len(got) < expect
            try:
                msg = receiver.receive(timeout=left if need_more else min(idle, left))
            except Timeout:
                if need_more:
                    continue
                break
            receiver.accept()
            properties: dict[object, object] = msg.properties or {}
            headers = {str(k): str(v) for k, v in properties.items()}
            if msg.id is not None:
                headers["message-id"] = str(msg.id)
            headers["durable"] = str(bool(msg.durable)).lower()
            got.append(ReceivedMessage(as_bytes(msg.body), headers))
    except ProtonException as exc:
        raise ClientError(f"{url}: drain of {address} failed after {len(got)}: {exc!r}") from exc
    finally:
        conn.close()
    return got


def _amqp_connect(
    url: str, user: str | None, password: str | None, timeout: float
) -> BlockingConnection:
    from proton import ProtonException  # noqa: PLC0415 - optional, see module doc
    from proton.utils import BlockingConnection  # noqa: PLC0415 - optional

    try:
        return BlockingConnection(
            url,
            timeout=timeout,
            user=user,
            password=password,
            allowed_mechs="PLAIN" if user else "ANONYMOUS",
        )
    except (ProtonException, OSError) as exc:
        raise ClientError(f"{url}: AMQP open failed: {exc!r}") from exc
