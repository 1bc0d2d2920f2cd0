"""The hand-written scanner: failover URI text -> a raw tree that remembers positions.

Why not :mod:`urllib.parse`: a failover URI is not one RFC 3986 URI but a tree of them.
``failover:(tcp://a,static:(tcp://b,tcp://c)?x=1)?y=2`` nests lists inside parentheses, so the
commas that separate members must be told apart by depth; ``urlsplit`` sees one opaque path.
Members carry their own ``?query`` that ends at a comma or a closing parenthesis, not at the end
of the text; Artemis separates options with ``;`` as well as ``&``; IPv6 literals put colons
inside brackets; and every error here must say *where* (a character offset, so a caret lines
up), which ``urlsplit`` cannot do because it rarely raises at all. One left-to-right pass over
the string keeps parsing cheap: small precompiled patterns only find where a token ends (and
match the common ``scheme://user:pw@host:port`` member whole); every character they stop at is
then judged here, so each error says what went wrong and where.

Nothing here knows what an option means; ``_build`` gives the tree its meaning.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from failover_client._errors import URIError

from ._address import SCHEMES
from ._agent import AGENT_SCHEMES, JGROUPS_REFUSED
from ._redact import mask_same_length

__all__ = ["COMPOSITES", "Pair", "RawAgent", "RawComposite", "RawMember", "RawNode", "scan"]

COMPOSITES = ("failover", "static", "masterslave", "discovery")
_HEX = frozenset("0123456789abcdefABCDEF")
_SPACE = frozenset(" \t\r\n")
_SCHEME_RUN = re.compile(r"[A-Za-z0-9+.\-]*")
_HOST_RUN = re.compile(r"[A-Za-z0-9._~\-]*")
# Token ends, per set of stop characters (top level: none; ``failover:u1,u2``: comma;
# inside parentheses: comma and ")"). Compiled once; they only find where a token ends, the
# character found there is then judged by hand so errors can say what and where.
_AUTHORITY_RUN = {stops: re.compile(rf"[^/?#()\s{re.escape(stops)}]*") for stops in ("", ",", ",)")}
_SEGMENT_RUN = {stops: re.compile(rf"[^&;()#\s{re.escape(stops)}]*") for stops in ("", ",", ",)")}
_LOCATION_RUN = {stops: re.compile(rf"[^?()\s{re.escape(stops)}]*") for stops in ("", ",", ",)")}
# The common member, ``//[user[:password]@]host[:port]`` with nothing to decode, in one match;
# anything else (IPv6, escapes, mistakes) takes the careful path that reports positions.
_PLAIN_MEMBER = re.compile(
    r"([A-Za-z][A-Za-z0-9+.\-]*)://(?:([^/?#()\s,@:%]*)(?::([^/?#()\s,@%]*))?@)?([A-Za-z0-9._~\-]+)(?::([0-9]{1,5}))?"
)
_MAX_DEPTH = 16
"""Composites nested deeper than this are refused (real URIs nest two or three levels)."""


@dataclass(slots=True)
class Pair:
    """One ``key=value`` option, decoded, with the offsets of key and value (None if built)."""

    key: str
    value: str
    key_pos: int | None = None
    value_pos: int | None = None


@dataclass(slots=True)
class RawMember:
    pos: int | None
    scheme: str
    host: str
    port: int | None
    user: str | None = None
    password: str | None = None
    params: list[Pair] = field(default_factory=list)


@dataclass(slots=True)
class RawAgent:
    pos: int | None
    scheme: str
    location: str
    params: list[Pair] = field(default_factory=list)


@dataclass(slots=True)
class RawComposite:
    pos: int | None
    kind: str
    """``failover``, ``static``, ``masterslave``, ``discovery`` or ``artemis`` for ``(u1,u2)``."""
    components: list[RawNode]
    params: list[Pair] = field(default_factory=list)
    parenthesized: bool = True


RawNode = RawMember | RawAgent | RawComposite


def scan(text: str) -> RawNode:
    """Scan ``text`` into a raw tree; raise :class:`URIError` with a position on bad syntax."""
    return _Scanner(text).top()


class _Scanner:
    __slots__ = ("_masked", "depth", "end", "i", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.depth = 0
        self.i = 0
        self.end = len(text)
        self._masked: str | None = None
        # Surrounding whitespace (a pasted newline) is not part of the URI.
        while self.i < self.end and text[self.i] in _SPACE:
            self.i += 1
        while self.end > self.i and text[self.end - 1] in _SPACE:
            self.end -= 1

    # --- helpers ---------------------------------------------------------------------------------

    def masked(self) -> str:
        if self._masked is None:
            self._masked = mask_same_length(self.text)
        return self._masked

    def error(self, message: str, position: int) -> URIError:
        return URIError(message, text=self.masked(), position=position)

    def shown(self, start: int, stop: int | None = None) -> str:
        """``text[start:stop]`` (one character by default) for a message: secrets starred."""
        return self.masked()[start : start + 1 if stop is None else stop]

    def peek(self) -> str:
        i = self.i
        return self.text[i] if i < self.end else ""

    def skip_space(self) -> None:
        while self.i < self.end and self.text[self.i] in _SPACE:
            self.i += 1

    def at_stop(self, stops: str) -> bool:
        return self.i >= self.end or self.text[self.i] in stops

    def decode(self, start: int, stop: int, *, plus: bool = False) -> str:
        """Percent-decode ``text[start:stop]``; a broken escape is an error at its offset.

        ``plus``: a ``+`` is a space, as in a query: ActiveMQ Classic, Artemis and Qpid JMS all
        read option names and values with ``URLDecoder``, which decodes it so.
        """
        raw = self.text[start:stop]
        if plus:
            raw = raw.replace("+", " ")  # same length: offsets below stay right
        if "%" not in raw:
            return raw
        out = bytearray()
        j = 0
        while j < len(raw):
            ch = raw[j]
            if ch == "%":
                pair = raw[j + 1 : j + 3]
                if len(pair) != 2 or not all(c in _HEX for c in pair):
                    raise self.error(
                        f"bad percent-escape {self.shown(start + j, start + j + 3)!r}", start + j
                    )
                out.append(int(pair, 16))
                j += 3
            else:
                out.extend(ch.encode())
                j += 1
        try:
            return out.decode()
        except UnicodeDecodeError:
            raise self.error("percent-escapes do not decode as UTF-8", start) from None

    # --- grammar ---------------------------------------------------------------------------------

    def top(self) -> RawNode:
        if self.i >= self.end:
            raise self.error("empty URI", 0)
        start = self.i
        if self.peek() == "(":
            node: RawNode = self.artemis_list("")
        else:
            scheme = self.scheme()
            if scheme in COMPOSITES:
                node = self.composite(scheme, start, "", top=True)
            else:
                node = self.leaf(scheme, start, "", in_discovery=False, top=True)
        if self.i < self.end:
            ch = self.shown(self.i)
            what = "unbalanced ')'" if ch == ")" else f"unexpected {ch!r}"
            raise self.error(what, self.i)
        return node

    def scheme(self) -> str:
        """Read ``scheme:``; leave ``i`` after the colon."""
        start = self.i
        self.i = min(_SCHEME_RUN.match(self.text, start).end(), self.end)  # type: ignore[union-attr]
        if self.i == start:
            ch = self.peek()
            if ch in ("", ",", ")"):
                raise self.error("empty member", start)
            raise self.error(f"expected a URI scheme, found {self.shown(start)!r}", start)
        if self.peek() != ":":
            raise self.error(
                f"{self.shown(start, self.i)!r} has no scheme (write e.g. tcp://host:port)", start
            )
        name = self.text[start : self.i].lower()
        self.i += 1
        if name not in COMPOSITES and name not in SCHEMES and name not in AGENT_SCHEMES:
            rest = self.text[self.i : self.i + 1]
            if rest.isdigit():
                # ``host:61616``: a bare address, the most common slip.
                stop = self.i
                while stop < self.end and self.text[stop] not in ",)?&;":
                    stop += 1
                raise self.error(
                    f"member {self.shown(start, stop)!r} has no scheme; write tcp://, stomp://, "
                    f"amqp:// ... in front of host:port",
                    start,
                )
            if name == "jgroups":
                raise self.error(JGROUPS_REFUSED, start)
            known = ", ".join(sorted({*COMPOSITES, *SCHEMES, *AGENT_SCHEMES}))
            raise self.error(f"unknown scheme {name!r} (known: {known})", start)
        return name

    def artemis_list(self, stops: str) -> RawComposite:
        start = self.i
        components = self.component_list(in_discovery=False)
        params = self.query(stops) if self.peek() == "?" else []
        return RawComposite(start, "artemis", components, params)

    def composite(self, kind: str, start: int, stops: str, *, top: bool) -> RawComposite:
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            # Refuse before Python's recursion limit turns hostile input into a crash.
            raise self.error(f"composites nested more than {_MAX_DEPTH} deep", start)
        node = self.composite_body(kind, start, stops, top=top)
        self.depth -= 1
        return node

    def composite_body(self, kind: str, start: int, stops: str, *, top: bool) -> RawComposite:
        # ``failover://(...)`` is an old spelling ActiveMQ still accepts.
        if self.text.startswith("//", self.i):
            self.i += 2
        in_discovery = kind == "discovery"
        if self.peek() == "(":
            components = self.component_list(in_discovery=in_discovery)
            params = self.query(stops) if self.peek() == "?" else []
            return RawComposite(start, kind, components, params)
        if self.i >= self.end or self.text[self.i] in stops:
            raise self.error(f"{kind}: has no members", self.i)
        if not top:
            # Without parentheses a nested composite takes exactly one component.
            return RawComposite(start, kind, [self.component(",)", in_discovery)], [], False)
        # ``failover:u1,u2``: as in ActiveMQ, a trailing ``?query`` belongs to the last member.
        components = [self.component(",", in_discovery)]
        while self.peek() == ",":
            self.i += 1
            components.append(self.component(",", in_discovery))
        return RawComposite(start, kind, components, [], False)

    def component_list(self, *, in_discovery: bool) -> list[RawNode]:
        open_pos = self.i
        self.i += 1  # the "("
        components: list[RawNode] = []
        self.skip_space()
        if self.peek() == ")":
            # ``failover:()?updateURIsURL=...``: the builder decides whether empty is allowed.
            self.i += 1
            return components
        while True:
            self.skip_space()
            if self.i >= self.end:
                raise self.error("unclosed '('", open_pos)
            components.append(self.component(",)", in_discovery))
            self.skip_space()
            ch = self.peek()
            if ch == ",":
                self.i += 1
                continue
            if ch == ")":
                self.i += 1
                return components
            if not ch:
                raise self.error("unclosed '('", open_pos)
            raise self.error(f"unexpected {self.shown(self.i)!r}", self.i)

    def component(self, stops: str, in_discovery: bool) -> RawNode:
        start = self.i
        ch = self.peek()
        if ch in ("", ",", ")"):
            raise self.error("empty member", start)
        if ch == "(":
            raise self.error("a nested list needs a scheme such as failover: or static:", start)
        if not in_discovery:
            plain = self.plain_member(stops)
            if plain is not None:
                return plain
        scheme = self.scheme()
        if scheme in COMPOSITES:
            return self.composite(scheme, start, stops, top=False)
        return self.leaf(scheme, start, stops, in_discovery=in_discovery, top=False)

    def leaf(
        self, scheme: str, start: int, stops: str, *, in_discovery: bool, top: bool
    ) -> RawMember | RawAgent:
        if scheme in AGENT_SCHEMES and (in_discovery or scheme not in SCHEMES):
            if not in_discovery and not (top and scheme == "udp"):
                raise self.error(
                    f"discovery agent {scheme}: must be wrapped in discovery:(...)", start
                )
            return self.agent(scheme, start, stops)
        if in_discovery:
            raise self.error(
                f"discovery:(...) lists discovery agents "
                f"({', '.join(sorted(AGENT_SCHEMES))}), not {scheme}:",
                start,
            )
        return self.member(scheme, start, stops)

    def agent(self, scheme: str, start: int, stops: str) -> RawAgent:
        loc_start = self.i
        self.i = min(_LOCATION_RUN[stops].match(self.text, loc_start).end(), self.end)  # type: ignore[union-attr]
        ch = self.peek()
        if ch and ch not in stops and (ch in "()" or ch in _SPACE):
            raise self.error(f"unexpected {self.shown(self.i)!r} in discovery agent", self.i)
        if self.i == loc_start:
            raise self.error(f"{scheme}: needs a location", loc_start)
        location = self.decode(loc_start, self.i)
        params = self.query(stops) if self.peek() == "?" else []
        return RawAgent(start, scheme, location, params)

    def plain_member(self, stops: str) -> RawMember | None:
        """The common case in one match, or None to take the careful path."""
        plain = _PLAIN_MEMBER.match(self.text, self.i, self.end)
        if plain is None:
            return None
        scheme = plain.group(1).lower()
        after = plain.end()
        ch = self.text[after] if after < self.end else ""
        port_text = plain.group(5)
        port = None if port_text is None else int(port_text)
        if (
            scheme not in SCHEMES
            or (ch and ch not in stops and ch != "?")
            or (port is not None and not 1 <= port <= 65535)
        ):
            return None
        start = self.i
        self.i = after
        params = self.query(stops) if ch == "?" else []
        user, password, host = plain.group(2, 3, 4)
        return RawMember(start, scheme, host, port, user, password, params)

    def member(self, scheme: str, start: int, stops: str) -> RawMember:
        if not self.text.startswith("//", self.i):
            raise self.error(f"expected '//' after {scheme}:", self.i)
        self.i += 2
        auth_start = self.i
        self.i = min(_AUTHORITY_RUN[stops].match(self.text, auth_start).end(), self.end)  # type: ignore[union-attr]
        ch = self.peek()
        if ch and ch not in stops and (ch in "()" or ch in _SPACE):
            raise self.error(f"unexpected {self.shown(self.i)!r} in broker address", self.i)
        auth_end = self.i
        user: str | None = None
        password: str | None = None
        at = self.text.rfind("@", auth_start, auth_end)
        host_start = auth_start
        if at >= 0:
            colon = self.text.find(":", auth_start, at)
            if colon >= 0:
                user = self.decode(auth_start, colon)
                password = self.decode(colon + 1, at)
            else:
                user = self.decode(auth_start, at)
            host_start = at + 1
        host, port = self.host_port(scheme, host_start, auth_end)
        if self.peek() == "/":
            # A bare trailing slash is harmless; a path means something we do not support.
            self.i += 1
            if not self.at_stop(stops + "?"):
                raise self.error("broker addresses take no path", self.i)
        if self.peek() == "#":
            raise self.error("broker addresses take no fragment", self.i)
        params = self.query(stops) if self.peek() == "?" else []
        return RawMember(start, scheme, host, port, user, password, params)

    def host_port(self, scheme: str, start: int, stop: int) -> tuple[str, int | None]:
        text = self.text
        if start >= stop:
            raise self.error(f"{scheme}:// needs a host", start)
        if text[start] == "[":
            close = text.find("]", start, stop)
            if close < 0:
                raise self.error("unclosed '[' in IPv6 address", start)
            host = text[start + 1 : close]
            literal = host.split("%", 1)[0]
            try:
                ipaddress.IPv6Address(literal)
            except ValueError:
                raise self.error(f"bad IPv6 address {host!r}", start + 1) from None
            rest = close + 1
            if rest < stop and text[rest] != ":":
                raise self.error(f"unexpected {self.shown(rest)!r} after IPv6 address", rest)
        else:
            colon = text.find(":", start, stop)
            rest = colon if colon >= 0 else stop
            bad = _HOST_RUN.match(text, start).end()  # type: ignore[union-attr]
            if bad < rest:
                raise self.error(f"unexpected {self.shown(bad)!r} in host name", bad)
            host = text[start:rest]
            if not host:
                raise self.error(f"{scheme}:// needs a host", start)
        if rest >= stop:
            return host, None
        port_text = text[rest + 1 : stop]
        if not port_text.isdigit() or not port_text.isascii():
            raise self.error(f"bad port {port_text!r}: must be a number 1-65535", rest + 1)
        port = int(port_text)
        if not 1 <= port <= 65535:
            raise self.error(f"bad port {port}: must be 1-65535", rest + 1)
        return host, port

    def query(self, stops: str) -> list[Pair]:
        """Read ``?k=v&k=v;k=v`` up to a stop character; ``i`` starts on the ``?``."""
        self.i += 1
        pairs: list[Pair] = []
        text = self.text
        while True:
            seg_start = self.i
            self.segment(stops)
            seg_end = self.i
            ch = self.peek()
            if ch == "#":
                raise self.error(
                    "a URI fragment ('#...') is not part of a failover URI; write %23 for a '#' "
                    "in a value",
                    self.i,
                )
            if ch and ch in _SPACE:
                raise self.error("unexpected whitespace in query", self.i)
            eq = text.find("=", seg_start, seg_end)
            if seg_end > seg_start:  # empty segments (``a=1&&b=2``, trailing ``&``) are skipped
                if eq < 0:
                    raise self.error(
                        f"expected name=value, found {self.shown(seg_start, seg_end)!r}", seg_start
                    )
                if eq == seg_start:
                    raise self.error("option without a name", seg_start)
                pairs.append(
                    Pair(
                        self.decode(seg_start, eq, plus=True),
                        self.decode(eq + 1, seg_end, plus=True),
                        seg_start,
                        eq + 1,
                    )
                )
            if self.i < self.end and text[self.i] in "&;":
                self.i += 1
                continue
            return pairs

    def segment(self, stops: str) -> None:
        """Move ``i`` to the end of one ``name=value``; parentheses may appear in the value.

        All three Java clients accept them (``file:/C:/Dir(1)/a.csv``, Jasypt's ``ENC(...)``).
        Inside a list a ``(`` must be closed within the value, as ActiveMQ's composite splitter
        counts parentheses to find the commas between members; in the shared query of the whole
        URI, which runs to the end of the text, any parenthesis is just a character.
        """
        text = self.text
        run = _SEGMENT_RUN[stops]
        while True:
            self.i = min(run.match(text, self.i).end(), self.end)  # type: ignore[union-attr]
            ch = self.peek()
            if ch == "(":
                close = self.closing(self.i)
                if close >= 0:
                    self.i = close + 1
                    continue
                if ")" in stops:
                    raise self.error("unclosed '(' in an option value (write %28)", self.i)
                self.i += 1
                continue
            if ch == ")" and ")" not in stops:
                self.i += 1
                continue
            return

    def closing(self, open_pos: int) -> int:
        """Offset of the ``)`` that closes the ``(`` at ``open_pos``, or -1."""
        depth = 0
        for j in range(open_pos, self.end):
            ch = self.text[j]
            if ch == "(":
                depth += 1
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    return j
            elif ch in _SPACE or ch == "#":
                return -1
        return -1
