"""Every connect failure names its cause in words: the reconnect warning prints the message.

``reconnect attempt N failed: stomp://a:61613: BrokerUnavailable`` said neither "connection
refused" nor "cannot resolve". :func:`describe_failure` is the one wording both adapters use.
"""

from __future__ import annotations

import errno
import socket
import ssl

import pytest

from failover_client import BrokerUnavailable, TLSFailure
from failover_client._clock import SystemClock
from failover_client.amqp._handler import crash_error
from failover_client.net._dial import AddrInfo, SocketDial, describe_failure
from failover_client.stomp._errors import transport_error

NXDOMAIN = socket.gaierror(socket.EAI_NONAME, "Name or service not known")


def _verify_error() -> ssl.SSLCertVerificationError:
    error = ssl.SSLCertVerificationError(1, "certificate verify failed")
    error.verify_message = "self-signed certificate"
    return error


@pytest.mark.parametrize(
    ("exc", "words"),
    [
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"), "connection refused"),
        (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), "connection reset"),
        (BrokenPipeError(errno.EPIPE, "Broken pipe"), "connection broken"),
        (TimeoutError("connect deadline passed"), "timed out"),
        (NXDOMAIN, "cannot resolve the host name (Name or service not known)"),
        (OSError(errno.EHOSTUNREACH, "No route to host"), "host unreachable (No route to host)"),
        (
            OSError(errno.ENETUNREACH, "Network is unreachable"),
            "network unreachable (Network is unreachable)",
        ),
        (_verify_error(), "certificate verification failed: self-signed certificate"),
        (OSError(errno.EACCES, "Permission denied"), "Permission denied"),
        (RuntimeError("boom"), "RuntimeError: boom"),
    ],
)
def test_each_cause_is_named(exc: BaseException, words: str) -> None:
    assert describe_failure(exc) == words


def _closed_port() -> int:
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = int(probe.getsockname()[1])
    probe.close()
    return port


def _dial(host: str, port: int, resolver: object, within: float = 5.0) -> SocketDial:
    clock = SystemClock()
    return SocketDial(
        host,
        port,
        deadline=clock.monotonic() + within,
        clock=clock,
        resolver=resolver,  # type: ignore[arg-type]
    )


def test_a_refused_connect_reads_connection_refused() -> None:
    port = _closed_port()
    dial = _dial("127.0.0.1", port, socket.getaddrinfo)
    with pytest.raises(ConnectionRefusedError) as caught:
        dial.connect()
    error = transport_error(caught.value, broker=f"stomp://127.0.0.1:{port}", during=dial.stage)
    assert isinstance(error, BrokerUnavailable)
    assert str(error) == f"stomp://127.0.0.1:{port}: connection refused during TCP connect"


def test_a_name_that_does_not_resolve_reads_cannot_resolve_during_name_resolution() -> None:
    def nxdomain(host: str, port: int, family: int, kind: int) -> list[AddrInfo]:
        raise NXDOMAIN

    dial = _dial("broker.invalid", 61613, nxdomain)
    with pytest.raises(socket.gaierror) as caught:
        dial.connect()
    assert dial.stage == "name resolution"  # it said "TCP connect"
    error = transport_error(caught.value, broker="stomp://broker.invalid:61613", during=dial.stage)
    assert str(error) == (
        "stomp://broker.invalid:61613: cannot resolve the host name (Name or service not known)"
        " during name resolution"
    )


def test_a_connect_past_its_deadline_reads_timed_out() -> None:
    dial = _dial("127.0.0.1", _closed_port(), socket.getaddrinfo, within=0.0)
    with pytest.raises(TimeoutError) as caught:
        dial.connect()
    error = transport_error(caught.value, broker="stomp://127.0.0.1:1", during=dial.stage)
    assert str(error) == "stomp://127.0.0.1:1: timed out during TCP connect"


def test_a_certificate_that_fails_verification_reads_so() -> None:
    error = transport_error(_verify_error(), broker="stomp+ssl://a:61612", during="TLS handshake")
    assert isinstance(error, TLSFailure)
    assert "certificate verification failed" in str(error)
    assert "self-signed certificate" in str(error)


def test_amqp_names_an_unresolvable_host_too() -> None:
    error = crash_error(NXDOMAIN, broker="amqp://broker.invalid:5672")
    assert str(error) == (
        "amqp://broker.invalid:5672: cannot resolve the host name (Name or service not known)"
    )
    assert error.__cause__ is NXDOMAIN
