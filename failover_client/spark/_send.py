"""Send one partition's messages and return only when the broker confirmed every one.

Messages go out with ``send_async``, so up to ``confirmWindow`` confirmations are outstanding
at once (the connection blocks the loop when the window is full: that is the backpressure),
then ``flush`` waits for the rest. A fail-over in between is the connection's business: it
re-sends what was unconfirmed, with the same ids. A reconnect loop that gives up, or a send
that is not confirmed for another reason, fails the partition with
:class:`PartitionNotConfirmed` (or the connection's own error), and Spark retries the task,
which sends the partition again with the same ids.

Rows are different: a row the checks refused (a :class:`Refusal` in the input) or one a
broker answered with :class:`~failover_client.SendRejected` would be refused again by every
retry, so neither fails the partition; both go to ``refused`` (``_rowerrors``), which may
hand back a dead letter to send in the row's place.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass

from failover_client import FailoverConnection
from failover_client._errors import PartitionNotConfirmed, SendRejected
from failover_client.spark._messages import Outgoing
from failover_client.spark._rowcheck import Refusal
from failover_client.spark._rowerrors import RefusedRows

__all__ = ["PartitionNotConfirmed", "SendResult", "send_all"]


@dataclass(frozen=True)
class SendResult:
    """What one partition sent; every message counted here was confirmed."""

    messages: int
    first_id: str | None
    last_id: str | None


def send_all(
    connection: FailoverConnection,
    messages: Iterable[Outgoing | Refusal],
    refused: RefusedRows | None = None,
) -> SendResult:
    """Send every message, then wait for every confirmation; raise if any was not confirmed.

    Without ``refused`` (a caller that has no rows) a refusal fails the partition like any
    unconfirmed send.
    """
    failures: list[BaseException] = []
    rejected: list[tuple[Outgoing, SendRejected]] = []

    def note(message: Outgoing, future: Future[None]) -> None:
        # Runs on an adapter thread: only record (list.append is atomic).
        error = future.exception()
        if isinstance(error, SendRejected) and refused is not None:
            rejected.append((message, error))
        elif error is not None:
            failures.append(error)

    def send(message: Outgoing) -> None:
        future = connection.send_async(
            message.destination, message.body, message.headers, message_id=message.message_id
        )
        future.add_done_callback(lambda done: note(message, done))

    count = 0
    first_id = last_id = None
    for item in messages:
        if failures:
            break  # the partition fails anyway; stop adding to it
        if isinstance(item, Refusal):
            if refused is None:
                raise PartitionNotConfirmed(str(item), message_id=item.message_id)
            letter = refused.take(item)
            if letter is not None:
                send(letter)
            continue
        send(item)
        count += 1
        last_id = item.message_id
        if first_id is None:
            first_id = last_id
    connection.flush()
    if refused is not None and rejected and not failures:
        # Sent but refused by the broker: not confirmed, so not counted as sent.
        count -= len(rejected)
        for message, error in list(rejected):
            letter = refused.take(_broker_refusal(message, error))
            if letter is not None:
                send(letter)
        connection.flush()
    if failures:
        first = failures[0]
        raise PartitionNotConfirmed(
            f"{len(failures)} of {count} messages were not confirmed "
            f"(first: {type(first).__name__}: {first}); Spark retries the task",
            message_id=getattr(first, "message_id", None),
        ) from first
    return SendResult(count, first_id, last_id)


def _broker_refusal(message: Outgoing, error: SendRejected) -> Refusal:
    return Refusal(
        row=-1,
        message_id=message.message_id,
        column="(the whole message)",
        rule=str(error),
        destination=message.destination,
        body=message.body,
        broker=True,
    )
