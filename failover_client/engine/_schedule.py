"""Reconnect schedules: how long to wait before each attempt, and when to give up.

A :class:`ReconnectSchedule` is built once from :class:`~failover_client.uri.FailoverOptions`; the
reconnect loop starts a fresh :class:`ScheduleRun` for the first connection (``startup=True``)
and another after every loss (``startup=False``). A new run starts from the initial delay again:
the reset after success that proton's own ``Backoff`` lacks. Delays come from tenacity wait
strategies (``wait_exponential`` handles the overflow of long unlimited runs); the attempt limit is
a tenacity ``stop_after_attempt``. Nothing here sleeps or reads the time: the reconnect loop waits
``next_delay()`` seconds on its injected clock.

What one attempt is (``attempt_unit``): ``"pass"`` is one pass over the whole broker plan (ActiveMQ
Classic, Qpid JMS); ``"broker"`` is one try of one broker (Artemis). The reconnect loop asks for a
delay before every pass, or before every broker try, accordingly.

Below, I = ``initial_reconnect_delay``, R = ``reconnect_delay``, m = ``backoff_multiplier``,
M = ``max_reconnect_delay``, and d(n) the wait before attempt n (n = 1, 2, ...). Every delay is
capped at M (when backoff is on) and a capped sequence stays at M.

ActiveMQ Classic (style ``"classic"``, ``FailoverTransport.doReconnect``/``doDelay``)
    Classic keeps one *current* delay; ``reconnectDelay`` (R) only seeds it and every successful
    connection resets it to ``initialReconnectDelay`` (I). Before each pass
    ``resetReconnectDelay`` puts I back when backoff is off or the current delay still equals the
    10 ms default, so the startup base B is R with backoff on and R != 10 ms, else I.
    Startup: d(1) = 0; d(n) = B * m**(n-2) for n >= 2, i.e. 0, 10 ms, 20 ms, 40 ms ... 30 s with
    the defaults. After a loss Classic waits I before the first pass (only when I > 0) and that
    wait already advances the backoff, so a runtime run is the I-based startup run without its
    leading 0: d(n) = I * m**(n-1): 10 ms, 20 ms, 40 ms ... Without backoff every wait is I
    (startup 0, I, I ...; runtime I, I ...).
    Give-up: the first pass at startup always happens; the run gives up after L passes where L is
    ``startupMaxReconnectAttempts`` before the first connection (-1 there means "use
    ``maxReconnectAttempts``", not unlimited) and ``maxReconnectAttempts`` after it. L = -1 never
    gives up; at startup L = 0 still allows the one pass (Classic checks after the pass); after a
    loss L = 0 means no reconnect at all (Classic's ``canReconnect``).
    Warn: after failed attempt 1 and after every multiple of ``warnAfterReconnectAttempts``
    (0 or less: never).

Qpid JMS (style ``"qpid"``, ``FailoverProvider.ReconnectControls``)
    Defaults I = 0, R = 10 ms, m = 2, M = 30 s.
    Startup: d(1) = 0; d(2) = I if I > 0 else R; d(n) = R * m**(n-2) for n >= 3. (With I > 0 the
    plain R is skipped: 0, I, 2R, 4R ...; with the defaults 0, 10 ms, 20 ms, 40 ms ...)
    Runtime: d(1) = I (0: immediate); d(n) = R * m**(n-2) for n >= 2: 0, 10 ms, 20 ms ...
    Without backoff R replaces every R * m**k.
    Give-up and the -1/0 rules: as Classic (``startupMaxReconnectAttempts`` undefined = -1 falls
    back to ``maxReconnectAttempts``; the startup attempt always happens; 0 after a loss means no
    reconnect). Warn: after every multiple of ``warnAfterReconnectAttempts`` (not after the first).

Artemis (style ``"artemis"``, ``ClientSessionFactoryImpl.getConnectionWithRetry``,
``ServerLocatorImpl.createSessionFactory``)
    R = ``retryInterval`` (default 2 s), m = ``retryIntervalMultiplier`` (1.0), M =
    ``maxRetryInterval`` (2 s); I is not an Artemis setting and is ignored.
    Startup and runtime: d(1) = 0; d(n) = R * m**(n-2) for n >= 2. Example R = 2 s, m = 1.5,
    M = 10 s: 0, 2, 3, 4.5, 6.75, 10, 10 ...
    Give-up, counted in single broker tries: after a loss ``reconnectAttempts`` = N allows exactly N
    tries (0: no reconnect at all; -1: unlimited). At startup Artemis tries
    ``max(1, initialConnectAttempts)`` times the number of brokers (each broker once per round;
    -1: unlimited), so the run needs the broker count: ``start(startup=True, brokers=n)``.
    Artemis has no warn setting; ``warn_after_reconnect_attempts`` applies as in Qpid.

Deliberate differences, all at the edges: the Java clients truncate every step to whole
milliseconds (``long *= double``), this schedule keeps floats, so long non-integer-ratio sequences
can differ by a few milliseconds. Every delay, including a first I or R larger than M, is capped at
M when backoff is on. Classic's ``resetReconnectDelay`` re-arms I whenever the current delay
happens to equal 10 ms (e.g. I = 5 ms, m = 2 never grows past 10 ms); that accident is not copied.

One more, on purpose: the first delay after a loss (Classic's and Qpid's I) is not waited when
the attempt starts with a broker other than the one just lost (``next_delay(elsewhere=True)``).
I is there to spare a broker that just failed, and the Java clients pay it even when the next
broker on the list is a different, healthy one: half of a default Classic failover was that
wait. It still applies when the attempt would retry the broker just lost (a single-broker
list, or every other broker quarantined), and every later delay of the run is unchanged.

Jitter (``reconnect_jitter`` = j, none of the three clients has it): each non-zero delay d becomes
d * (1 - j * u) with u uniform in [0, 1) from the injected ``random.Random``, so jitter only
shortens a delay and M stays a hard bound. An immediate attempt (d = 0: the first try of a
startup run, the first try after a loss where the style has none) stays immediate, so jitter
never slows a failover to another broker; it only spreads the retries and the back-off.

The option's default is j = 0.5, not the Java clients' 0: without it, clients that lost their
brokers together share one delay sequence and come back in the same instant (a fleet of 50
Classic clients whose broker is away for a minute all retry within the same millisecond once
the delays reach M; with j = 0.5 their retries spread over about M/2). A URI that sets
``reconnectJitter`` gets exactly that value; ``reconnectJitter=0`` gives the delays above exactly.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from failover_client._errors import OptionError
from failover_client.uri import RETRY_FIELDS

if TYPE_CHECKING:
    from tenacity.stop import stop_base
    from tenacity.wait import wait_base

    from failover_client.uri import AttemptUnit, FailoverOptions

__all__ = ["ReconnectSchedule", "ReconnectStyle", "ScheduleRun"]

ReconnectStyle = Literal["classic", "qpid", "artemis"]
"""Whose delay and warning rules the schedule follows (see the module docstring)."""

_STYLES: tuple[ReconnectStyle, ...] = ("classic", "qpid", "artemis")
_UNLIMITED = -1
_CLASSIC_DEFAULT_DELAY = 0.01
"""Classic's DEFAULT_INITIAL_RECONNECT_DELAY (10 ms), which its reset compares against."""


@dataclass(frozen=True, slots=True)
class ReconnectSchedule:
    """The reconnect delays and attempt limits of one connection, per :data:`ReconnectStyle`.

    Build it with :meth:`from_options`; construct it directly only in tests. Times are seconds;
    attempt limits use -1 for unlimited. ``rng`` supplies the jitter and is used only when
    ``jitter > 0``. The schedule itself is immutable; each :meth:`start` returns a new run.
    """

    style: ReconnectStyle = "classic"
    unit: AttemptUnit = "pass"
    initial_delay: float = 0.01
    delay: float = 0.01
    max_delay: float = 30.0
    exponential: bool = True
    multiplier: float = 2.0
    jitter: float = 0.0
    max_attempts: int = _UNLIMITED
    startup_max_attempts: int = _UNLIMITED
    warn_after: int = 10
    rng: random.Random = field(default_factory=random.Random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.style not in _STYLES:
            raise OptionError(
                f"reconnect style must be one of {', '.join(_STYLES)}, got {self.style!r}",
                option="style",
            )
        if self.unit not in ("pass", "broker"):
            raise OptionError(
                f"attempt_unit must be 'pass' or 'broker', got {self.unit!r}", option="unit"
            )
        for name in ("initial_delay", "delay", "max_delay"):
            if getattr(self, name) < 0:
                raise OptionError(f"{name} must be >= 0, got {getattr(self, name)}", option=name)
        if self.multiplier < 1.0:
            raise OptionError(
                f"multiplier must be >= 1.0, got {self.multiplier}", option="multiplier"
            )
        if not 0.0 <= self.jitter <= 1.0:
            raise OptionError(f"jitter must be between 0 and 1, got {self.jitter}", option="jitter")
        for name in ("max_attempts", "startup_max_attempts"):
            if getattr(self, name) < _UNLIMITED:
                raise OptionError(
                    f"{name} must be -1 (unlimited) or >= 0, got {getattr(self, name)}",
                    option=name,
                )

    @classmethod
    def from_options(
        cls,
        options: FailoverOptions,
        *,
        rng: random.Random | None = None,
        style: ReconnectStyle | None = None,
    ) -> ReconnectSchedule:
        """The schedule ``options`` describe.

        Pass the parsed URI's ``dialect`` as ``style`` (the values are the same). Without it
        :func:`infer_style` guesses: ``"artemis"`` for ``attempt_unit="broker"``, ``"qpid"`` when
        a schedule option was spelled the Qpid JMS way (``failover.*``), else ``"classic"``.
        ``rng`` (unseeded when None) draws the jitter.
        """
        return cls(
            style=style if style is not None else infer_style(options),
            unit=options.attempt_unit,
            initial_delay=options.initial_reconnect_delay,
            delay=options.reconnect_delay,
            max_delay=options.max_reconnect_delay,
            exponential=options.use_exponential_backoff,
            multiplier=options.backoff_multiplier,
            jitter=options.reconnect_jitter,
            max_attempts=options.max_reconnect_attempts,
            startup_max_attempts=options.startup_max_reconnect_attempts,
            warn_after=options.warn_after_reconnect_attempts,
            rng=rng if rng is not None else random.Random(),
        )

    def replace(self, **changes: object) -> ReconnectSchedule:
        """A validated copy with ``changes`` applied (the generator is shared, not copied)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def start(self, *, startup: bool, brokers: int = 1) -> ScheduleRun:
        """A fresh run: for the first connection (``startup=True``) or after a loss.

        ``brokers`` is the number of live brokers; only the Artemis startup limit (which counts
        rounds over the list) uses it.
        """
        if brokers < 1:
            raise OptionError(f"brokers must be >= 1, got {brokers}", option="brokers")
        return ScheduleRun(self, startup=startup, brokers=brokers)

    # --- the pieces a run is made of -------------------------------------------------------

    def attempt_limit(self, *, startup: bool, brokers: int = 1) -> int | None:
        """How many attempts a run may start; None = unlimited."""
        if not startup:
            return None if self.max_attempts == _UNLIMITED else self.max_attempts
        if self.unit == "broker":
            if self.startup_max_attempts == _UNLIMITED:
                return None
            return max(1, self.startup_max_attempts) * brokers
        limit = self.startup_max_attempts
        if limit == _UNLIMITED:
            limit = self.max_attempts
        # The first attempt at startup happens before anything checks the limit.
        return None if limit == _UNLIMITED else max(1, limit)

    def wait_strategy(self, *, startup: bool) -> wait_base:
        """The tenacity wait strategy giving d(n) for ``attempt_number`` n (before jitter)."""
        # tenacity is imported when a run starts, not with the package (see _waits).
        from failover_client.engine._waits import (  # noqa: PLC0415
            wait_chain,
            wait_fixed,
            wait_shifted,
        )

        immediate = wait_fixed(0)
        if self.style == "classic":
            if not startup:
                # The startup run without its leading immediate attempt, based on I.
                return self._growth(self.initial_delay)
            seeded = self.exponential and self.delay != _CLASSIC_DEFAULT_DELAY
            base = self.delay if seeded else self.initial_delay
            return wait_chain(immediate, wait_shifted(self._growth(base), 1))
        if self.style == "qpid":
            growth = wait_shifted(self._growth(self.delay), 1)
            if startup:
                second = self.initial_delay if self.initial_delay > 0 else self.delay
                return wait_chain(immediate, self._capped(wait_fixed(second)), growth)
            return wait_chain(self._capped(wait_fixed(self.initial_delay)), growth)
        return wait_chain(immediate, wait_shifted(self._growth(self.delay), 1))

    def _growth(self, base: float) -> wait_base:
        """base, base*m, base*m**2 ... for attempt numbers 1, 2, 3 ... (base without backoff)."""
        from failover_client.engine._waits import wait_exponential, wait_fixed  # noqa: PLC0415

        if not self.exponential:
            return wait_fixed(base)
        return wait_exponential(multiplier=base, exp_base=self.multiplier, max=self.max_delay)

    def _capped(self, strategy: wait_base) -> wait_base:
        from failover_client.engine._waits import wait_capped  # noqa: PLC0415

        return wait_capped(strategy, self.max_delay) if self.exponential else strategy

    def stop_strategy(self, *, startup: bool, brokers: int = 1) -> stop_base:
        """The tenacity stop strategy, asked with ``attempt_number`` = attempts already made."""
        from failover_client.engine._waits import stop_after_attempt, stop_never  # noqa: PLC0415

        limit = self.attempt_limit(startup=startup, brokers=brokers)
        return stop_never if limit is None else stop_after_attempt(limit)

    def warns_at(self, attempts: int) -> bool:
        """Whether the failure of attempt number ``attempts`` deserves a warning."""
        if self.warn_after <= 0 or attempts <= 0:
            return False
        if self.style == "classic" and attempts == 1:
            return True
        return attempts % self.warn_after == 0


def infer_style(options: FailoverOptions) -> ReconnectStyle:
    """Whose reconnect rules ``options`` follow (see :meth:`from_options`)."""
    if options.dialect != "classic":
        return options.dialect
    if options.attempt_unit == "broker":
        return "artemis"
    for name in RETRY_FIELDS:
        spelling = options.source_of(name)
        if spelling is not None and spelling.startswith("failover."):
            return "qpid"
    return "classic"


class ScheduleRun:
    """One sequence of attempts: from a loss (or startup) until success or giving up.

    Not thread-safe: the one reconnect loop that owns the run calls it. Start a new run after
    every successful connection.
    """

    __slots__ = (
        "_attempt",
        "_draws",
        "_stop",
        "_wait",
        "attempts",
        "limit",
        "schedule",
        "startup",
        "unit",
    )

    def __init__(self, schedule: ReconnectSchedule, *, startup: bool, brokers: int = 1) -> None:
        """Prefer :meth:`ReconnectSchedule.start`."""
        self.schedule = schedule
        self.unit: AttemptUnit = schedule.unit
        self.startup = startup
        self.attempts = 0
        """Attempts started so far (each ``next_delay()`` that returned a number started one)."""
        self.limit = schedule.attempt_limit(startup=startup, brokers=brokers)
        """Attempts this run may start; None = unlimited."""
        from failover_client.engine._waits import attempt  # noqa: PLC0415 - see wait_strategy

        self._attempt = attempt
        self._wait = schedule.wait_strategy(startup=startup)
        self._stop = schedule.stop_strategy(startup=startup, brokers=brokers)
        # Jitter draws are kept per attempt so that delays() can look ahead without changing
        # what next_delay() will return.
        self._draws: list[float] = []

    @property
    def exhausted(self) -> bool:
        """True when no further attempt is allowed."""
        return bool(self._stop(self._attempt(self.attempts)))

    def _delay(self, attempt_number: int) -> float:
        delay = float(self._wait(self._attempt(attempt_number)))
        jitter = self.schedule.jitter
        if jitter == 0.0 or delay == 0.0:
            return delay
        while len(self._draws) < attempt_number:
            self._draws.append(self.schedule.rng.random())
        return delay * (1.0 - jitter * self._draws[attempt_number - 1])

    def next_delay(self, *, elsewhere: bool = False) -> float | None:
        """Seconds to wait before the next attempt, counting it as started; None = give up.

        The first call of a startup run returns 0.0 (the first attempt is immediate); the first
        call after a loss returns the style's first reconnect delay (0.0 except for Classic with
        ``initialReconnectDelay`` > 0 and Qpid with ``initialReconnectDelay`` > 0), or 0.0 when
        ``elsewhere`` says the attempt starts with another broker than the one just lost
        (see the module docstring). ``elsewhere`` changes nothing on later calls.
        """
        if self.exhausted:
            return None
        self.attempts += 1
        if elsewhere and self.attempts == 1 and not self.startup:
            return 0.0
        return self._delay(self.attempts)

    def should_warn(self) -> bool:
        """Whether to log a warning now that attempt ``attempts`` has failed.

        True after failed attempt 1 for Classic and after every multiple of
        ``warn_after_reconnect_attempts`` for every style; never when that setting is <= 0.
        """
        return self.schedule.warns_at(self.attempts)

    def delays(self, limit: int) -> list[float]:
        """The next ``limit`` delays (fewer if the run gives up first), without using them."""
        upcoming: list[float] = []
        for attempts in range(self.attempts, self.attempts + limit):
            if self._stop(self._attempt(attempts)):
                break
            upcoming.append(self._delay(attempts + 1))
        return upcoming

    def __repr__(self) -> str:
        limit = "unlimited" if self.limit is None else self.limit
        return (
            f"ScheduleRun(style={self.schedule.style!r}, unit={self.unit!r}, "
            f"startup={self.startup}, attempts={self.attempts}, limit={limit})"
        )
