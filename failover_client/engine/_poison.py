"""Poison frames: a send or a subscription that a broker answers by ending the session.

A broker that answers one frame with an error and closes the connection (ActiveMQ: a header
over its frame limit; RabbitMQ: an exchange that does not exist) is not a dead broker, and
replaying that frame to every broker in turn fails over forever while everything behind it
waits. When the broker names the frame (a STOMP ERROR with its receipt, an AMQP disposition or
attach refusal) the adapter answers that frame and nothing else is in doubt. When it does not,
the adapter reports the loss as :class:`~failover_client.BrokerRefused`, and brokers do not
reliably confirm the frames written before the bad one (ActiveMQ drops their receipts when it
closes), so one loss cannot name the culprit. The rule, for sends and subscriptions alike:

* every loss counts against every frame written to the dying session and not yet confirmed,
  except a redirect (the broker sent the client elsewhere, it refused nothing);
* such a frame becomes a *suspect* when the loss was a refusal (unless the adapter failed it
  as a frame the broker never read: STOMP group commit knows the transactions written after
  the one in doubt), or at its
  :data:`POISON_LOSSES`-th loss of any kind (a broker that crashes on it without a word); a
  subscription after any loss (a broker that resets the connection with frames of ours
  unread loses its ERROR with it, and a SUBSCRIBE restored alone costs no throughput);
* on the next session, suspects are written one at a time, each waiting for its confirmation
  (at most :data:`PROBE_TIMEOUT`) before the next; everything else, and new work, waits;
  a loss now names one frame: the only one unconfirmed;
* a frame that is the only one unconfirmed when its session dies is *poison* after
  :data:`POISON_LOSSES` losses if this one was a refusal, or after :data:`CRASH_LOSSES` of any
  kind. A poison send fails with :class:`~failover_client.SendRejected` (``PoisonQuarantined``
  event), a poison subscription with :class:`~failover_client.SubscriptionRefused`
  (``SubscriptionFailed`` event); neither is written again, and the frames suspected with it
  are suspects no longer (the next replay writes them at once).

So a poison frame costs two fail-overs. An innocent frame is never quarantined by kills and
hangs alone unless four sessions in a row die while it is the only frame on the wire; after an
ordinary loss (a kill, a hang, a network fault) the replay is written at once, as before. The
price of a refusal: the suspects before the poison one are replayed at one round trip each,
once. Brokers read in order, so what follows the poison frame was never read; with ActiveMQ's
group commit the suspects are the transaction the poison frame was in (at most ``maxBatch``
sends), elsewhere every frame then unconfirmed. A confirmation clears the counts: a frame
some broker accepted is not poison.
"""

from __future__ import annotations

from failover_client._errors import BrokerRefused

__all__ = ["CRASH_LOSSES", "POISON_LOSSES", "PROBE_TIMEOUT", "is_poison", "is_suspect"]

POISON_LOSSES = 2
"""Losses, the last a refusal, after which a frame alone on the wire is poison.

Two, not one: a broker may end a session with an error for reasons of its own (shutting down,
out of resources) while a frame happens to be alone in flight; the replay on the next broker
then confirms it.
"""

CRASH_LOSSES = 4
"""Losses of any kind after which a frame alone on the wire is poison (a broker that dies
without a word whenever it reads it)."""

PROBE_TIMEOUT = 5.0
"""Seconds a suspect waits for its confirmation before the rest is written at once.

A broker this slow is not refusing the frame: it is slow, and holding everything behind one
frame would turn a slow broker into a stalled connection.
"""


def is_suspect(losses: int, cause: BaseException) -> bool:
    """Whether a frame with ``losses`` (this one included) is written alone on the next session."""
    return isinstance(cause, BrokerRefused) or losses >= POISON_LOSSES


def is_poison(losses: int, cause: BaseException) -> bool:
    """Whether a frame alone on the wire when its session died of ``cause`` is poison."""
    if isinstance(cause, BrokerRefused):
        return losses >= POISON_LOSSES
    return losses >= CRASH_LOSSES
