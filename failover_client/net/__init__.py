"""Network plumbing shared by every protocol that runs its own socket.

* ``_dial``: one cancellable connect to one host and port (name resolution on a short-lived
  thread, non-blocking TCP connect, TLS handshake), bounded by one deadline;
* ``_writer``: a batching writer that gathers frames queued by any thread into one ``sendall``;
* ``_tls``: the one TLS builder of every adapter: the client ``ssl.SSLContext`` built once from
  the options (verified by default), at construction when the options name files;
* ``_settings``: :class:`ConnectorSettings`, what every connector checks alike (heart-beats,
  close timeout, TLS files, credentials), validated once at construction;
* ``_completions``: what every session does at its end (run the waiting callbacks, say why
  it is dead).

The one timer thread per clock that every connection shares (heart-beats, parked reconnect
loops) is :mod:`failover_client._timers`, below both the engine and the adapters.

The STOMP and AMQP adapters and the shipped fake connector share these; the OpenWire control
channel of the topology sources dials through ``_dial`` too. Nothing here knows a protocol.
"""

from __future__ import annotations
