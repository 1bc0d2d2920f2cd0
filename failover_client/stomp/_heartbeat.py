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

Time comes from the injected clock; the watchdog thread waits on an event with a timeout.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from failover_client._clock import Clock

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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class Tick:
    """What the watchdog should do now."""

    send_beat: bool = False
    silence: float | None = None
    """Set when the broker is lost: how long it has been silent."""
    wait: float | None = None
    """Seconds until the next check; None when there is nothing (more) to watch."""


class HeartbeatState:
    """Last read / last write times and the decisions drawn from them. Thread-safe.

    While the receive thread runs the application's message callback it cannot read, so
    bytes the broker sent meanwhile sit unread: silence is not judged during a dispatch, and
    the clock restarts when the dispatch ends.
    """

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

    def dispatch_started(self) -> None:
        with self._lock:
            self._dispatching += 1

    def dispatch_finished(self, now: float) -> None:
        with self._lock:
            self._dispatching = max(0, self._dispatching - 1)
            self._last_received = max(self._last_received, now)

    def poll(self, now: float) -> Tick:
        """Decide at time ``now``: send a beat?, is the broker lost?, when to look again."""
        with self._lock:
            plan = self.plan
            waits: list[float] = []
            if plan.silence_limit:
                silence = now - self._last_received
                if self._dispatching:
                    waits.append(plan.silence_limit)
                elif silence >= plan.silence_limit:
                    return Tick(silence=silence)
                else:
                    waits.append(plan.silence_limit - silence)
            send_beat = False
            if plan.beat_every:
                idle = now - self._last_sent
                if idle >= plan.beat_every:
                    send_beat = True
                    self._last_sent = now
                    idle = 0.0
                waits.append(plan.beat_every - idle)
            return Tick(send_beat=send_beat, wait=min(waits) if waits else None)


class HeartbeatMonitor:
    """One watchdog thread per session: sends beats and reports a silent broker once."""

    def __init__(
        self,
        state: HeartbeatState | None,
        clock: Clock,
        *,
        send_beat: Callable[[], None],
        on_silence: Callable[[float], None],
        name: str = "stomp-heartbeat",
    ) -> None:
        """``state`` may come later, through :meth:`arm`: the session starts the thread while
        the broker works on CONNECT, before CONNECTED says what to watch."""
        self.state = state
        self._clock = clock
        self._send_beat = send_beat
        self._on_silence = on_silence
        self._stop = threading.Event()
        self._armed = threading.Event()
        if state is not None:
            self._armed.set()
        self._thread: threading.Thread | None = None
        self._name = name

    def start(self) -> None:
        """Start the thread (nothing to do when an armed plan watches neither direction).

        An unarmed thread waits for :meth:`arm` or :meth:`stop`.
        """
        if self.state is not None and not _watches(self.state.plan):
            return
        self._thread = threading.Thread(target=self._main, name=self._name, daemon=True)
        self._thread.start()

    def arm(self, state: HeartbeatState) -> None:
        """Give the (started) thread what to watch; it ends at once if that is nothing."""
        self.state = state
        self._armed.set()

    def stop(self, join_timeout: float | None = None) -> None:
        """Stop the thread; join it unless called from the thread itself."""
        self._stop.set()
        self._armed.set()
        thread = self._thread
        if (
            thread is not None
            and thread is not threading.current_thread()
            and join_timeout is not None
        ):
            thread.join(join_timeout)

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def _main(self) -> None:
        self._armed.wait()  # arm() or stop() sets it; the thread is a daemon either way
        if self.state is not None and _watches(self.state.plan):
            self.run()

    def run(self) -> None:
        """The watchdog loop (the thread's work once armed; tests call it with a fake clock)."""
        state = self.state
        if state is None:
            return
        while not self._stop.is_set():
            tick = state.poll(self._clock.monotonic())
            if tick.silence is not None:
                self._stop.set()
                self._on_silence(tick.silence)
                return
            if tick.send_beat:
                self._send_beat()
            if tick.wait is None or self._clock.wait(self._stop, tick.wait):
                return


def _watches(plan: HeartbeatPlan) -> bool:
    return bool(plan.beat_every or plan.silence_limit)
