"""One cancellable connection to one host and port: name resolution, TCP connect, TLS handshake.

A blocking ``socket.create_connection`` or ``do_handshake`` can only be ended by its timeout,
and the system resolver cannot be interrupted at all (it may take its own timeouts, several
seconds per DNS server, longer than a connect timeout). A failover client has to end a connect
at once when the application closes, and has to keep all three steps within one deadline. So
:class:`SocketDial`:

* resolves a name on a short-lived daemon thread while the caller waits in a selector; a
  cancelled or late lookup is left to finish on its own (it holds no socket, and its answer is
  dropped). A literal address needs no resolver and is answered on the caller's thread;
* connects to each resolved address in turn without blocking, IPv6 included, like
  ``socket.create_connection``, waiting in the same kind of selector;
* runs the TLS handshake on the connected non-blocking socket, waiting there too.

Every wait also watches a socket pair that :meth:`SocketDial.interrupt` writes to from any
thread. Nothing here knows a protocol: the STOMP transport dials through it, and so will the
OpenWire control channel.

:func:`describe_failure` says in words what a failed dial's exception means ("connection
refused", "cannot resolve the host name (...)", "timed out"): every adapter builds its
``BrokerUnavailable`` messages with it, so each reconnect warning names the cause.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import selectors
import socket
import ssl
import threading
from collections.abc import Callable, Sequence
from typing import Any

from failover_client._clock import Clock

__all__ = ["AddrInfo", "Resolver", "SocketDial", "describe_failure"]

AddrInfo = tuple[int, int, int, str, Any]
"""One ``getaddrinfo`` answer: (family, type, proto, canonname, sockaddr)."""

Resolver = Callable[[str, int, int, int], Sequence[AddrInfo]]
"""``socket.getaddrinfo(host, port, family, type)``: injected so tests can stand in a slow DNS."""

_IN_PROGRESS = frozenset(
    code
    for code in (
        errno.EINPROGRESS,
        errno.EALREADY,
        errno.EWOULDBLOCK,
        getattr(errno, "WSAEWOULDBLOCK", None),  # what a non-blocking connect says on Windows
    )
    if code is not None
)
"""connect_ex() results that mean "under way": wait for the socket to become writable."""


_OS_ERRORS: tuple[tuple[type[OSError], str], ...] = (
    (ConnectionRefusedError, "connection refused"),
    (ConnectionResetError, "connection reset"),
    (BrokenPipeError, "connection broken"),
    (TimeoutError, "timed out"),
)
_ERRNO_WORDS: dict[int, str] = {
    errno.ENETUNREACH: "network unreachable",
    errno.EHOSTUNREACH: "host unreachable",
    errno.EADDRNOTAVAIL: "address not available",
}


def describe_failure(exc: BaseException) -> str:
    """What a failed dial (or a write on a dialled socket) means, in words a log reader knows.

    ``socket.gaierror`` is "cannot resolve the host name" with the resolver's reason; the
    connection errors are named ("connection refused", ...); TLS errors say whether the
    certificate failed verification. Anything else: its ``strerror`` or its type and text.
    """
    if isinstance(exc, socket.gaierror):
        reason = exc.strerror or str(exc)
        return f"cannot resolve the host name ({reason})"
    if isinstance(exc, ssl.SSLError):
        return _tls_words(exc)
    if isinstance(exc, OSError):
        return _os_words(exc)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _tls_words(exc: ssl.SSLError) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        reason = getattr(exc, "verify_message", None) or exc.reason or str(exc)
        return f"certificate verification failed: {reason}"
    return f"TLS error: {exc.reason or exc}"


def _os_words(exc: OSError) -> str:
    for kind, words in _OS_ERRORS:
        if isinstance(exc, kind):
            return words
    if exc.errno in _ERRNO_WORDS:
        words = _ERRNO_WORDS[exc.errno]
        return f"{words} ({exc.strerror})" if exc.strerror else words
    return exc.strerror or str(exc) or type(exc).__name__


def _is_literal(host: str) -> bool:
    """Whether ``host`` is an IP address (getaddrinfo answers those without a resolver)."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


class SocketDial:
    """Dials ``host:port`` once, all steps within ``deadline`` on ``clock``.

    :param tls_context: when given, the connected socket is wrapped with it and the TLS
        handshake runs before :meth:`connect` returns.
    :param server_hostname: the name the TLS handshake sends (SNI) and verifies the
        certificate against.
    :param resolver: ``getaddrinfo``; the system's by default.

    :meth:`interrupt` (any thread) ends a running or later :meth:`connect` at once.
    """

    __slots__ = (
        "_clock",
        "_deadline",
        "_host",
        "_interrupted",
        "_port",
        "_resolver",
        "_server_hostname",
        "_stage",
        "_tls_context",
        "_wake",
        "_wake_lock",
    )

    def __init__(
        self,
        host: str,
        port: int,
        *,
        deadline: float,
        clock: Clock,
        tls_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        resolver: Resolver = socket.getaddrinfo,
    ) -> None:
        self._host = host
        self._port = port
        self._deadline = deadline
        self._clock = clock
        self._tls_context = tls_context
        self._server_hostname = server_hostname
        self._resolver = resolver
        self._stage = "TCP connect"
        self._wake_lock = threading.Lock()
        self._wake: tuple[socket.socket, socket.socket] | None = None
        self._interrupted = False

    @property
    def stage(self) -> str:
        """The step under way, or the one that failed: ``name resolution``, ``TCP connect``
        or ``TLS handshake`` (for error messages)."""
        return self._stage

    def connect(self) -> socket.socket:
        """The connected socket (a TLS one with a ``tls_context``), left non-blocking.

        Raises TimeoutError at the deadline, ConnectionAbortedError once interrupted, and
        otherwise the OSError (``socket.gaierror``, ``ssl.SSLError``, ...) of the failed step.
        Nothing is left open when it raises, except a lookup thread cut short (see the module).
        """
        self._open_wake()
        try:
            sock = self._connect_tcp()
            if self._tls_context is None:
                return sock
            self._stage = "TLS handshake"
            try:
                return self._tls_handshake(sock, self._tls_context)
            except BaseException:
                sock.close()  # wrap_socket may fail before it took the descriptor over
                raise
        finally:
            self._close_wake()

    def interrupt(self) -> None:
        """Make a running or later :meth:`connect` fail at once (any thread)."""
        with self._wake_lock:
            self._interrupted = True
        self._poke()

    def _remaining(self) -> float:
        remaining = self._deadline - self._clock.monotonic()
        if remaining <= 0:
            raise TimeoutError("connect deadline passed")
        return remaining

    def _open_wake(self) -> None:
        with self._wake_lock:
            if self._interrupted:
                raise ConnectionAbortedError("connect cancelled")
            wake = socket.socketpair()
            wake[1].setblocking(False)  # interrupt() holds the lock while it writes
            self._wake = wake

    def _close_wake(self) -> None:
        with self._wake_lock:
            wake, self._wake = self._wake, None
        if wake is not None:
            for end in wake:
                end.close()

    def _connect_tcp(self) -> socket.socket:
        """Connect to the first resolved address that accepts."""
        self._remaining()
        infos = self._resolve()
        errors: list[OSError] = []
        for family, kind, proto, _, sockaddr in infos:
            sock = socket.socket(family, kind, proto)
            try:
                self._connect_one(sock, sockaddr)
            except OSError as exc:
                sock.close()
                if self._interrupted or isinstance(exc, TimeoutError):
                    raise  # cancelled, or the deadline passed: no time for the next address
                errors.append(exc)
                continue
            except BaseException:
                sock.close()
                raise
            return sock
        # getaddrinfo raises rather than return nothing; like create_connection, report the
        # first address's error.
        raise errors[0]

    def _resolve(self) -> Sequence[AddrInfo]:
        """The resolver's answer, within the deadline and cancellable (see the module)."""
        host, port = self._host, self._port
        if _is_literal(host):
            return self._resolver(host, port, 0, socket.SOCK_STREAM)
        self._stage = "name resolution"
        outcome: list[Sequence[AddrInfo] | Exception] = []
        done = threading.Event()

        def run() -> None:
            try:
                outcome.append(self._resolver(host, port, 0, socket.SOCK_STREAM))
            except Exception as exc:  # noqa: BLE001 - raised on the connecting thread
                outcome.append(exc)
            done.set()
            self._poke()

        thread = threading.Thread(target=run, name="failover-client-resolve", daemon=True)
        thread.start()
        if not done.is_set():
            self._wait_for(None, selectors.EVENT_READ)  # the poke, interrupt(), or the deadline
        thread.join()  # already past its last step
        self._drain_wake()
        if self._interrupted:
            raise ConnectionAbortedError("connect cancelled")
        [result] = outcome
        if isinstance(result, Exception):
            raise result  # the stage stays "name resolution": that is what failed
        self._stage = "TCP connect"
        return result

    def _poke(self) -> None:
        """Wake a :meth:`_wait_for` in progress; nothing once the dial has ended."""
        with self._wake_lock:
            if self._wake is not None:
                with contextlib.suppress(OSError):  # a full pipe has already woken the waiter
                    self._wake[1].send(b"\0")

    def _drain_wake(self) -> None:
        """Read the pokes out, so the connect's own wait is not woken by them."""
        wake = self._wake
        if wake is None:
            return
        wake[0].setblocking(False)
        with contextlib.suppress(BlockingIOError):
            while wake[0].recv(64):
                pass

    def _connect_one(self, sock: socket.socket, sockaddr: Any) -> None:
        """A non-blocking connect of ``sock`` to ``sockaddr``; raises the OSError it ends with."""
        sock.setblocking(False)
        code = sock.connect_ex(sockaddr)
        if code in _IN_PROGRESS:
            self._wait_for(sock, selectors.EVENT_WRITE)
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            # OSError(errno, ...) builds the matching subclass (ConnectionRefusedError, ...),
            # as a blocking connect would raise it.
            raise OSError(code, os.strerror(code))

    def _tls_handshake(self, sock: socket.socket, context: ssl.SSLContext) -> ssl.SSLSocket:
        """The TLS handshake on the connected non-blocking ``sock``, waiting in the selector."""
        tls = context.wrap_socket(
            sock, server_hostname=self._server_hostname, do_handshake_on_connect=False
        )
        try:
            while True:
                try:
                    tls.do_handshake()
                except ssl.SSLWantReadError:
                    self._wait_for(tls, selectors.EVENT_READ)
                except ssl.SSLWantWriteError:
                    self._wait_for(tls, selectors.EVENT_WRITE)
                else:
                    return tls
        except BaseException:
            tls.close()
            raise

    def _wait_for(self, sock: socket.socket | None, events: int) -> None:
        """Block until ``sock`` is ready for ``events``, the deadline passes (TimeoutError) or
        :meth:`interrupt` runs (ConnectionAbortedError). Without ``sock``, wait for a poke."""
        wake = self._wake
        with selectors.DefaultSelector() as selector:
            if sock is not None:
                selector.register(sock, events)
            if wake is not None:
                selector.register(wake[0], selectors.EVENT_READ)
            ready = selector.select(self._remaining())
        if self._interrupted:
            raise ConnectionAbortedError("connect cancelled")
        if not ready:
            raise TimeoutError("connect deadline passed")

    def __repr__(self) -> str:
        return (
            f"SocketDial(host={self._host!r}, port={self._port}, "
            f"tls={self._tls_context is not None}, stage={self._stage!r})"
        )
