"""The adapter's frame parser gives exactly stomp.py's ``Frame`` for any frame."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from stomp.utils import parse_frame as stomp_parse_frame

from failover_client.stomp._decode import parse_frame

# Pieces that exercise every rule: separators, escapes (defined and not), CR, blank lines,
# non-ASCII and invalid UTF-8.
PIECES = [
    b"a", b"id", b":", b"\\", b"\\n", b"\\c", b"\\\\", b"\\r", b"\\t", b"\r", b"\n", b"\r\n",
    b" ", "é".encode(), b"\xff", b"MESSAGE", b"\0",
]  # fmt: skip


@given(st.lists(st.sampled_from(PIECES), max_size=40).map(b"".join))
def test_the_same_frame_as_stomp_py(frame: bytes) -> None:
    ours, theirs = parse_frame(frame), stomp_parse_frame(frame)
    if theirs is None:
        assert ours is None
    else:
        assert ours is not None
        assert (ours.cmd, ours.headers, ours.body) == (theirs.cmd, theirs.headers, theirs.body)


def test_a_message_frame() -> None:
    frame = b"MESSAGE\r\ndestination:/queue/a\nid:1\nid:2\nx\\cy:a\\nb\\q\nnocolon\n:empty\n\nbody"
    parsed = parse_frame(frame)
    assert parsed is not None
    assert parsed.cmd == "MESSAGE"
    # The first of a repeated header; escapes undone, an undefined one left as it is.
    assert parsed.headers == {"destination": "/queue/a", "id": "1", "x:y": "a\nb\\q"}
    assert parsed.body == b"body"


def test_a_blank_frame_is_none() -> None:
    assert parse_frame(b"\n\n") is None
