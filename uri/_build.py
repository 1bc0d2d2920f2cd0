"""Give a scanned tree its meaning: dialect, canonical options, effective members."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import cast

from failover_client._errors import URIError

from ._address import BrokerAddress
from ._agent import AGENT_SCHEMES, DiscoveryAgent
from ._members import check_member_pairs, single_startup
from ._model import Component, Dialect, FailoverURI, Form
from ._options import FailoverOptions
from ._query import (
    DIALECT_LABELS,
    Context,
    QueryOptions,
    QueryReader,
    build_member,
    dialect_defaults,
)
from ._redact import Pairs
from ._scan import Pair, RawAgent, RawComposite, RawMember, RawNode

__all__ = ["LOGIN_PARAM", "PASSCODE_PARAM", "build", "build_raw", "dialect_defaults"]

LOGIN_PARAM = "login"
PASSCODE_PARAM = "passcode"
"""stomp.py's names for a member's credentials, taken as its user and password."""

# --- public entry points -------------------------------------------------------------------------


def build_raw(
    node: RawNode,
    text: str | None,
    *,
    dialect: Dialect | None = None,
    policies: Collection[str] = (),
) -> FailoverURI:
    """Meaning for a scanned tree (``text`` is the source, for error positions)."""
    return _Builder(Context(text, policies)).top(node, dialect)


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
    query = query.reveal() if isinstance(query, Pairs) else query
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
        [Pair(k, v) for k, v in _clear(component.query)],
    )


def _raw_member(member: BrokerAddress) -> RawMember:
    params = [Pair(k, v) for k, v in _clear(member.params)]
    return RawMember(
        None, member.scheme, member.host, member.port, member.user, member.password, params
    )


def _raw_agent(agent: DiscoveryAgent) -> RawAgent:
    return RawAgent(
        None, agent.scheme, agent.location, [Pair(k, v) for k, v in _clear(agent.params)]
    )


# --- the builder ---------------------------------------------------------------------------------


class _Builder:
    __slots__ = ("ctx", "reader")

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.reader = QueryReader(ctx)

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
        check_member_pairs(self.ctx, node.scheme, read.leftovers, own=False)
        effective = BrokerAddress(
            member.scheme,
            member.host,
            member.port,
            member.user,
            member.password,
            tuple((p.key, p.value) for p in read.leftovers),
        )
        effective = self.credentials(read, [self.own_credentials(effective)])[0]
        return FailoverURI(
            form="single",
            dialect=dialect,
            members=(effective,),
            options=single_startup(read.options),
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
                check_member_pairs(self.ctx, child.scheme, child.params, own=True)
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
        members = self.credentials(read, [self.own_credentials(m) for m in members])
        options = read.options
        if not components and (form != "failover" or options.update_uris_url is None):
            # ActiveMQ reads the whole list from updateURIsURL when the parentheses are empty.
            text, pos = self.ctx.text, node.pos
            inside = None if text is None or pos is None else text.find("(", pos) + 1
            raise self.ctx.error(
                f"empty member: a {form} list needs at least one (only "
                f"failover:()?updateURIsURL=... may be empty)",
                inside,
            )
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
        if form == "discovery":
            # Classic also takes a static:(...) list as the agent (its SimpleDiscoveryAgent).
            if not all(
                isinstance(c, DiscoveryAgent) or (isinstance(c, FailoverURI) and c.form == "static")
                for c in components
            ):
                raise self.ctx.error(
                    "discovery:(...) lists discovery agents or a static:(...) list only", node.pos
                )
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
                f"a {form} URI cannot use the {DIALECT_LABELS[dialect]} dialect", node.pos
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

    def credentials(self, read: QueryOptions, members: list[BrokerAddress]) -> list[BrokerAddress]:
        """Shared ``user``/``password`` options: the credentials of members without userinfo."""
        if read.user is None and read.password is None:
            return members
        user = None if read.user is None else read.user.value
        password = None if read.password is None else read.password.value
        return [
            m
            if m.user is not None
            else BrokerAddress(m.scheme, m.host, m.port, user, password, m.params)
            for m in members
        ]

    def own_credentials(self, member: BrokerAddress) -> BrokerAddress:
        """A member's ``login`` / ``passcode`` params (stomp.py's names, the STOMP CONNECT
        headers) are its user and password: kept as params they were silently unused."""
        login = member.param(LOGIN_PARAM)
        passcode = member.secret_param(PASSCODE_PARAM)
        if login is None and passcode is None:
            return member
        if member.user is not None:
            raise self.ctx.option_error(
                f"member {member}: give the credentials once, as user:password@ or as "
                f"{LOGIN_PARAM}/{PASSCODE_PARAM}",
                LOGIN_PARAM if login is not None else PASSCODE_PARAM,
                None,
            )
        if login is None:
            raise self.ctx.option_error(
                f"member {member}: {PASSCODE_PARAM} needs a {LOGIN_PARAM} (the user it is the "
                "password of)",
                PASSCODE_PARAM,
                None,
            )
        params = tuple(
            (k, v) for k, v in _clear(member.params) if k not in (LOGIN_PARAM, PASSCODE_PARAM)
        )
        return BrokerAddress(member.scheme, member.host, member.port, login, passcode, params)

    # --- leaves --------------------------------------------------------------------------------

    def member(self, node: RawMember, *, params: bool) -> BrokerAddress:
        return build_member(self.ctx, node, params=params)

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

    # --- the query ----------------------------------------------------------------------------

    def detect(self, pairs: list[Pair], form: Form, members: Sequence[BrokerAddress]) -> Dialect:
        return self.reader.detect(pairs, form, members)

    def read(
        self, pairs: list[Pair], dialect: Dialect, form: Form | str, *, leftover: str
    ) -> QueryOptions:
        return self.reader.read(pairs, dialect, form, leftover=leftover)


def _pairs(pairs: Sequence[Pair]) -> tuple[tuple[str, str], ...]:
    return tuple((p.key, p.value) for p in pairs)


def _clear(pairs: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """``pairs`` with secret values in clear (a parsed value holds them masked)."""
    return pairs.reveal() if isinstance(pairs, Pairs) else pairs


def _with_params(member: BrokerAddress, params: tuple[tuple[str, str], ...]) -> BrokerAddress:
    return BrokerAddress(
        member.scheme, member.host, member.port, member.user, member.password, params
    )


def _override(member: BrokerAddress, nested: Sequence[tuple[str, str]]) -> BrokerAddress:
    """Classic / Qpid JMS ``nested.*``: the shared value replaces the member's own."""
    params = dict(_clear(member.params))
    params.update(_clear(tuple(nested)))
    return _with_params(member, tuple(params.items()))


def _default(member: BrokerAddress, shared: tuple[tuple[str, str], ...]) -> BrokerAddress:
    """Artemis shared options: a default that the member's own value beats."""
    own = {k for k, _ in member.params}
    extra = tuple((k, v) for k, v in shared if k not in own)
    return _with_params(member, _clear(member.params) + extra) if extra else member
