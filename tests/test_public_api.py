"""The public surface is exactly what is listed: adding or dropping a name is a decision."""

from __future__ import annotations

import subprocess
import sys

import failover_client

EXPECTED = {
    "MESSAGE_ID_HEADER",
    "AckDropped",
    "AllBrokersFailed",
    "AuthenticationFailed",
    "BrokerAddress",
    "BrokerPool",
    "BrokerRefused",
    "BrokerState",
    "BrokerUnavailable",
    "Clock",
    "Closed",
    "ConfigurationError",
    "Connected",
    "ConnectCancelled",
    "ConnectorSettings",
    "ConnectionClosed",
    "ConnectionFailure",
    "DataError",
    "Disconnected",
    "DrainFinished",
    "DrainStarted",
    "Event",
    "FailedOver",
    "FailoverClientError",
    "FailoverConnection",
    "FailoverOptions",
    "FailoverTarget",
    "FailoverURI",
    "GaveUp",
    "HandlerError",
    "Health",
    "Listener",
    "ListenerError",
    "MessagesReleased",
    "Message",
    "NotConnected",
    "OptionError",
    "PolicyError",
    "PoisonQuarantined",
    "PrefetchExceeded",
    "PriorityRestored",
    "Rebalanced",
    "ProtocolViolation",
    "ReconnectAttempt",
    "ReconnectSchedule",
    "ReconnectWarning",
    "SessionDeaf",
    "SubscriptionHealth",
    "ScheduleRun",
    "SendFailure",
    "SendRejected",
    "SendTimeout",
    "StandbyConnected",
    "StandbyLost",
    "Subscription",
    "SubscriptionFailed",
    "SubscriptionRefused",
    "SystemClock",
    "TLSFailure",
    "TopologyChanged",
    "TopologyDelta",
    "TopologyError",
    "TopologySourceFailed",
    "TopologyTruncated",
    "URIError",
    "parse",
}


def test_all_is_pinned() -> None:
    assert set(failover_client.__all__) == EXPECTED
    assert len(failover_client.__all__) == len(EXPECTED)


def test_every_exported_name_exists() -> None:
    for name in failover_client.__all__:
        assert hasattr(failover_client, name), name


def test_private_modules_stay_private() -> None:
    # "@py_builtins" / "@pytest_ar": pytest rewrites the asserts of every module in the
    # distribution that ships its plugin, this package included; they are not our names.
    public = [n for n in dir(failover_client) if not n.startswith(("_", "@"))]
    modules = {"uri", "policies", "testing", "cli", "demo", "annotations", "adapter", "engine"}
    modules |= {"net", "stomp", "topology", "amqp", "spark", "openwire", "otel"}
    assert set(public) - set(failover_client.__all__) <= modules


def test_core_import_needs_no_extra() -> None:
    # The core must import without stomp.py, proton or dnspython: they are extras.
    code = (
        "import sys\n"
        "for name in ('stomp', 'proton', 'dns', 'pyspark'):\n"
        "    sys.modules[name] = None\n"
        "import failover_client, failover_client.uri, failover_client.policies\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
