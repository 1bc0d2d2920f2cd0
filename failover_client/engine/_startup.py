"""Start-up that says what is wrong: the first-pass warning and the start-up deadline.

A wrong port, an unknown host or a broker that is not up yet all look the same to a reconnect
run: every broker fails, and the schedule goes on. ActiveMQ Classic's default
(``startupMaxReconnectAttempts=-1`` with ``maxReconnectAttempts=-1``) retries for ever, so
``connect()`` would block without a word. Two things keep a new user from waiting in silence:

* :class:`StartupNotice`: when the user wrote no retry option, a start-up pass over the brokers
  that found none logs a warning naming every broker's cause (and emits a
  :class:`~failover_client.ReconnectWarning`) at once, then again at most once a minute while
  the run goes on. A user who wrote retry options gets their system's warning rule
  (``warnAfterReconnectAttempts``) and nothing more: they asked for that behaviour.
* the start-up deadline (``connect(timeout=...)``): the decisions end the run once it passed
  (:class:`~._decide.Expire`), each connect is cut to the time left, and :func:`expired`
  builds the :class:`AllBrokersFailed` the caller gets, with a cause for every broker (one not
  tried in time says so).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from failover_client._errors import AllBrokersFailed, BrokerUnavailable, ConnectionClosed
from failover_client._events import Event, ReconnectWarning
from failover_client._hosts import shown_list
from failover_client.engine._state import ConnectionState
from failover_client.uri import wrote_retry_options

__all__ = [
    "StartupNotice",
    "bounded",
    "expired",
    "startup_error",
    "wrote_retry_options",  # uri's, named here beside the notice it switches
]

_log = logging.getLogger("failover_client")


NOTICE_INTERVAL = 60.0
"""Seconds between two start-up notices while the run goes on (the first is at once)."""

_SHOWN = 8
"""Brokers named in one notice; the event carries every cause."""


class StartupNotice:
    """The warning after a failed start-up pass, for users who set no retry options.

    ``clock`` is the connection's ``monotonic``; ``describe`` renders one broker's cause.
    Only the reconnect loop's thread calls :meth:`pass_failed`.
    """

    __slots__ = ("_clock", "_describe", "_emit", "_interval", "_next_at", "enabled", "passes")

    def __init__(
        self,
        *,
        enabled: bool,
        clock: Callable[[], float],
        emit: Callable[[Event], None],
        describe: Callable[[str, BaseException], str],
        interval: float = NOTICE_INTERVAL,
    ) -> None:
        self.enabled = enabled
        self._clock = clock
        self._emit = emit
        self._describe = describe
        self._interval = interval
        self._next_at: float | None = None
        self.passes = 0
        """Start-up passes that found no broker so far."""

    def pass_failed(
        self, attempt: int, causes: Mapping[str, BaseException], *, warned: bool = False
    ) -> bool:
        """A whole start-up pass found no broker: warn now unless one was said too recently.

        ``warned``: the schedule's own warning (``warnAfterReconnectAttempts``) was just
        logged for this pass, which counts as this notice's too. Returns whether it warned.
        ``attempt`` is the schedule's attempt number (for the event); the message counts
        passes, which is what the user can picture.
        """
        self.passes += 1
        if not self.enabled or not causes:
            return False
        now = self._clock()
        if warned or (self._next_at is not None and now < self._next_at):
            if warned:
                self._next_at = now + self._interval
            return False
        self._next_at = now + self._interval
        reasons = shown_list(
            (self._describe(broker, error) for broker, error in causes.items()), _SHOWN, sep="; "
        )
        _log.warning(
            "no broker answered at start-up (%d pass(es) over the list so far): %s; still "
            "trying: with no retry option in the URI start-up retries for ever (set "
            "startupMaxReconnectAttempts, or call connect(timeout=...))",
            self.passes,
            reasons,
        )
        self._emit(ReconnectWarning(attempt, tuple(causes.items())))
        return True


def expired(
    timeout: float, causes: Mapping[str, BaseException], brokers: Iterable[str]
) -> AllBrokersFailed:
    """The error of a start-up that passed its deadline: a cause for every broker.

    ``brokers`` are the pool's brokers (redacted addresses); one that was not tried before the
    deadline (a connect to another broker took the time) gets a cause saying so.
    """
    every: dict[str, BaseException] = dict(causes)
    for broker in brokers:
        every.setdefault(
            broker,
            BrokerUnavailable(
                f"not tried: the start-up deadline ({timeout:g} s) passed first", broker=broker
            ),
        )
    return AllBrokersFailed(f"no broker answered within connect(timeout={timeout:g})", every)


_GRACE = 1.0
"""How long ``connect(timeout=...)`` waits past its deadline for the loop's own verdict (a
connect in progress is cut to the time left, so the verdict comes at the deadline) before it
closes the connection and answers itself."""


def bounded(seconds: float | None) -> float | None:
    """How long ``connect()`` waits for the loop's first outcome (None: no limit)."""
    return None if seconds is None else seconds + _GRACE


def startup_error(state: ConnectionState) -> BaseException | None:
    """What ``connect()`` raises once the loop's first outcome is in (None: connected)."""
    with state.cond:
        name, error = state.state, state.error
    if name == "failed" and error is not None:
        return error
    if name not in ("connected", "reconnecting", "switching"):
        return ConnectionClosed(f"the connection was closed while connecting ({name})")
    return None
