"""The thread that runs one session's proton Container, and how other threads reach it.

proton's objects are not thread-safe: everything that touches the connection runs on the
container thread. Other threads hand it work with :meth:`ContainerThread.post`, which puts the
call in a :class:`_Mailbox`: a queue and a pipe the container's selector watches, so the
container wakes at once and no thread polls or sleeps.

The mailbox is the send path's hand-over, so it is built for a stream of calls rather than
one: a byte goes down the pipe only when the queue turns from empty to non-empty, and the
container runs every queued call at each wake-up, in order. proton's own ``EventInjector``
writes a byte to its pipe and has the container dispatch an event through its collector for
every call: at tens of thousands of sends a second, a system call, often a selector wake-up,
and an event's wrapping and dispatch per message.

After each batch the mailbox runs ``after_batch`` (the session writes what the calls produced
to the socket at once, rather than in the next turn of the loop when the selector reports it
writable: for a blocking send, one select, one turn and its events less per message).

Once the container has ended, the mailbox closes its pipe and refuses further posts under its
lock: a write to a closed pipe descriptor could otherwise land in whatever file reused its
number.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from proton import Event, Handler
from proton._reactor import GlobalOverrides, Reactor
from proton.reactor import Container

from failover_client._lazy import LazyEvent

__all__ = ["ContainerThread", "PlainContainer"]


class _Mailbox:
    """Calls for the container thread; the handler of a selectable on its pipe's read end."""

    _transport = None
    """proton's IO handler looks for a transport on every readable selectable's delegate."""

    def __init__(self, after_batch: Callable[[], None] | None = None) -> None:
        self._lock = threading.Lock()
        self._after_batch = after_batch
        self._calls: deque[Callable[[], None]] = deque()
        self._woken = False
        """A wake-up byte is in the pipe and the container has not taken the queue yet."""
        self._released = False
        self.pipe = os.pipe()

    def fileno(self) -> int:
        return self.pipe[0]

    def post(self, call: Callable[[], None]) -> bool:
        """Queue ``call`` for the container thread; False once the container ended."""
        with self._lock:
            if self._released:
                return False
            self._calls.append(call)
            if not self._woken:
                self._woken = True
                # Under the lock: release() closes the descriptor under it too.
                os.write(self.pipe[1], b"!")
            return True

    def on_selectable_init(self, event: Any) -> None:
        selectable = event.context
        selectable.reading = True
        selectable.update()

    def on_selectable_readable(self, event: Any) -> None:
        # The byte is read before the queue is taken: a post after the take writes a new one
        # (so the selector fires again), a post before it is in the batch taken here.
        os.read(self.pipe[0], 64)
        with self._lock:
            calls, self._calls = self._calls, deque()
            self._woken = False
        for call in calls:
            call()
        if self._after_batch is not None:
            self._after_batch()

    def release(self) -> None:
        """Refuse further posts, drop the calls not run, close the pipe (container ended)."""
        with self._lock:
            if self._released:
                return
            self._released = True
            self._calls.clear()
            for fd in self.pipe:
                os.close(fd)


class PlainContainer(Container):
    """proton's Container without the default TLS configuration it builds for itself.

    ``Container()`` sets up a client and a server ``SSLDomain`` (two OpenSSL contexts) every
    time: about 40 ms here, spent on every failover's critical path since each session has a
    container of its own. This adapter hands proton its own domain for ``amqps`` members and
    never uses the default one, so everything else ``Container.__init__`` sets is set the same
    way and ``ssl`` stays None (``tests/test_amqp_loop.py`` compares the two, so a proton
    release that sets more fails there first; the ``amqp`` extra pins proton to 0.40).

    A selectable's update (its reading, writing or deadline changed) goes to the selector at
    once instead of as an event through the collector: proton's IO handler does nothing else
    with that event, which the selector only reads when the loop is about to wait, after
    every queued event. Four of the fourteen events a blocking send caused were these.
    """

    def push_event(self, obj: Any, etype: Any) -> None:
        if etype is Event.SELECTABLE_UPDATED:
            self._io_selector.update(obj)
            return
        super().push_event(obj, etype)

    def __init__(self, *handlers: Any, **kwargs: Any) -> None:
        Reactor.__init__(self, *handlers, **kwargs)
        self.ssl = None  # type: ignore[assignment]  # proton's own sets None without TLS too
        self.global_handler = GlobalOverrides(kwargs.get("global_handler", self.global_handler))
        self.trigger = None
        self.container_id = kwargs.get("container_id", str(uuid.uuid4()))
        self.allow_insecure_mechs = True
        self.allowed_mechs = None
        self.sasl_enabled = True
        self.user = None
        self.password = None
        # proton's IOHandler, under the GlobalOverrides built above, owns the selector.
        self._io_selector = self.global_handler.base._selector


class ContainerThread:
    """A proton Container with its own thread, started by :meth:`start`.

    ``on_crash`` runs on the thread if the container raises (a bug in a handler, or proton's
    own socket code failing, e.g. an unroutable address).
    """

    def __init__(
        self,
        handler: Handler,
        *,
        name: str,
        on_crash: Callable[[BaseException], None],
        container_id: str | None = None,
        after_batch: Callable[[], None] | None = None,
    ) -> None:
        kwargs: dict[str, Any] = {}
        if container_id is not None:
            kwargs["container_id"] = container_id
        self.container = PlainContainer(handler, **kwargs)
        self._mailbox = _Mailbox(after_batch)
        # proton's annotation names its own two kinds; it takes any object with a fileno and
        # the selectable callbacks, as EventInjector is one.
        self.container.selectable(self._mailbox)  # type: ignore[arg-type]
        self._on_crash = on_crash
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.ended = LazyEvent()

    def start(self) -> None:
        self._thread.start()

    @property
    def started(self) -> bool:
        return self._thread.ident is not None

    def post(self, call: Callable[[], None]) -> bool:
        """Run ``call`` on the container thread soon; False once the container ended."""
        return self._mailbox.post(call)

    def on_thread(self) -> bool:
        """Whether the caller is the container thread itself."""
        return threading.current_thread() is self._thread

    def stop(self) -> None:
        """End the container once the events already queued are handled (container thread)."""
        self.container.stop()

    def join(self, timeout: float) -> bool:
        """Wait for the thread to end (never the caller's own); True if it did."""
        if not self.started:
            self._mailbox.release()
            return True
        if self.on_thread():
            return False
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:
        try:
            self.container.run()
        except Exception as exc:  # noqa: BLE001 - reported as the loss of the session
            self._on_crash(exc)
        finally:
            self._mailbox.release()
            self.ended.set()

    def __repr__(self) -> str:
        state = "ended" if self.ended.is_set() else ("running" if self.started else "new")
        return f"ContainerThread({self._thread.name!r}, {state})"
