"""The STOMP 1.1 / 1.2 adapter, over stomp.py.

:class:`StompConnector` opens :class:`StompSession` s that implement
:mod:`failover_client.adapter`. stomp.py stays the parser of what the broker sends and builds
CONNECT; after the handshake the session encodes frames itself (``_encode``, byte-for-byte
what stomp.py writes). The adapter uses stomp.py internals (``Transport``, ``Protocol12``),
hence the tested version range in ``setup.cfg``.
"""

from __future__ import annotations

from failover_client.stomp._session import StompConnector, StompSession

__all__ = ["StompConnector", "StompSession"]
