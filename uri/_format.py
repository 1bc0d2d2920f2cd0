"""Write a :class:`FailoverURI` back as text that parses to the same value."""

from __future__ import annotations

from urllib.parse import quote

from ._address import BrokerAddress
from ._agent import DiscoveryAgent
from ._model import Component, FailoverURI
from ._redact import MASK, Pairs, redact_value

__all__ = ["format_uri"]

# Characters left as they are. The shared query of the whole URI runs to the end of the text, so
# commas may stay (``heartbeat=500,500``); inside a list a comma would end the member. A ``+`` is
# escaped: the Java clients, and our parser, read a bare one in a query as a space.
_SAFE_TOP = "-._~:/@!$'*,[]?"
_SAFE_INNER = "-._~:/@!$'*[]?"
_SAFE_LOCATION = "-._~:/@!$'*+=[]"


def format_uri(value: FailoverURI, *, redact: bool = False) -> str:
    """The text of ``value``; ``parse(format_uri(x)) == x``.

    The result contains passwords and secret options unless ``redact`` is true (then they are
    written ``***``, as ``str(value)`` does). Ports are always written, and a list is always
    parenthesised, so the text may differ from what was parsed while meaning the same.
    """
    return _uri(value, redact=redact, top=True)


def _uri(value: FailoverURI, *, redact: bool, top: bool) -> str:
    query = _query(value.query, redact=redact, top=top)
    if value.form == "single":
        return _member(value.components[0], redact=redact, top=top) + query  # type: ignore[arg-type]
    if value.form == "discovery" and value.dialect == "artemis":
        return _agent(value.components[0], redact=redact, top=top) + query  # type: ignore[arg-type]
    inner = ",".join(_component(c, redact=redact) for c in value.components)
    prefix = "" if value.form == "artemis" else value.form + ":"
    return f"{prefix}({inner}){query}"


def _component(component: Component, *, redact: bool) -> str:
    if isinstance(component, BrokerAddress):
        return _member(component, redact=redact, top=False)
    if isinstance(component, DiscoveryAgent):
        return _agent(component, redact=redact, top=False)
    return _uri(component, redact=redact, top=False)


def _member(member: BrokerAddress, *, redact: bool, top: bool) -> str:
    userinfo = ""
    if member.user is not None:
        userinfo = quote(member.user, safe="")
        if member.password is not None:
            userinfo += ":" + (MASK if redact else quote(member.password, safe=""))
        userinfo += "@"
    return f"{member.scheme}://{userinfo}{member.authority}" + _query(
        member.params, redact=redact, top=top
    )


def _agent(agent: DiscoveryAgent, *, redact: bool, top: bool) -> str:
    shown = redact_value("location", agent.location) if redact else agent.location
    location = quote(shown, safe=_SAFE_LOCATION)
    return f"{agent.scheme}:{location}" + _query(agent.params, redact=redact, top=top)


def _query(pairs: tuple[tuple[str, str], ...], *, redact: bool, top: bool) -> str:
    if not pairs:
        return ""
    if isinstance(pairs, Pairs):
        pairs = pairs.reveal()
    safe = _SAFE_TOP if top else _SAFE_INNER
    parts = []
    for key, value in pairs:
        shown = quote(redact_value(key, value) if redact else value, safe=safe)
        parts.append(f"{quote(key, safe=safe.replace('?', ''))}={shown}")
    return "?" + "&".join(parts)
