"""The one option table: every spelling each system uses, what it maps to, its default and meaning.

ActiveMQ Classic (``failover:`` transport), ActiveMQ Artemis (core client URL) and Qpid JMS
(``failover.*`` keys) each name the reconnect knobs differently, count attempts differently and
ship different defaults. Each row here is one spelling as its system documents it; ``fields``
names the :class:`FailoverOptions` fields it sets (none: accepted and recorded, but not
interpreted, and ``explain`` says so). Defaults are the systems' own values as written in a URI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

__all__ = [
    "ARTEMIS_POLICY_CLASSES",
    "BUILTIN_POLICIES",
    "OPTION_TABLE",
    "SYSTEM_LABELS",
    "OptionSpec",
    "System",
    "ValueKind",
    "option_table_markdown",
    "spec_for",
]

System = Literal["classic", "artemis", "qpid", "failover-client"]

SYSTEM_LABELS: dict[System, str] = {
    "classic": "ActiveMQ Classic",
    "artemis": "ActiveMQ Artemis",
    "qpid": "Qpid JMS",
    "failover-client": "failover-client",
}

ValueKind = Literal[
    "bool",
    "ms",
    "timeout_ms",
    "count",
    "int",
    "non_negative_int",
    "positive_int",
    "multiplier",
    "fraction",
    "heartbeat",
    "check_period",
    "policy",
    "server_list_action",
    "confirm_mode",
    "dedup",
    "failover_timeout_ms",
    "text",
    "secret",
    "uri_list",
    "source_names",
    "port",
    "scheme_map",
]

BUILTIN_POLICIES: tuple[str, ...] = (
    "first-element",
    "random",
    "random-sticky",
    "rendezvous",
    "round-robin",
    "shuffle",
)
"""Policy names every installation has; registered plug-ins add to these (never import paths)."""

_ARTEMIS_LB = "org.apache.activemq.artemis.api.core.client.loadbalance."
ARTEMIS_POLICY_CLASSES: dict[str, str] = {
    _ARTEMIS_LB + "RoundRobinConnectionLoadBalancingPolicy": "round-robin",
    _ARTEMIS_LB + "RandomConnectionLoadBalancingPolicy": "random",
    _ARTEMIS_LB + "RandomStickyConnectionLoadBalancingPolicy": "random-sticky",
    _ARTEMIS_LB + "FirstElementConnectionLoadBalancingPolicy": "first-element",
}
"""Artemis load-balancing policy class names and the built-in policy each one means."""

_WHOLE_LIST = "one pass over the whole broker list"
_ONE_BROKER = "one try of one broker"


@dataclass(frozen=True)
class OptionSpec:
    """One row of the option table."""

    name: str
    systems: tuple[System, ...]
    fields: tuple[str, ...]
    """:class:`FailoverOptions` fields this spelling sets; empty = recorded, not interpreted."""
    kind: ValueKind
    default: str
    """The system's default as written in a URI; empty when there is none."""
    meaning: str
    aliases: tuple[str, ...] = ()
    attempts: str = ""
    """What one counted attempt is, for attempt-count options."""
    applies_to: Literal["uri", "discovery", "member"] = "uri"
    """``discovery``: a parameter of an Artemis ``udp://`` discovery group, kept on the agent;
    ``member``: the user (``text``) or password (``secret``) of every member without its own."""

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    @property
    def system(self) -> System:
        """The system this spelling comes from (the first, when JMS clients share it)."""
        return self.systems[0]


def _make(system: System, prefix: str = "") -> _Maker:
    def make(
        name: str,
        fields: tuple[str, ...],
        kind: ValueKind,
        default: str,
        meaning: str,
        *,
        aliases: tuple[str, ...] = (),
        attempts: str = "",
        applies_to: Literal["uri", "discovery", "member"] = "uri",
    ) -> OptionSpec:
        return OptionSpec(
            prefix + name, (system,), fields, kind, default, meaning, aliases, attempts, applies_to
        )

    return make


class _Maker(Protocol):
    def __call__(
        self,
        name: str,
        fields: tuple[str, ...],
        kind: ValueKind,
        default: str,
        meaning: str,
        *,
        aliases: tuple[str, ...] = (),
        attempts: str = "",
        applies_to: Literal["uri", "discovery", "member"] = "uri",
    ) -> OptionSpec: ...


_c = _make("classic")
_a = _make("artemis")
_q = _make("qpid", "failover.")
_f = _make("failover-client")


OPTION_TABLE: tuple[OptionSpec, ...] = (
    # --- ActiveMQ Classic failover transport ---------------------------------------------------
    _c("randomize", ("randomize",), "bool", "true",
       "Shuffle the broker list before each pass; false tries brokers in the order written."),
    _c("priorityBackup", ("priority_backup",), "bool", "false",
       "Prefer the priority broker(s): while connected elsewhere keep probing them and move "
       "back when one answers."),
    _c("priorityURIs", ("priority_uris",), "uri_list", "",
       "Comma-separated broker URIs that count as priority for priorityBackup "
       "(default: the first member)."),
    _c("initialReconnectDelay", ("initial_reconnect_delay",), "ms", "10",
       "Delay before the first reconnect attempt after a connection is lost, and the delay "
       "back-off restarts from (ms)."),
    _c("reconnectDelay", ("reconnect_delay",), "ms", "10",
       "Delay between reconnect attempts before back-off grows it (ms)."),
    _c("maxReconnectDelay", ("max_reconnect_delay",), "ms", "30000",
       "Upper bound of the back-off delay (ms)."),
    _c("useExponentialBackOff", ("use_exponential_backoff",), "bool", "true",
       "Multiply the delay by reconnectDelayExponent after each failed attempt."),
    _c("reconnectDelayExponent", ("backoff_multiplier",), "multiplier", "2.0",
       "Back-off factor applied to the delay after each failed attempt.",
       aliases=("backOffMultiplier",)),
    _c("maxReconnectAttempts", ("max_reconnect_attempts",), "count", "-1",
       "Attempts after a lost connection before giving up; -1 unlimited, 0 never reconnect.",
       attempts=_WHOLE_LIST),
    _c("startupMaxReconnectAttempts", ("startup_max_reconnect_attempts",), "count", "-1",
       "Attempts for the very first connection; -1 means maxReconnectAttempts applies. A plain "
       "broker URI (no failover:) that sets no retry option makes one pass (0).",
       attempts=_WHOLE_LIST),
    _c("warnAfterReconnectAttempts", ("warn_after_reconnect_attempts",), "int", "10",
       "Log a warning every N failed attempts; 0 or less never warns."),
    _c("timeout", ("timeout",), "timeout_ms", "-1",
       "How long a send may block while disconnected (ms); -1 (or 0) blocks forever."),
    _c("backup", ("backup",), "bool", "false",
       "Keep standby connections to other brokers open for a fast failover."),
    _c("backupPoolSize", ("backup_pool_size",), "non_negative_int", "1",
       "Number of standby connections kept when backup=true."),
    _c("trackMessages", ("track_messages",), "bool", "false",
       "Keep unconfirmed messages so they can be replayed after a failover."),
    _c("maxCacheSize", ("max_cache_size",), "non_negative_int", "131072",
       "Byte bound of the unconfirmed sends per connection: a confirmed send waits while this "
       "many bytes await confirmation (one larger send goes alone); with trackMessages=true, "
       "tracked sends past it are evicted oldest first and not replayed."),
    _c("updateURIsSupported", ("update_uris_supported",), "bool", "true",
       "Accept broker lists pushed by the cluster (updateClusterClients)."),
    _c("reconnectSupported", ("reconnect_supported",), "bool", "true",
       "Obey a broker's request to reconnect elsewhere (rebalanceClusterClients)."),
    _c("updateURIsURL", ("update_uris_url",), "text", "",
       "File, file: or http(s) URL listing extra broker URIs (comma- or newline-separated), "
       "re-read every 30 s and before each reconnect."),
    _c("rebalanceUpdateURIs", ("rebalance_update_uris",), "bool", "true",
       "Rebalance the connection when the updateURIsURL list changes."),
    _c("trackTransactionProducers", (), "bool", "true",
       "Replay the producers of open transactions after a failover. Recorded only: "
       "failover-client replays every unconfirmed send."),
    OptionSpec("jms.userName", ("classic",), (), "text", "",
               "User name for every member without user:password@ in its address.",
               applies_to="member"),
    OptionSpec("jms.username", ("qpid",), (), "text", "",
               "User name for every member without user:password@ in its address.",
               applies_to="member"),
    OptionSpec("jms.password", ("classic", "qpid"), (), "secret", "",
               "Password for every member without user:password@ in its address (never "
               "printed).", applies_to="member"),
    OptionSpec("jms.clientID", ("classic", "qpid"), ("client_id",), "text", "",
               "JMS client id; also the stable id rendezvous-hash placement uses."),
    # --- ActiveMQ Artemis core client ----------------------------------------------------------
    _a("ha", ("ha",), "bool", "false",
       "Learn the cluster topology, backups included, and fail over to the backup of a dead "
       "broker.", aliases=("HA",)),
    _a("clientID", ("client_id",), "text", "",
       "Client id of the connections; also the stable id rendezvous-hash placement uses."),
    _a("user", (), "text", "",
       "User name for every member without user:password@ in its address.",
       applies_to="member"),
    _a("password", (), "secret", "",
       "Password for every member without user:password@ in its address (never printed).",
       applies_to="member"),
    _a("reconnectAttempts", ("max_reconnect_attempts",), "count", "0",
       "Tries after a lost connection before giving up; -1 unlimited, 0 never reconnect.",
       attempts=_ONE_BROKER),
    _a("initialConnectAttempts", ("startup_max_reconnect_attempts",), "count", "1",
       "Tries for the first connection; -1 unlimited.", attempts=_ONE_BROKER),
    _a("failoverAttempts", (), "count", "0",
       "Tries of other live brokers once reconnectAttempts are used up. Recorded only: "
       "failover-client moves through the list in policy order, bounded by reconnectAttempts.",
       attempts=_ONE_BROKER),
    _a("retryInterval", ("reconnect_delay",), "ms", "2000",
       "Delay between connection attempts (ms)."),
    _a("retryIntervalMultiplier", ("backoff_multiplier",), "multiplier", "1.0",
       "Factor applied to the delay after each failed attempt (1.0: constant delay)."),
    _a("maxRetryInterval", ("max_reconnect_delay",), "ms", "2000",
       "Upper bound of the delay between attempts (ms)."),
    _a("useTopologyForLoadBalancing", ("use_topology_for_load_balancing",), "bool", "true",
       "Balance over the topology the cluster reports instead of only the listed brokers."),
    _a("connectionLoadBalancingPolicyClassName", ("policy",), "policy",
       _ARTEMIS_LB + "RoundRobinConnectionLoadBalancingPolicy",
       "Broker-selection policy: an Artemis policy class name (round-robin, random, "
       "random-sticky, first-element) or a registered failover-client policy name."),
    _a("clientFailureCheckPeriod", ("heartbeat",), "check_period", "30000",
       "A connection silent for this long is dead (ms). Mapped onto heart-beats in both "
       "directions (heartbeat=N,N); -1 disables."),
    _a("connectionTTL", (), "int", "60000",
       "Broker side: how long the broker keeps a silent connection (ms). Recorded only; "
       "STOMP/AMQP brokers use the negotiated heart-beats."),
    _a("callTimeout", ("timeout",), "timeout_ms", "30000",
       "How long a blocking call (a confirmed send) waits (ms); mapped onto timeout; -1 "
       "blocks forever."),
    _a("callFailoverTimeout", ("failover_timeout",), "failover_timeout_ms", "30000",
       "How long a blocking call (a send) waits for a failover to finish while no broker is "
       "connected (ms), counted from when it began to wait for it; callTimeout then bounds only "
       "the waits while connected. -1 waits forever."),
    _a("confirmationWindowSize", (), "int", "-1",
       "Bytes of sent commands buffered for session re-attachment. Recorded only: "
       "failover-client confirms every send instead (see confirmWindow)."),
    _a("refreshTimeout", (), "non_negative_int", "10000",
       "udp:// discovery: drop a broker not heard from for this long (ms).",
       applies_to="discovery"),
    _a("discoveryInitialWaitTimeout", (), "non_negative_int", "10000",
       "udp:// discovery: a first connect with no broker known yet waits this long for the "
       "first broadcast (ms).",
       aliases=("initialWaitTimeout",), applies_to="discovery"),
    _a("localAddress", (), "text", "",
       "udp:// discovery: IPv4 address of this host's interface to join the group on "
       "(default: the one the routing table gives the group).",
       aliases=("localBindAddress",), applies_to="discovery"),
    _a("localPort", (), "int", "-1",
       "udp:// discovery: local port of Artemis' sending socket. Recorded only: a listener "
       "binds the group's port.",
       aliases=("localBindPort",), applies_to="discovery"),
    # --- Qpid JMS failover provider ------------------------------------------------------------
    _q("initialReconnectDelay", ("initial_reconnect_delay",), "ms", "0",
       "Delay before the first reconnect attempt (ms); 0 tries at once."),
    _q("reconnectDelay", ("reconnect_delay",), "ms", "10",
       "Delay between reconnect attempts; constant unless back-off is on (ms)."),
    _q("maxReconnectDelay", ("max_reconnect_delay",), "ms", "30000",
       "Upper bound of the back-off delay (ms)."),
    _q("useReconnectBackOff", ("use_exponential_backoff",), "bool", "true",
       "Grow the delay by reconnectBackOffMultiplier after each failed attempt."),
    _q("reconnectBackOffMultiplier", ("backoff_multiplier",), "multiplier", "2.0",
       "Back-off factor applied to the delay after each failed attempt."),
    _q("maxReconnectAttempts", ("max_reconnect_attempts",), "count", "-1",
       "Attempts before the connection is reported failed; -1 unlimited.", attempts=_WHOLE_LIST),
    _q("startupMaxReconnectAttempts", ("startup_max_reconnect_attempts",), "count", "-1",
       "Attempts for a client that never connected; -1 means maxReconnectAttempts applies.",
       attempts=_WHOLE_LIST),
    _q("warnAfterReconnectAttempts", ("warn_after_reconnect_attempts",), "int", "10",
       "Log a warning every N failed attempts."),
    _q("randomize", ("randomize",), "bool", "false",
       "Shuffle the broker list before connecting, spreading clients over the brokers."),
    _q("amqpOpenServerListAction", ("server_list_action",), "server_list_action", "REPLACE",
       "What a broker-sent failover-server-list does: REPLACE, ADD to or IGNORE the list "
       "(listed brokers are never removed)."),
    # --- failover-client's own options ---------------------------------------------------------
    _f("connectTimeout", ("connect_timeout",), "ms", "2000",
       "Deadline for TCP connect plus protocol handshake (STOMP CONNECTED / AMQP open) (ms)."),
    _f("heartbeat", ("heartbeat",), "heartbeat", "10000,10000",
       "Heart-beats send,receive in ms (one number sets both); 0 disables that direction."),
    _f("maxFrameSize", ("max_frame_size",), "positive_int", "104857600",
       "Largest frame (header block and body, in bytes) accepted from a broker; a larger one "
       "drops the connection as a protocol violation (ActiveMQ's own limit and default)."),
    _f("reconnectJitter", ("reconnect_jitter",), "fraction", "0.5",
       "Fraction (0..1) by which each reconnect delay is shortened at random, so a fleet of "
       "clients that lost their brokers together does not reconnect in lock-step; an "
       "immediate attempt stays immediate. 0: the Classic / Artemis / Qpid JMS delays exactly."),
    _f("confirmWindow", ("confirm_window",), "positive_int", "1024",
       "Unconfirmed sends allowed per connection before send waits; their bytes are bounded "
       "by maxCacheSize as well (the default 131072 holds 128 sends of 1 KiB)."),
    _f("confirmMode", ("confirm_mode",), "confirm_mode", "auto",
       "receipt: one receipt per send; transaction: sends written together share one "
       "transaction and its COMMIT receipt (group commit); auto: group commit on ActiveMQ "
       "Classic 5.14+, receipts elsewhere."),
    _f("dedup", ("dedup",), "dedup", "auto",
       "auto: every send that may be replayed carries _AMQ_DUPL_ID = its failover-message-id "
       "to Artemis (and to a broker that names no product, not to ActiveMQ Classic or "
       "RabbitMQ), so Artemis drops a replayed copy; on other brokers a DuplicatesPossible "
       "event at connect. off: no _AMQ_DUPL_ID header."),
    _f("policy", ("policy",), "policy", "",
       "Registered broker-selection policy name; empty: from randomize (shuffle or "
       "first-element)."),
    _f("rebalance", ("rebalance",), "bool", "false",
       "Move to this client's rendezvous-hash home in the best live tier when brokers join or "
       "leave (only the clients that must move do); needs a stable clientId across restarts."),
    _f("rebalanceDrainWindow", ("rebalance_drain_window",), "ms", "2000",
       "Moves are spread over this window: each client waits a random part of it (ms)."),
    _f("clientId", ("client_id",), "text", "",
       "Stable client id for rendezvous-hash placement; empty: a random id per connection."),
    _f("topology", ("topology",), "source_names", "",
       "Comma-separated topology sources that take their settings from the connection: "
       "openwire (ActiveMQ Classic's cluster push, heard over an OpenWire control channel), "
       "advisory (ActiveMQ Classic's network-bridge advisories, over STOMP)."),
    _f("topology.openwirePort", ("topology_openwire_port",), "port", "61616",
       "Port of the OpenWire listener on the data broker's host (topology=openwire)."),
    _f("topology.schemeMap", ("topology_scheme_map",), "scheme_map", "",
       "How broker URLs of another protocol (advertised by topology sources, or listed in "
       "updateURIsURL) become this connection's: from:to[:port],... e.g. "
       "tcp:stomp:61613,ssl:stomp+ssl:61612."),
    _f("topology.maxBrokers", ("topology_max_brokers",), "positive_int", "256",
       "Brokers the pool holds at most, seeds included; entries a topology source pushes past "
       "it are dropped (one TopologyTruncated event), so a hostile or broken push cannot grow "
       "memory and CPU without bound."),
    _f("consumer.prefetch", ("consumer_prefetch",), "positive_int", "100",
       "Messages each subscription holds in the client at most, delivered but not yet handled "
       "(auto) or acknowledged (client modes), in every ack mode; the broker keeps the rest. "
       "Sent as activemq.prefetchSize (ActiveMQ), prefetch-count (RabbitMQ), link credit "
       "(AMQP); subscribe(prefetch=) overrides it per subscription."),
    _f("consumer.prefetchBytes", ("consumer_prefetch_bytes",), "non_negative_int", "0",
       "Byte bound per subscription besides consumer.prefetch; Artemis's STOMP "
       "consumer-window-size is this, or prefetch x 4096 when 0."),
    _f("consumer.canaryInterval", ("canary_interval",), "ms", "0",
       "Every this many ms each session sends itself a small message on a private temporary "
       "destination; none back within canaryMisses intervals means the session is deaf and the "
       "connection fails over (0: off)."),
    _f("consumer.canaryMisses", ("canary_misses",), "positive_int", "2",
       "Canary intervals without the canary back before a session counts as deaf."),
    _f("consumer.drainOnMove", ("drain_on_move",), "bool", "true",
       "When a connection moves on purpose (priority return, rebalance), keep consuming its "
       "queue subscriptions on the broker it leaves until that broker is quiet; a broker left "
       "by a failure is drained the same way once it answers again."),
    _f("consumer.drainOnStart", ("drain_on_start",), "bool", "false",
       "At start, drain every member but the one first connected, once each answers, for what "
       "an earlier process of the application stranded there (killed before it drained them), "
       "e.g. a restarted Spark driver on a network of brokers."),
    _f("consumer.drainQuiet", ("drain_quiet",), "ms", "1000",
       "A broker being drained is done after this long without a delivery (ms)."),
    _f("consumer.drainTimeout", ("drain_timeout",), "ms", "30000",
       "A drain ends after this long whatever is left; what it ends with is reported (ms)."),
    _f("tls.caFile", ("tls_ca_file",), "text", "",
       "PEM file of CA certificates that verify the brokers; empty: system trust store."),
    _f("tls.certFile", ("tls_cert_file",), "text", "", "PEM client certificate (mutual TLS)."),
    _f("tls.keyFile", ("tls_key_file",), "text", "", "PEM private key of the client certificate."),
    _f("tls.keyPassword", ("tls_key_password",), "secret", "",
       "Password of tls.keyFile (never printed)."),
    _f("tls.verify", ("tls_verify",), "bool", "true", "Verify the broker's certificate chain."),
    _f("tls.verifyHostname", ("tls_verify_hostname",), "bool", "true",
       "Check that the broker's certificate names the host connected to."),
)  # fmt: skip

_BY_NAME: dict[str, OptionSpec] = {n: spec for spec in OPTION_TABLE for n in spec.names}


def spec_for(name: str) -> OptionSpec | None:
    """The table row for spelling ``name`` (exact, case-sensitive), or None."""
    return _BY_NAME.get(name)


def _md(text: str) -> str:
    return text.replace("|", r"\|")


def option_table_markdown() -> str:
    """Every supported option as a markdown table (the README embeds exactly this)."""
    lines = [
        "| Option | System | Default | Maps to | Meaning |",
        "|---|---|---|---|---|",
    ]
    for spec in OPTION_TABLE:
        names = " / ".join(f"`{n}`" for n in spec.names)
        systems = ", ".join(SYSTEM_LABELS[s] for s in spec.systems)
        default = f"`{spec.default}`" if spec.default else "(none)"
        if spec.applies_to == "discovery":
            target = "udp:// discovery group"
        elif spec.applies_to == "member":
            target = "members' password" if spec.kind == "secret" else "members' user"
        elif spec.fields:
            target = ", ".join(f"`{f}`" for f in spec.fields)
        else:
            target = "recorded only"
        meaning = spec.meaning + (f" Attempt = {spec.attempts}." if spec.attempts else "")
        lines.append(f"| {names} | {systems} | {_md(default)} | {target} | {_md(meaning)} |")
    return "\n".join(lines) + "\n"
