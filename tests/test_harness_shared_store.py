"""The harness's shared-storage master/slave setting, without brokers: spec and broker.xml."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from failover_client.testing.brokers import ClusterSpec
from failover_client.testing.brokers._activemq_config import (
    LOCK_ACQUIRE_SLEEP_MS,
    ActiveMQConfig,
    render_broker_xml,
)
from failover_client.testing.brokers._model import BrokerKind

NS = "{http://activemq.apache.org/schema/core}"


def _kahadb(shared: str | None) -> ET.Element:
    cfg = ActiveMQConfig("b0", "/data/b0", "127.0.0.1", 20001, 20002, shared_store=shared)
    (kahadb,) = ET.fromstring(render_broker_xml(cfg)).iter(NS + "kahaDB")
    return kahadb


def test_a_broker_of_its_own_keeps_its_store_in_its_data_directory() -> None:
    kahadb = _kahadb(None)
    assert kahadb.get("directory") == "/data/b0/kahadb"
    assert list(kahadb) == []


def test_a_shared_store_names_the_shared_directory_and_a_quick_shared_file_locker() -> None:
    kahadb = _kahadb("/data/shared & <kahadb>")
    assert kahadb.get("directory") == "/data/shared & <kahadb>"  # escaped, read back as given
    (locker,) = kahadb.iter(NS + "shared-file-locker")
    assert locker.get("lockAcquireSleepInterval") == str(LOCK_ACQUIRE_SLEEP_MS)


def test_the_spec_labels_a_shared_store_and_keeps_it_apart_from_independent_brokers() -> None:
    shared = ClusterSpec(BrokerKind.ACTIVEMQ, 2, shared_store=True)
    assert shared.label == "activemq-shared"
    assert shared != ClusterSpec(BrokerKind.ACTIVEMQ, 2)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"kind": BrokerKind.ACTIVEMQ, "size": 1}, "size >= 2"),
        ({"kind": BrokerKind.ACTIVEMQ, "size": 2, "network": True}, "no network"),
        ({"kind": BrokerKind.RABBITMQ, "size": 2}, "only supported for ActiveMQ"),
    ],
)
def test_a_shared_store_the_harness_cannot_build_is_refused(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ClusterSpec(shared_store=True, **kwargs)
