"""The protocol-neutral engine: one connection to a group of brokers that fails over.

Nothing here knows STOMP or AMQP; it drives any :mod:`adapter <failover_client.adapter>`.

* ``_connection``: :class:`FailoverConnection`, the application's API, which wires the rest;
  ``_adapters`` picks (and lazily imports) the protocol adapter;
* ``_state``: the connection state every thread meets under one lock; ``_sender`` writes,
  confirms and replays sends through the ``_outbox``; ``_subscriptions`` outlive sessions;
* ``_loop``: the reconnect loop (the one owner of reconnecting), ``_dial``: one reconnect run;
* ``_pool`` (known brokers), ``_placement`` (tiers and plans), ``_schedule`` (delays),
  ``_standby`` (pre-connected standbys), ``_dispatch`` (the handler thread);
* ``_canary``: each session proves it still hears; ``_health``: ``connection.health()``.

Dependencies flow one way: ``uri`` and ``policies`` <- engine <- adapters <- topology, cli,
demo, testing. A test keeps it so (``tests/test_layout.py``).
"""

from __future__ import annotations

from failover_client.engine._adapters import connector_for
from failover_client.engine._connection import MESSAGE_ID_HEADER, FailoverConnection, FailoverTarget

__all__ = ["MESSAGE_ID_HEADER", "FailoverConnection", "FailoverTarget", "connector_for"]
