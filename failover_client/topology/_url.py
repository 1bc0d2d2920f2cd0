"""The ``url`` topology source: ActiveMQ's ``updateURIsURL``, a broker list at a path or URL.

ActiveMQ's failover transport reads a comma-separated list of broker URIs from
``updateURIsURL`` before each reconnect and adds those brokers to its own. This source reads
the same list from a local path, a ``file:`` URL or an ``http://`` / ``https://`` URL
(:func:`parse_broker_list`: commas and/or newlines, ``#`` comments, bad entries logged with
their position and skipped), and pushes it with action ``replace`` whenever it changed: the
list is the user's configuration, so a broker whose entry is removed leaves the pool (seeds
from the connection's URI stay).

When it reads:

* at :meth:`~UrlSource.start`, then every ``interval`` seconds;
* when the connection it feeds starts a reconnect pass, as ActiveMQ does: with a
  :class:`~failover_client.FailoverConnection` as sink it listens for ``Disconnected`` and for
  a ``ReconnectAttempt`` after a back-off delay, and reads at once (but not more often than
  ``min_interval``), so a broker added to the list during an outage is tried on that pass;
* after a failed read, again after ``min_interval``, doubling up to ``interval``.

A failed read never empties the pool: an unreachable server, a timeout, an HTTP status other
than 200, a body over ``max_bytes``, text that is not UTF-8, or a list naming no broker keeps
the last list, with the reason logged (the first failure of a streak as a warning). HTTPS is
verified (the system's CAs unless ``tls`` is given); a redirect may not leave HTTP(S) or go from
``https`` to ``http``. Credentials in the URL (``https://user:pass@host/list``) are sent as HTTP
basic authentication to that host only (never after a redirect) and never shown: logs and
``repr`` carry the URL with its password starred out.

With ``rebalance=True`` (ActiveMQ's ``rebalanceUpdateURIs``) a list whose brokers changed since
the last one pushed also asks the sink to rebalance (``request_rebalance``), when it can.
"""

from __future__ import annotations

import base64
import http.client
import logging
import os
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, NoReturn
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

from failover_client._clock import Clock, SystemClock
from failover_client._errors import ConfigurationError, UrlReadError
from failover_client._events import Disconnected, Event, ReconnectAttempt
from failover_client._hosts import shown_list
from failover_client._throttle import LogThrottle
from failover_client.uri import BrokerAddress, redact_value

from ._backoff import Backoff
from ._base import SourceThread, TopologySink, check_sink, report_failure
from ._file import SchemeRewrite, parse_broker_list

__all__ = ["DEFAULT_MAX_BYTES", "UrlReadError", "UrlSource", "starts_reconnect_pass"]

_log = logging.getLogger("failover_client.topology")

DEFAULT_MAX_BYTES = 1024 * 1024
"""A broker list is a few hundred bytes; a body far larger is not one, and is not read."""

_WEB = ("http", "https")


@dataclass(frozen=True)
class _Location:
    """Where the list is: a local path, or an HTTP(S) URL without its userinfo."""

    path: Path | None
    url: str | None
    authorization: str | None  # "Basic ...", from the URL's userinfo
    shown: str  # for logs and repr: the password starred out


def _locate(target: str | os.PathLike[str]) -> _Location:
    if not isinstance(target, str):
        path = Path(target)
        return _Location(path, None, None, str(path))
    shown = redact_value("url", target)
    try:
        parts = urlsplit(target)
        port = parts.port  # a bad port fails here, not at every read
    except ValueError as exc:
        raise ConfigurationError(f"url topology source: {shown!r} is not a URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme == "" or (len(scheme) == 1 and os.name == "nt"):  # a path (C:\ on Windows)
        return _Location(Path(target), None, None, target)
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ConfigurationError(
                f"url topology source: {shown!r} names a file on another host; use a local "
                "path or an http(s):// URL"
            )
        # file:/x, file:///x and file://localhost/x are one absolute path; file:x is relative.
        path = Path(urllib.request.url2pathname(parts.path))
        return _Location(path, None, None, shown)
    if scheme not in _WEB:
        raise ConfigurationError(
            f"url topology source: cannot read {shown!r}: give a path, a file: URL or an "
            "http:// or https:// URL"
        )
    if not parts.hostname:
        raise ConfigurationError(f"url topology source: {shown!r} has no host")
    authorization = None
    if parts.username is not None:
        user = unquote(parts.username)
        password = unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        authorization = f"Basic {token}"
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    netloc = host if port is None else f"{host}:{port}"
    bare = urlunsplit((scheme, netloc, parts.path or "/", parts.query, ""))
    return _Location(None, bare, authorization, shown)


class _Redirects(urllib.request.HTTPRedirectHandler):
    """Follows redirects within HTTP(S), never from ``https`` down to ``http``.

    Checked before urllib's own handling, whose refusal would print the target URL (and any
    password in it).
    """

    def http_error_302(
        self,
        req: urllib.request.Request,
        fp: IO[bytes],
        code: int,
        msg: str,
        headers: http.client.HTTPMessage,
    ) -> IO[bytes] | None:
        target = headers.get("Location") or headers.get("URI")
        if target is not None:
            old = urlsplit(req.full_url).scheme.lower()
            new = urlsplit(urljoin(req.full_url, target)).scheme.lower()
            if new not in _WEB or (old == "https" and new != "https"):
                fp.close()
                shown = redact_value("url", target)[:200]
                raise UrlReadError(f"refused the redirect ({code}) from {old} to {shown!r}")
        return super().http_error_302(req, fp, code, msg, headers)

    http_error_301 = http_error_303 = http_error_307 = http_error_308 = http_error_302


def starts_reconnect_pass(event: Event) -> bool:
    """Whether ``event`` begins a reconnect pass: the loss itself, or the first try after a
    back-off delay (a try inside a pass has delay 0)."""
    return isinstance(event, Disconnected) or (
        isinstance(event, ReconnectAttempt) and event.delay > 0
    )


def _positive(what: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigurationError(f"url topology source: {what} must be a number > 0, got {value!r}")
    return float(value)


class UrlSource:
    """Reads a list of broker URIs from a path or URL and pushes it when it changed.

    :param url: a local path, a ``file:`` URL, or an ``http://`` / ``https://`` URL (it may
        carry ``user:password@``, sent as basic authentication and never shown).
    :param interval: seconds between reads (on ``clock``).
    :param min_interval: the shortest time between two reads woken by the connection's
        reconnect passes, and the first retry after a failed read (doubling up to ``interval``).
    :param clock: waits go through it (a fake clock in tests).
    :param rebalance: ask the sink to rebalance when the list's brokers changed (ActiveMQ's
        ``rebalanceUpdateURIs``); the first list is not a change.
    :param timeout: seconds an HTTP connect or read may block.
    :param max_bytes: a longer list is refused (the last one is kept).
    :param tls: the TLS context of ``https`` reads; default: verified against the system's CAs.
    :param scheme_map: rewrites entries of another protocol (``{"tcp": ("stomp", 61613)}``:
        an ActiveMQ ``tcp://`` list for a STOMP connection).
    :param name: the ``source`` of every update.

    Reads run on a daemon thread from :meth:`start`; :meth:`stop` wakes a waiting thread at
    once, and an HTTP read under way ends within ``timeout``.
    """

    def __init__(
        self,
        url: str | os.PathLike[str],
        *,
        interval: float = 30.0,
        min_interval: float = 1.0,
        clock: Clock | None = None,
        rebalance: bool = False,
        timeout: float = 10.0,
        max_bytes: int = DEFAULT_MAX_BYTES,
        tls: ssl.SSLContext | None = None,
        scheme_map: SchemeRewrite | None = None,
        name: str = "url",
    ) -> None:
        self.interval = _positive("interval", interval)
        self.min_interval = _positive("min_interval", min_interval)
        if self.min_interval > self.interval:
            raise ConfigurationError(
                f"url topology source: min_interval ({min_interval!r}) must be <= interval "
                f"({interval!r})"
            )
        self.timeout = _positive("timeout", timeout)
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ConfigurationError(
                f"url topology source: max_bytes must be a whole number >= 1, got {max_bytes!r}"
            )
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"url topology source: name must be a name, got {name!r}")
        if scheme_map is not None and not isinstance(scheme_map, Mapping):
            raise ConfigurationError("url topology source: scheme_map must be a mapping")
        self._where = _locate(url)
        self.max_bytes = max_bytes
        self.rebalance = bool(rebalance)
        self.name = name
        self._scheme_map = scheme_map
        self._clock: Clock = clock or SystemClock()
        self._opener: urllib.request.OpenerDirector | None = None
        if self._where.url is not None:
            context = tls or ssl.create_default_context()
            self._opener = urllib.request.build_opener(
                urllib.request.HTTPSHandler(context=context), _Redirects()
            )
        self._worker = SourceThread(self.name)
        self._stop = self._worker.stopping
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._read = threading.Condition(self._lock)
        # Guarded by _lock:
        self._sink: TopologySink | None = None
        self._listening = False
        self._last: tuple[BrokerAddress, ...] | None = None
        self.reads = 0
        """Reads finished so far, failed ones included."""
        self.last_error: str | None = None
        """Why the latest read failed; None after a good one."""
        # The source thread's own:
        self._text: str | None = None  # the text of the last list pushed (or found empty)
        self._backoff = Backoff(self.min_interval, self.interval, owner="url topology source")
        self._throttle = LogThrottle(_log, clock=self._clock.monotonic)

    @property
    def shown(self) -> str:
        """Where the list is read from, password starred out."""
        return self._where.shown

    # --- life cycle ----------------------------------------------------------------------------

    def start(self, sink: TopologySink) -> None:
        """Read now, then on the interval and on each reconnect pass of ``sink``, on a thread."""
        check_sink(sink, self)
        self._worker.start(lambda: self._run(sink), self)
        sink.add_listener(self._on_event)
        with self._lock:
            self._sink, self._listening = sink, True

    def stop(self) -> None:
        """Stop reading and join the thread. Idempotent; never raises."""
        self._stop.set()
        self._wake.set()
        with self._lock:
            sink, listening, self._listening = self._sink, self._listening, False
        if listening and sink is not None:
            try:
                sink.remove_listener(self._on_event)
            except Exception:  # noqa: BLE001 - stop() must not raise; the sink's bug is logged
                _log.exception("%s: could not stop listening to %r", self.name, sink)
        self._worker.stop()

    def _on_event(self, event: Event) -> None:
        # The connection's dispatch thread: only wake the reader, never read here.
        if starts_reconnect_pass(event):
            self._wake.set()

    def wait_reads(self, count: int, timeout: float | None = None) -> bool:
        """Block (real time) until ``count`` reads finished; False after ``timeout``."""
        with self._read:
            return self._read.wait_for(lambda: self.reads >= count, timeout)

    def _run(self, sink: TopologySink) -> None:
        while not self._stop.is_set():
            self._wake.clear()
            started = self._clock.monotonic()
            delay = self._refresh(sink)
            woken = self._clock.wait(self._wake, delay)
            if self._stop.is_set():
                return
            if woken:  # a reconnect pass: read at once, but not more often than min_interval
                rest = started + self.min_interval - self._clock.monotonic()
                if rest > 0 and self._clock.wait(self._stop, rest):
                    return

    # --- one read ------------------------------------------------------------------------------

    def _refresh(self, sink: TopologySink) -> float:
        """Read once and push a changed list; returns the seconds until the next read."""
        try:
            text = self._fetch()
            brokers = self._brokers(text)
        except UrlReadError as exc:
            return self._failed(sink, str(exc))
        except Exception as exc:  # noqa: BLE001 - a bug must not end the reading thread either
            _log.exception("%s: reading %s failed", self.name, self.shown)
            return self._failed(sink, f"{type(exc).__name__}: {exc}")
        if failures := self._backoff.succeeded():
            _log.info("%s: %s read again after %d failures", self.name, self.shown, failures)
        if brokers is not None:
            self._push(sink, brokers)
        self._finish(None)  # after the push: a waiter on the read sees what it pushed
        return self.interval

    def _brokers(self, text: str) -> tuple[BrokerAddress, ...] | None:
        """The list in ``text``; None when the text is the one pushed last (nothing to do)."""
        if text == self._text:
            return None
        brokers = parse_broker_list(
            text, self.shown, scheme_map=self._scheme_map, throttle=self._throttle
        )
        if not brokers:
            raise UrlReadError("the list names no broker (every entry is blank or bad)")
        self._text = text
        return brokers

    def _push(self, sink: TopologySink, brokers: tuple[BrokerAddress, ...]) -> None:
        with self._lock:
            previous, self._last = self._last, brokers
        if brokers == previous:
            return
        _log.info("%s: %s lists %s", self.name, self.shown, shown_list(brokers))
        try:
            sink.update_brokers(brokers, source=self.name, action="replace")
        except Exception:  # noqa: BLE001 - a sink's bug must not end the reading thread
            _log.exception("%s: the sink failed to take the list from %s", self.name, self.shown)
            return
        moved = previous is not None and {b.key for b in brokers} != {b.key for b in previous}
        if self.rebalance and moved:
            try:
                sink.request_rebalance(source=self.name)
            except Exception:  # noqa: BLE001 - as above
                _log.exception("%s: the sink failed to rebalance", self.name)

    def _failed(self, sink: TopologySink, reason: str) -> float:
        """Keep the last list; log the first failure of a streak; the next read's delay."""
        retry = self._backoff.failed()
        with self._lock:
            kept = 0 if self._last is None else len(self._last)
        _log.log(
            logging.WARNING if self._backoff.failures == 1 else logging.DEBUG,
            "%s: cannot read %s, keeping the last list (%d brokers); retry in %gs: %s",
            self.name,
            self.shown,
            kept,
            retry,
            reason,
        )
        report_failure(sink, self.name, reason, self._backoff.failures, retry)
        self._finish(reason)
        return retry

    def _finish(self, error: str | None) -> None:
        with self._read:
            self.reads += 1
            self.last_error = error
            self._read.notify_all()

    def _fetch(self) -> str:
        """The list's text; :class:`UrlReadError` saying why there is none."""
        where = self._where
        if where.path is not None:
            try:
                with where.path.open("rb") as file:
                    body = file.read(self.max_bytes + 1)
            except OSError as exc:
                raise UrlReadError(f"{type(exc).__name__}: {exc.strerror or exc}") from None
            return self._decode(body, "utf-8")
        return self._fetch_http()

    def _fetch_http(self) -> str:
        assert self._opener is not None
        assert self._where.url is not None
        request = urllib.request.Request(  # noqa: S310 - the scheme is http(s), checked above
            self._where.url, headers={"User-Agent": "failover-client", "Accept": "text/plain, */*"}
        )
        if self._where.authorization is not None:
            # Unredirected: urllib copies every other header to the target of a redirect.
            request.add_unredirected_header("Authorization", self._where.authorization)
        try:
            with self._opener.open(request, timeout=self.timeout) as response:
                status = response.status
                if status != 200:
                    raise UrlReadError(f"HTTP {status} {response.reason} (only 200 carries a list)")
                length = response.headers.get("Content-Length", "")
                if length.isdigit() and int(length) > self.max_bytes:
                    self._too_large()
                body = response.read(self.max_bytes + 1)
                charset = response.headers.get_content_charset() or "utf-8"
        except urllib.error.HTTPError as exc:
            exc.close()
            raise UrlReadError(f"HTTP {exc.code} {exc.reason}") from None
        except urllib.error.URLError as exc:
            raise UrlReadError(f"{exc.reason}") from None
        except (OSError, http.client.HTTPException) as exc:  # timeouts, resets, bad responses
            raise UrlReadError(f"{type(exc).__name__}: {exc}") from None
        return self._decode(body, charset)

    def _decode(self, body: bytes, charset: str) -> str:
        if len(body) > self.max_bytes:
            self._too_large()
        try:
            # A byte-order mark (some editors write one) is not part of the first entry.
            return body.decode("utf-8-sig" if charset.lower() in ("utf-8", "utf8") else charset)
        except (LookupError, UnicodeDecodeError) as exc:
            raise UrlReadError(f"the list is not {charset} text: {exc}") from None

    def _too_large(self) -> NoReturn:
        raise UrlReadError(f"the list is larger than max_bytes ({self.max_bytes} bytes)")

    def __repr__(self) -> str:
        state = self._worker.state
        with self._lock:
            brokers = 0 if self._last is None else len(self._last)
        return f"UrlSource({self.shown!r}, interval={self.interval:g}, brokers={brokers}, {state})"
