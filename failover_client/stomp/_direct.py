"""Frames handed to the transport's listeners directly, past stomp.py's ``notify``.

stomp.py's ``notify`` sorts its listeners under a lock and looks the method up by name on each,
for every frame, and debug-logs a listener without it. For the frames that make up nearly all
of a connection's traffic that walk is the only thing it does:

* a MESSAGE: ``before_message`` then ``message``; once per message consumed, the walk was a
  tenth of the I/O thread's time;
* a RECEIPT stomp.py did not register itself (its own DISCONNECT bookkeeping; ours never does):
  besides telling the listeners, a no-op removal and a notify of a condition nothing waits on;
  one per awaited confirmed send;
* a heart-beat: the watchdog was told of the bytes already (``receive``).

With stomp.py's debug log on, every frame takes stomp.py's own path, so its log stays whole.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stomp import log as stomp_log

__all__ = ["tell_beat", "told_directly"]


def told_directly(
    listeners: Mapping[str, Any], receipts: Mapping[str, Any], command: str, f: Any
) -> bool:
    """Tell ``listeners`` of the MESSAGE or unregistered RECEIPT ``f``; False: stomp.py's path.

    ``command`` is the frame's command in lower case, ``receipts`` the receipt ids stomp.py
    registered (its ``__receipts``).
    """
    if stomp_log.isEnabledFor(stomp_log.DEBUG):
        return False
    if command == "message":
        for listener in tuple(listeners.values()):
            listener.on_message(f)
        return True
    if command == "receipt":
        receipt = f.headers.get("receipt-id")
        if receipt is None or receipt in receipts:
            return False
        for listener in tuple(listeners.values()):
            listener.on_receipt(f)
        return True
    return False


def tell_beat(listeners: Mapping[str, Any]) -> bool:
    """Tell ``listeners`` of a heart-beat; False (nothing told): stomp.py's path."""
    if stomp_log.isEnabledFor(stomp_log.DEBUG):
        return False
    for listener in tuple(listeners.values()):
        on_heartbeat = getattr(listener, "on_heartbeat", None)
        if on_heartbeat is not None:
            on_heartbeat()
    return True
