"""The project's one exception hierarchy.

::

    FailoverClientError
    +-- ConfigurationError          bad input from the user; nothing was changed
    |   +-- URIError                a failover URI that does not parse (names text and position)
    |   +-- OptionError             an unknown or ill-typed option (names the nearest valid ones)
    |   +-- PolicyError             an unknown policy name (lists the registered ones)
    |   |   +-- PolicyLoadError     a policy plugin that failed to load (policies)
    |   +-- TopologySourceError     an unknown topology source name (topology)
    +-- ConnectionFailure           something went wrong talking to a broker
    |   +-- BrokerUnavailable       one broker could not be reached or handshaken
    |   |   +-- BrokerRefused       it ended the session over a frame it did not name
    |   |   +-- ConnectCancelled    the connect was cut short by its caller (closing)
    |   +-- AuthenticationFailed    a broker refused the credentials (not retried)
    |   +-- TLSFailure              certificate / hostname verification failed (not retried)
    |   +-- ProtocolViolation       a broker sent something the protocol does not allow
    |   +-- AllBrokersFailed        the reconnect loop gave up; carries each broker's last cause
    +-- SendFailure                 a send could not be confirmed
    |   +-- SendTimeout             not confirmed within ``timeout``
    |   +-- SendRejected            the broker answered the send with an ERROR / rejection
    +-- SubscriptionRefused         the broker refused a subscription (not restored)
    +-- ConnectionClosed            the application closed the connection
    +-- NotConnected                called before ``connect()`` (also a ``RuntimeError``)

Each state of a connection that refuses work has its own error: ``NotConnected`` before
``connect()`` (a mistake in the calling code), ``AllBrokersFailed`` once the reconnect loop gave
up (send, send_async, subscribe and flush raise it with every broker's last cause, and the error
the loop stopped with, the ``GaveUp`` event's, as its ``__cause__``), and ``ConnectionClosed``
after ``close()``.

Third-party exceptions (stomp.py, proton, ssl, socket) are mapped onto these at the adapter
boundary and raised ``from`` the original, so ``__cause__`` keeps the detail. Messages never
contain a password: URIs appear only in their redacted form.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = [
    "AllBrokersFailed",
    "AuthenticationFailed",
    "BrokerRefused",
    "BrokerUnavailable",
    "ConfigurationError",
    "ConnectCancelled",
    "ConnectionClosed",
    "ConnectionFailure",
    "FailoverClientError",
    "NotConnected",
    "OptionError",
    "PolicyError",
    "ProtocolViolation",
    "SendFailure",
    "SendRejected",
    "SendTimeout",
    "SubscriptionRefused",
    "TLSFailure",
    "URIError",
]


class FailoverClientError(Exception):
    """Base of every error this library raises on purpose."""


class ConfigurationError(FailoverClientError, ValueError):
    """The user's input (URI, option, policy name) is wrong; nothing was changed."""


class URIError(ConfigurationError):
    """A failover URI that does not parse.

    ``text`` is the whole (redacted) URI and ``position`` the 0-based character offset of the
    problem, so tools can point at it.
    """

    def __init__(self, message: str, *, text: str = "", position: int | None = None) -> None:
        self.reason = message
        self.text = text
        self.position = position
        super().__init__(self._render())

    def _render(self) -> str:
        if self.position is None or not self.text:
            return self.reason
        caret = " " * self.position + "^"
        return f"{self.reason} at position {self.position}\n  {self.text}\n  {caret}"


class OptionError(URIError):
    """An unknown or ill-typed option; ``suggestions`` holds the nearest valid names."""

    def __init__(
        self,
        message: str,
        *,
        option: str,
        text: str = "",
        position: int | None = None,
        suggestions: Sequence[str] = (),
    ) -> None:
        self.option = option
        self.suggestions = tuple(suggestions)
        if self.suggestions:
            message = f"{message} (did you mean: {', '.join(self.suggestions)}?)"
        super().__init__(message, text=text, position=position)


class PolicyError(ConfigurationError):
    """An unknown policy name; ``known`` lists the registered names."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        self.name = name
        self.known = tuple(sorted(known))
        super().__init__(
            f"unknown broker-selection policy {name!r}; registered policies: "
            + ", ".join(self.known)
        )


class ConnectionFailure(FailoverClientError):
    """Talking to a broker failed. ``broker`` is the redacted address, when known."""

    def __init__(self, message: str, *, broker: str | None = None) -> None:
        self.broker = broker
        super().__init__(f"{broker}: {message}" if broker else message)


class BrokerUnavailable(ConnectionFailure):
    """One broker could not be reached, did not finish the handshake in time, or dropped."""


class BrokerRefused(BrokerUnavailable):
    """The broker ended the session on purpose, with an error that named no frame of ours.

    A STOMP ERROR without one of our receipts (or a close right after one), an AMQP close
    with an error condition. The broker is alive: something it was sent made it end the
    session, and the engine looks for that frame before it replays the others (poison
    quarantine, see the README).
    """


class ConnectCancelled(BrokerUnavailable):
    """The connect was cancelled (the connection is closing) before the handshake finished.

    Says nothing about the broker's health: the reconnect loop does not count it as a failure.
    """


class AuthenticationFailed(ConnectionFailure):
    """The broker refused the credentials. Retrying the same credentials cannot help."""


class TLSFailure(ConnectionFailure):
    """TLS verification failed. A wrong CA is not an outage and is not retried forever."""


class ProtocolViolation(ConnectionFailure):
    """The broker sent a frame the protocol does not allow (garbage, truncated, out of order)."""


class AllBrokersFailed(ConnectionFailure):
    """The reconnect loop gave up: every attempt the schedule allowed failed.

    ``causes`` maps each broker (redacted address) to the last error seen from it.
    """

    def __init__(self, message: str, causes: Mapping[str, BaseException]) -> None:
        self.reason = message
        self.causes = dict(causes)
        details = "; ".join(f"{b}: {type(e).__name__}: {e}" for b, e in self.causes.items())
        super().__init__(f"{message}: {details}" if details else message)


class SendFailure(FailoverClientError):
    """A send could not be confirmed. ``message_id`` names the message."""

    def __init__(self, message: str, *, message_id: str | None = None) -> None:
        self.message_id = message_id
        super().__init__(f"{message} (message-id {message_id})" if message_id else message)


class SendTimeout(SendFailure):
    """The send was not confirmed within the configured ``timeout``.

    The message may still reach the broker later: a retry can deliver it twice, with the same id.
    """


class SendRejected(SendFailure):
    """The broker answered the send with an error; re-sending the same message will not help."""


class SubscriptionRefused(FailoverClientError):
    """The broker refused a subscription (unknown destination, bad selector, no permission).

    The subscription is not restored on any broker; ``subscription_id`` names it.
    """

    def __init__(self, message: str, *, subscription_id: str | None = None) -> None:
        self.subscription_id = subscription_id
        super().__init__(message)


class ConnectionClosed(FailoverClientError):
    """The application closed the connection; no further sends or subscriptions are possible."""


class NotConnected(FailoverClientError, RuntimeError):
    """A call that needs a connection came before ``connect()``.

    A mistake in the calling code, not an outage: nothing was tried with any broker.
    """
