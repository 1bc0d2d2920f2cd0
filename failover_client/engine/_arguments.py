"""Checks of what the application passes to the public API, before anything changes.

Each check raises :class:`ConfigurationError` naming the argument, the type or value it got and
what is valid, so a mistake in the calling code surfaces at the call instead of as a broker
error, a silent wrong message (``bytes(7)`` is seven NUL bytes) or an ``AttributeError`` deep in
the engine. They run before any state changes (no id drawn, no counter moved, nothing written).

The send-path checks sit on the hot path (measured against raw stomp.py): the common case is
one or two ``type(...) is`` tests and no allocation beyond the body's own conversion.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from typing import Protocol, get_args

from failover_client._errors import ConfigurationError, PolicyError
from failover_client._events import Listener, ListenerSet
from failover_client.adapter import AckMode
from failover_client.policies import canonical_policy_name, registered_policies
from failover_client.uri import (
    BrokerAddress,
    DiscoveryAgent,
    FailoverOptions,
    ServerListAction,
    parse,
    unused_member_params,
)

__all__ = [
    "ACK_MODES",
    "FailoverTarget",
    "body_bytes",
    "check_callable",
    "check_construction",
    "check_destination",
    "check_headers",
    "check_optional_str",
    "check_send",
    "check_subscribe",
    "check_target",
    "check_timeout",
    "check_update",
    "listener_set",
    "refuse_zero_timeout_for_confirmed_send",
    "resolve_target",
]

ACK_MODES: tuple[str, ...] = get_args(AckMode)
_ACTIONS: tuple[str, ...] = get_args(ServerListAction)

TIMEOUT_VALUES = "None (wait forever) or a number of seconds >= 0"


def _kind(value: object) -> str:
    return type(value).__name__


def body_bytes(body: object) -> bytes:
    """The bytes of a message body: bytes as they are, str as UTF-8, other buffers copied."""
    if type(body) is bytes:
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    # bytes(7) would be seven NUL bytes and bytes([1, 2]) a list's values: only objects that
    # expose a buffer (bytearray, memoryview, array, numpy arrays) are bodies.
    if not isinstance(body, int):
        try:
            view = memoryview(body)  # type: ignore[arg-type]  # any buffer-protocol object
        except TypeError:
            pass
        else:
            with view:
                return view.tobytes()
    raise ConfigurationError(
        f"body must be bytes, a bytes-like object (bytearray, memoryview) or str; got {_kind(body)}"
    )


def check_timeout(timeout: object, *, name: str = "timeout") -> float | None:
    """Seconds to wait (None: forever), or ConfigurationError for a negative, NaN or non-number."""
    if timeout is None:
        return None
    if isinstance(timeout, float | int) and not isinstance(timeout, bool):
        seconds = float(timeout)
        if seconds >= 0:
            # An infinite deadline overflows the clock's wait: forever is spelled None.
            return None if seconds == math.inf else seconds
        raise ConfigurationError(f"{name} must be {TIMEOUT_VALUES}; got {timeout!r}")
    raise ConfigurationError(f"{name} must be {TIMEOUT_VALUES}; got {_kind(timeout)} {timeout!r}")


def refuse_zero_timeout_for_confirmed_send() -> ConfigurationError:
    """The error for ``send(..., timeout=0)`` (see :meth:`FailoverConnection.send`)."""
    return ConfigurationError(
        "timeout=0 means 'do not wait', but a confirmed send() must wait for the broker's "
        "confirmation; use send_async(..., timeout=0) or send(..., confirm=False, timeout=0) "
        "to send without waiting, or give timeout as None (forever) or a number > 0"
    )


def check_destination(destination: object) -> None:
    if type(destination) is not str or not destination:
        raise ConfigurationError(
            f"destination must be a non-empty str (e.g. '/queue/orders'); got "
            f"{_kind(destination)} {destination!r}"
        )


def check_headers(headers: object) -> None:
    if headers is not None and type(headers) is not dict and not isinstance(headers, Mapping):
        raise ConfigurationError(
            f"headers must be None or a mapping of str to str; got {_kind(headers)}"
        )


def check_send(destination: object, body: object, headers: object, message_id: object) -> bytes:
    """The body's bytes, once the send's other arguments passed their checks."""
    check_destination(destination)
    if headers is not None:
        check_headers(headers)
    if message_id is not None:
        check_optional_str("message_id", message_id, empty=False)
    return body_bytes(body)


def check_optional_str(name: str, value: object, *, empty: bool = True) -> None:
    """``value`` is None or a str (non-empty unless ``empty``)."""
    if value is None or (type(value) is str and (empty or value)):
        return
    wanted = "a str" if empty else "a non-empty str"
    raise ConfigurationError(f"{name} must be None or {wanted}; got {_kind(value)} {value!r}")


def check_callable(name: str, value: object) -> None:
    if not callable(value):
        raise ConfigurationError(
            f"{name} must be callable (a function taking one argument); got {_kind(value)}"
        )


def listener_set(listeners: Iterable[Listener]) -> ListenerSet:
    """The connection's listeners, each checked to be callable before anything starts."""
    found = ListenerSet()
    for listener in listeners:
        check_callable("listener", listener)
        found.add(listener)
    return found


def check_subscribe(
    destination: object,
    handler: object,
    *,
    ack: object,
    id: object,
    durable: object,
    headers: object,
    prefetch: object = None,
    prefetch_bytes: object = None,
) -> None:
    """Every argument of ``subscribe``, checked before an id is drawn or anything registered."""
    check_destination(destination)
    if handler is not None:
        check_callable("handler", handler)
    for name, value, least in (("prefetch", prefetch, 1), ("prefetch_bytes", prefetch_bytes, 0)):
        if value is not None and (type(value) is not int or value < least):
            raise ConfigurationError(
                f"{name} must be None (the connection's consumer_{name}) or an int >= {least}; "
                f"got {_kind(value)} {value!r}"
            )
    if type(ack) is not str or ack not in ACK_MODES:
        raise ConfigurationError(f"ack must be one of {', '.join(ACK_MODES)}; got {ack!r}")
    check_optional_str("id", id, empty=False)
    check_optional_str("durable_name", durable, empty=False)
    check_headers(headers)


def check_update(
    source: object, action: object, tiers: object = None, weights: object = None
) -> None:
    """The arguments of ``update_brokers`` besides the list itself."""
    for name, mapping, valid in (
        ("tiers", tiers, lambda v: type(v) is int and v >= 0),
        ("weights", weights, lambda v: type(v) in (int, float) and v > 0 and v != math.inf),
    ):
        if mapping is None:
            continue
        if not isinstance(mapping, Mapping):
            raise ConfigurationError(f"{name} must map broker keys to values; got {_kind(mapping)}")
        for key, value in mapping.items():
            if type(key) is not str or not valid(value):
                raise ConfigurationError(
                    f"{name}[{key!r}] = {value!r}: "
                    + ("a tier is an int >= 0" if name == "tiers" else "a weight is a number > 0")
                )
    if type(source) is not str or not source:
        raise ConfigurationError(
            f"source must be a non-empty str naming the topology source; got {_kind(source)}"
        )
    if action is not None and (type(action) is not str or action not in _ACTIONS):
        raise ConfigurationError(
            f"action must be None (the options' server_list_action) or one of "
            f"{', '.join(_ACTIONS)}; got {action!r}"
        )


def check_construction(
    options: object,
    client_id: object,
    listeners: object,
    tiers: object,
) -> None:
    """The keyword arguments of ``FailoverConnection`` that the engine would misuse silently."""
    if options is not None and not isinstance(options, FailoverOptions):
        raise ConfigurationError(
            f"options must be None or a FailoverOptions (failover_client.uri); got {_kind(options)}"
        )
    if isinstance(options, FailoverOptions) and options.timeout == 0:
        # As a default for every call it would make each confirmed send() refuse to run.
        raise ConfigurationError(
            "options.timeout=0 would make every confirmed send() fail; use None (wait "
            "forever) or a number of seconds > 0, and pass timeout=0 per call instead"
        )
    check_optional_str("client_id", client_id, empty=False)
    if isinstance(listeners, str | bytes) or not isinstance(listeners, Iterable):
        raise ConfigurationError(
            f"listeners must be an iterable of callables; got {_kind(listeners)}"
        )
    if tiers is not None and not isinstance(tiers, Mapping):
        raise ConfigurationError(
            f"tiers must be None or a mapping of 'host:port' to tier number; got {_kind(tiers)}"
        )


def check_target(target: object) -> None:
    """A failover URI string, a parsed URI (members and options), or a list of addresses."""
    if isinstance(target, str):
        return
    if isinstance(target, Sequence) and not isinstance(target, bytes | bytearray):
        return
    if hasattr(target, "members") and hasattr(target, "options"):
        return
    raise ConfigurationError(
        "target must be a failover URI str, a parsed FailoverURI (failover_client.uri.parse) "
        f"or a sequence of BrokerAddress; got {_kind(target)}"
    )


class FailoverTarget(Protocol):
    """A parsed failover URI (``failover_client.uri.FailoverURI``) or anything shaped like one."""

    @property
    def members(self) -> tuple[BrokerAddress, ...]: ...

    @property
    def options(self) -> FailoverOptions: ...


class _RegisteredPolicies(Collection[str]):
    """Every policy name a URI may use, read from the registry only when asked.

    The registry lists installed plug-ins (reading every distribution's metadata) only for a
    name that is neither built in nor registered: a URI naming a built-in policy, or none,
    costs no such scan.
    """

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            canonical_policy_name(name)
        except PolicyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(registered_policies())

    def __len__(self) -> int:
        return len(registered_policies())


def resolve_target(
    target: str | FailoverTarget | Sequence[BrokerAddress],
) -> tuple[tuple[BrokerAddress, ...], FailoverOptions, tuple[DiscoveryAgent, ...]]:
    """Members, options and discovery agents of a target (see ``FailoverConnection``)."""
    check_target(target)
    if isinstance(target, str):
        # Policies registered by other packages (entry points) are valid names in a URI too.
        target = parse(target, policies=_RegisteredPolicies())
    if isinstance(target, Sequence):
        members: list[BrokerAddress] = []
        for member in target:
            if not isinstance(member, BrokerAddress):
                raise ConfigurationError(
                    f"a member list must hold BrokerAddress values, got {type(member).__name__}"
                )
            members.append(member)
        check_members(members)
        return tuple(members), FailoverOptions(), ()
    agents = tuple(getattr(target, "agents", ()))
    check_members(target.members)
    return _shared((tuple(target.members), target.options, agents))


_Resolved = tuple[tuple[BrokerAddress, ...], FailoverOptions, tuple[DiscoveryAgent, ...]]

_resolved: dict[_Resolved, _Resolved] = {}
_RESOLVED_LIMIT = 64
"""Distinct targets remembered: a process that opens many connections to one group of brokers
keeps one copy of its (immutable) options, about 2 KiB, rather than one per connection."""


def _shared(resolved: _Resolved) -> _Resolved:
    """An equal result seen before, if any (frozen values: interchangeable), else ``resolved``."""
    try:
        found = _resolved.get(resolved)
    except TypeError:  # an option holding an unhashable value: nothing to share
        return resolved
    if found is not None:
        return found
    if len(_resolved) < _RESOLVED_LIMIT:
        return _resolved.setdefault(resolved, resolved)  # atomic: a racing equal one wins
    return resolved


def check_members(members: Iterable[BrokerAddress]) -> None:
    """Refuse a STOMP / AMQP member option no adapter reads (it would be ignored silently)."""
    for member in members:
        error = unused_member_params(member)
        if error is not None:
            raise error
