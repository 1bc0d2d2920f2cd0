"""Exit codes of ``failover-client`` and the mapping from the library's errors onto them."""

from __future__ import annotations

import enum

from failover_client import (
    ConfigurationError,
    ConnectionClosed,
    ConnectionFailure,
    SendFailure,
)

__all__ = ["ExitCode", "exit_code_for"]


class ExitCode(enum.IntEnum):
    """What a script calling ``failover-client`` can branch on."""

    OK = 0
    """Everything asked for was done (all sent messages confirmed, all members answered)."""
    ERROR = 1
    """An unexpected internal error (a bug: please report it with the traceback)."""
    USAGE = 2
    """Bad input: arguments, URI, option or policy name (argparse uses 2 as well)."""
    CONNECTION = 3
    """No broker could be reached, or one refused the credentials or the certificate."""
    UNCONFIRMED = 4
    """At least one message was not confirmed by a broker (it may or may not have arrived)."""
    INCOMPLETE = 5
    """Fewer messages than ``--count`` arrived in time, or some probed members did not answer."""
    MISSING_EXTRA = 6
    """The library needs an extra that is not installed (``pip install 'failover-client[stomp]'``
    or ``[amqp]``): the set-up, not the arguments, is wrong."""
    INTERRUPTED = 130
    """Stopped by Ctrl-C (128 + SIGINT, as shells report it)."""


def exit_code_for(error: BaseException) -> ExitCode:
    """The exit code for an error that ended a command."""
    if isinstance(error, ConfigurationError) and isinstance(error.__cause__, ImportError):
        # An adapter whose library is not installed is raised from the ImportError.
        return ExitCode.MISSING_EXTRA
    for kind, code in _CODES:
        if isinstance(error, kind):
            return code
    return ExitCode.ERROR


_CODES: tuple[tuple[type[BaseException], ExitCode], ...] = (
    (KeyboardInterrupt, ExitCode.INTERRUPTED),
    (ConfigurationError, ExitCode.USAGE),
    (ConnectionFailure, ExitCode.CONNECTION),
    (SendFailure, ExitCode.UNCONFIRMED),
    (ConnectionClosed, ExitCode.CONNECTION),
)
