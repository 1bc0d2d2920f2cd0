"""Send one partition's messages and return only when the broker confirmed every one.

Messages go out with ``send_async``, so up to ``confirmWindow`` confirmations are outstanding
at once (the connection blocks the loop when the window is full: that is the backpressure),
then ``flush`` waits for the rest. A fail-over in between is the connection's business: it
re-sends what was unconfirmed, with the same ids. A message the broker rejects, or a reconnect
loop that gives up, fails the partition with :class:`PartitionNotConfirmed` (or the
connection's own error), and Spark retries the task, which sends the partition again with the
same ids.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass

from failover_client import FailoverConnection
from failover_client._errors import PartitionNotConfirmed
from failover_client.spark._messages import Outgoing

__all__ = ["PartitionNotConfirmed", "SendResult", "send_all"]


@dataclass(frozen=True)
class SendResult:
    """What one partition sent; every message counted here was confirmed."""

    messages: int
    first_id: str | None
    last_id: str | None


def send_all(connection: FailoverConnection, messages: Iterable[Outgoing]) -> SendResult:
    """Send every message, then wait for every confirmation; raise if any was not confirmed."""
    failures: list[BaseException] = []

    def note(future: Future[None]) -> None:
        # Runs on an adapter thread: only record (list.append is atomic).
        error = future.exception()
        if error is not None:
            failures.append(error)

    count = 0
    first_id = last_id = None
    for message in messages:
        if failures:
            break  # the partition fails anyway; stop adding to it
        future = connection.send_async(
            message.destination, message.body, message.headers, message_id=message.message_id
        )
        future.add_done_callback(note)
        count += 1
        last_id = message.message_id
        if first_id is None:
            first_id = last_id
    connection.flush()
    if failures:
        first = failures[0]
        raise PartitionNotConfirmed(
            f"{len(failures)} of {count} messages were not confirmed "
            f"(first: {type(first).__name__}: {first}); Spark retries the task",
            message_id=getattr(first, "message_id", None),
        ) from first
    return SendResult(count, first_id, last_id)
