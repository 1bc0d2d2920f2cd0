"""What every connector of one connection shares, validated once: :class:`ConnectorSettings`.

The STOMP and AMQP adapters and the shipped fake used to check heart-beats, close timeouts and
TLS files each in their own way, and the copies drifted (a key file without its certificate was
a configuration error in one adapter and an endless "broker unavailable" retry in the other).
One frozen value now checks them in ``__post_init__`` (elastic-transport's ``NodeConfig``
does the same for its five back-ends), so every adapter refuses the same settings at
construction with the same message, and the reconnect loop never meets a configuration error.
"""

from __future__ import annotations

import math
import ssl
from dataclasses import dataclass, field

from failover_client._errors import ConfigurationError
from failover_client.net._tls import LazyTls, build_ssl_context
from failover_client.uri import BrokerAddress, FailoverOptions

__all__ = ["ConnectorSettings"]


@dataclass(frozen=True, slots=True)
class ConnectorSettings:
    """The protocol-neutral settings of one connector; :class:`ConfigurationError` when wrong.

    ``heartbeat`` is (send, receive) milliseconds, ``None`` for ``options.heartbeat``; the value
    in force is :attr:`beats`. ``close_timeout`` bounds how long a session's ``close()`` waits
    for the broker. ``ssl_context`` is a ready client context for TLS members instead of one
    built from the ``tls_*`` options. The passcode is never shown (``repr`` leaves it out).
    """

    options: FailoverOptions = field(default_factory=FailoverOptions)
    login: str | None = None
    passcode: str | None = field(default=None, repr=False)
    heartbeat: tuple[int, int] | None = None
    close_timeout: float = 2.0
    client_id: str | None = None
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False, compare=False)
    _beats: tuple[int, int] = field(init=False, repr=False, compare=False)
    _tls: LazyTls[ssl.SSLContext] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.options, FailoverOptions):
            raise ConfigurationError(
                f"options must be FailoverOptions; got {type(self.options).__name__}"
            )
        for name in ("login", "passcode", "client_id"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                # The passcode's value is never shown, only its type.
                raise ConfigurationError(f"{name} must be a string; got {type(value).__name__}")
        beats = self.options.heartbeat if self.heartbeat is None else self.heartbeat
        object.__setattr__(self, "_beats", _heartbeat(beats))
        _check_seconds("close_timeout", self.close_timeout)
        if self.ssl_context is not None and not isinstance(self.ssl_context, ssl.SSLContext):
            raise ConfigurationError(
                f"ssl_context must be an ssl.SSLContext; got {type(self.ssl_context).__name__}"
            )
        # Named files are loaded now: an unusable one is refused here, not on every reconnect.
        object.__setattr__(
            self, "_tls", LazyTls(self.options, build_ssl_context, ready=self.ssl_context)
        )

    @property
    def beats(self) -> tuple[int, int]:
        """(send, receive) heart-beat milliseconds in force (0 switches that direction off)."""
        return self._beats

    def credentials_for(self, address: BrokerAddress) -> tuple[str | None, str | None]:
        """(login, passcode) for ``address``: the member's own beat the connector's defaults.

        A member that names a user without a password sends none (it does not borrow the
        default passcode of another user).
        """
        if address.user is not None:
            return address.user, address.password
        return self.login, self.passcode

    def tls_context(self) -> ssl.SSLContext:
        """The client TLS context for TLS members, built once (see :class:`LazyTls`)."""
        return self._tls.get()


def _heartbeat(beats: object) -> tuple[int, int]:
    wanted = "heartbeat must be (send, receive): two whole numbers of milliseconds >= 0"
    if not isinstance(beats, tuple | list) or len(beats) != 2:
        raise ConfigurationError(f"{wanted}; got {beats!r}")
    for beat in beats:
        if isinstance(beat, bool) or not isinstance(beat, int) or beat < 0:
            raise ConfigurationError(f"{wanted}; got {tuple(beats)!r}")
    return int(beats[0]), int(beats[1])


def _check_seconds(name: str, value: object) -> None:
    """A finite, non-negative number of seconds: every wait of a close has a deadline."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(
            f"{name} must be a number of seconds >= 0; got {type(value).__name__} {value!r}"
        )
    if math.isnan(value) or math.isinf(value) or value < 0:
        raise ConfigurationError(f"{name} must be a finite number of seconds >= 0; got {value!r}")
