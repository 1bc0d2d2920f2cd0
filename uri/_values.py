"""Typed option values: URI text -> canonical value (seconds, tuples, names) and back."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection

from ._address import SCHEMES
from ._options import SchemeMapEntries
from ._redact import MASK
from ._table import ARTEMIS_POLICY_CLASSES, OptionSpec

__all__ = ["BadValue", "convert", "render"]

_TRUE = ("true",)
_FALSE = ("false",)
_ACTIONS = ("replace", "add", "ignore")


class BadValue(ValueError):
    """A value that does not fit its option; ``offset`` is relative to the value's start."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


def _int(text: str) -> int:
    body = text[1:] if text[:1] in "+-" else text
    if not body.isdigit() or not body.isascii():
        raise BadValue(f"expected a whole number, got {text!r}")
    return int(text)


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise BadValue(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise BadValue(f"expected a finite number, got {text!r}")
    return value


def _ms(text: str) -> float:
    value = _int(text)
    if value < 0:
        raise BadValue(f"expected milliseconds >= 0, got {text!r}")
    return value / 1000.0


def _bool(text: str) -> bool:
    lowered = text.lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise BadValue(f"expected true or false, got {text!r}")


def _timeout_ms(text: str) -> float | None:
    value = _int(text)
    if value < -1:
        raise BadValue(f"expected -1 (forever) or milliseconds >= 0, got {text!r}")
    # ActiveMQ only applies a send timeout when it is > 0: -1 and 0 both block forever.
    return None if value <= 0 else value / 1000.0


def _failover_timeout_ms(text: str) -> float:
    value = _int(text)
    if value < -1:
        raise BadValue(f"expected -1 (forever) or milliseconds >= 0, got {text!r}")
    # Artemis: -1 waits for the failover forever; 0 does not wait for it at all.
    return math.inf if value == -1 else value / 1000.0


def _count(text: str) -> int:
    value = _int(text)
    if value < -1:
        raise BadValue(f"expected -1 (unlimited) or a count >= 0, got {text!r}")
    return value


def _at_least(minimum: int) -> Callable[[str], int]:
    def check(text: str) -> int:
        value = _int(text)
        if value < minimum:
            raise BadValue(f"expected a whole number >= {minimum}, got {text!r}")
        return value

    return check


def _multiplier(text: str) -> float:
    factor = _float(text)
    if factor < 1.0:
        raise BadValue(f"expected a factor >= 1.0, got {text!r}")
    return factor


def _fraction(text: str) -> float:
    fraction = _float(text)
    if not 0.0 <= fraction <= 1.0:
        raise BadValue(f"expected a fraction between 0 and 1, got {text!r}")
    return fraction


def _heartbeat(text: str) -> tuple[int, int]:
    parts = text.split(",")
    if len(parts) > 2:
        raise BadValue(f"expected send,receive milliseconds, got {text!r}")
    values = [_int(part) for part in parts]
    if any(v < 0 for v in values):
        raise BadValue(f"heart-beat milliseconds must be >= 0, got {text!r}")
    return (values[0], values[-1])


def _check_period(text: str) -> tuple[int, int]:
    value = _int(text)
    if value < -1:
        raise BadValue(f"expected -1 (disabled) or milliseconds >= 0, got {text!r}")
    # Artemis declares a connection dead after this much silence; heart-beats in both
    # directions at the same period give the same detection time on STOMP and AMQP.
    return (0, 0) if value <= 0 else (value, value)


def _one_of(words: tuple[str, ...], *, upper: bool = False) -> Callable[[str], str]:
    """A converter accepting any case of ``words``; ``upper`` shows them as the system writes."""
    shown = [w.upper() if upper else w for w in words]
    listed = f"{', '.join(shown[:-1])} or {shown[-1]}"

    def check(text: str) -> str:
        lowered = text.lower()
        if lowered not in words:
            raise BadValue(f"expected {listed}, got {text!r}")
        return lowered

    return check


def _text(text: str) -> str:
    if not text:
        raise BadValue("expected a value")
    return text


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]*")
_SCHEME = re.compile(r"[a-z][a-z0-9+.\-]*")


def _source_names(text: str) -> tuple[str, ...]:
    """``openwire,advisory``: topology-source names, each once (the registry checks them)."""
    names: list[str] = []
    offset = 0
    for name in text.split(","):
        if not _NAME.fullmatch(name):
            raise BadValue(
                f"expected a topology-source name such as openwire, got {name!r}", offset
            )
        if name in names:
            raise BadValue(f"topology source {name!r} is named twice", offset)
        names.append(name)
        offset += len(name) + 1
    return tuple(names)


def _port(text: str) -> int:
    value = _int(text)
    if not 0 < value < 65536:
        raise BadValue(f"expected a port 1-65535, got {text!r}")
    return value


def _scheme_map(text: str) -> SchemeMapEntries:
    """``tcp:stomp:61613,ssl:stomp+ssl``: advertised scheme -> (this connection's scheme, port)."""
    entries: list[tuple[str, str, int | None]] = []
    offset = 0
    # A query's '+' was decoded as a space; only a scheme (stomp+ssl) holds one here.
    for entry in text.replace(" ", "+").split(","):
        parts = entry.split(":")
        if len(parts) not in (2, 3):
            raise BadValue(
                f"expected from:to[:port] such as tcp:stomp:61613, got {entry!r}", offset
            )
        source, target = parts[0].lower(), parts[1].lower()
        if not _SCHEME.fullmatch(source):
            raise BadValue(f"{parts[0]!r} is not a URL scheme", offset)
        if any(source == seen for seen, _, _ in entries):
            raise BadValue(f"scheme {source!r} is mapped twice", offset)
        at = offset + len(parts[0]) + 1
        if target not in SCHEMES or SCHEMES[target][0] == "openwire":
            known = ", ".join(s for s, (proto, _) in SCHEMES.items() if proto != "openwire")
            raise BadValue(f"{parts[1]!r} is not a STOMP or AMQP scheme ({known})", at)
        port: int | None = None
        if len(parts) == 3:
            try:
                port = _port(parts[2])
            except BadValue as exc:
                raise BadValue(exc.message, at + len(parts[1]) + 1) from None
        entries.append((source, target, port))
        offset += len(entry) + 1
    return tuple(entries)


_CONVERTERS: dict[str, Callable[[str], object]] = {
    "bool": _bool,
    "ms": _ms,
    "timeout_ms": _timeout_ms,
    "failover_timeout_ms": _failover_timeout_ms,
    "count": _count,
    "int": _int,
    "non_negative_int": _at_least(0),
    "positive_int": _at_least(1),
    "multiplier": _multiplier,
    "fraction": _fraction,
    "heartbeat": _heartbeat,
    "check_period": _check_period,
    "server_list_action": _one_of(_ACTIONS, upper=True),
    "confirm_mode": _one_of(("auto", "receipt", "transaction")),
    "dedup": _one_of(("auto", "off")),
    "text": _text,
    "secret": _text,
    "source_names": _source_names,
    "port": _port,
    "scheme_map": _scheme_map,
}


# People also write the bare class name; Artemis itself needs the full one.
_POLICY_ALIASES = {
    **ARTEMIS_POLICY_CLASSES,
    **{name.rpartition(".")[2]: policy for name, policy in ARTEMIS_POLICY_CLASSES.items()},
}


def _policy(text: str, policies: Collection[str]) -> str:
    if text in _POLICY_ALIASES:
        return _POLICY_ALIASES[text]
    if text in policies:
        return text
    valid = ", ".join([*sorted(policies), *ARTEMIS_POLICY_CLASSES])
    # Never an import path: a URI must not be able to load arbitrary code.
    raise BadValue(f"unknown policy {text!r}; valid: {valid}")


def convert(spec: OptionSpec, text: str, policies: Collection[str]) -> object:
    """The canonical value of ``text`` for ``spec``; raise :class:`BadValue` if it does not fit.

    ``uri_list`` values are converted by the builder, which can scan URIs.
    """
    if spec.kind == "policy":
        return _policy(text, policies)
    return _CONVERTERS[spec.kind](text)


def render(spec: OptionSpec, value: object) -> str:  # noqa: PLR0911
    """``value`` written the way ``spec``'s system writes it in a URI (secrets as ``***``)."""
    kind = spec.kind
    if value is None:
        return "-1" if kind == "timeout_ms" else ""
    if kind == "bool":
        return "true" if value else "false"
    if kind == "failover_timeout_ms" and value == math.inf:
        return "-1"
    if kind in ("ms", "timeout_ms", "failover_timeout_ms") and isinstance(value, float):
        return str(round(value * 1000))
    if kind == "heartbeat" and isinstance(value, tuple):
        return f"{value[0]},{value[1]}"
    if kind == "check_period" and isinstance(value, tuple):
        return "-1" if value == (0, 0) else str(max(value))
    if kind == "server_list_action" and isinstance(value, str):
        return value.upper() if spec.system == "qpid" else value
    if kind == "secret":
        return MASK
    if kind in ("uri_list", "source_names") and isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    if kind == "scheme_map" and isinstance(value, tuple):
        return ",".join(
            f"{source}:{target}" + ("" if port is None else f":{port}")
            for source, target, port in value
        )
    if kind == "policy" and value == "":
        return ""
    return str(value)
