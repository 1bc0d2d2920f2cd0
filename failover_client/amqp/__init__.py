"""The AMQP 1.0 adapter, over python-qpid-proton.

:class:`AmqpConnector` (``_connector``) opens :class:`AmqpSession` s (``_session``) that
implement :mod:`failover_client.adapter`. Each session runs one proton Container on a thread of
its own (``_loop``), with proton's reconnect off (the engine reconnects); its handler
(``_handler``) drives the send side (``_sending``: one sender link per destination, confirmed
by the broker's disposition) and the receive side (``_receiving``: one receiver link per
subscription, with credit). ``_errors`` maps proton's error conditions onto the library's
errors, ``_convert`` encodes (body, headers) as AMQP messages and decodes them back, ``_tls``
builds proton's TLS domain from the options, and ``_server_list`` reads the brokers a broker names
(``failover-server-list``, ``amqp:connection:redirect``).
"""

from __future__ import annotations

from failover_client.amqp._connector import AmqpConnector
from failover_client.amqp._session import AmqpSession

__all__ = ["AmqpConnector", "AmqpSession"]
