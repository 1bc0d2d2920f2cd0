"""What a member's own query may hold, and what a plain one-broker URI does at start-up.

A member of a failover list carries its own ``?key=value`` options. The Java clients hand them
to that member's transport (``wireFormat.*``, ``soTimeout``, Artemis ``sslEnabled``), so for
``tcp://`` / ``ssl://`` members (OpenWire: written for a Java client) they are kept as written.
For the members this library speaks to (STOMP and AMQP 1.0) the adapters read exactly the names
in :data:`MEMBER_PARAMS`; two mistakes there are errors, because both were accepted silently
and ignored before:

* a failover option inside a member (``failover:(stomp://h:1?maxReconnectAttempts=1)``) sets
  nothing: the error says to put it after the closing parenthesis;
* a near-miss of a member option or of a failover option (``?vhsot=/``): the error names the
  nearest spelling.

Another unknown name on a STOMP / AMQP member (``amqp.idleTimeout``, a Qpid JMS transport
option) still parses, so a URI copied from a Java configuration can be read and explained;
``explain`` warns about it and :class:`~failover_client.FailoverConnection` refuses it
(:func:`unused_member_params`), naming the member and the names a member takes.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from failover_client._errors import OptionError

from ._address import SCHEMES, BrokerAddress
from ._options import FailoverOptions
from ._query import Context
from ._scan import Pair
from ._table import OPTION_TABLE, spec_for

__all__ = [
    "MEMBER_PARAMS",
    "RETRY_FIELDS",
    "SINGLE_STARTUP",
    "check_member_pairs",
    "single_startup",
    "unused_member_params",
    "wrote_retry_options",
]

MEMBER_PARAMS: dict[str, str] = {
    "vhost": "virtual host: the STOMP CONNECT host header / the AMQP open hostname "
    "(default: the member's host; RabbitMQ: /)",
    "login": "user of this member (stomp.py's name; it becomes the member's user)",
    "passcode": "password of this member (it becomes the member's password; never printed)",
}
"""The options a STOMP or AMQP member's own query may hold, and what each sets."""

RETRY_FIELDS = (
    "initial_reconnect_delay",
    "reconnect_delay",
    "max_reconnect_delay",
    "use_exponential_backoff",
    "backoff_multiplier",
    "max_reconnect_attempts",
    "startup_max_reconnect_attempts",
    "warn_after_reconnect_attempts",
)
""":class:`FailoverOptions` fields that shape a reconnect run: writing any of them in a URI
means the user chose the start-up behaviour."""


def wrote_retry_options(options: FailoverOptions) -> bool:
    """Whether the URI (or the options given) spelled out any of :data:`RETRY_FIELDS`.

    Options built in code (``FailoverOptions(...)`` without a URI) have no spellings: they
    count as "not written".
    """
    return any(options.source_of(name) is not None for name in RETRY_FIELDS)


SINGLE_STARTUP = "plain broker URI"
"""The source recorded for the start-up limit a one-broker URI gets (see
:func:`single_startup`)."""

_SPOKEN = ("stomp", "amqp")
_MEMBER_CUTOFF = 0.75
"""``vhsot`` / ``vhots`` / ``vhost`` score 0.8; unrelated transport names stay far below."""
_OPTION_CUTOFF = 0.85
"""As close as the shared query's own check for a near-miss of an option."""


def _spoken(scheme: str) -> bool:
    return SCHEMES[scheme][0] in _SPOKEN


def check_member_pairs(ctx: Context, scheme: str, pairs: Sequence[Pair], *, own: bool) -> None:
    """Refuse a failover option in a member's query (``own``: inside a list) and, on a STOMP
    or AMQP member, a near-miss of a member or failover option."""
    if scheme not in SCHEMES:
        return  # the unknown scheme is reported where the member is built
    for pair in pairs:
        key = pair.key
        spec = spec_for(key)
        if own and spec is not None:
            raise ctx.option_error(
                f"{key!r} is a failover option, not an option of one member: there it sets "
                f"nothing; put it after the list's closing parenthesis, "
                f"e.g. failover:(...)?{key}={pair.value}",
                key,
                pair.key_pos,
            )
        if not _spoken(scheme) or key in MEMBER_PARAMS or spec is not None:
            continue
        near = difflib.get_close_matches(key, list(MEMBER_PARAMS), n=2, cutoff=_MEMBER_CUTOFF)
        names = [n for s in OPTION_TABLE for n in s.names]
        near += difflib.get_close_matches(key, names, n=2, cutoff=_OPTION_CUTOFF)
        if near:
            raise ctx.option_error(
                f"unknown member option {key!r} (a {SCHEMES[scheme][0].upper()} member takes: "
                f"{', '.join(MEMBER_PARAMS)})",
                key,
                pair.key_pos,
                suggestions=near,
            )


def single_startup(options: FailoverOptions) -> FailoverOptions:
    """A plain one-broker URI without retry options makes one start-up pass, then fails.

    ``stomp://host:61613`` names no group and asks for no failover; a wrong port or host there
    is the user's mistake more often than a broker still starting, so ``connect()`` reports it
    at once (as the Java client does for a plain ``tcp://`` URI and stomp.py for its one host)
    instead of retrying for ever. After the first connection a lost broker is reconnected as
    for any URI. Writing any retry option (``startupMaxReconnectAttempts=-1``) or wrapping the
    member in ``failover:(...)`` restores the unlimited start-up.
    """
    if wrote_retry_options(options):
        return options
    return options.replace(
        startup_max_reconnect_attempts=0,
        sources=(*options.sources, ("startup_max_reconnect_attempts", SINGLE_STARTUP)),
    )


def unused_member_params(member: BrokerAddress) -> OptionError | None:
    """The error for a STOMP / AMQP member option no adapter reads (None: all are read)."""
    if not _spoken(member.scheme):
        return None
    unknown = [key for key, _ in member.params if key not in MEMBER_PARAMS]
    if not unknown:
        return None
    key = unknown[0]
    return OptionError(
        f"member {member}: option {key!r} is not read by failover-client, so it would be "
        f"ignored (a {member.protocol.upper()} member takes: {', '.join(MEMBER_PARAMS)}; "
        f"failover options go after the list's closing parenthesis)",
        option=key,
        suggestions=difflib.get_close_matches(key, list(MEMBER_PARAMS), n=1, cutoff=0.6),
    )
