"""The STOMP 1.1 / 1.2 adapter, over stomp.py.

:class:`StompConnector` (``_connector``) opens :class:`StompSession` s (``_session``) that
implement :mod:`failover_client.adapter`. A session is put together from its handshake
(``_handshake``), its outbound and inbound sides (``_outbound``, ``_inbound``) and its teardown
(``_teardown``), which share one ``_state``; the socket is a stomp.py transport bound to one
broker (``_transport``) that dials through :mod:`failover_client.net`. stomp.py stays the
parser of what the broker sends and builds CONNECT; after the handshake the session encodes
frames itself (``_encode``, byte-for-byte what stomp.py writes). The adapter uses stomp.py
internals (``Transport``'s private I/O loop attributes), hence the tested version range in
``setup.cfg``.
"""

from __future__ import annotations

from failover_client.stomp._connector import StompConnector
from failover_client.stomp._session import StompSession

__all__ = ["StompConnector", "StompSession"]
