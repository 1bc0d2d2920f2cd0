"""The data source's option table: every option's spelling, who reads it, the values it takes.

One row per option; :mod:`._options` parses against it, the error for an unknown key lists its
names, and the documentation's option tables are generated from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from failover_client.engine._dedup import DUPLICATE_ID_HEADER

__all__ = ["BY_KEY", "OPTIONS", "SPARK_OWN_OPTIONS", "OptionInfo", "Role"]

Role = Literal["sink", "source"]


@dataclass(frozen=True)
class OptionInfo:
    """One row of the option table: its spelling, who reads it, the values it takes."""

    name: str
    roles: frozenset[Role]
    values: str
    help: str

    @property
    def key(self) -> str:
        """The key as Spark delivers it (lower case)."""
        return self.name.lower()


_SINK: frozenset[Role] = frozenset({"sink"})
_SOURCE: frozenset[Role] = frozenset({"source"})
_BOTH: frozenset[Role] = _SINK | _SOURCE


def _info(name: str, roles: frozenset[Role], values: str, help_text: str) -> OptionInfo:
    return OptionInfo(name, roles, values, help_text)


OPTIONS: tuple[OptionInfo, ...] = (
    _info("uri", _BOTH, "a failover URI", "the brokers and failover options"),
    _info(
        "destination",
        _BOTH,
        "a destination such as /queue/orders (source: several, comma-separated)",
        "where rows go (sink) / what is consumed (source)",
    ),
    _info(
        "destinationColumn",
        _SINK,
        "a string column",
        "the column naming each row's destination (instead of destination)",
    ),
    _info("bodyColumn", _SINK, "a string or binary column", "the message body (default: value)"),
    _info("headersColumn", _SINK, "a map<string,string> column", "headers / properties"),
    _info(
        "messageIdColumn",
        _SINK,
        "a string or integer column",
        "each row's message id (default: query, batch, partition and row index)",
    ),
    _info("persistent", _SINK, "true or false", "persistent (durable) messages (default true)"),
    _info(
        "confirmWindow",
        _SINK,
        "a positive integer",
        "confirmations outstanding per task (default: the URI's confirmWindow)",
    ),
    _info(
        "duplicateDetection",
        _SINK,
        "none or artemis",
        f"artemis: also put the id in {DUPLICATE_ID_HEADER} on every send, to any broker, even "
        "under the URI's dedup=off (dedup=auto, the URI default, puts it there for Artemis and "
        "unnamed brokers already) (default none)",
    ),
    _info(
        "commitMarkers",
        _SINK,
        "true or false",
        "write a marker per committed batch under checkpointLocation (default true)",
    ),
    _info(
        "commitDestination",
        _SINK,
        "a destination",
        "send a summary message per committed batch there (default: none)",
    ),
    _info(
        "onRowError",
        _SINK,
        "fail, skip or deadLetter:<destination>",
        "what a row that cannot be sent does: fail the batch once with its reason, be counted "
        "and left out, or go to that destination with the reason in a header (default fail)",
    ),
    _info(
        "allowNullBody",
        _SINK,
        "true or false",
        "send a null body as an empty message instead of refusing the row (default false)",
    ),
    _info(
        "allowAnyDestination",
        _SINK,
        "true or false",
        "accept STOMP destinations without a known prefix such as /queue/ (default false)",
    ),
    _info("selector", _SOURCE, "a selector expression", "broker-side message filter"),
    _info(
        "maxMessagesPerBatch",
        _SOURCE,
        "a positive integer",
        "the most messages one micro-batch takes (default 10000)",
    ),
    _info(
        "maxBytesPerBatch",
        _SOURCE,
        "a positive integer (bytes of message bodies)",
        "the most body bytes one micro-batch takes; a larger single message still goes "
        "alone (default: no bound)",
    ),
    _info(
        "minMessagesPerBatch",
        _SOURCE,
        "a positive integer, at most maxMessagesPerBatch",
        "a micro-batch waits until this many messages are buffered, or maxBatchDelay passed "
        "since the last one (default 1)",
    ),
    _info(
        "maxBatchDelay",
        _SOURCE,
        "seconds (a positive number, or with an ms / s / m suffix)",
        "the longest minMessagesPerBatch holds a batch back (default 15m)",
    ),
    _info(
        "receiveTimeout",
        _SOURCE,
        "seconds (a positive number, or with an ms / s suffix)",
        "the quiet time, while connected, after which Trigger.AvailableNow / Once take the "
        "queue as drained (default 1 s); other triggers never wait for it (a batch short of its "
        "limit takes what the broker is still sending, until a 50 ms pause or 0.5 s)",
    ),
    _info(
        "queueDepth",
        _SOURCE,
        "auto or off",
        "auto: ask ActiveMQ Classic's statisticsBrokerPlugin for the queue's depth (lag in "
        "the query's progress, the target of Trigger.AvailableNow); off: never ask "
        "(default auto)",
    ),
    _info("bodyAsString", _SOURCE, "true or false", "add the body as a string column"),
    _info(
        "numPartitions",
        _SOURCE,
        "a positive integer",
        "tasks (and spool files) per micro-batch, spread over the executors (default 1)",
    ),
)

SPARK_OWN_OPTIONS = frozenset({"checkpointlocation", "path"})
"""Keys Spark itself passes to a data source (``checkpointLocation``; ``path`` from
``save(path)`` / ``start(path)``, taken as the destination)."""

BY_KEY = {info.key: info for info in OPTIONS}
