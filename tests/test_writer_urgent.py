"""A frame whose caller waits for its answer is written on the caller's thread when it can be."""

from __future__ import annotations

import threading

from failover_client.net._writer import WRITE_SLICE, FrameWriter

WAIT = 5.0
"""Upper bound for waits on events that the code under test is bound to set."""


class Recorder:
    """A fake ``sendall`` recording what each thread wrote; ``gate`` holds the writer thread."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bytes]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()

    def __call__(self, data: bytes) -> None:
        name = threading.current_thread().name
        if name == "writer":
            self.entered.set()
            assert self.gate.wait(WAIT)
        self.calls.append((name, data))


def _writer(write: Recorder) -> FrameWriter:
    # The clock never moves: no frame ever comes after a quiet spell.
    writer = FrameWriter(
        write,
        on_written=lambda: None,
        on_failed=lambda exc: None,
        name="writer",
        inline_after=0.001,
        monotonic=lambda: 7.0,
    )
    writer.start()
    return writer


def _idle(writer: FrameWriter) -> None:
    assert writer.flush(WAIT)
    ready = threading.Event()
    for _ in range(int(WAIT / 0.001)):  # bounded: the writer parks right after its write
        if writer.waiting:
            return
        ready.wait(0.001)
    raise AssertionError("the writer thread never parked")


def test_urgent_frames_are_written_inline_however_short_the_quiet() -> None:
    write = Recorder()
    writer = _writer(write)
    _idle(writer)
    writer.put(b"a", urgent=True)
    writer.put(b"b", urgent=True)  # no time passed: only urgency lets it skip the thread
    _idle(writer)
    writer.put(b"c")  # not urgent, no quiet: through the thread
    _idle(writer)
    assert write.calls == [("MainThread", b"a"), ("MainThread", b"b"), ("writer", b"c")]
    writer.cancel()
    assert writer.join(WAIT)


def test_an_urgent_frame_queues_behind_a_write_in_progress_and_keeps_its_order() -> None:
    write = Recorder()
    writer = _writer(write)
    _idle(writer)
    write.gate.clear()
    writer.put(b"a", inline=False)  # the writer thread takes it and is held inside the write
    assert write.entered.wait(WAIT)
    writer.put(b"b", urgent=True)  # a write is in progress: queued, not written alongside it
    assert writer.buffered == 1
    write.gate.set()
    _idle(writer)
    assert write.calls == [("writer", b"a"), ("writer", b"b")]
    writer.cancel()
    assert writer.join(WAIT)


def test_an_urgent_frame_never_writes_inline_when_told_not_to() -> None:
    write = Recorder()
    writer = _writer(write)
    _idle(writer)
    writer.put(b"a", urgent=True, inline=False)
    _idle(writer)
    assert write.calls == [("writer", b"a")]
    writer.cancel()
    assert writer.join(WAIT)


def test_a_large_batch_is_written_in_slices_each_reported() -> None:
    # A close waiting for a busy broker tells progress from a hang by these reports.

    write = Recorder()
    reports: list[int] = []
    writer = FrameWriter(
        write,
        on_written=lambda: reports.append(len(write.calls)),
        on_failed=lambda exc: None,
        name="writer",
        inline_after=None,
        monotonic=lambda: 7.0,
    )
    writer.start()
    frames = [b"A" * 1000 + b"\0" for _ in range(3 * WRITE_SLICE // 1000)]
    for frame in frames:
        writer.put(frame)
    assert writer.flush(WAIT)
    written = b"".join(data for _, data in write.calls)
    assert written == b"".join(frames)
    assert all(len(data) <= WRITE_SLICE for _, data in write.calls)
    assert len(write.calls) >= 3
    assert reports[-1] == len(write.calls)  # every slice reported, the last after the batch
    assert len(reports) == len(write.calls)
    writer.cancel()
