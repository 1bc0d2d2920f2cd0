"""``failover-client parse URI``: what a URI means, option by option (secrets as ``***``)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from failover_client.uri import ExplainRow, FailoverURI, explain

from ._common import parse_target
from ._env import Environment
from ._exit import ExitCode
from ._output import Table, render_tables

__all__ = ["add_parser", "parse_report", "report_tables", "run"]

_DIALECT_LABELS = {"classic": "ActiveMQ Classic", "artemis": "ActiveMQ Artemis", "qpid": "Qpid JMS"}


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "parse",
        help="explain a failover URI: members, options, attempt semantics, warnings",
        description="Explain a failover URI without connecting: every member, every option of "
        "its dialect with value, default and the system it comes from, what one reconnect "
        "attempt counts, and warnings about combinations that do not do what they seem to. "
        "Passwords and secret options are shown as ***.",
    )
    parser.add_argument("uri", metavar="URI", help="the URI to explain (quote it for the shell)")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead")
    parser.add_argument("--given", action="store_true", help="list only the options the URI sets")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace, env: Environment) -> ExitCode:
    uri = parse_target(args.uri)
    if args.json:
        env.stdout.write(json.dumps(parse_report(uri), indent=2) + "\n")
        return ExitCode.OK
    env.stdout.write(f"URI:     {uri}\n")
    env.stdout.write(
        f"form:    {uri.form}   dialect: {_DIALECT_LABELS[uri.dialect]}\n"
        f"attempt: {attempt_semantics(uri)}\n\n"
    )
    render_tables(report_tables(uri, given_only=args.given), env.stdout, styled=env.rich_output)
    return ExitCode.OK


def attempt_semantics(uri: FailoverURI) -> str:
    """What one reconnect attempt counts for this URI's dialect, in words."""
    if uri.options.attempt_unit == "broker":
        return "one try of one broker (Artemis reconnectAttempts semantics)"
    return "one pass over the whole broker list (ActiveMQ Classic / Qpid JMS semantics)"


def _member_rows(uri: FailoverURI) -> tuple[tuple[str, ...], ...]:
    return tuple(
        (
            str(index),
            str(member),
            member.protocol,
            "yes" if member.tls else "no",
            member.user or "",
        )
        for index, member in enumerate(uri.members, start=1)
    )


def report_tables(uri: FailoverURI, *, given_only: bool = False) -> list[Table]:
    """The tables ``parse`` prints: members, discovery agents, options, warnings."""
    rows = explain(uri)
    tables = [
        Table(
            "members",
            ("#", "member", "protocol", "tls", "user"),
            _member_rows(uri),
        )
    ]
    if uri.agents:
        tables.append(
            Table(
                "discovery agents (resolved at connect time)",
                ("#", "agent"),
                tuple((str(i), str(a)) for i, a in enumerate(uri.agents, start=1)),
            )
        )
    options = [r for r in rows if r.kind != "warning" and (r.given or not given_only)]
    tables.append(
        Table(
            "options (* = set in the URI)",
            ("option", "value", "default", "system", "attempt ="),
            tuple(_option_cells(r) for r in options),
            notes=tuple(r.meaning for r in options),
        )
    )
    warnings = [r for r in rows if r.kind == "warning"]
    if warnings:
        tables.append(
            Table(
                "warnings",
                ("options",),
                tuple((r.option,) for r in warnings),
                notes=tuple(r.meaning for r in warnings),
                note_title="why",
            )
        )
    return tables


def _option_cells(row: ExplainRow) -> tuple[str, ...]:
    name = row.option + (" *" if row.given else "")
    if row.kind != "option":
        name = f"{name} ({row.kind})"
    return (name, row.value or "-", row.default or "-", row.system, row.attempts)


def parse_report(uri: FailoverURI) -> dict[str, Any]:
    """The ``--json`` document: everything ``parse`` prints, as data (secrets redacted)."""
    rows = explain(uri)
    return {
        "uri": str(uri),
        "form": uri.form,
        "dialect": uri.dialect,
        "attempt_unit": uri.options.attempt_unit,
        "attempt": attempt_semantics(uri),
        "members": [
            {
                "uri": str(m),
                "scheme": m.scheme,
                "host": m.host,
                "port": m.port,
                "protocol": m.protocol,
                "tls": m.tls,
                "user": m.user,
            }
            for m in uri.members
        ],
        "agents": [str(a) for a in uri.agents],
        "options": [asdict(r) for r in rows if r.kind != "warning"],
        "warnings": [
            {"options": r.option, "message": r.meaning} for r in rows if r.kind == "warning"
        ],
    }
