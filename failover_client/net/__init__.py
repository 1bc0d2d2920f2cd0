"""Network plumbing shared by every protocol that runs its own socket.

* ``_writer``: a batching writer that gathers frames queued by any thread into one ``sendall``;
* ``_tls``: the client ``ssl.SSLContext`` built once from the options (verified by default).

The STOMP adapter uses both today; the OpenWire control channel of the topology sources will
too. Nothing here knows a protocol.
"""

from __future__ import annotations
