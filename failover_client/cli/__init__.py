"""``failover-client``: the command-line tool (``parse``, ``probe``, ``send``, ``receive``).

Run it as ``failover-client ...`` or ``python -m failover_client.cli ...``; ``--help`` on any
command explains it. Exit codes are :class:`ExitCode`. Needs the ``cli`` extra for rich tables
(plain text otherwise) and the protocol extra (``stomp`` or ``amqp``) for commands that connect.
"""

from __future__ import annotations

from ._app import build_parser, main, run
from ._env import Environment
from ._exit import ExitCode, exit_code_for

__all__ = ["Environment", "ExitCode", "build_parser", "exit_code_for", "main", "run"]
