"""The ``failover-client`` command: argument parsing, dispatch, errors and exit codes."""

from __future__ import annotations

import argparse
import contextlib
import logging
import sys
from collections.abc import Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any, NoReturn, TextIO

from failover_client import FailoverClientError, URIError
from failover_client.uri import mask_same_length

from . import _parse_cmd, _probe_cmd, _receive_cmd, _send_cmd
from ._env import Environment
from ._exit import ExitCode, exit_code_for

__all__ = ["build_parser", "main", "run"]

_EPILOG = """\
exit codes: 0 ok, 1 internal error, 2 bad arguments or URI, 3 no broker reachable within
--timeout (or credentials / TLS refused), 4 a message was not confirmed, 5 fewer messages or
members than asked for, 6 a library extra is missing (pip install 'failover-client[stomp]'),
130 interrupted. Passcodes are read from an environment variable, never from the command line.
"""


class _Parser(argparse.ArgumentParser):
    """argparse, but its error messages never show a password typed into a URI argument, and
    an option is never guessed from its beginning (``--passcode s3cret`` must not become
    ``--passcode-env s3cret``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(ExitCode.USAGE, f"{self.prog}: error: {mask_same_length(message)}\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every sub-command (``--help`` documents each)."""
    parser = _Parser(
        prog="failover-client",
        description="Inspect failover URIs and talk to a group of brokers through one "
        "connection that fails over.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="more of the library's log on stderr: -v info, -vv debug (warnings always)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    commands = parser.add_subparsers(
        title="commands", dest="command", required=True, parser_class=_Parser
    )
    _parse_cmd.add_parser(commands)
    _probe_cmd.add_parser(commands)
    _send_cmd.add_parser(commands)
    _receive_cmd.add_parser(commands)
    return parser


def run(argv: Sequence[str], env: Environment) -> int:
    """Run one command with ``env``'s streams; return the exit code (never raises for errors)."""
    parser = build_parser()
    try:
        # argparse prints help and usage errors to sys.stdout / sys.stderr itself.
        with contextlib.redirect_stdout(env.stdout), contextlib.redirect_stderr(env.stderr):
            args = parser.parse_args(list(argv))
    except SystemExit as exc:  # --help, or a usage error already printed by argparse
        return int(exc.code) if isinstance(exc.code, int) else ExitCode.USAGE
    with _logging_to(env.stderr, args.verbose):
        try:
            return int(args.run(args, env))
        except KeyboardInterrupt:
            env.stderr.write("failover-client: interrupted\n")
            return ExitCode.INTERRUPTED
        except FailoverClientError as exc:
            env.stderr.write(f"failover-client {args.command}: {_describe(exc)}\n")
            return exit_code_for(exc)


@contextlib.contextmanager
def _logging_to(stream: TextIO, verbose: int) -> Iterator[None]:
    """The library's records on ``stream`` while the command runs: warnings always (a
    broker that does not answer is said while the command waits), ``-v`` info, ``-vv`` debug.

    On the package logger, not the root, and removed afterwards: ``run()`` may be called many
    times in one process (tests, a host application).
    """
    logger = logging.getLogger("failover_client")
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    handler = logging.StreamHandler(stream)
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    previous = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > level:
        logger.setLevel(level)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)


def _version() -> str:
    try:
        return version("failover-client")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _describe(error: FailoverClientError) -> str:
    # URIError renders the (already redacted) URI with a caret under the bad character.
    kind = "bad URI" if isinstance(error, URIError) else type(error).__name__
    return f"{kind}: {error}"


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point: ``failover-client ...``."""
    return run(sys.argv[1:] if argv is None else argv, Environment())
