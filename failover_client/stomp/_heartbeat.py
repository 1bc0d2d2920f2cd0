"""STOMP heart-beats: negotiation, and a watchdog that notices a silent (hung) broker.

stomp.py's own heart-beat listener is not used. It declares a broker dead after 1.5 negotiated
intervals of silence, but ActiveMQ Classic only writes a heart-beat when nothing else was
written during a whole check period, so after a RECEIPT it can legitimately stay silent for
almost two intervals (measured: 1.98-2.0 s with ``heart-beat:1000,1000``); a 1.5 grace then
drops healthy connections. It also reads the real clock and polls with sleeps.

Instead the client asks the broker for beats at *half* the receive interval it wants to
check, so even a broker that is silent for two of its own intervals is heard from at least
once per wanted interval, and declares the broker lost after ``grace`` (1.5) wanted intervals
of silence. A SIGSTOPped broker is therefore noticed between 1 and 1.5 intervals after the last
byte it sent. Outgoing beats go out when nothing was written for half the negotiated send
interval, so a broker that checks us with its own grace never sees a gap.

Why half, and not the configured interval on the wire as stomp.py asks for
(``benchmarks/probe_broker_beats.py`` measures both brokers): asked for beats every T, ActiveMQ
Classic sends one every T on an idle connection, but after any other frame (a RECEIPT, a
MESSAGE) stays silent for up to 1.98 T: only a watchdog waiting more than two intervals could
tell it from a hung broker, and the bound of ``grace`` (1.5) wanted intervals would not hold.
RabbitMQ beats at half of what it is asked for (silent for about T at most after a frame), so
with it the wire carries four beats per wanted interval; the client cannot tell the two apart
before CONNECTED, and the header is sent before it. Sending: ActiveMQ closed a connection whose
beats came every 1.4 T (1.2 T passed), so beats at the negotiated T would leave a timer thread
that is late by a fifth of T no room; half leaves half.

A beat may also go out up to a tenth of its interval early (``BEAT_EARLY``), so that the shared
timer wakes once for the beats of many connections that fall due close together; a silence
check never runs early.

Time comes from the injected clock; the watchdog's deadlines run on the process's shared timer
thread (:mod:`failover_client._timers`), not on a thread per connection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from failover_client._clock import Clock
from failover_client._timers import TimerEntry, Timers, timers_for

__all__ = [
    "HeartbeatMonitor",
    "HeartbeatPlan",
    "HeartbeatState",
    "Tick",
    "negotiate",
    "parse_heartbeat_header",
    "request_header",
]

DEFAULT_GRACE = 1.5

BEAT_EARLY = 0.1
"""The fraction of the beat interval by which a beat may go out early, to share a wake-up of the
shared timer with other connections' beats: a beat every 0.45-0.5 negotiated intervals is still
well inside what a broker checks."""


def request_header(heartbeat: tuple[int, int]) -> str:
    """The ``heart-beat`` CONNECT header for a wanted (send, receive) pair in milliseconds.

    The receive half is asked for at half the wanted interval (see the module docstring).
    """
    send_ms, recv_ms = heartbeat
    asked = max(1, recv_ms // 2) if recv_ms else 0
    return f"{send_ms},{asked}"


def parse_heartbeat_header(value: str | None) -> tuple[int, int]:
    """The broker's ``heart-beat`` header as (sx, sy); a missing header means no beats.

    Raises ValueError for anything that is not two non-negative integers.
    """
    if value is None or not value.strip():
        return (0, 0)
    parts = [p.strip() for p in value.split(",")]
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"malformed heart-beat header {value!r}")
    return (int(parts[0]), int(parts[1]))


@dataclass(frozen=True, slots=True)
class HeartbeatPlan:
    """What was negotiated, in seconds; 0 switches that direction off."""

    beat_every: float
    """Send a heart-beat when nothing was written for this long."""
    silence_limit: float
    """Declare the broker lost after this long without a byte from it."""
    broker_interval: float = 0.0
    """How often the broker promised to send (the negotiated server-to-client interval)."""

    def __post_init__(self) -> None:
        if self.beat_every < 0 or self.silence_limit < 0 or self.broker_interval < 0:
            raise ValueError("heart-beat intervals must be >= 0")


def negotiate(
    wanted: tuple[int, int], server_header: str | None, grace: float = DEFAULT_GRACE
) -> HeartbeatPlan:
    """Combine the wanted (send, receive) milliseconds with the broker's CONNECTED header.

    Follows STOMP 1.1+: each direction is off when either side says 0, otherwise the larger of
    the two values. Raises ValueError for a malformed header.
    """
    send_ms, recv_ms = wanted
    asked_ms = int(request_header(wanted).split(",")[1])
    server_send, server_recv = parse_heartbeat_header(server_header)
    out_ms = max(send_ms, server_recv) if send_ms and server_recv else 0
    in_ms = max(asked_ms, server_send) if asked_ms and server_send else 0
    # A broker may stay silent for up to two of its own intervals (see the module docstring):
    # never declare it dead before that, even when it insisted on a slower rate than asked.
    silence_ms = max(grace * recv_ms, 2.0 * in_ms) if in_ms else 0.0
    return HeartbeatPlan(
        beat_every=out_ms / 2000.0,
        silence_limit=silence_ms / 1000.0,
        broker_interval=in_ms / 1000.0,
    )


@dataclass(frozen=True, slots=True)
class Tick:
    """What the watchdog should do now."""

    send_beat: bool = False
    silence: float | None = None
    """Set when the broker is lost: how long it has been silent."""
    wait: float | None = None
    """Seconds until the next check; None when there is nothing (more) to watch."""
    early: float = 0.0
    """How much sooner than ``wait`` the next check may come: a beat's slack when the next
    deadline is a beat's, 0 when it is the silence limit's."""


class HeartbeatState:
    """Last read / last write times and the decisions drawn from them. Thread-safe.

    While the receive thread runs the application's message callback it cannot read, so
    bytes the broker sent meanwhile sit unread: silence is not judged during a dispatch, and
    the clock restarts when the dispatch ends.
    """

    __slots__ = ("_dispatching", "_last_received", "_last_sent", "_lock", "plan")

    def __init__(self, plan: HeartbeatPlan, now: float) -> None:
        self.plan = plan
        self._last_received = now
        self._last_sent = now
        self._dispatching = 0
        self._lock = threading.Lock()

    def received(self, now: float) -> None:
        with self._lock:
            self._last_received = max(self._last_received, now)

    @property
    def last_received(self) -> float:
        """When the broker was last heard from (any byte, or the end of a dispatch)."""
        with self._lock:
            return self._last_received

    def sent(self, now: float) -> None:
        with self._lock:
            self._last_sent = max(self._last_sent, now)

    @property
    def last_sent(self) -> float:
        """When bytes last reached the socket (a whole write, or a slice of a large one)."""
        with self._lock:
            return self._last_sent

    def dispatch_started(self) -> None:
        with self._lock:
            self._dispatching += 1

    def dispatch_finished(self, now: float) -> None:
        with self._lock:
            self._dispatching = max(0, self._dispatching - 1)
            self._last_received = max(self._last_received, now)

    def poll(self, now: float) -> Tick:
        """Decide at time ``now``: send a beat?, is the broker lost?, when to look again.

        A beat is due once nothing was written for ``beat_every`` less its slack
        (``BEAT_EARLY``); the broker is lost only once the whole silence limit has passed.
        """
        with self._lock:
            plan = self.plan
            wait: float | None = None
            early = 0.0
            if plan.silence_limit:
                silence = now - self._last_received
                if self._dispatching:
                    wait = plan.silence_limit
                elif silence >= plan.silence_limit:
                    return Tick(silence=silence)
                else:
                    wait = plan.silence_limit - silence
            send_beat = False
            every = plan.beat_every
            if every:
                slack = every * BEAT_EARLY
                idle = now - self._last_sent
                if idle >= every - slack:
                    send_beat = True
                    self._last_sent = now
                    idle = 0.0
                if wait is None or every - idle <= wait:
                    wait, early = every - idle, slack
            return Tick(send_beat=send_beat, wait=wait, early=early)


class HeartbeatMonitor:
    """A session's watchdog: sends beats and reports a silent broker once.

    It has no thread of its own: its deadlines run on the process's shared timer thread for
    its clock (:mod:`failover_client._timers`), which serves every connection. A beat is
    written without blocking (``send_beat`` must not block: it runs on that shared thread);
    ``on_silence`` may block (it fails confirmations and tells the engine), so it runs on a
    short-lived thread of its own, started only when a broker is found silent.
    """

    __slots__ = (
        "_clock",
        "_entry",
        "_lock",
        "_name",
        "_on_silence",
        "_reporter",
        "_send_beat",
        "_stopped",
        "_timers",
        "state",
    )

    def __init__(
        self,
        state: HeartbeatState | None,
        clock: Clock,
        *,
        send_beat: Callable[[], None],
        on_silence: Callable[[float], None],
        name: str = "stomp-heartbeat",
        timers: Timers | None = None,
    ) -> None:
        """``state`` may come later, through :meth:`arm`: the session creates the monitor
        while the broker works on CONNECT, before CONNECTED says what to watch."""
        self.state = state
        self._clock = clock
        self._send_beat = send_beat
        self._on_silence = on_silence
        self._name = name
        self._timers = timers if timers is not None else timers_for(clock)
        self._lock = threading.Lock()
        self._stopped = False
        self._entry: TimerEntry | None = None
        self._reporter: threading.Thread | None = None

    def start(self) -> None:
        """Watch the state given at construction, if any (otherwise :meth:`arm` starts)."""
        if self.state is not None:
            self.arm(self.state)

    def arm(self, state: HeartbeatState) -> None:
        """Watch ``state`` from now on (nothing is scheduled when it watches nothing)."""
        with self._lock:
            self.state = state
            if self._stopped or self._entry is not None or not _watches(state.plan):
                return
            self._entry = self._timers.schedule(self._clock.monotonic(), self._on_timer)

    def stop(self, join_timeout: float | None = None) -> None:
        """Stop watching; with ``join_timeout``, also wait that long for a loss report under
        way on its own thread (unless called from that thread)."""
        with self._lock:
            self._stopped = True
            entry, self._entry = self._entry, None
            reporter = self._reporter
        if entry is not None:
            entry.cancel()
        if (
            reporter is not None
            and reporter is not threading.current_thread()
            and join_timeout is not None
        ):
            reporter.join(join_timeout)

    @property
    def thread(self) -> threading.Thread | None:
        """The thread reporting a silent broker, once one was started."""
        return self._reporter

    def _step(self, now: float) -> Tick:
        """One look at time ``now``: the beat is sent here; the caller acts on the silence."""
        state = self.state
        if state is None or self._stopped:
            return Tick()
        tick = state.poll(now)
        if tick.silence is not None:
            self._stopped = True
        elif tick.send_beat:
            self._send_beat()
        return tick

    def _on_timer(self, now: float) -> tuple[float, float] | None:
        """The shared timer's callback: when to look again (absolute) and how much earlier it
        may (to share a wake-up), None to end."""
        tick = self._step(now)
        if tick.silence is not None:
            reporter = threading.Thread(
                target=self._on_silence,
                args=(tick.silence,),
                name=f"{self._name} lost",
                daemon=True,
            )
            with self._lock:
                self._reporter = reporter
            reporter.start()
            return None
        return None if tick.wait is None else (now + tick.wait, tick.early)

    def run(self) -> None:
        """The watchdog's timeline on the calling thread, waiting on the clock between looks.

        The same decisions as on the shared timer, with the loss reported on this thread:
        tests drive it with a virtual clock.
        """
        stop = threading.Event()
        while not self._stopped:
            tick = self._step(self._clock.monotonic())
            if tick.silence is not None:
                self._on_silence(tick.silence)
                return
            if tick.wait is None or self._clock.wait(stop, tick.wait):
                return


def _watches(plan: HeartbeatPlan) -> bool:
    return bool(plan.beat_every or plan.silence_limit)
