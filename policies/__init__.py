"""Broker-selection policies: turn the live broker list into an ordered plan.

Installed as ``failover_client.policies``. Pure: no I/O, no third-party imports.
"""

from __future__ import annotations

__all__: list[str] = []
