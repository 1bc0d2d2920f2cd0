"""Observers: the hooks tracing needs on the send and delivery paths, free when unset.

Events tell what happened to the connection; they do not say which message a span belongs to,
nor let anyone add a header to an outgoing message. An :class:`Observer` (one per connection,
set with :meth:`Observing.set_observer`; ``failover_client.otel`` implements one) is called:

* when the application hands over a send, on the application's thread, with the headers about
  to go on the wire (it may add some, e.g. W3C ``traceparent``); the :class:`SendObservation`
  it returns hears of every re-send of that message to another broker, and of its outcome once:
  confirmed (``error`` None), rejected, timed out, or failed with the connection; a
  fire-and-forget send's outcome is its write;
* around a handler call (on the subscription's worker thread), and when ``receive()`` hands a
  message to the application.

Without an observer each hook costs one attribute read and an ``is None`` test. An observer
that raises is logged and ignored: telemetry never fails a send or a delivery.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, MutableMapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, ParamSpec, Protocol, TypeVar

from failover_client.engine._slot import Slot
from failover_client.uri import BrokerAddress

if TYPE_CHECKING:
    from failover_client.engine._consumers import Consumers
    from failover_client.engine._lifetime import ProcessGuard
    from failover_client.engine._outbox import OutboundMessage
    from failover_client.engine._sender import Sender
    from failover_client.engine._subscriptions import Handler, Message

__all__ = [
    "DeliveryObservation",
    "Observer",
    "Observing",
    "SendObservation",
    "broker_of",
    "observe_handler",
    "safely",
    "watch_send",
]

_log = logging.getLogger("failover_client")

_P = ParamSpec("_P")
_T = TypeVar("_T")


class SendObservation(Protocol):
    """One send, from hand-over to outcome (see the module docstring)."""

    def resent(self, from_broker: BrokerAddress | None, to_broker: BrokerAddress) -> None:
        """The message is written again, to ``to_broker``, after its session was lost or left
        (called under the connection's lock: be quick)."""

    def finished(self, error: BaseException | None, broker: BrokerAddress | None) -> None:
        """The outcome, once: ``error`` None when ``broker`` confirmed it (or, fire-and-forget,
        it was written there); ``broker`` None when it was never written."""


class DeliveryObservation(Protocol):
    """One handler call (see :meth:`Observer.handling`)."""

    def finished(self, error: BaseException | None) -> None:
        """The handler returned (``error`` None) or raised ``error``."""


class Observer(Protocol):
    """What a connection tells its observer; every call must be quick and thread-safe."""

    def sending(
        self, destination: str, headers: MutableMapping[str, str], message_id: str | None
    ) -> SendObservation | None:
        """A send was handed over (application thread); add headers to ``headers`` here."""

    def handling(
        self, message: Message, broker: BrokerAddress | None
    ) -> DeliveryObservation | None:
        """A handler is about to run for ``message`` (from ``broker``), on its thread."""

    def received(self, message: Message, broker: BrokerAddress | None) -> None:
        """``receive()`` or iteration hands ``message`` (from ``broker``) to the application."""


def safely(call: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T | None:
    """``call(*args)``; an exception is logged and gives None (telemetry must not break I/O)."""
    try:
        return call(*args, **kwargs)
    except Exception:  # noqa: BLE001 - logged; the message goes on without telemetry
        _log.exception("the connection's observer failed in %s", getattr(call, "__name__", call))
        return None


def observe_handler(observer: Observer, handler: Handler) -> Handler:
    """``handler`` as the observer sees it: each call between ``handling`` and ``finished``."""

    def observed(message: Message) -> None:
        observation = safely(observer.handling, message, broker_of(message))
        try:
            handler(message)
        except BaseException as exc:
            if observation is not None:
                safely(observation.finished, exc)
            raise
        if observation is not None:
            safely(observation.finished, None)

    return observed


def watch_send(observation: SendObservation, message: OutboundMessage | None, slot: Slot) -> None:
    """End ``observation`` with the send's outcome: its confirmation, or (fire-and-forget)
    now, at its write."""
    future = message.future if message is not None else None
    if future is None:
        safely(observation.finished, None, slot.address)
        return
    assert isinstance(future, Future)  # an observed send never gets a Latch (see Sender._enqueue)

    def done(settled: Future[None]) -> None:
        written = message.session if message is not None else None
        broker = written.address if isinstance(written, Slot) else None
        safely(observation.finished, settled.exception(), broker)

    future.add_done_callback(done)


def broker_of(message: Message) -> BrokerAddress | None:
    """The broker whose session delivered ``message``."""
    session = message.session
    return session.address if isinstance(session, Slot) else None


class Observing:
    """``set_observer`` of a failover connection (a mixin, like ``Consuming``)."""

    _guard: ProcessGuard
    _sender: Sender
    _consumers: Consumers

    def set_observer(self, observer: Observer | None) -> None:
        """Install ``observer`` (None removes it); it sees sends and deliveries from now on.

        For instrumentation such as :func:`failover_client.otel.instrument`; most applications
        never call it. Sends already handed over keep the observer they started with.
        """
        self._guard.check()
        self._sender.observer = observer
        self._consumers.observer = observer

    @property
    def observer(self) -> Observer | None:
        """The installed observer, if any."""
        return self._sender.observer
