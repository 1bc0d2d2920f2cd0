"""Network plumbing shared by every protocol that runs its own socket.

* ``_dial``: one cancellable connect to one host and port (name resolution on a short-lived
  thread, non-blocking TCP connect, TLS handshake), bounded by one deadline;
* ``_writer``: a batching writer that gathers frames queued by any thread into one ``sendall``;
* ``_tls``: the client ``ssl.SSLContext`` built once from the options (verified by default).

The STOMP adapter uses all three today; the OpenWire control channel of the topology sources
will too. Nothing here knows a protocol.
"""

from __future__ import annotations
