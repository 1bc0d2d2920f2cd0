"""The CLI ends within --timeout, takes no abbreviations, names unset variables, and says
which exit code means what (fake connector and clock: no sockets, no sleeps)."""

from __future__ import annotations

import io
from importlib.metadata import version

import pytest
from test_cli_commands import make_env, rig

from failover_client.cli import Environment, ExitCode, run
from failover_client.cli._progress import Progress, wants_progress
from failover_client.engine import _adapters

URI = "failover:(stomp://a:61613,stomp://b:61613)?randomize=false"
SECRET = "s3cret"


def refusing() -> tuple[Environment, io.StringIO, io.StringIO]:
    clock, connector = rig()
    connector.behave("a:61613", "refuse")
    connector.behave("b:61613", "refuse")
    return make_env(connector, clock, stdin="one\n")


@pytest.mark.parametrize(
    "argv",
    [
        ["send", URI, "/queue/x", "--body", "hi", "--timeout", "3"],
        ["receive", URI, "/queue/x", "--count", "1", "--timeout", "3"],
    ],
)
def test_no_broker_answering_ends_within_the_timeout_with_exit_3(argv: list[str]) -> None:
    env, out, err = refusing()
    began = env.clock.monotonic()
    code = run(argv, env)
    assert code == ExitCode.CONNECTION == 3
    assert env.clock.monotonic() - began <= 3.0 + 1e-6
    assert "no broker answered within connect(timeout=3)" in err.getvalue()
    assert "stomp://a:61613" in err.getvalue()
    assert "stomp://b:61613" in err.getvalue()
    assert out.getvalue() == ""


def test_a_passcode_on_the_command_line_is_refused_not_taken_for_passcode_env() -> None:
    env, out, err = refusing()
    code = run(["send", URI, "/queue/x", "--passcode", SECRET], env)
    assert code == ExitCode.USAGE
    assert "--passcode is not accepted" in err.getvalue()
    assert "--passcode-env" in err.getvalue()
    assert SECRET not in err.getvalue() + out.getvalue()


@pytest.mark.parametrize("prefix", ["--passcode-e", "--time", "--lo"])
def test_no_option_is_guessed_from_its_beginning(prefix: str) -> None:
    env, _, err = refusing()
    code = run(["send", URI, "/queue/x", prefix, "x"], env)
    assert code == ExitCode.USAGE
    assert "unrecognized arguments" in err.getvalue()


def test_an_unset_passcode_variable_is_an_error_naming_it() -> None:
    env, _, err = refusing()
    code = run(["send", URI, "/queue/x", "--passcode-env", "MY_PASSCDE"], env)
    assert code == ExitCode.USAGE
    assert "MY_PASSCDE" in err.getvalue()
    assert "not set" in err.getvalue()


def test_a_set_passcode_variable_is_used() -> None:
    clock, connector = rig()
    env, _, _ = make_env(connector, clock, environ={"MY_PASSCODE": SECRET})
    code = run(
        ["send", URI, "/queue/x", "--body", "x", "--login", "u", "--passcode-env", "MY_PASSCODE"],
        env,
    )
    assert code == ExitCode.OK


def test_version_comes_from_the_installed_distribution(
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = io.StringIO()
    code = run(["--version"], Environment(stdout=out, stderr=io.StringIO(), environ={}))
    assert code == ExitCode.OK
    assert out.getvalue().strip() == f"failover-client {version('failover-client')}"


def test_a_missing_extra_has_its_own_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    def without_stomp(name: str) -> object:
        # What importing the adapter raises when stomp.py is not installed.
        raise ModuleNotFoundError("No module named 'stomp'", name="stomp")

    monkeypatch.setattr(_adapters.importlib, "import_module", without_stomp)
    err = io.StringIO()
    env = Environment(stdin=io.StringIO(), stdout=io.StringIO(), stderr=err, environ={})
    code = run(["send", URI, "/queue/x", "--body", "x", "--timeout", "1"], env)
    assert code == ExitCode.MISSING_EXTRA == 6
    assert "pip install 'failover-client[stomp]'" in err.getvalue()
    assert ExitCode.MISSING_EXTRA != ExitCode.USAGE


def test_progress_is_plain_when_piped() -> None:
    clock, connector = rig()
    env, _, err = make_env(connector, clock)
    assert not wants_progress(env.stderr, env.styled_stderr)  # a StringIO is no terminal
    assert run(["send", URI, "/queue/x", "--body", "x", "--count", "50"], env) == ExitCode.OK
    assert err.getvalue().count("\n") == 1  # the summary line, nothing drawn
    assert "\x1b" not in err.getvalue()


def test_progress_counts_and_draws_only_when_asked() -> None:
    stream = io.StringIO()
    with Progress(stream, "sent", total=3, show=False) as quiet:
        quiet.advance(3)
    assert (quiet.done, stream.getvalue()) == (3, "")
    with Progress(stream, "sent", total=3, show=True) as shown:
        shown.advance()
        shown.advance(2)
    assert shown.done == 3


def test_a_terminal_gets_progress() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert wants_progress(Tty(), None)
    assert not wants_progress(Tty(), False)


def test_parse_refuses_a_failover_option_inside_a_member_with_a_caret() -> None:
    env, out, err = refusing()
    text = "failover:(stomp://h:1?maxReconnectAttempts=1)"
    assert run(["parse", text], env) == ExitCode.USAGE
    assert "is a failover option, not an option of one member" in err.getvalue()
    assert " " * (2 + text.index("maxReconnectAttempts")) + "^" in err.getvalue()
    assert out.getvalue() == ""


def test_parse_refuses_a_member_option_typo_with_the_nearest_spelling() -> None:
    env, _, err = refusing()
    assert run(["parse", "stomp://h:1?vhsot=/"], env) == ExitCode.USAGE
    assert "did you mean: vhost?" in err.getvalue()


def test_parse_warns_about_a_member_option_no_adapter_reads() -> None:
    env, out, _ = refusing()
    assert run(["parse", "failover:(amqp://h:5672?amqp.idleTimeout=5)"], env) == ExitCode.OK
    assert "amqp.idleTimeout" in out.getvalue()
    assert "refuses it" in out.getvalue()
