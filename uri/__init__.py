"""Failover URI grammar: parse text into an immutable value and format it back.

Installed as ``failover_client.uri``. Pure: no I/O, no third-party imports.
"""

from __future__ import annotations

from ._address import DEFAULT_PORTS, SCHEMES, BrokerAddress
from ._options import AttemptUnit, FailoverOptions, ServerListAction

__all__ = [
    "DEFAULT_PORTS",
    "SCHEMES",
    "AttemptUnit",
    "BrokerAddress",
    "FailoverOptions",
    "ServerListAction",
]
