"""Give a scanned tree its meaning: dialect, canonical options, effective members."""

from __future__ import annotations

import difflib
from collections.abc import Collection, Sequence
from typing import cast

from failover_client._errors import OptionError, URIError

from ._address import DEFAULT_PORTS, SCHEMES, BrokerAddress
from ._agent import AGENT_SCHEMES, DiscoveryAgent
from ._model import Component, Dialect, FailoverURI, Form
from ._options import FailoverOptions
from ._redact import mask_same_length
from ._scan import Pair, RawAgent, RawComposite, RawMember, RawNode, scan
from ._table import BUILTIN_POLICIES, OPTION_TABLE, SYSTEM_LABELS, OptionSpec, spec_for
from ._values import BadValue, convert

__all__ = ["build", "build_raw", "dialect_defaults"]

_DIALECT_LABELS: dict[Dialect, str] = {
    "classic": "ActiveMQ Classic",
    "artemis": "Artemis",
    "qpid": "Qpid JMS",
}
_NESTED_PREFIX: dict[Dialect, str] = {"classic": "nested.", "qpid": "failover.nested."}
_AMQP = frozenset(s for s, (proto, _) in SCHEMES.items() if proto == "amqp")
# Fields an Artemis URI cannot set but whose Classic default would misdescribe Artemis.
_BASE_DEFAULTS: dict[Dialect, dict[str, object]] = {
    "classic": {},
    "qpid": {},
    "artemis": {"initial_reconnect_delay": 0.0},
}
_defaults_cache: dict[Dialect, dict[str, object]] = {}
_PLACEHOLDER = FailoverOptions()


def dialect_defaults(dialect: Dialect) -> dict[str, object]:
    """FailoverOptions field values a ``dialect`` URI gets when it does not set them."""
    cached = _defaults_cache.get(dialect)
    if cached is None:
        cached = dict(_BASE_DEFAULTS[dialect])
        for spec in OPTION_TABLE:
            if spec.systems == (dialect,) and spec.fields and spec.default:
                value = convert(spec, spec.default, BUILTIN_POLICIES)
                for name in spec.fields:
                    cached[name] = value
        cached["attempt_unit"] = "broker" if dialect == "artemis" else "pass"
        _defaults_cache[dialect] = cached
    return cached


class _Context:
    """What every error needs: the text (masked lazily) and the known policy names."""

    __slots__ = ("_masked", "policies", "text")

    def __init__(self, text: str | None, policies: Collection[str]) -> None:
        self.text = text
        self.policies = frozenset(BUILTIN_POLICIES) | frozenset(policies)
        self._masked: str | None = None

    def masked(self) -> str:
        if self._masked is None:
            self._masked = mask_same_length(self.text) if self.text else ""
        return self._masked

    def error(self, message: str, position: int | None) -> URIError:
        return URIError(message, text=self.masked(), position=position)

    def option_error(
        self,
        message: str,
        option: str,
        position: int | None,
        suggestions: Sequence[str] = (),
    ) -> OptionError:
        return OptionError(
            message,
            option=option,
            text=self.masked(),
            position=position,
            suggestions=suggestions,
        )


# --- public entry points -------------------------------------------------------------------------


def build_raw(
    node: RawNode,
    text: str | None,
    *,
    dialect: Dialect | None = None,
    policies: Collection[str] = (),
) -> FailoverURI:
    """Meaning for a scanned tree (``text`` is the source, for error positions)."""
    return _Builder(_Context(text, policies)).top(node, dialect)


def build(
    form: Form,
    components: Sequence[Component],
    query: Sequence[tuple[str, str]] = (),
    *,
    dialect: Dialect | None = None,
    policies: Collection[str] = (),
) -> FailoverURI:
    """Make a :class:`FailoverURI` from parts, exactly as :func:`parse` would from text.

    ``components`` are the list as written (members with their *own* params, discovery agents,
    nested ``FailoverURI`` composites); ``query`` the shared options as written. For
    ``form="single"`` pass one member (its params and ``query`` are the one query); for an
    Artemis ``udp://`` group pass ``form="discovery", dialect="artemis"`` and one agent.
    """
    if form == "single":
        if len(components) != 1 or not isinstance(components[0], BrokerAddress):
            raise URIError("a single-member URI has exactly one BrokerAddress")
        member = _raw_member(components[0])
        member.params.extend(Pair(k, v) for k, v in query)
        return build_raw(member, None, dialect=dialect, policies=policies)
    if form == "discovery" and dialect == "artemis":
        if len(components) != 1 or not isinstance(components[0], DiscoveryAgent):
            raise URIError("an Artemis udp:// URI has exactly one DiscoveryAgent")
        agent = _raw_agent(components[0])
        agent.params.extend(Pair(k, v) for k, v in query)
        return build_raw(agent, None, dialect=dialect, policies=policies)
    raw = RawComposite(None, form, [_raw(c) for c in components], [Pair(k, v) for k, v in query])
    return build_raw(raw, None, dialect=dialect, policies=policies)


def _raw(component: Component) -> RawNode:
    if isinstance(component, BrokerAddress):
        return _raw_member(component)
    if isinstance(component, DiscoveryAgent):
        return _raw_agent(component)
    if component.form in ("single", "artemis"):
        raise URIError(f"a {component.form} URI cannot be nested inside a list")
    return RawComposite(
        None,
        component.form,
        [_raw(c) for c in component.components],
        [Pair(k, v) for k, v in component.query],
    )


def _raw_member(member: BrokerAddress) -> RawMember:
    params = [Pair(k, v) for k, v in member.params]
    return RawMember(
        None, member.scheme, member.host, member.port, member.user, member.password, params
    )


def _raw_agent(agent: DiscoveryAgent) -> RawAgent:
    return RawAgent(None, agent.scheme, agent.location, [Pair(k, v) for k, v in agent.params])


# --- the builder ---------------------------------------------------------------------------------


class _Options:
    """The outcome of reading one shared query."""

    __slots__ = ("leftovers", "nested", "options", "passthrough")

    def __init__(self, options: FailoverOptions) -> None:
        self.options = options
        self.nested: list[tuple[str, str]] = []
        self.passthrough: list[tuple[str, str]] = []
        self.leftovers: list[Pair] = []


class _Builder:
    __slots__ = ("ctx",)

    def __init__(self, ctx: _Context) -> None:
        self.ctx = ctx

    def top(self, node: RawNode, dialect: Dialect | None) -> FailoverURI:
        if isinstance(node, RawMember):
            return self.single(node, dialect)
        if isinstance(node, RawAgent):
            return self.udp(node, dialect)
        return self.composite(node, dialect)

    # --- forms ---------------------------------------------------------------------------------

    def single(self, node: RawMember, dialect: Dialect | None) -> FailoverURI:
        member = self.member(node, params=False)
        if dialect is None:
            dialect = self.detect(node.params, "single", (member,))
        read = self.read(node.params, dialect, "single", leftover="member")
        effective = BrokerAddress(
            member.scheme,
            member.host,
            member.port,
            member.user,
            member.password,
            tuple((p.key, p.value) for p in read.leftovers),
        )
        return FailoverURI(
            form="single",
            dialect=dialect,
            members=(effective,),
            options=read.options,
            components=(member,),
            query=_pairs(node.params),
            passthrough=tuple(read.passthrough),
        )

    def udp(self, node: RawAgent, dialect: Dialect | None) -> FailoverURI:
        if node.scheme != "udp" or dialect not in (None, "artemis"):
            raise self.ctx.error(
                f"a bare {node.scheme}: agent must be wrapped in discovery:(...)", node.pos
            )
        bare = DiscoveryAgent(node.scheme, self.location(node), ())
        read = self.read(node.params, "artemis", "udp", leftover="agent")
        agent = DiscoveryAgent(bare.scheme, bare.location, _pairs(read.leftovers))
        return FailoverURI(
            form="discovery",
            dialect="artemis",
            members=(),
            options=read.options,
            components=(bare,),
            query=_pairs(node.params),
            agents=(agent,),
        )

    def composite(self, node: RawComposite, dialect: Dialect | None) -> FailoverURI:
        form = cast(Form, node.kind)
        components: list[Component] = []
        members: list[BrokerAddress] = []
        agents: list[DiscoveryAgent] = []
        for child in node.components:
            if isinstance(child, RawMember):
                member = self.member(child, params=True)
                components.append(member)
                members.append(member)
            elif isinstance(child, RawAgent):
                agent = self.agent(child)
                components.append(agent)
                agents.append(agent)
            else:
                nested = self.composite(child, None)
                components.append(nested)
                members.extend(nested.members)
                agents.extend(nested.agents)
        self.check_shape(node, form, components)
        if dialect is None:
            dialect = self.detect(node.params, form, members)
        self.check_dialect(node, form, dialect)
        read = self.read(
            node.params, dialect, form, leftover="member" if form == "artemis" else "error"
        )
        if read.nested:
            members = [_override(m, read.nested) for m in members]
        if read.leftovers:
            defaults = _pairs(read.leftovers)
            members = [_default(m, defaults) for m in members]
        options = read.options
        if form == "masterslave":
            options = self.masterslave(node, options)
        return FailoverURI(
            form=form,
            dialect=dialect,
            members=tuple(members),
            options=options,
            components=tuple(components),
            query=_pairs(node.params),
            agents=tuple(agents),
            nested=tuple(read.nested),
            passthrough=tuple(read.passthrough),
        )

    def check_shape(self, node: RawComposite, form: Form, components: list[Component]) -> None:
        if form not in ("failover", "static", "masterslave", "discovery", "artemis"):
            raise self.ctx.error(f"unknown composite {form!r}", node.pos)
        if not components:
            raise self.ctx.error(f"{form} list is empty", node.pos)
        if form == "discovery":
            if not all(isinstance(c, DiscoveryAgent) for c in components):
                raise self.ctx.error("discovery:(...) lists discovery agents only", node.pos)
            return
        for component, raw in zip(components, node.components, strict=True):
            if isinstance(component, DiscoveryAgent):
                raise self.ctx.error(
                    f"discovery agent {component.scheme}: must be wrapped in discovery:(...)",
                    raw.pos,
                )
            if form == "masterslave" and not isinstance(component, BrokerAddress):
                raise self.ctx.error("masterslave:(...) lists brokers only", raw.pos)
        if form == "masterslave" and len(components) < 2:
            raise self.ctx.error(
                "masterslave:(...) needs a master and at least one slave", node.pos
            )

    def check_dialect(self, node: RawComposite, form: Form, dialect: Dialect) -> None:
        allowed: tuple[Dialect, ...] = {
            "artemis": ("artemis",),
            "failover": ("classic", "qpid"),
        }.get(form, ("classic",))  # type: ignore[assignment]
        if dialect not in allowed:
            raise self.ctx.error(
                f"a {form} URI cannot use the {_DIALECT_LABELS[dialect]} dialect", node.pos
            )

    def masterslave(self, node: RawComposite, options: FailoverOptions) -> FailoverOptions:
        # The list is ordered: master first. Randomizing would defeat the point.
        if options.source_of("randomize") is not None and options.randomize:
            pair = next(p for p in node.params if p.key == "randomize")
            raise self.ctx.option_error(
                "masterslave:(...) is ordered (master first); randomize=true contradicts it",
                "randomize",
                pair.value_pos,
            )
        return options.replace(
            randomize=False, sources=(*options.sources, ("randomize", "masterslave:"))
        )

    # --- leaves --------------------------------------------------------------------------------

    def member(self, node: RawMember, *, params: bool) -> BrokerAddress:
        if node.scheme not in SCHEMES:
            known = ", ".join(sorted(SCHEMES))
            raise self.ctx.error(f"unknown scheme {node.scheme!r} (known: {known})", node.pos)
        if not node.host:
            raise self.ctx.error("broker address without a host", node.pos)
        port = node.port
        if port is None:
            protocol, tls = SCHEMES[node.scheme]
            port = DEFAULT_PORTS[protocol][1 if tls else 0]
        elif not 1 <= port <= 65535:
            raise self.ctx.error(f"bad port {port}: must be 1-65535", node.pos)
        return BrokerAddress(
            node.scheme,
            node.host,
            port,
            node.user,
            node.password,
            _pairs(node.params) if params else (),
        )

    def location(self, node: RawAgent) -> str:
        if node.scheme not in AGENT_SCHEMES:
            known = ", ".join(sorted(AGENT_SCHEMES))
            raise self.ctx.error(
                f"unknown discovery agent {node.scheme!r} (known: {known})", node.pos
            )
        if not node.location:
            raise self.ctx.error(f"{node.scheme}: needs a location", node.pos)
        return node.location

    def agent(self, node: RawAgent) -> DiscoveryAgent:
        return DiscoveryAgent(node.scheme, self.location(node), _pairs(node.params))

    # --- dialect -------------------------------------------------------------------------------

    def detect(  # noqa: PLR0911 - one return per dialect rule reads best
        self, pairs: list[Pair], form: Form, members: Sequence[BrokerAddress]
    ) -> Dialect:
        """Whose spellings this query uses; mixing two systems is an error naming both."""
        if form == "artemis":
            return "artemis"
        seen: dict[str, Pair] = {}
        for pair in pairs:
            if pair.key.startswith("failover."):
                seen.setdefault("qpid", pair)
                continue
            spec = spec_for(pair.key)
            if spec is not None and len(spec.systems) == 1 and spec.system != "failover-client":
                seen.setdefault(spec.system, pair)
        if "classic" in seen and "qpid" in seen:
            _, second = sorted((seen["classic"], seen["qpid"]), key=_position)
            raise self.ctx.option_error(
                f"this URI mixes ActiveMQ Classic option {seen['classic'].key!r} and Qpid JMS "
                f"option {seen['qpid'].key!r}; use one dialect's spellings",
                second.key,
                second.key_pos,
            )
        if form == "single":
            for system in ("artemis", "classic", "qpid"):
                if system in seen:
                    return system
        if form not in ("failover", "single"):
            return "classic"
        if "qpid" in seen:
            return "qpid"
        if "classic" in seen:
            return "classic"
        # No telling spelling: an all-AMQP list is a Qpid JMS URI (a Classic client speaks
        # OpenWire), anything else is Classic.
        if members and all(m.scheme in _AMQP for m in members):
            return "qpid"
        return "classic"

    # --- options -------------------------------------------------------------------------------

    def read(
        self, pairs: list[Pair], dialect: Dialect, form: Form | str, *, leftover: str
    ) -> _Options:
        """Turn a shared query into options; leftover pairs are errors or member/agent params."""
        out = _Options(_PLACEHOLDER)
        values: dict[str, object] = {}
        origin: dict[str, Pair] = {}
        sources: list[tuple[str, str]] = []
        nested_prefix = _NESTED_PREFIX.get(dialect)
        for pair in pairs:
            key = pair.key
            if nested_prefix and key.startswith(nested_prefix) and len(key) > len(nested_prefix):
                out.nested.append((key[len(nested_prefix) :], pair.value))
                continue
            spec = spec_for(key)
            if spec is None:
                if key.startswith("jms.") and dialect in ("classic", "qpid"):
                    out.passthrough.append((key, pair.value))
                    continue
                if leftover == "error":
                    raise self.unknown(pair, dialect, form)
                self.check_typo(pair, dialect, form)
                out.leftovers.append(pair)
                continue
            self.check_allowed(spec, pair, dialect, form)
            if spec.applies_to == "discovery":
                self.value(spec, pair)
                out.leftovers.append(pair)
                continue
            value = self.value(spec, pair)
            if not spec.fields:
                out.passthrough.append((key, pair.value))
                continue
            for name in spec.fields:
                if name in origin:
                    earlier = origin[name]
                    raise self.ctx.option_error(
                        f"{key!r} sets the same option as {earlier.key!r}"
                        + (
                            f" (at position {earlier.key_pos})"
                            if earlier.key_pos is not None
                            else ""
                        )
                        + "; give it once",
                        key,
                        pair.key_pos,
                    )
                origin[name] = pair
                values[name] = value
                sources.append((name, key))
        fields = dict(dialect_defaults(dialect))
        fields.update(values)
        fields["dialect"] = dialect
        fields["sources"] = tuple(sources)
        try:
            out.options = FailoverOptions(**fields)  # type: ignore[arg-type]
        except OptionError as exc:
            culprit = origin.get(exc.option)
            raise self.ctx.option_error(
                exc.reason,
                culprit.key if culprit else exc.option,
                culprit.value_pos if culprit else None,
            ) from None
        return out

    def value(self, spec: OptionSpec, pair: Pair) -> object:
        if spec.kind == "uri_list":
            return self.uri_list(spec, pair)
        try:
            return convert(spec, pair.value, self.ctx.policies)
        except BadValue as exc:
            position = None if pair.value_pos is None else pair.value_pos + exc.offset
            raise self.ctx.option_error(
                f"bad value for {pair.key}: {exc.message}", pair.key, position
            ) from None

    def uri_list(self, spec: OptionSpec, pair: Pair) -> tuple[str, ...]:
        keys: list[str] = []
        offset = 0
        for part in pair.value.split(","):
            try:
                node = scan(part)
                if not isinstance(node, RawMember):
                    raise URIError("expected a broker URI such as tcp://host:61616", position=0)  # noqa: TRY301
                keys.append(_Builder(_Context(None, ())).member(node, params=False).key)
            except URIError as exc:
                position = None
                if pair.value_pos is not None:
                    position = pair.value_pos + offset + (exc.position or 0)
                raise self.ctx.option_error(
                    f"bad value for {spec.name}: {exc.reason}", pair.key, position
                ) from None
            offset += len(part) + 1
        return tuple(keys)

    def check_allowed(self, spec: OptionSpec, pair: Pair, dialect: Dialect, form: str) -> None:
        if spec.applies_to == "discovery" and form != "udp":
            raise self.ctx.option_error(
                f"{pair.key!r} configures an Artemis udp:// discovery group; it has no meaning "
                f"here",
                pair.key,
                pair.key_pos,
            )
        if dialect in spec.systems or "failover-client" in spec.systems:
            return
        same = [
            name
            for other in OPTION_TABLE
            if (dialect in other.systems and set(other.fields) & set(spec.fields))
            for name in other.names
        ]
        raise self.ctx.option_error(
            f"{pair.key!r} is a {SYSTEM_LABELS[spec.system]} option; it has no meaning in a "
            f"{_DIALECT_LABELS[dialect]} URI",
            pair.key,
            pair.key_pos,
            suggestions=same,
        )

    def valid_names(self, dialect: Dialect, form: str) -> list[str]:
        names = [
            name
            for spec in OPTION_TABLE
            if (dialect in spec.systems or "failover-client" in spec.systems)
            and (spec.applies_to == "uri" or form == "udp")
            for name in spec.names
        ]
        if dialect in _NESTED_PREFIX:
            names.append(_NESTED_PREFIX[dialect] + "*")
        return names

    def unknown(self, pair: Pair, dialect: Dialect, form: str) -> OptionError:
        valid = self.valid_names(dialect, form)
        lowered = {n.lower(): n for n in valid}
        suggestions = difflib.get_close_matches(pair.key, valid, n=3, cutoff=0.6)
        if pair.key.lower() in lowered and lowered[pair.key.lower()] not in suggestions:
            suggestions.insert(0, lowered[pair.key.lower()])
        return self.ctx.option_error(
            f"unknown {_DIALECT_LABELS[dialect]} option {pair.key!r}",
            pair.key,
            pair.key_pos,
            suggestions=suggestions,
        )

    def check_typo(self, pair: Pair, dialect: Dialect, form: str) -> None:
        """Pairs that go to members must not be near-misses of a real option name."""
        valid = self.valid_names(dialect, form)
        if pair.key.lower() in {n.lower() for n in valid}:
            raise self.unknown(pair, dialect, form)
        if difflib.get_close_matches(pair.key, valid, n=1, cutoff=0.85):
            raise self.unknown(pair, dialect, form)


def _position(pair: Pair) -> int:
    return -1 if pair.key_pos is None else pair.key_pos


def _pairs(pairs: Sequence[Pair]) -> tuple[tuple[str, str], ...]:
    return tuple((p.key, p.value) for p in pairs)


def _with_params(member: BrokerAddress, params: tuple[tuple[str, str], ...]) -> BrokerAddress:
    return BrokerAddress(
        member.scheme, member.host, member.port, member.user, member.password, params
    )


def _override(member: BrokerAddress, nested: Sequence[tuple[str, str]]) -> BrokerAddress:
    """Classic / Qpid JMS ``nested.*``: the shared value replaces the member's own."""
    params = dict(member.params)
    params.update(nested)
    return _with_params(member, tuple(params.items()))


def _default(member: BrokerAddress, shared: tuple[tuple[str, str], ...]) -> BrokerAddress:
    """Artemis shared options: a default that the member's own value beats."""
    own = {k for k, _ in member.params}
    extra = tuple((k, v) for k, v in shared if k not in own)
    return _with_params(member, member.params + extra) if extra else member
