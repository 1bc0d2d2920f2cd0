"""Arguments and helpers shared by the commands that talk to brokers."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from failover_client import ConfigurationError, FailoverConnection
from failover_client.uri import FailoverURI, parse

from ._env import PASSCODE_ENV, Environment

__all__ = [
    "DESTINATION_HELP",
    "add_connection_arguments",
    "credentials",
    "open_connection",
    "parse_headers",
    "parse_target",
    "positive_int",
    "seconds",
]


DESTINATION_HELP = (
    "e.g. /queue/orders; RabbitMQ over AMQP 1.0: /amq/queue/orders, a durable queue declared "
    "beforehand (its /queue/orders declares a queue that does not survive a restart)"
)


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """``URI``, ``--login`` and ``--passcode-env`` (the passcode never goes on a command line)."""
    parser.add_argument("uri", metavar="URI", help="failover URI or a single broker URI")
    parser.add_argument(
        "--login", help="login for members whose URI carries no user (default: none)"
    )
    parser.add_argument("--passcode", nargs="?", action=_RefusePasscode, help=argparse.SUPPRESS)
    parser.add_argument(
        "--passcode-env",
        metavar="NAME",
        help=f"environment variable holding the passcode; an error when it is not set "
        f"(default: {PASSCODE_ENV}, if set)",
    )


class _RefusePasscode(argparse.Action):
    """``--passcode VALUE``: refused with a pointer to ``--passcode-env``, value not echoed."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        parser.error(
            "--passcode is not accepted: a passcode on the command line is visible to every "
            "user of the machine (ps); put it in an environment variable and name it with "
            f"--passcode-env NAME (default {PASSCODE_ENV})"
        )


def parse_target(text: str) -> FailoverURI:
    """Parse the URI argument (URIError / OptionError propagate with their caret message)."""
    return parse(text)


def credentials(args: argparse.Namespace, env: Environment) -> tuple[str | None, str | None]:
    """(login, passcode) from ``--login`` and the passcode environment variable.

    A variable named with ``--passcode-env`` must be set: an unset one is an error naming it
    (a typo in its name would otherwise show up only as an authentication failure).
    """
    name = args.passcode_env
    if name is None:
        return args.login, env.environ.get(PASSCODE_ENV) or None
    if name not in env.environ:
        raise ConfigurationError(
            f"--passcode-env {name}: the environment variable {name} is not set"
        )
    return args.login, env.environ[name] or None


def open_connection(
    target: FailoverURI, args: argparse.Namespace, env: Environment
) -> FailoverConnection:
    """A not yet connected FailoverConnection for ``target`` with the command's credentials."""
    login, passcode = credentials(args, env)
    return FailoverConnection(
        target, connector=env.connector, clock=env.clock, login=login, passcode=passcode
    )


def parse_headers(values: Sequence[str]) -> dict[str, str]:
    """``-H name:value`` arguments as a dict; raises ConfigurationError naming the bad one."""
    headers: dict[str, str] = {}
    for index, value in enumerate(values, start=1):
        name, sep, text = value.partition(":")
        name = name.strip()
        # The text is not echoed: a malformed header may be a secret typed in the wrong place.
        if not sep:
            raise ConfigurationError(f"-H #{index} has no ':'; write it as name:value")
        if not name:
            raise ConfigurationError(f"-H #{index} has an empty name; write it as name:value")
        headers[name] = text.strip()
    return headers


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def seconds(text: str) -> float:
    """argparse type: a number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value
