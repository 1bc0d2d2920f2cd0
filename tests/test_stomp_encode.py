"""Our frame encoder writes exactly the bytes stomp.py's own send path writes."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from stomp.protocol import Protocol11, Protocol12
from stomp.utils import convert_frame, pack

from failover_client.stomp._encode import encode_frame, escape_headers


class _Capture:
    """The part of a stomp.py transport that a protocol object uses to send a frame."""

    def __init__(self) -> None:
        self.written: list[bytes] = []

    def set_listener(self, name: str, listener: Any) -> None:
        pass  # the protocol registers itself; nothing here reads frames

    def transmit(self, frame: Any) -> None:
        self.written.append(pack(convert_frame(frame)))


def stomp_py_bytes(version: str, command: str, headers: dict[str, str], body: bytes) -> bytes:
    """What stomp.py's ``send_frame`` hands its transport for this frame."""
    capture = _Capture()
    protocol = Protocol12(capture) if version == "1.2" else Protocol11(capture)
    protocol.send_frame(command, dict(headers), body)
    [data] = capture.written
    return data


def ours(version: str, command: str, headers: dict[str, str], body: bytes) -> bytes:
    return encode_frame(command, escape_headers(headers, version), body)


# Names as the adapter allows them (it refuses ':', line breaks and NUL in names); values of
# any text but NUL, including the characters that need escaping and lone surrogates.
_names = st.text(
    alphabet=st.characters(blacklist_characters=":\n\r\0", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=12,
)
_values = st.text(
    alphabet=st.one_of(
        st.sampled_from(["\\", "\n", "\r", ":", "a", "é", "\ud800"]),
        st.characters(blacklist_characters="\0"),
    ),
    max_size=20,
)


@given(
    version=st.sampled_from(["1.1", "1.2"]),
    command=st.sampled_from(["SEND", "SUBSCRIBE", "ACK", "NACK", "BEGIN", "COMMIT"]),
    headers=st.dictionaries(_names, _values, max_size=6),
    body=st.binary(max_size=40),
    length=st.sampled_from([None, "0", "999", "not a number"]),
)
def test_same_bytes_as_stomp_py(
    version: str, command: str, headers: dict[str, str], body: bytes, length: str | None
) -> None:
    if length is not None:
        headers = {**headers, "content-length": length}
    assert ours(version, command, headers, body) == stomp_py_bytes(version, command, headers, body)


def test_a_send_frame_byte_for_byte() -> None:
    headers = {
        "destination": "/queue/a:b",
        "persistent": "false",
        "content-length": "3",
        "note": "line\nbreak\r\\",
    }
    assert ours("1.2", "SEND", headers, b"x\0y") == (
        b"SEND\ncontent-length:3\ndestination:/queue/a\\cb\n"
        b"note:line\\nbreak\\r\\\\\npersistent:false\n\nx\x00y\x00"
    )


def test_stomp_1_1_leaves_carriage_return_alone() -> None:
    # "\r" is no escape in STOMP 1.1: a 1.1 broker would refuse the frame for it.
    assert escape_headers({"k": "a\rb:c"}, "1.1") == {"k": "a\rb\\cc"}
    assert escape_headers({"k": "a\rb:c"}, "1.2") == {"k": "a\\rb\\cc"}


def test_headers_passed_in_are_not_changed() -> None:
    headers = {"destination": "/queue/a", "content-length": "1"}
    escaped = escape_headers(headers, "1.2")
    encode_frame("SEND", escaped, b"abc")
    assert headers == {"destination": "/queue/a", "content-length": "1"}
    assert escaped == headers


def test_an_empty_body_has_no_body_bytes() -> None:
    assert encode_frame("ACK", {"id": "7"}, b"") == b"ACK\nid:7\n\n\x00"
