"""What a command touches outside itself, bundled so tests can replace every part of it."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TextIO

from failover_client import Clock, SystemClock
from failover_client.adapter import Connector

__all__ = ["PASSCODE_ENV", "Environment"]

PASSCODE_ENV = "FAILOVER_CLIENT_PASSCODE"
"""Where the passcode comes from by default: never from the command line, where ``ps`` shows it."""


@dataclass(frozen=True)
class Environment:
    """Streams, environment variables, clock, and (for tests) the connector to use.

    ``styled`` None means: rich output when ``stdout`` is a terminal. ``connector`` None means
    the protocol adapter the URI's members need.
    """

    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    clock: Clock = field(default_factory=SystemClock)
    connector: Connector | None = None
    styled: bool | None = None
    styled_stderr: bool | None = None
    """Progress displays on stderr: None means when stderr is a terminal."""

    @property
    def rich_output(self) -> bool:
        """Use rich tables: asked for, or stdout is a terminal."""
        if self.styled is not None:
            return self.styled
        isatty = getattr(self.stdout, "isatty", None)
        return bool(isatty and isatty())
