"""What a user reads at start-up: wrong protocol, wrong port, and the package's logging."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from failover_client.uri import BrokerAddress

from failover_client import ConfigurationError, FailoverConnection
from failover_client.amqp._mismatch import mismatch_of
from failover_client.stomp._inbound import mismatch_hint

ROOT = Path(__file__).resolve().parent.parent
AMQP_MEMBER = BrokerAddress("amqp", "h", 61613)


def test_tcp_members_are_told_the_stomp_port_and_the_scheme_map() -> None:
    with pytest.raises(ConfigurationError) as info:
        FailoverConnection("failover:(tcp://a:61616,tcp://b:61616)")
    text = str(info.value)
    assert "OpenWire" in text
    assert "61613" in text
    assert "5672" in text
    assert "stomp://a:61613" in text
    assert "topology.schemeMap" in text


def test_ssl_members_are_pointed_at_the_stomp_tls_port() -> None:
    with pytest.raises(ConfigurationError, match=r"stomp\+ssl://a:61612"):
        FailoverConnection("failover:(ssl://a:61617)")


@pytest.mark.parametrize(
    ("sniffed", "says"),
    [
        (b"AMQP\x00\x01\x00\x00", "answered like an AMQP broker"),
        (b"\x00\x00\x01\x0c\x01ActiveMQ\x00", "OpenWire"),
        (b"HTTP/1.1 400 Bad", "HTTP server"),
        (b"\x15\x03\x03\x00\x02", "TLS server"),
    ],
)
def test_a_stomp_member_names_the_protocol_that_answered(sniffed: bytes, says: str) -> None:
    hint = mismatch_hint(sniffed)
    assert hint.startswith("protocol mismatch")
    assert says in hint


def test_unknown_bytes_keep_the_plain_hint() -> None:
    assert mismatch_hint(b"hello there") == "wrong port or protocol?"


def test_an_amqp_member_that_got_a_stomp_frame_back_says_so() -> None:
    description = (
        "amqp:connection:framing-error: SASL header mismatch: Insufficient data to determine "
        "protocol [b'ERROR\\ncontent-t']"
    )
    text = mismatch_of(description, AMQP_MEMBER)
    assert text is not None
    assert text.startswith("protocol mismatch: amqp://h:61613 answered like a STOMP broker")
    assert "stomp://h:61613" in text


def test_an_amqp_member_that_got_openwire_back_says_so() -> None:
    text = mismatch_of("AMQP header mismatch: [b'\\x00\\x00\\x01\\x0c\\x01ActiveMQ']", AMQP_MEMBER)
    assert text is not None
    assert "OpenWire" in text


def test_other_amqp_failures_are_no_mismatch() -> None:
    assert mismatch_of("amqp:unauthorized-access: bad user", AMQP_MEMBER) is None


# --- logging ------------------------------------------------------------------------------------


def test_the_package_logger_has_a_null_handler() -> None:
    handlers = logging.getLogger("failover_client").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)


def _logger_names_in_code() -> set[str]:
    names: set[str] = set()
    pattern = re.compile(r'getLogger\("(failover_client[a-z_.]*)"\)')
    for path in (ROOT / "failover_client").rglob("*.py"):
        if "testing" in path.parts:
            continue  # the harness's own loggers are documented with the harness
        names.update(pattern.findall(path.read_text(encoding="utf-8")))
    return names


def test_every_logger_the_library_uses_is_documented() -> None:
    page = (ROOT / "docs" / "startup.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\| `(failover_client[a-z_.]*)` \|", page, flags=re.M))
    assert documented == _logger_names_in_code()
