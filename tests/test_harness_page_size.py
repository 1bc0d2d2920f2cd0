"""The harness's ActiveMQ page size: ClusterSpec.max_page_size and the broker.xml it renders."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from failover_client.testing.brokers import BrokerKind, ClusterSpec
from failover_client.testing.brokers._activemq_config import ActiveMQConfig, render_broker_xml

NS = "{http://activemq.apache.org/schema/core}"


def _policies(max_page_size: int | None) -> list[ET.Element]:
    cfg = ActiveMQConfig("b0", "/data/b0", "127.0.0.1", 20001, 20002, max_page_size=max_page_size)
    return list(ET.fromstring(render_broker_xml(cfg)).iter(NS + "policyEntry"))


def test_a_page_size_becomes_every_queues_policy() -> None:
    (policy,) = _policies(30)
    assert (policy.get("queue"), policy.get("maxPageSize")) == (">", "30")


def test_without_one_the_broker_keeps_its_default() -> None:
    assert _policies(None) == []


def test_specs_with_other_page_sizes_are_other_clusters() -> None:
    spec = ClusterSpec(BrokerKind.ACTIVEMQ, 1, max_page_size=30)
    assert spec != ClusterSpec(BrokerKind.ACTIVEMQ, 1)
    assert spec.label == "activemq-page30"


@pytest.mark.parametrize(
    ("kind", "size", "message"),
    [
        (BrokerKind.RABBITMQ, 30, "max_page_size is only supported for ActiveMQ"),
        (BrokerKind.ACTIVEMQ, 0, "a page holds at least 1"),
    ],
)
def test_a_page_size_the_harness_cannot_give_is_refused(
    kind: BrokerKind, size: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        ClusterSpec(kind, 1, max_page_size=size)
