"""Read a URI's query: which system's dialect it speaks, and the canonical options it sets.

Split from ``_build`` (which gives the list of members and composites its meaning): this half
knows the option table, each dialect's spellings and the errors that point at a bad option.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence

from failover_client._errors import OptionError, URIError

from ._address import DEFAULT_PORTS, SCHEMES, BrokerAddress
from ._model import Dialect, Form
from ._options import FailoverOptions
from ._redact import mask_same_length
from ._scan import Pair, RawMember, scan
from ._table import BUILTIN_POLICIES, OPTION_TABLE, SYSTEM_LABELS, OptionSpec, spec_for
from ._values import BadValue, convert

__all__ = [
    "DIALECT_LABELS",
    "Context",
    "QueryOptions",
    "QueryReader",
    "build_member",
    "dialect_defaults",
]

DIALECT_LABELS: dict[Dialect, str] = {
    "classic": "ActiveMQ Classic",
    "artemis": "Artemis",
    "qpid": "Qpid JMS",
}
_NESTED_PREFIX: dict[Dialect, str] = {"classic": "nested.", "qpid": "failover.nested."}
_DISCOVERED = "discovered."
"""Classic ``discovery:(...)?discovered.x=y``: options for the brokers the agent discovers."""
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


class _PolicyNames(Collection[str]):
    """The built-in policy names and ``more``, asked in that order.

    ``more`` may be a registry that lists installed plug-ins only when asked for a name it
    does not otherwise know (reading every distribution's metadata): a URI that names a
    built-in policy, or none, never makes it do so.
    """

    __slots__ = ("_more",)

    def __init__(self, more: Collection[str]) -> None:
        self._more = more

    def __contains__(self, name: object) -> bool:
        return name in BUILTIN_POLICIES or name in self._more

    def _all(self) -> frozenset[str]:
        return frozenset(BUILTIN_POLICIES) | frozenset(self._more)

    def __iter__(self) -> Iterator[str]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


class Context:
    """What every error needs: the text (masked lazily) and the known policy names."""

    __slots__ = ("_masked", "policies", "text")

    def __init__(self, text: str | None, policies: Collection[str]) -> None:
        self.text = text
        self.policies: Collection[str] = _PolicyNames(policies)
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


class QueryOptions:
    """The outcome of reading one shared query."""

    __slots__ = ("leftovers", "nested", "options", "passthrough", "password", "user")

    def __init__(self, options: FailoverOptions) -> None:
        self.options = options
        self.nested: list[tuple[str, str]] = []
        self.passthrough: list[tuple[str, str]] = []
        self.leftovers: list[Pair] = []
        self.user: Pair | None = None
        self.password: Pair | None = None


def build_member(ctx: Context, node: RawMember, *, params: bool) -> BrokerAddress:
    if node.scheme not in SCHEMES:
        known = ", ".join(sorted(SCHEMES))
        raise ctx.error(f"unknown scheme {node.scheme!r} (known: {known})", node.pos)
    if not node.host:
        raise ctx.error("broker address without a host", node.pos)
    port = node.port
    if port is None:
        protocol, tls = SCHEMES[node.scheme]
        port = DEFAULT_PORTS[protocol][1 if tls else 0]
    elif not 1 <= port <= 65535:
        raise ctx.error(f"bad port {port}: must be 1-65535", node.pos)
    return BrokerAddress(
        node.scheme,
        node.host,
        port,
        node.user,
        node.password,
        _pairs(node.params) if params else (),
    )


class QueryReader:
    """Reads shared queries against the option table, raising errors that point into ``ctx``."""

    __slots__ = ("ctx",)

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

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
    ) -> QueryOptions:
        """Turn a shared query into options; leftover pairs are errors or member/agent params."""
        out = QueryOptions(_PLACEHOLDER)
        values: dict[str, object] = {}
        origin: dict[str, Pair] = {}
        sources: list[tuple[str, str]] = []
        for pair in pairs:
            key = pair.key
            if self.prefixed(pair, dialect, form, out):
                continue
            spec = spec_for(key)
            if spec is None:
                self.unmatched(pair, dialect, form, out, leftover=leftover)
                continue
            self.check_allowed(spec, pair, dialect, form)
            if spec.applies_to == "member":
                # The Java clients take credentials as connection-factory properties too; they
                # become the members' user and password, never an option anyone prints.
                self.value(spec, pair)
                if spec.kind == "secret":
                    out.password = pair
                else:
                    out.user = pair
                continue
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

    def prefixed(self, pair: Pair, dialect: Dialect, form: Form | str, out: QueryOptions) -> bool:
        """Route ``nested.*`` (and Classic ``discovered.*``) pairs; False for any other pair."""
        key = pair.key
        nested_prefix = _NESTED_PREFIX.get(dialect)
        if nested_prefix and key.startswith(nested_prefix) and len(key) > len(nested_prefix):
            out.nested.append((key[len(nested_prefix) :], pair.value))
            return True
        if key.startswith(_DISCOVERED) and form == "discovery" and len(key) > len(_DISCOVERED):
            # Classic hands these to each transport it discovers; the topology source does.
            out.passthrough.append((key, pair.value))
            return True
        return False

    def unmatched(
        self, pair: Pair, dialect: Dialect, form: Form | str, out: QueryOptions, *, leftover: str
    ) -> None:
        """A pair no table row knows: passthrough, a member/agent parameter, or an error."""
        if pair.key.startswith("jms.") and dialect in ("classic", "qpid"):
            out.passthrough.append((pair.key, pair.value))
            return
        if leftover == "error":
            raise self.unknown(pair, dialect, form)
        self.check_typo(pair, dialect, form)
        out.leftovers.append(pair)

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
                # A query's '+' was decoded as a space; in a broker URI only a scheme
                # (nio+ssl) holds one, and no broker URI holds a space.
                node = scan(part.replace(" ", "+"))
                if not isinstance(node, RawMember):
                    raise URIError("expected a broker URI such as tcp://host:61616", position=0)  # noqa: TRY301
                keys.append(build_member(Context(None, ()), node, params=False).key)
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
            f"{DIALECT_LABELS[dialect]} URI",
            pair.key,
            pair.key_pos,
            suggestions=same,
        )

    def valid_names(self, dialect: Dialect, form: str) -> list[str]:
        names = [
            name
            for spec in OPTION_TABLE
            if (dialect in spec.systems or "failover-client" in spec.systems)
            and (spec.applies_to != "discovery" or form == "udp")
            for name in spec.names
        ]
        if dialect in _NESTED_PREFIX:
            names.append(_NESTED_PREFIX[dialect] + "*")
        return names

    def unknown(self, pair: Pair, dialect: Dialect, form: str) -> OptionError:
        valid = self.valid_names(dialect, form)
        lowered = {n.lower(): n for n in valid}
        import difflib  # noqa: PLC0415 - only an error needs it: not imported with the package

        suggestions = difflib.get_close_matches(pair.key, valid, n=3, cutoff=0.6)
        if pair.key.lower() in lowered and lowered[pair.key.lower()] not in suggestions:
            suggestions.insert(0, lowered[pair.key.lower()])
        return self.ctx.option_error(
            f"unknown {DIALECT_LABELS[dialect]} option {pair.key!r}",
            pair.key,
            pair.key_pos,
            suggestions=suggestions,
        )

    def check_typo(self, pair: Pair, dialect: Dialect, form: str) -> None:
        """Pairs that go to members must not be near-misses of a real option name."""
        valid = self.valid_names(dialect, form)
        if pair.key.lower() in {n.lower() for n in valid}:
            raise self.unknown(pair, dialect, form)
        import difflib  # noqa: PLC0415 - only a misspelt key needs it (see above)

        if difflib.get_close_matches(pair.key, valid, n=1, cutoff=0.85):
            raise self.unknown(pair, dialect, form)


def _position(pair: Pair) -> int:
    return -1 if pair.key_pos is None else pair.key_pos


def _pairs(pairs: Sequence[Pair]) -> tuple[tuple[str, str], ...]:
    return tuple((p.key, p.value) for p in pairs)
