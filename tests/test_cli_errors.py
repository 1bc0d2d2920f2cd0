"""``failover-client``: usage errors, exit codes, help, and secrets never echoed."""

from __future__ import annotations

import io

import pytest

from failover_client._errors import (
    AllBrokersFailed,
    AuthenticationFailed,
    ConfigurationError,
    ConnectionClosed,
    OptionError,
    PolicyError,
    SendRejected,
    SendTimeout,
    URIError,
)
from failover_client.cli import Environment, ExitCode, exit_code_for, run
from failover_client.cli._common import parse_headers

SECRET = "s3cr3tpw"


def call(*argv: str, environ: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    env = Environment(
        stdin=io.StringIO(), stdout=out, stderr=err, environ=environ or {}, styled=False
    )
    return run(list(argv), env), out.getvalue(), err.getvalue()


def test_bad_uri_exits_2_with_the_caret_message() -> None:
    code, out, err = call("parse", "failover:(stomp://a:1,stomp://b:2)?randomise=false")
    assert code == ExitCode.USAGE == 2
    assert out == ""
    assert err == (
        "failover-client parse: bad URI: unknown ActiveMQ Classic option 'randomise' "
        "(did you mean: randomize?) at position 35\n"
        "  failover:(stomp://a:1,stomp://b:2)?randomise=false\n"
        "  " + " " * 35 + "^\n"
    )


def test_bad_uri_error_hides_the_password() -> None:
    code, _, err = call("parse", f"failover:(stomp://u:{SECRET}@a:1)?randomise=false")
    assert code == ExitCode.USAGE
    assert SECRET not in err
    assert "stomp://u:********@a:1" in err


@pytest.mark.parametrize("command", ["probe", "send", "receive"])
def test_bad_uri_in_connecting_commands_exits_2_before_any_connection(command: str) -> None:
    argv = [command, f"failover:(stomp://u:{SECRET}@a:1?"]
    if command != "probe":
        argv.append("/queue/x")
    code, out, err = call(*argv)
    assert code == ExitCode.USAGE
    assert out == ""
    assert err.startswith(f"failover-client {command}: bad URI: ")
    assert SECRET not in err


def test_unknown_arguments_are_reported_without_the_password() -> None:
    code, out, err = call("parse", "stomp://a:1", f"stomp://u:{SECRET}@b:2")
    assert code == ExitCode.USAGE
    assert out == ""
    assert SECRET not in err
    assert "unrecognized arguments: stomp://u:********@b:2" in err


def test_missing_command_is_a_usage_error() -> None:
    code, _, err = call()
    assert code == ExitCode.USAGE
    assert "usage: failover-client" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["send", "stomp://a:1", "/queue/x", "--count", "0"], "must be at least 1, got 0"),
        (["send", "stomp://a:1", "/queue/x", "--count", "x"], "not a whole number: 'x'"),
        (["receive", "stomp://a:1", "/queue/x", "--timeout", "-1"], "must be more than 0"),
        (["receive", "stomp://a:1", "/queue/x", "--ack", "sometimes"], "invalid choice"),
    ],
)
def test_ill_typed_arguments_exit_2(argv: list[str], message: str) -> None:
    code, _, err = call(*argv)
    assert code == ExitCode.USAGE
    assert message in err


@pytest.mark.parametrize("command", [[], ["parse"], ["probe"], ["send"], ["receive"]])
def test_help_for_everything(command: list[str]) -> None:
    code, out, _ = call(*command, "--help")
    assert code == ExitCode.OK
    assert out.startswith("usage: failover-client")


def test_top_level_help_explains_exit_codes() -> None:
    _, out, _ = call("--help")
    assert "exit codes: 0 ok, 1 internal error, 2 bad arguments or URI, 3 no broker" in out
    assert "6 a library extra is missing" in out


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (URIError("x"), ExitCode.USAGE),
        (OptionError("x", option="o"), ExitCode.USAGE),
        (PolicyError("p", ["a"]), ExitCode.USAGE),
        (AllBrokersFailed("all failed", {}), ExitCode.CONNECTION),
        (AuthenticationFailed("no", broker="stomp://a:1"), ExitCode.CONNECTION),
        (SendTimeout("late"), ExitCode.UNCONFIRMED),
        (SendRejected("no"), ExitCode.UNCONFIRMED),
        (ConnectionClosed("closed"), ExitCode.CONNECTION),
        (KeyboardInterrupt(), ExitCode.INTERRUPTED),
        (RuntimeError("bug"), ExitCode.ERROR),
    ],
)
def test_exit_code_for_each_error(error: BaseException, code: ExitCode) -> None:
    assert exit_code_for(error) is code


def test_exit_code_values_are_stable() -> None:
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4, 5, 6, 130]


def test_headers_parse_name_value_pairs() -> None:
    assert parse_headers(["a:1", " b : two:parts ", "empty:"]) == {
        "a": "1",
        "b": "two:parts",
        "empty": "",
    }


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([f"{SECRET}"], "-H #1 has no ':'; write it as name:value"),
        (["a:1", f":{SECRET}"], "-H #2 has an empty name; write it as name:value"),
    ],
)
def test_bad_headers_are_named_not_echoed(values: list[str], message: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_headers(values)
    assert str(caught.value) == message


def test_bad_header_exits_2() -> None:
    code, _, err = call("send", "stomp://a:1", "/queue/x", "--body", "b", "-H", "nocolon")
    assert code == ExitCode.USAGE
    assert (
        err
        == "failover-client send: ConfigurationError: -H #1 has no ':'; write it as name:value\n"
    )
