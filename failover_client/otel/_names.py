"""The names this instrumentation records under: OpenTelemetry's, and the library's own.

Messaging names follow the OpenTelemetry semantic conventions **v1.44.0** (the messaging
conventions are still of "development" stability there; the Python package
``opentelemetry-semantic-conventions`` 0.66b2 carries the same names). They are spelled out here
rather than imported from that package's ``_incubating`` modules, which may move between
releases. What the conventions have no name for (the failover itself) is named under
``failover_client.``.
"""

from __future__ import annotations

from typing import Final

SEMCONV_VERSION: Final = "1.44.0"
SCHEMA_URL: Final = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

# --- attributes (semantic conventions) -------------------------------------------------------
MESSAGING_SYSTEM: Final = "messaging.system"
MESSAGING_OPERATION_NAME: Final = "messaging.operation.name"
MESSAGING_OPERATION_TYPE: Final = "messaging.operation.type"
MESSAGING_DESTINATION_NAME: Final = "messaging.destination.name"
MESSAGING_SUBSCRIPTION_NAME: Final = "messaging.destination.subscription.name"
MESSAGING_MESSAGE_ID: Final = "messaging.message.id"
MESSAGING_BODY_SIZE: Final = "messaging.message.body.size"
MESSAGING_CLIENT_ID: Final = "messaging.client.id"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"
ERROR_TYPE: Final = "error.type"

# --- metrics (semantic conventions) ----------------------------------------------------------
SENT_MESSAGES: Final = "messaging.client.sent.messages"
CONSUMED_MESSAGES: Final = "messaging.client.consumed.messages"
OPERATION_DURATION: Final = "messaging.client.operation.duration"
PROCESS_DURATION: Final = "messaging.process.duration"

BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
"""The bucket boundaries the conventions advise for both duration histograms (seconds)."""

# --- the library's own -----------------------------------------------------------------------
IN_FLIGHT: Final = "failover_client.in_flight"
RECONNECT_ATTEMPTS: Final = "failover_client.reconnect.attempts"
FAILOVER_DURATION: Final = "failover_client.failover.duration"
CURRENT_BROKER: Final = "failover_client.broker.current"
TOPOLOGY_SIZE: Final = "failover_client.topology.size"

BROKER_FROM: Final = "failover_client.broker.from"
BROKER_TO: Final = "failover_client.broker.to"
EVENT_RESENT: Final = "failover_client.resent"
EVENT_FAILOVER: Final = "failover_client.failover"
EVENT_REBALANCE: Final = "failover_client.rebalance"
EVENT_PRIORITY_RESTORED: Final = "failover_client.priority_restored"
FAILOVER_DURATION_ATTRIBUTE: Final = "failover_client.failover.duration"
