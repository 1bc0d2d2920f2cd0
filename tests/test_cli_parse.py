"""``failover-client parse``: explanation text, JSON, and what it never shows."""

from __future__ import annotations

import io
import json

import pytest

from failover_client.cli import Environment, ExitCode, run
from failover_client.cli._output import Table, plain_table

SECRET = "hunter2"
URI = (
    f"failover:(stomp://app:{SECRET}@a:61613,stomp://b:61614)"
    f"?randomize=false&priorityBackup=true&maxReconnectAttempts=3&tls.keyPassword={SECRET}"
)


def call(*argv: str, styled: bool = False) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(argv), Environment(stdin=io.StringIO(), stdout=out, stderr=err, styled=styled))
    return code, out.getvalue(), err.getvalue()


def test_parse_lists_members_with_redacted_credentials() -> None:
    code, out, err = call("parse", URI)
    assert code == ExitCode.OK
    assert err == ""
    assert "  1  stomp://app:***@a:61613  stomp     no   app" in out
    assert "  2  stomp://b:61614          stomp     no" in out
    assert SECRET not in out


def test_parse_shows_value_default_system_and_meaning() -> None:
    _, out, _ = call("parse", URI)
    lines = out.splitlines()
    row = next(i for i, line in enumerate(lines) if line.strip().startswith("randomize *"))
    assert lines[row].split() == ["randomize", "*", "false", "true", "ActiveMQ", "Classic"]
    assert lines[row + 1].strip() == (
        "Shuffle the broker list before each pass; false tries brokers in the order written."
    )


def test_parse_states_attempt_semantics_per_dialect() -> None:
    _, classic, _ = call("parse", URI)
    _, artemis, _ = call("parse", "(tcp://a:61616,tcp://b:61616)?reconnectAttempts=5")
    assert "attempt: one pass over the whole broker list" in classic
    assert "attempt: one try of one broker (Artemis reconnectAttempts semantics)" in artemis
    assert "dialect: ActiveMQ Artemis" in artemis


def test_parse_given_lists_only_the_options_in_the_uri() -> None:
    _, out, _ = call("parse", "--given", "failover:(stomp://a:1)?randomize=false")
    options = out.split("options (* = set in the URI):\n")[1].split("\n\n")[0].splitlines()
    assert [line.split()[0] for line in options[1:] if not line.startswith("      ")] == [
        "randomize"
    ]


def test_parse_prints_warnings() -> None:
    _, out, _ = call("parse", "failover:(stomp://a:1,stomp://b:1)?priorityBackup=true")
    assert "warnings:" in out
    assert "priorityBackup + randomize" in out


def test_parse_json_document() -> None:
    code, out, _ = call("parse", "--json", URI)
    document = json.loads(out)
    assert code == ExitCode.OK
    assert document["uri"].startswith("failover:(stomp://app:***@a:61613,stomp://b:61614)")
    assert document["dialect"] == "classic"
    assert document["attempt_unit"] == "pass"
    assert [m["uri"] for m in document["members"]] == [
        "stomp://app:***@a:61613",
        "stomp://b:61614",
    ]
    rows = {r["option"]: r for r in document["options"]}
    assert rows["maxReconnectAttempts"]["value"] == "3"
    assert rows["maxReconnectAttempts"]["default"] == "-1"
    assert rows["maxReconnectAttempts"]["given"] is True
    assert rows["tls.keyPassword"]["value"] == "***"
    assert SECRET not in out


def test_parse_rich_output_on_a_terminal() -> None:
    code, out, _ = call("parse", URI, styled=True)
    assert code == ExitCode.OK
    assert "┃ member" in out
    assert SECRET not in out


def test_plain_table_aligns_columns_and_puts_notes_below() -> None:
    table = Table("t", ("a", "bb"), (("x", "1"), ("long", "2")), notes=("first", ""))
    assert plain_table(table) == "t:\n  a     bb\n  x     1\n      first\n  long  2\n"


def test_plain_table_without_rows_says_none() -> None:
    assert plain_table(Table("t", ("a",), ())) == "t:\n  a\n  (none)\n"


def test_table_rejects_rows_of_the_wrong_width() -> None:
    with pytest.raises(ValueError, match="does not match the columns"):
        Table("t", ("a", "b"), (("only one",),))
