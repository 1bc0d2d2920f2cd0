"""``explain``: what every option of a parsed URI is set to, where that came from, and pitfalls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ._build import dialect_defaults
from ._members import SINGLE_STARTUP, unused_member_params
from ._model import FailoverURI
from ._options import FailoverOptions
from ._redact import MASK, is_secret_key, redact_value
from ._table import OPTION_TABLE, SYSTEM_LABELS, OptionSpec, spec_for
from ._values import render

__all__ = ["ExplainRow", "explain"]

RowKind = Literal["option", "nested", "passthrough", "warning"]


@dataclass(frozen=True)
class ExplainRow:
    """One line of ``failover-client parse`` output.

    ``kind`` is ``option`` (a table row), ``nested`` (a ``nested.*`` member option),
    ``passthrough`` (accepted, not interpreted) or ``warning`` (``meaning`` says what is wrong,
    ``option`` names the options involved). Secret values are shown as ``***``.
    """

    kind: RowKind
    option: str
    value: str
    default: str
    system: str
    given: bool
    meaning: str
    attempts: str = ""


def _applies(spec: OptionSpec, uri: FailoverURI) -> bool:
    if uri.dialect not in spec.systems and "failover-client" not in spec.systems:
        return False
    udp = uri.form == "discovery" and uri.dialect == "artemis"
    return spec.applies_to != "discovery" or udp


def explain(uri: FailoverURI) -> list[ExplainRow]:
    """Rows for every option of ``uri``'s dialect, its nested and passthrough pairs, warnings."""
    options = uri.options
    defaults = FailoverOptions(**dialect_defaults(uri.dialect))  # type: ignore[arg-type]
    written = dict(uri.query)
    dialect_fields = {
        f for spec in OPTION_TABLE if spec.systems != ("failover-client",) and _applies(spec, uri)
        for f in spec.fields
    }  # fmt: skip
    rows: list[ExplainRow] = []
    for spec in OPTION_TABLE:
        if not _applies(spec, uri):
            continue
        used = next((n for n in spec.names if n in written), None)
        ours = spec.systems == ("failover-client",)
        if ours and set(spec.fields) & dialect_fields and used is None:
            continue  # the dialect's own spelling of this field is listed instead
        if spec.fields:
            field = spec.fields[0]
            value = render(spec, getattr(options, field))
            given = options.source_of(field) in spec.names
            default = render(spec, getattr(defaults, field)) if ours else spec.default
        else:
            value = written.get(used, spec.default) if used else spec.default
            given = used is not None
            default = spec.default
        if spec.kind == "secret" and value:
            value = MASK
        value = redact_value(spec.name, value)  # updateURIsURL may hold user:password@
        rows.append(
            ExplainRow(
                "option",
                used or spec.name,
                value,
                default,
                ", ".join(SYSTEM_LABELS[s] for s in spec.systems),
                given,
                spec.meaning,
                spec.attempts,
            )
        )
    prefix = "failover.nested." if uri.dialect == "qpid" else "nested."
    for key, value in uri.nested:
        rows.append(
            ExplainRow(
                "nested",
                prefix + key,
                MASK if is_secret_key(key) else value,
                "",
                SYSTEM_LABELS["qpid" if uri.dialect == "qpid" else "classic"],
                True,
                f"sets {key} on every member, replacing the member's own value",
            )
        )
    for key, value in uri.passthrough:
        if spec_for(key) is not None:
            continue  # recorded-only table options were listed above
        rows.append(
            ExplainRow(
                "passthrough",
                key,
                MASK if is_secret_key(key) else value,
                "",
                "JMS",
                True,
                "accepted for compatibility; failover-client does not interpret it",
            )
        )
    rows.extend(_warnings(uri))
    return rows


def _warning(option: str, message: str) -> ExplainRow:
    return ExplainRow("warning", option, "", "", "", True, message)


def _given(uri: FailoverURI, field: str) -> str | None:
    return uri.options.source_of(field)


def _warnings(uri: FailoverURI) -> list[ExplainRow]:
    o = uri.options
    out: list[ExplainRow] = []
    if o.priority_backup and o.randomize and not o.policy:
        out.append(
            _warning(
                "priorityBackup + randomize",
                "randomize=true sends the first connection to a random broker; priorityBackup "
                "only moves it to the priority broker later. Set randomize=false to start there.",
            )
        )
    if o.priority_uris and not o.priority_backup:
        out.append(
            _warning("priorityURIs", "priorityURIs has no effect without priorityBackup=true")
        )
    if _given(uri, "backup_pool_size") and not (o.backup or o.priority_backup):
        out.append(_warning("backupPoolSize", "backupPoolSize has no effect without backup=true"))
    if not o.use_exponential_backoff:
        for field in ("backoff_multiplier", "max_reconnect_delay"):
            name = _given(uri, field)
            if name:
                out.append(_warning(name, f"{name} has no effect when back-off is switched off"))
    if _given(uri, "rebalance_update_uris") and o.update_uris_url is None:
        out.append(
            _warning(
                "rebalanceUpdateURIs", "rebalanceUpdateURIs has no effect without updateURIsURL"
            )
        )
    randomize = _given(uri, "randomize")
    policy = _given(uri, "policy")
    if randomize and policy and randomize != "masterslave:":
        out.append(
            _warning(
                f"{randomize} + {policy}",
                f"{randomize} is ignored: policy {o.policy!r} orders the brokers",
            )
        )
    if o.max_reconnect_attempts == 0 and uri.form != "discovery":
        name = _given(uri, "max_reconnect_attempts") or (
            "reconnectAttempts" if uri.dialect == "artemis" else "maxReconnectAttempts"
        )
        out.append(_warning(name, f"{name}=0: a lost connection is never re-established"))
    if (
        uri.dialect == "artemis"
        and policy
        and o.use_topology_for_load_balancing
        and uri.form == "artemis"
    ):
        out.append(
            _warning(
                f"{policy} + useTopologyForLoadBalancing",
                "with useTopologyForLoadBalancing=true the policy balances over the topology the "
                "cluster reports, not only the brokers listed; set it to false to use the list",
            )
        )
    out.extend(_topology_warnings(uri))
    out.extend(_member_warnings(uri))
    tls_given = [
        spec.name
        for spec in OPTION_TABLE
        if spec.name.startswith("tls.") and spec.name in dict(uri.query)
    ]
    if tls_given and uri.members and not any(m.tls for m in uri.members):
        out.append(
            _warning(
                ", ".join(tls_given), "TLS options have no effect: no member uses a TLS scheme"
            )
        )
    if not o.tls_verify and any(m.tls for m in uri.members):
        out.append(
            _warning(
                "tls.verify", "certificate verification is off: any server certificate is accepted"
            )
        )
    return out


def _topology_warnings(uri: FailoverURI) -> list[ExplainRow]:
    """Topology options that cannot do what they say with the rest of the URI."""
    o = uri.options
    out: list[ExplainRow] = []
    listed = ",".join(o.topology)
    if o.topology and not o.update_uris_supported:
        out.append(
            _warning(
                "topology + updateURIsSupported",
                f"updateURIsSupported=false: the broker lists that topology={listed} hears "
                "are ignored (only updateURIsURL and discovery lists are taken)",
            )
        )
    if _given(uri, "topology_openwire_port") and "openwire" not in o.topology:
        out.append(
            _warning(
                "topology.openwirePort",
                "topology.openwirePort has no effect without topology=openwire",
            )
        )
    dynamic = any(a.scheme in ("multicast", "udp") for a in uri.agents)
    if _given(uri, "topology_scheme_map") and not (o.topology or o.update_uris_url or dynamic):
        out.append(
            _warning(
                "topology.schemeMap",
                "topology.schemeMap has no effect without topology=..., updateURIsURL, or a "
                "discovery agent multicast:// or udp://",
            )
        )
    advertising = [name for name in o.topology if name in ("openwire", "advisory")]
    if advertising and not o.topology_scheme_map:
        out.append(
            _warning(
                "topology",
                f"ActiveMQ advertises its brokers' OpenWire URLs (tcp://, ssl://); without "
                f"topology.schemeMap (e.g. tcp:stomp:61613) topology={','.join(advertising)} "
                "skips every URL that does not already speak this connection's protocol",
            )
        )
    return out


def _member_warnings(uri: FailoverURI) -> list[ExplainRow]:
    """Member options no adapter reads, and the start-up of a plain broker URI.

    (A failover option written on a member is a parse error: ``_members``.)
    """
    out = []
    for member in uri.members:
        error = unused_member_params(member)
        if error is not None:
            out.append(_warning(error.option, f"{error.reason}; FailoverConnection refuses it"))
    if uri.options.source_of("startup_max_reconnect_attempts") == SINGLE_STARTUP:
        out.append(
            _warning(
                "startupMaxReconnectAttempts",
                "a plain broker URI without retry options makes one start-up pass: connect() "
                "fails at once when the broker does not answer (write "
                "startupMaxReconnectAttempts=-1, or use failover:(...), to retry)",
            )
        )
    return out
