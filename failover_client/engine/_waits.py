"""The tenacity pieces of the reconnect schedule, imported when a schedule first runs.

tenacity's package import (every strategy module, its retry machinery) took about as long as
a third of ours; a program that only imports the package, or parses URIs, does not need it.
:mod:`~failover_client.engine._schedule` imports this module inside the methods that build
strategies.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from tenacity.stop import stop_after_attempt, stop_base, stop_never
from tenacity.wait import wait_base, wait_chain, wait_exponential, wait_fixed

if TYPE_CHECKING:
    from tenacity import RetryCallState

__all__ = [
    "attempt",
    "stop_after_attempt",
    "stop_base",
    "stop_never",
    "wait_capped",
    "wait_chain",
    "wait_exponential",
    "wait_fixed",
    "wait_shifted",
]


class _Attempt:
    """The one field of tenacity's ``RetryCallState`` the strategies used here read.

    A real ``RetryCallState`` needs a ``Retrying`` object and stamps ``time.monotonic()``; the
    schedule has neither a retry loop nor a clock of its own.
    """

    __slots__ = ("attempt_number",)

    def __init__(self, attempt_number: int) -> None:
        self.attempt_number = attempt_number


def attempt(attempt_number: int) -> RetryCallState:
    """What a strategy is asked with for attempt number ``attempt_number``."""
    return cast("RetryCallState", _Attempt(attempt_number))


class wait_shifted(wait_base):  # tenacity's naming for strategy classes
    """Evaluate ``inner`` as if the attempt number were ``by`` lower."""

    def __init__(self, inner: wait_base, by: int) -> None:
        self.inner = inner
        self.by = by

    def __call__(self, retry_state: RetryCallState) -> float:
        return self.inner(attempt(retry_state.attempt_number - self.by))


class wait_capped(wait_base):  # tenacity's naming for strategy classes
    """``inner``, but never more than ``cap`` seconds."""

    def __init__(self, inner: wait_base, cap: float) -> None:
        self.inner = inner
        self.cap = cap

    def __call__(self, retry_state: RetryCallState) -> float:
        return min(self.inner(retry_state), self.cap)
