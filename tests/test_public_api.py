"""The public surface is exactly what is listed: adding or dropping a name is a decision."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

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
    "Deduplicator",
    "DrainStarted",
    "DuplicatesPossible",
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
    "SettleConfirmation",
    "SettleQuestion",
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


def test_dir_lists_only_the_public_names() -> None:
    # No leftovers of the module's own imports ("annotations" from the __future__ import, the
    # engine's modules): dir() is __all__, __version__ and the public subpackages loaded.
    names = dir(failover_client)
    assert "annotations" not in names
    subpackages = {"adapter", "amqp", "cli", "demo", "policies", "spark", "stomp", "testing"}
    subpackages |= {"aio", "otel", "topology", "uri"}
    extra = set(names) - set(failover_client.__all__) - {"__version__"}
    assert extra <= subpackages, extra
    assert set(failover_client.__all__) <= set(names)
    assert names == sorted(names)


def test_dir_shows_a_subpackage_once_it_is_imported() -> None:
    code = (
        "import failover_client\n"
        "before = 'spark' in dir(failover_client)\n"
        "import failover_client.spark\n"
        "print(before, 'spark' in dir(failover_client))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


def test_version_is_one_value_read_by_the_packaging() -> None:
    # setup.cfg takes the version from the package, so the installed metadata and
    # failover_client.__version__ cannot disagree.
    setup_cfg = (Path(__file__).resolve().parent.parent / "setup.cfg").read_text("utf-8")
    assert re.search(r"^version = attr: failover_client\.__version__$", setup_cfg, re.M)
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+|rc\d+)?", failover_client.__version__)
    assert importlib.metadata.version("failover-client") == failover_client.__version__


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
