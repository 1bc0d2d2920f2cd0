"""What every adapter's session does at its end: run waiting callbacks, say why it is dead.

A session's books (STOMP receipts, AMQP deliveries) change their state under a lock and
*return* the callbacks to run; :func:`run_all` runs them afterwards, outside the lock (a
callback may call the session again), each isolated from the others. :func:`dead_error` is the
error every operation of a session that is not open raises, with the same words for every
protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from failover_client._errors import BrokerUnavailable
from failover_client.adapter import ConfirmCallback

__all__ = ["Completion", "confirm_all", "dead_error", "run_all"]


@dataclass(frozen=True)
class Completion:
    """One callback to run with its outcome (``None`` = confirmed)."""

    callback: ConfirmCallback
    outcome: BaseException | None

    def run(self) -> None:
        self.callback(self.outcome)


def run_all(
    completions: Iterable[Completion | None] | Completion | None,
    on_error: Callable[[BaseException], None],
) -> None:
    """Run completions in order; a callback that raises is reported, never propagated.

    A callback is the engine's; its bug must not kill the adapter's I/O thread, nor keep the
    callbacks after it from running.
    """
    if completions is None:
        return
    if isinstance(completions, Completion):
        completions = (completions,)
    for completion in completions:
        if completion is None:
            continue
        try:
            completion.run()
        except Exception as exc:  # noqa: BLE001 - reported by on_error; the rest still run
            on_error(exc)


def confirm_all(
    callbacks: Sequence[ConfirmCallback], on_error: Callable[[BaseException], None]
) -> None:
    """Tell ``callbacks`` in order that their sends were confirmed, in as few calls as possible.

    A run of callbacks that carry the same ``confirm_together`` (see
    :data:`~failover_client.adapter.ConfirmCallback`) is confirmed by one call of it; any
    other callback is called with None. Errors are isolated as in :func:`run_all`.
    """
    start, count = 0, len(callbacks)
    if count:
        # The common case, one connection's sends: all share one confirm_together.
        together = getattr(callbacks[0], "confirm_together", None)
        if together is not None and all(
            getattr(callback, "confirm_together", None) is together for callback in callbacks
        ):
            try:
                together(callbacks)
            except Exception as exc:  # noqa: BLE001 - reported by on_error, as below
                on_error(exc)
            return
    while start < count:
        together = getattr(callbacks[start], "confirm_together", None)
        end = start + 1
        if together is not None:
            while end < count and getattr(callbacks[end], "confirm_together", None) is together:
                end += 1
        try:
            if together is None:
                callbacks[start](None)
            else:
                together(callbacks[start:end])
        except Exception as exc:  # noqa: BLE001 - reported by on_error; the rest still run
            on_error(exc)
        start = end


def dead_error(phase: str, cause: BaseException | None, *, broker: str) -> BrokerUnavailable:
    """Why a session in ``phase`` can do nothing: closed, not connected yet, or lost (and why)."""
    if phase == "closed":
        return BrokerUnavailable("session is closed", broker=broker)
    if phase == "connecting":
        return BrokerUnavailable("session is not connected yet", broker=broker)
    return BrokerUnavailable(f"session was lost: {cause}", broker=broker)
