"""The one TLS builder of every adapter: the client ``ssl.SSLContext`` from the options.

stomp.py's ``set_ssl`` builds a context per connect from file names and only knows "verify
everything" or "verify nothing"; it cannot verify the certificate while skipping the host name,
and it reloads the files on every reconnect. Every adapter (STOMP, AMQP, the shipped fake)
builds its TLS object through :class:`LazyTls` instead: once per connector, and *at
construction* whenever the options name a file, so a missing file, a key without its
certificate or a wrong key password is a :class:`ConfigurationError` there, never a "broker
unavailable" on every reconnect. AMQP runs TLS in proton's C library and turns the same options
into a proton ``SSLDomain``; it checks them here first, so both adapters refuse the same
settings with the same messages.

Verification (certificate chain and host name) is on unless the options switch it off.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from failover_client._errors import ConfigurationError
from failover_client.uri import FailoverOptions

__all__ = ["LazyTls", "build_ssl_context", "names_tls_files"]

T = TypeVar("T")


def names_tls_files(options: FailoverOptions) -> bool:
    """Whether the options name a CA, certificate or key file (which can be unusable)."""
    return any((options.tls_ca_file, options.tls_cert_file, options.tls_key_file))


class LazyTls(Generic[T]):
    """One connector's TLS object (a context, a proton domain): built once, thread-safe.

    Built at construction when the options name a file (an unusable one raises
    :class:`ConfigurationError` from here, at once), otherwise on the first TLS member, so a
    connection without one never loads the system trust store. ``ready`` is a TLS object the
    caller already has (the user's own ``ssl_context``): it is used as it is.
    """

    __slots__ = ("_build", "_lock", "_options", "_value")

    def __init__(
        self,
        options: FailoverOptions,
        build: Callable[[FailoverOptions], T],
        *,
        ready: T | None = None,
    ) -> None:
        self._options = options
        self._build = build
        self._lock = threading.Lock()
        self._value: T | None = ready
        if ready is None and names_tls_files(options):
            self._value = build(options)

    def get(self) -> T:
        """The TLS object, built on first use (ConfigurationError if the options are unusable)."""
        with self._lock:
            if self._value is None:
                self._value = self._build(self._options)
            return self._value

    def __repr__(self) -> str:
        with self._lock:
            return f"LazyTls(built={self._value is not None})"


def build_ssl_context(options: FailoverOptions) -> ssl.SSLContext:
    """A TLS 1.2+ client context following the ``tls_*`` options.

    Raises :class:`ConfigurationError` naming the option whose file is missing or unusable
    (never showing the key password).
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if options.tls_verify:
        # check_hostname must be switched off before verify_mode may be relaxed, and only
        # verify_mode=CERT_REQUIRED makes a hostname check meaningful.
        context.check_hostname = options.tls_verify_hostname
        context.verify_mode = ssl.CERT_REQUIRED
        if options.tls_ca_file:
            try:
                context.load_verify_locations(cafile=options.tls_ca_file)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigurationError(
                    f"tls_ca_file {options.tls_ca_file!r} cannot be loaded: {_reason(exc)}"
                ) from exc
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if options.tls_cert_file:
        try:
            context.load_cert_chain(
                certfile=options.tls_cert_file,
                keyfile=options.tls_key_file,
                password=options.tls_key_password,
            )
        except (OSError, ssl.SSLError) as exc:
            raise ConfigurationError(
                f"tls_cert_file {options.tls_cert_file!r} / tls_key_file "
                f"{options.tls_key_file!r} cannot be loaded (is the tls_key_password right?): "
                f"{_reason(exc)}"
            ) from exc
    elif options.tls_key_file:
        raise ConfigurationError("tls_key_file is set but tls_cert_file is not; give both")
    return context


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and getattr(exc, "reason", None):
        return str(exc.reason)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
