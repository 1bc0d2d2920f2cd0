"""The project's one exception hierarchy: every error a user can see, defined here.

::

    FailoverClientError
    +-- ConfigurationError          bad input from the user; nothing was changed (also a ValueError)
    |   +-- URIError                a failover URI that does not parse (names text and position)
    |   |   +-- OptionError         an unknown or ill-typed option (names the nearest valid ones)
    |   +-- PolicyError             an unknown policy name (lists the registered ones)
    |   |   +-- PolicyLoadError     a policy plugin that failed to load  [policies]
    |   +-- TopologySourceError     an unknown or broken topology source name  [topology]
    |   +-- SparkOptionError        a data source option missing, unknown or invalid  [spark]
    +-- ConnectionFailure           something went wrong talking to a broker
    |   +-- BrokerUnavailable       one broker could not be reached or handshaken
    |   |   +-- BrokerRefused       it ended the session over a frame it did not name
    |   |   +-- ConnectCancelled    the connect was cut short by its caller (closing)
    |   +-- AuthenticationFailed    a broker refused the credentials (not retried)
    |   +-- TLSFailure              certificate / hostname verification failed (not retried)
    |   +-- ProtocolViolation       a broker sent something the protocol does not allow
    |   |   +-- CodecError          bytes that are not the OpenWire they claim to be  [openwire]
    |   +-- AllBrokersFailed        the reconnect loop gave up; carries each broker's last cause
    +-- SendFailure                 a send could not be confirmed
    |   +-- SendTimeout             not confirmed within ``timeout``
    |   +-- SendRejected            the broker answered the send with an ERROR / rejection
    |   +-- PartitionNotConfirmed   a Spark partition's sends were not all confirmed  [spark]
    +-- SubscriptionRefused         the broker refused a subscription (not restored)
    +-- TopologyError               a topology source could not read or use a broker list
    |   +-- DnsLookupError          a DNS query got no usable answer  [topology]
    |   +-- UrlReadError            the updateURIsURL list could not be read  [topology]
    |   +-- AdvisoryError           an unusable bridge advisory  [topology] (also a ValueError)
    +-- DataError                   data given or kept cannot be used (not a setting, not an outage)
    |   +-- RowError                a row that cannot become a message  [spark] (also a ValueError)
    |   +-- SpoolGap                the source's spool lacks offsets Spark asks for  [spark]
    +-- ConnectionClosed            the application closed the connection
    +-- NotConnected                called before ``connect()`` (also a RuntimeError)

A name without a mark is importable from :mod:`failover_client`; ``[spark]`` and the other marks
name the public subpackage to import it from (``failover_client.spark``), which re-exports it
from here. ``tests/test_error_tree.py`` walks ``FailoverClientError.__subclasses__()`` and
compares it with this drawing: a class missing here, drawn under another parent, or not
importable where the mark says fails it.

Each state of a connection that refuses work has its own error: ``NotConnected`` before
``connect()`` (a mistake in the calling code), ``AllBrokersFailed`` once the reconnect loop gave
up (send, send_async, subscribe and flush raise it with every broker's last cause, and the error
the loop stopped with, the ``GaveUp`` event's, as its ``__cause__``), and ``ConnectionClosed``
after ``close()``.

A ``ConfigurationError`` is raised where the setting is given (a connector refuses bad
heart-beats or TLS files when it is built); it is never a ``ConnectionFailure``, which the
reconnect loop retries. ``TopologyError`` and ``DataError`` are not outages of the data
connection either: a source that cannot read its list keeps the last one, and a spool gap means
the stored data and Spark's checkpoint disagree (the spool was removed, or belongs to another
query), which no retry mends.

Third-party exceptions (stomp.py, proton, ssl, socket) are mapped onto these at the adapter
boundary and raised ``from`` the original, so ``__cause__`` keeps the detail. Messages never
contain a password: URIs appear only in their redacted form.

The real-broker harness shipped in :mod:`failover_client.testing.brokers` has a tree of its own
(``BrokerError``, drawn in its module): those errors say that a *test environment* could not
be set up (a broker did not start, a port is taken), not that the client failed, and an
application's ``except FailoverClientError`` in a test must not swallow them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = [
    "AdvisoryError",
    "AllBrokersFailed",
    "AuthenticationFailed",
    "BrokerRefused",
    "BrokerUnavailable",
    "CodecError",
    "ConfigurationError",
    "ConnectCancelled",
    "ConnectionClosed",
    "ConnectionFailure",
    "DataError",
    "DnsLookupError",
    "FailoverClientError",
    "NotConnected",
    "OptionError",
    "PartitionNotConfirmed",
    "PolicyError",
    "PolicyLoadError",
    "ProtocolViolation",
    "RowError",
    "SendFailure",
    "SendRejected",
    "SendTimeout",
    "SparkOptionError",
    "SpoolGap",
    "SubscriptionRefused",
    "TLSFailure",
    "TopologyError",
    "TopologySourceError",
    "URIError",
    "UrlReadError",
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


class PolicyLoadError(PolicyError):
    """A policy name is known but its code is broken: an entry point that does not import, or a
    factory that does not build a policy. ``source`` says where the code came from."""

    def __init__(self, name: str, source: str, problem: str, known: Sequence[str]) -> None:
        self.name = name
        self.known = tuple(sorted(known))
        self.source = source
        # PolicyError's own message says "unknown policy", which would mislead here: the name is
        # known, its code is broken. Skip to the base initialiser with the precise message.
        ConfigurationError.__init__(
            self, f"broker-selection policy {name!r} from {source} could not be used: {problem}"
        )


class TopologySourceError(ConfigurationError):
    """An unknown topology-source name; ``known`` lists the registered names.

    Also raised, with ``problem`` set, when a known name's code is broken (an entry point
    that does not import or is not callable).
    """

    def __init__(self, name: str, known: Sequence[str], problem: str | None = None) -> None:
        self.name = name
        self.known = tuple(sorted(known))
        self.problem = problem
        listed = ", ".join(self.known) or "(none)"
        if problem is None:
            message = f"unknown topology source {name!r}; registered sources: {listed}"
        else:
            message = f"topology source {name!r} could not be used: {problem}"
        super().__init__(message)


class SparkOptionError(ConfigurationError):
    """A data source option is missing, unknown or has a value outside its valid set.

    ``option`` is the documented spelling (``bodyColumn``), or None when the problem is a
    combination of options.
    """

    def __init__(self, message: str, *, option: str | None = None) -> None:
        self.option = option
        super().__init__(message)


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


class CodecError(ProtocolViolation):
    """Bytes that are not the OpenWire they claim to be; says what and where.

    ``command`` is the command being read (``"ConnectionControl"``, ``"frame"`` for the size
    prefix), ``field`` the field, ``offset`` the byte offset from the frame's type byte.
    """

    def __init__(
        self,
        problem: str,
        *,
        command: str | None = None,
        field: str | None = None,
        offset: int | None = None,
    ) -> None:
        self.problem = problem
        self.command = command
        self.field = field
        self.offset = offset
        where = " ".join(
            part
            for part in (
                command,
                f"field {field!r}" if field else None,
                f"at offset {offset}" if offset is not None else None,
            )
            if part
        )
        super().__init__(f"OpenWire {where}: {problem}" if where else f"OpenWire: {problem}")


class AllBrokersFailed(ConnectionFailure):
    """The reconnect loop gave up: every attempt the schedule allowed failed.

    ``causes`` maps each broker (redacted address) to the last error seen from it.
    """

    def __init__(self, message: str, causes: Mapping[str, BaseException]) -> None:
        self.reason = message
        self.causes = dict(causes)
        # The message names a few brokers (a pushed pool may hold hundreds); ``causes`` has all.
        shown = [f"{b}: {type(e).__name__}: {e}" for b, e in list(self.causes.items())[:8]]
        if len(self.causes) > len(shown):
            shown.append(f"and {len(self.causes) - len(shown):,} more")
        details = "; ".join(shown)
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
    """The broker answered the send with an error; re-sending the same message will not help.

    ``broker`` is the (redacted) broker that refused it and ``text`` its own words (a password
    the client sent is starred out), when the adapter knows them.
    """

    def __init__(
        self,
        message: str,
        *,
        message_id: str | None = None,
        broker: str | None = None,
        text: str | None = None,
    ) -> None:
        self.broker = broker
        self.text = text
        super().__init__(message, message_id=message_id)


class PartitionNotConfirmed(SendFailure):
    """Some messages of a Spark partition were not confirmed; the task fails, Spark retries it."""


class SubscriptionRefused(FailoverClientError):
    """The broker refused a subscription (unknown destination, bad selector, no permission).

    The subscription is not restored on any broker; ``subscription_id`` names it.
    """

    def __init__(self, message: str, *, subscription_id: str | None = None) -> None:
        self.subscription_id = subscription_id
        super().__init__(message)


class TopologyError(FailoverClientError):
    """A topology source could not read or use a broker list; it keeps the last one it had."""


class DnsLookupError(TopologyError):
    """A query got no usable answer; ``reason`` is ``NXDOMAIN``, ``timeout``, ``SERVFAIL``...

    Raised by a ``DnsResolve`` function (``failover_client.topology``); the source logs it and
    keeps its last list.
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"{reason}: {detail}" if detail else reason)


class UrlReadError(TopologyError):
    """The ``updateURIsURL`` list could not be read; the message says why (and no password)."""


class AdvisoryError(TopologyError, ValueError):
    """A network-bridge advisory (or its ``brokerURL``) that cannot be used; says why."""


class DataError(FailoverClientError):
    """Data given to the library, or kept by it, cannot be used as it is.

    Not a setting (a :class:`ConfigurationError`) and not an outage (a retry gives the same data).
    """


class RowError(DataError, ValueError):
    """A row that cannot become a message (a null destination or id). Fails the Spark task."""


class SpoolGap(DataError):
    """The source's spool lacks offsets Spark asks for: it was removed, or belongs to another query.

    The stored messages and Spark's checkpoint disagree; ``option`` names the setting to check
    (``checkpointLocation``).
    """

    def __init__(self, message: str, *, option: str | None = None) -> None:
        self.option = option
        super().__init__(message)


class ConnectionClosed(FailoverClientError):
    """The application closed the connection; no further sends or subscriptions are possible."""


class NotConnected(FailoverClientError, RuntimeError):
    """A call that needs a connection came before ``connect()``.

    A mistake in the calling code, not an outage: nothing was tried with any broker.
    """
