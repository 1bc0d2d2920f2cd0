"""The data source's options: one table, parsed and validated when a query starts.

Spark hands a Python data source its options with lower-cased keys and every value a string
(``.option("confirmWindow", 100)`` arrives as ``{"confirmwindow": "100"}``). This module turns
that map into a frozen :class:`SinkOptions` or :class:`SourceOptions`, or raises one
:class:`SparkOptionError` that names the option (in its documented spelling) and what would be
valid: an unknown key lists the nearest and all valid names, a bad value the accepted values,
and a bad failover URI carries the URI parser's positioned message. It runs on the driver when
the query starts (``writer()`` / ``streamWriter()``), so a mistake fails the query there, in a
few lines, before a task or a connection exists.

Pure: no Spark, no I/O. Column *types* are checked against the DataFrame's schema elsewhere
(``_layout``), because only ``writer(schema, ...)`` knows the schema.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from failover_client import URIError
from failover_client._errors import SparkOptionError
from failover_client.engine._dedup import DUPLICATE_ID_HEADER
from failover_client.spark._option_table import BY_KEY as _BY_KEY
from failover_client.spark._option_table import OPTIONS, SPARK_OWN_OPTIONS, OptionInfo, Role
from failover_client.spark._rowcheck import KNOWN_PREFIXES, destination_rule
from failover_client.uri import parse

__all__ = [
    "ARTEMIS_DUPLICATE_HEADER",
    "OPTIONS",
    "SPARK_OWN_OPTIONS",
    "DuplicateDetection",
    "OptionInfo",
    "RowErrorMode",
    "SinkOptions",
    "SourceOptions",
    "SparkOptionError",
    "sink_options",
    "source_options",
]

DuplicateDetection = Literal["none", "artemis"]
RowErrorMode = Literal["fail", "skip", "deadLetter"]

ARTEMIS_DUPLICATE_HEADER = DUPLICATE_ID_HEADER
"""The header Artemis de-duplicates on (its duplicate-id cache drops a second message with it).
A connection with ``dedup=auto`` (the URI default) sets it on every send to a broker that may
drop copies by it already; ``duplicateDetection=artemis`` sets it on every send, to any broker."""


DEFAULT_BODY_COLUMN = "value"
DEFAULT_MAX_MESSAGES = 10_000
DEFAULT_RECEIVE_TIMEOUT = 1.0
DEFAULT_MAX_BATCH_DELAY = 15 * 60.0
"""Kafka's ``maxTriggerDelay`` default."""


@dataclass(frozen=True)
class SinkOptions:
    """The sink's options, validated. Picklable: writers carry it to the executors.

    ``uri`` is the text the user gave (it may hold a password): it is left out of ``repr``,
    which shows the redacted form instead.
    """

    uri: str = field(repr=False)
    destination: str | None = None
    destination_column: str | None = None
    body_column: str = DEFAULT_BODY_COLUMN
    headers_column: str | None = None
    message_id_column: str | None = None
    persistent: bool = True
    confirm_window: int | None = None
    duplicate_detection: DuplicateDetection = "none"
    commit_markers: bool = True
    commit_destination: str | None = None
    checkpoint_location: str | None = None
    on_row_error: RowErrorMode = "fail"
    dead_letter: str | None = None
    """The destination of ``onRowError=deadLetter:<destination>``."""
    allow_null_body: bool = False
    allow_any_destination: bool = False

    @property
    def redacted_uri(self) -> str:
        return str(parse(self.uri))

    def connection_key(self) -> tuple[str, int | None]:
        """What a pooled connection is shared by (tasks with equal keys share one)."""
        return (self.uri, self.confirm_window)

    def __repr__(self) -> str:
        shown = {
            "destination": self.destination,
            "destination_column": self.destination_column,
            "body_column": self.body_column,
            "headers_column": self.headers_column,
            "message_id_column": self.message_id_column,
            "persistent": self.persistent,
            "confirm_window": self.confirm_window,
            "duplicate_detection": self.duplicate_detection,
            "on_row_error": self.on_row_error,
            "dead_letter": self.dead_letter,
        }
        inner = ", ".join(f"{k}={v!r}" for k, v in shown.items() if v is not None)
        return f"SinkOptions(uri={self.redacted_uri!r}, {inner})"


@dataclass(frozen=True)
class SourceOptions:
    """The source's options, validated (the URI is redacted in ``repr`` as for the sink)."""

    uri: str = field(repr=False)
    destinations: tuple[str, ...] = ()
    selector: str | None = None
    max_messages_per_batch: int = DEFAULT_MAX_MESSAGES
    receive_timeout: float = DEFAULT_RECEIVE_TIMEOUT
    body_as_string: bool = False
    checkpoint_location: str | None = None
    max_bytes_per_batch: int | None = None
    min_messages_per_batch: int = 1
    max_batch_delay: float = DEFAULT_MAX_BATCH_DELAY
    queue_depth: bool = True
    num_partitions: int = 1

    @property
    def redacted_uri(self) -> str:
        return str(parse(self.uri))

    def __repr__(self) -> str:
        return (
            f"SourceOptions(uri={self.redacted_uri!r}, destinations={self.destinations!r}, "
            f"selector={self.selector!r}, max_messages_per_batch={self.max_messages_per_batch}, "
            f"receive_timeout={self.receive_timeout}, body_as_string={self.body_as_string}, "
            f"max_bytes_per_batch={self.max_bytes_per_batch}, "
            f"min_messages_per_batch={self.min_messages_per_batch}, "
            f"max_batch_delay={self.max_batch_delay}, queue_depth={self.queue_depth}, "
            f"num_partitions={self.num_partitions})"
        )


# --- parsing ---------------------------------------------------------------------------------


class _Invalid(Exception):
    """A problem found by a helper; the public functions add the role and re-raise."""

    def __init__(self, message: str, option: str | None) -> None:
        super().__init__(message)
        self.option = option


def sink_options(raw: Mapping[str, str]) -> SinkOptions:
    """Validate the options of ``df.write`` / ``df.writeStream`` (keys in any case)."""
    try:
        return _sink(_checked_keys(raw, "sink"))
    except _Invalid as exc:
        raise SparkOptionError(f"failover sink: {exc}", option=exc.option) from None


def source_options(raw: Mapping[str, str]) -> SourceOptions:
    """Validate the options of ``spark.readStream`` (keys in any case)."""
    try:
        return _source(_checked_keys(raw, "source"))
    except _Invalid as exc:
        raise SparkOptionError(f"failover source: {exc}", option=exc.option) from None


def _sink(given: Mapping[str, str]) -> SinkOptions:
    uri = _uri(given)
    destination = given.get("destination")
    if destination is None and given.get("path"):
        destination = given["path"]
    column = given.get("destinationcolumn")
    if destination is not None and column is not None:
        raise _Invalid("give destination or destinationColumn, not both", None)
    if destination is None and column is None:
        raise _Invalid(
            "option destination (or destinationColumn) is required: where should rows go?",
            "destination",
        )
    window = given.get("confirmwindow")
    mode, dead_letter = _on_row_error(given.get("onrowerror", "fail"))
    any_destination = _bool("allowAnyDestination", given.get("allowanydestination", "false"))
    stomp = all(member.protocol == "stomp" for member in parse(uri).members)
    for name, value in (
        ("destination", destination),
        ("commitDestination", given.get("commitdestination")),
        ("onRowError", dead_letter),
    ):
        if value is not None and stomp and not any_destination:
            _prefixed(name, _destination(name, value))
    return SinkOptions(
        uri=uri,
        destination=None if destination is None else _destination("destination", destination),
        destination_column=None if column is None else _column("destinationColumn", column),
        body_column=_column("bodyColumn", given.get("bodycolumn", DEFAULT_BODY_COLUMN)),
        headers_column=_optional(given, "headersColumn", _column),
        message_id_column=_optional(given, "messageIdColumn", _column),
        persistent=_bool("persistent", given.get("persistent", "true")),
        confirm_window=None if window is None else _positive_int("confirmWindow", window),
        duplicate_detection=_duplicate_detection(given.get("duplicatedetection", "none")),
        commit_markers=_bool("commitMarkers", given.get("commitmarkers", "true")),
        commit_destination=_optional(given, "commitDestination", _destination),
        checkpoint_location=given.get("checkpointlocation") or None,
        on_row_error=mode,
        dead_letter=dead_letter,
        allow_null_body=_bool("allowNullBody", given.get("allownullbody", "false")),
        allow_any_destination=any_destination,
    )


def _on_row_error(value: str) -> tuple[RowErrorMode, str | None]:
    text = value.strip()
    lowered = text.lower()
    if lowered == "fail":
        return "fail", None
    if lowered == "skip":
        return "skip", None
    if lowered.startswith("deadletter:"):
        return "deadLetter", _destination("onRowError", text.split(":", 1)[1])
    raise _Invalid(
        f"option onRowError: {value!r}; valid values: fail, skip, deadLetter:<destination> "
        "(e.g. deadLetter:/queue/orders.dlq)",
        "onRowError",
    )


def _prefixed(name: str, value: str) -> None:
    if value in KNOWN_PREFIXES or not value.startswith(KNOWN_PREFIXES):
        raise _Invalid(f"option {name}: {value!r} is not {destination_rule()}", name)


def _source(given: Mapping[str, str]) -> SourceOptions:
    uri = _uri(given)
    text = given.get("destination") or given.get("path")
    if text is None:
        raise _Invalid(
            "option destination is required: which queue(s) or topic(s) to consume?",
            "destination",
        )
    destinations = tuple(_destination("destination", d) for d in text.split(","))
    selector = given.get("selector")
    if selector is not None and not selector.strip():
        raise _Invalid("option selector is empty; leave it out to take every message", "selector")
    most = _positive_int(
        "maxMessagesPerBatch", given.get("maxmessagesperbatch", str(DEFAULT_MAX_MESSAGES))
    )
    least = _positive_int("minMessagesPerBatch", given.get("minmessagesperbatch", "1"))
    if least > most:
        # The broker delivers at most about one batch beyond what waits for its commit
        # (the prefetch is twice maxMessagesPerBatch), so a larger minimum never fills.
        raise _Invalid(
            f"option minMessagesPerBatch: {least} is above maxMessagesPerBatch ({most}); "
            "valid values: 1 .. maxMessagesPerBatch",
            "minMessagesPerBatch",
        )
    delay = given.get("maxbatchdelay")
    if delay is not None and "minmessagesperbatch" not in given:
        raise _Invalid(
            "option maxBatchDelay bounds how long minMessagesPerBatch holds a batch back; "
            "give minMessagesPerBatch too, or leave maxBatchDelay out",
            "maxBatchDelay",
        )
    byte_bound = given.get("maxbytesperbatch")
    return SourceOptions(
        uri=uri,
        destinations=destinations,
        selector=selector,
        max_messages_per_batch=most,
        min_messages_per_batch=least,
        max_batch_delay=_seconds(
            "maxBatchDelay", given.get("maxbatchdelay", str(DEFAULT_MAX_BATCH_DELAY))
        ),
        max_bytes_per_batch=(
            None if byte_bound is None else _positive_int("maxBytesPerBatch", byte_bound)
        ),
        queue_depth=_choice("queueDepth", given.get("queuedepth", "auto"), ("auto", "off"))
        == "auto",
        receive_timeout=_seconds(
            "receiveTimeout", given.get("receivetimeout", str(DEFAULT_RECEIVE_TIMEOUT))
        ),
        body_as_string=_bool("bodyAsString", given.get("bodyasstring", "false")),
        checkpoint_location=given.get("checkpointlocation") or None,
        num_partitions=_positive_int("numPartitions", given.get("numpartitions", "1")),
    )


def _checked_keys(raw: Mapping[str, str], role: Role) -> dict[str, str]:
    """The options with lower-case keys, once every key is known and meant for ``role``."""
    given = {str(k).lower(): str(v) for k, v in raw.items()}
    mine = [info.name for info in OPTIONS if role in info.roles]
    for key in given:
        if key in SPARK_OWN_OPTIONS:
            continue
        info = _BY_KEY.get(key)
        if info is None:
            near = difflib.get_close_matches(key, [n.lower() for n in mine], n=2, cutoff=0.6)
            hint = f" (did you mean {' or '.join(_BY_KEY[n].name for n in near)}?)" if near else ""
            raise SparkOptionError(
                f"failover {role}: unknown option {key!r}{hint}; valid options: {', '.join(mine)}",
                option=key,
            )
        if role not in info.roles:
            other = "readStream" if role == "sink" else "write / writeStream"
            raise SparkOptionError(
                f"failover {role}: option {info.name} belongs to {other}; "
                f"valid options here: {', '.join(mine)}",
                option=info.name,
            )
    return given


def _uri(given: Mapping[str, str]) -> str:
    text = given.get("uri")
    if text is None or not text.strip():
        raise _Invalid(
            "option uri is required, e.g. failover:(stomp://host1:61613,stomp://host2:61613)",
            "uri",
        )
    try:
        parse(text)
    except URIError as exc:
        # The parser's message is positioned and redacted: it is the useful part.
        raise _Invalid(f"option uri: {exc}", "uri") from exc
    return text


def _optional(given: Mapping[str, str], name: str, check: Callable[[str, str], str]) -> str | None:
    value = given.get(name.lower())
    return None if value is None else check(name, value)


def _column(name: str, value: str) -> str:
    if not value.strip():
        raise _Invalid(f"option {name}: a column name is required, got ''", name)
    return value


def _destination(name: str, value: str) -> str:
    text = value.strip()
    if not text or any(c in text for c in "\r\n\0"):
        raise _Invalid(
            f"option {name}: {value!r} is not a destination; valid: a name such as "
            "/queue/orders or /topic/prices",
            name,
        )
    return text


def _bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise _Invalid(f"option {name}: {value!r}; valid values: true, false", name)
    return lowered == "true"


def _positive_int(name: str, value: str) -> int:
    try:
        number = int(value.strip())
    except ValueError:
        number = 0
    if number < 1:
        raise _Invalid(f"option {name}: {value!r}; valid values: a positive integer", name)
    return number


def _choice(name: str, value: str, valid: tuple[str, ...]) -> str:
    lowered = value.strip().lower()
    if lowered not in valid:
        raise _Invalid(f"option {name}: {value!r}; valid values: {', '.join(valid)}", name)
    return lowered


def _seconds(name: str, value: str) -> float:
    text = value.strip().lower()
    scale = 1.0
    if text.endswith("ms"):
        text, scale = text[:-2], 0.001
    elif text.endswith("s"):
        text = text[:-1]
    elif text.endswith("m"):
        text, scale = text[:-1], 60.0
    try:
        seconds = float(text) * scale
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise _Invalid(
            f"option {name}: {value!r}; valid values: seconds > 0 such as 1.5, 500ms, 2s or 5m",
            name,
        )
    return seconds


def _duplicate_detection(value: str) -> DuplicateDetection:
    lowered = value.strip().lower()
    if lowered == "none":
        return "none"
    if lowered == "artemis":
        return "artemis"
    raise _Invalid(
        f"option duplicateDetection: {value!r}; valid values: none, artemis", "duplicateDetection"
    )
