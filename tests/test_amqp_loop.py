"""The adapter's proton Container and the mailbox through which other threads reach it."""

from __future__ import annotations

import os
import threading

from proton import Event, Handler
from proton.reactor import Container

from failover_client.amqp._loop import ContainerThread, PlainContainer, _Mailbox


def test_the_plain_container_sets_what_proton_sets_but_no_default_tls() -> None:
    ours, theirs = PlainContainer(container_id="c"), Container(container_id="c")
    assert set(vars(ours)) == set(vars(theirs)) | {"_io_selector"}
    assert ours.ssl is None
    assert theirs.ssl is not None  # proton's builds two OpenSSL contexts we never use
    for name in ("container_id", "allow_insecure_mechs", "allowed_mechs", "sasl_enabled"):
        assert getattr(ours, name) == getattr(theirs, name)
    assert type(ours.global_handler) is type(theirs.global_handler)


def _pending_bytes(mailbox: _Mailbox) -> bytes:
    os.set_blocking(mailbox.pipe[0], False)
    try:
        return os.read(mailbox.pipe[0], 64)
    except BlockingIOError:
        return b""
    finally:
        os.set_blocking(mailbox.pipe[0], True)


def test_one_wake_up_per_batch_and_every_call_run_in_order() -> None:
    mailbox = _Mailbox()
    ran: list[int] = []
    for n in range(5):
        assert mailbox.post(lambda n=n: ran.append(n))
    assert _pending_bytes(mailbox) == b"!"  # one byte for the five
    os.write(mailbox.pipe[1], b"!")  # put it back for the container's read
    mailbox.on_selectable_readable(None)
    assert ran == [0, 1, 2, 3, 4]
    assert _pending_bytes(mailbox) == b""
    assert mailbox.post(lambda: ran.append(5))
    assert _pending_bytes(mailbox) == b"!"  # empty again: the next call wakes the container
    mailbox.release()
    mailbox.release()


def test_a_released_mailbox_refuses_calls_and_drops_those_not_run() -> None:
    mailbox = _Mailbox()
    ran: list[str] = []
    assert mailbox.post(lambda: ran.append("late"))
    mailbox.release()
    assert not mailbox.post(lambda: ran.append("refused"))
    assert ran == []
    assert [fd for fd in mailbox.pipe if _is_closed(fd)] == list(mailbox.pipe)


def _is_closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def test_calls_from_many_threads_all_run_on_the_container_thread_in_each_ones_order() -> None:
    crashes: list[BaseException] = []
    loop = ContainerThread(Handler(), name="test-mailbox", on_crash=crashes.append)
    seen: dict[str, list[int]] = {}
    on_thread: list[bool] = []

    def call(name: str, n: int) -> None:
        on_thread.append(loop.on_thread())
        seen.setdefault(name, []).append(n)

    def producer(name: str) -> None:
        for n in range(2000):
            assert loop.post(lambda n=n: call(name, n))

    loop.start()
    threads = [threading.Thread(target=producer, args=(f"t{i}",)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert loop.post(loop.stop)
    assert loop.join(30.0)
    assert crashes == []
    assert all(on_thread)
    assert seen == {f"t{i}": list(range(2000)) for i in range(3)}
    assert not loop.post(lambda: None)  # the container ended: the mailbox is closed
    assert "ended" in repr(loop)


def test_a_batch_of_calls_is_followed_by_one_after_batch_call() -> None:
    order: list[str] = []
    mailbox = _Mailbox(after_batch=lambda: order.append("after"))
    for n in range(3):
        assert mailbox.post(lambda n=n: order.append(f"call {n}"))
    mailbox.on_selectable_readable(None)
    assert order == ["call 0", "call 1", "call 2", "after"]
    mailbox.release()


def test_a_selectable_update_reaches_the_selector_without_an_event() -> None:
    container = PlainContainer(container_id="c")
    mailbox = _Mailbox()
    selectable = container.selectable(mailbox)  # type: ignore[arg-type]
    selectable.reading = True
    selectable.update()
    assert selectable in container._io_selector._reading
    # Only the selectable's init is queued: the update went to the selector directly.
    assert container._collector.peek().type is Event.SELECTABLE_INIT
    container._collector.pop()
    assert container._collector.peek() is None
    mailbox.release()
