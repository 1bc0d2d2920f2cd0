"""The ``file`` topology source: a list of broker URIs in a file, re-read on an interval.

The list format (:func:`parse_broker_list`, shared with the ``url`` source): broker URIs
(``stomp://a:61613``, or a ``failover:(...)`` list) separated by newlines and/or commas, as
ActiveMQ's ``updateURIsURL`` files are one comma-separated line; blank entries and ``#``
comments are skipped. The file is the whole list each time: a broker whose entry is removed
leaves the list (a seed from the connection's URI stays; the sink decides). A bad entry is
logged with its line (and column, on a line of several) and skipped, so one typo does not drop
the rest; a file that cannot be read keeps the last list. The sink hears a list only when it
changed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path

from failover_client._clock import Clock, SystemClock
from failover_client._errors import ConfigurationError
from failover_client._throttle import LogThrottle
from failover_client.uri import BrokerAddress, ServerListAction, parse

from ._base import SourceThread, TopologySink, check_sink, report_failure

__all__ = ["FileSource", "SchemeRewrite", "parse_broker_list", "read_broker_file"]

_log = logging.getLogger("failover_client.topology")


_SHOWN_BAD = 5
"""Bad entries of one list logged one by one; the rest are counted in one line."""

SchemeRewrite = Mapping[str, tuple[str, int | None]]
"""Entries of another protocol rewritten: ``{"tcp": ("stomp", 61613)}`` turns an OpenWire
``tcp://a:61616`` into ``stomp://a:61613`` (port None keeps the entry's own)."""


def _entries(line: str) -> Iterator[tuple[int, str]]:
    """``(column, entry)`` for each comma-separated entry of ``line``; a comma inside
    ``failover:(...)`` parentheses belongs to that entry."""
    depth, start = 0, 0
    for index, char in enumerate(f"{line},"):
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        elif char == "," and depth == 0:
            entry = line[start:index]
            stripped = entry.strip()
            if stripped:
                yield start + len(entry) - len(entry.lstrip()) + 1, stripped
            start = index + 1


def _rewrite(member: BrokerAddress, scheme_map: SchemeRewrite | None) -> BrokerAddress:
    if scheme_map is None or member.scheme not in scheme_map:
        return member
    scheme, port = scheme_map[member.scheme]
    # The entry's parameters configure its own protocol's clients, not this connection's.
    return BrokerAddress(scheme, member.host, member.port if port is None else port)


def parse_broker_list(
    text: str,
    origin: str,
    *,
    scheme_map: SchemeRewrite | None = None,
    throttle: LogThrottle | None = None,
) -> tuple[BrokerAddress, ...]:
    """The brokers a list names, in order, without duplicates; bad entries are logged.

    ``text`` holds broker URIs separated by newlines and/or commas, ``#`` comments and blank
    entries; ``origin`` (a path or a redacted URL) starts each log line about a bad entry.
    ``throttle`` rate-limits those lines (a list re-read every few seconds repeats them).
    """
    log = throttle or LogThrottle(_log)
    brokers: dict[str, BrokerAddress] = {}
    bad = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        entries = list(_entries(raw.split("#", 1)[0]))
        for column, entry in entries:
            try:
                members = parse(entry).members
            except ConfigurationError as exc:
                # The error text carries the redacted URI and the position; never the password.
                where = f" entry at column {column}" if len(entries) > 1 else ""
                bad += 1
                if bad <= _SHOWN_BAD:
                    log.log(
                        logging.WARNING,
                        (origin, number, column),
                        "%s:%d: skipped%s, not a broker URI: %s",
                        origin,
                        number,
                        where,
                        exc,
                    )
                continue
            for member in members:
                address = _rewrite(member, scheme_map)
                brokers.setdefault(str(address), address)
    if bad > _SHOWN_BAD:
        log.log(
            logging.WARNING,
            (origin, "more"),
            "%s: skipped %d more entries that are not broker URIs",
            origin,
            bad - _SHOWN_BAD,
        )
    return tuple(brokers.values())


def read_broker_file(
    path: Path, *, throttle: LogThrottle | None = None
) -> tuple[BrokerAddress, ...]:
    """The brokers listed in ``path`` (:func:`parse_broker_list`); bad entries are logged.

    Raises :class:`OSError` when the file cannot be read.
    """
    return parse_broker_list(path.read_text(encoding="utf-8"), str(path), throttle=throttle)


class FileSource:
    """Re-reads a file of broker URIs every ``interval`` seconds and pushes changes.

    :param path: the file; read once at :meth:`start` and then every ``interval``.
    :param interval: seconds between reads (on ``clock``).
    :param clock: waits go through it (a fake clock in tests).
    :param action: passed with every update; None lets the sink use its configured action.
    :param name: the ``source`` of every update.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        interval: float = 30.0,
        clock: Clock | None = None,
        action: ServerListAction | None = None,
        name: str = "file",
    ) -> None:
        if not interval > 0:
            raise ConfigurationError(f"file topology source: interval must be > 0, got {interval}")
        self.path = Path(path)
        self.interval = interval
        self.name = name
        self._action: ServerListAction | None = action
        self._clock: Clock = clock or SystemClock()
        self._worker = SourceThread(self.name)
        self._stop = self._worker.stopping
        self._last: tuple[BrokerAddress, ...] | None = None
        self._throttle = LogThrottle(_log, clock=self._clock.monotonic)
        self._failures = 0

    def start(self, sink: TopologySink) -> None:
        """Read the file now and then every ``interval``, on a daemon thread."""
        check_sink(sink, self)
        self._worker.start(lambda: self._run(sink), self)

    def stop(self) -> None:
        """Stop reading and join the thread. Idempotent."""
        self._worker.stop()

    def _run(self, sink: TopologySink) -> None:
        while not self._stop.is_set():
            self._read_once(sink)
            if self._clock.wait(self._stop, self.interval):
                return

    def _read_once(self, sink: TopologySink) -> None:
        try:
            brokers = read_broker_file(self.path, throttle=self._throttle)
        except OSError as exc:
            self._failures += 1
            self._throttle.log(
                logging.WARNING,
                "unreadable",
                "%s: cannot read %s, keeping the last list: %s",
                self.name,
                self.path,
                exc,
            )
            report_failure(sink, self.name, exc, self._failures, self.interval)
            return
        self._failures = 0
        if brokers == self._last:
            return
        self._last = brokers
        try:
            sink.update_brokers(brokers, source=self.name, action=self._action)
        except Exception:  # noqa: BLE001 - a sink's bug must not end the watching thread
            _log.exception("%s: the sink failed to take the list from %s", self.name, self.path)

    def __repr__(self) -> str:
        state = self._worker.state
        return f"FileSource({str(self.path)!r}, interval={self.interval:g}, {state})"
