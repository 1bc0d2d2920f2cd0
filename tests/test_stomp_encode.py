"""Our frame encoder writes exactly the bytes stomp.py's own send path writes."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from stomp.protocol import Protocol11, Protocol12
from stomp.utils import convert_frame, pack

from failover_client.stomp._encode import encode_frame, escape_headers, header_block
from failover_client.stomp._frames import send_block, send_headers


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


def _parsed(block: bytes) -> dict[str, str]:
    """The header block's lines as name -> value (first wins, as STOMP 1.2 says)."""
    assert block.endswith(b"\n\n")
    parsed: dict[str, str] = {}
    for line in block[:-2].decode("utf-8").split("\n"):
        name, _, value = line.partition(":")
        parsed.setdefault(name, value)
    return parsed


@given(
    version=st.sampled_from(["1.1", "1.2"]),
    headers=st.dictionaries(
        st.one_of(_names, st.sampled_from(["persistent", "transaction", "receipt", "priority"])),
        _values,
        max_size=5,
    ),
    body_length=st.sampled_from([0, 7, 128]),
    destination=st.sampled_from(["/queue/q", "/queue/a:b", "/topic/t\\x"]),
)
def test_a_group_committed_sends_header_block_says_what_send_headers_says(
    version: str, headers: dict[str, str], body_length: int, destination: str
) -> None:
    # The fast path (names seen before, plain values) and the general one give the same
    # headers: those of send_headers without receipt and transaction, escaped like stomp.py.
    for _ in range(2):  # the second time every name is known: the fast path when it can
        block = send_block(destination, headers, body_length=body_length, version=version)
        expected = send_headers(destination, headers, None, body_length=body_length)
        expected.pop("transaction", None)
        escaped = escape_headers(expected, version)
        # Text is UTF-8 with unencodable characters (lone surrogates) replaced, as stomp.py does.
        assert _parsed(block) == {
            name.encode("utf-8", "replace").decode(): value.encode("utf-8", "replace").decode()
            for name, value in escaped.items()
        }


def test_a_header_block_has_every_header_once_and_ends_with_the_blank_line() -> None:
    block = send_block("/queue/q", {"k": "v"}, body_length=3, version="1.2")
    block = send_block("/queue/q", {"k": "v"}, body_length=3, version="1.2")
    assert sorted(block.split(b"\n")) == sorted(
        [b"persistent:true", b"k:v", b"content-length:3", b"destination:/queue/q", b"", b""]
    )
    assert header_block({}, "1.2") == b"\n"
    assert header_block({"a": "x:y"}, "1.1") == b"a:x\\cy\n\n"


def test_sends_to_one_destination_carry_each_its_own_body_length() -> None:
    # The destination's line is encoded once and reused; the length is each send's own.
    for length in (3, 7, 0, 3):
        block = send_block("/queue/lengths", {"k": "v"}, body_length=length, version="1.2")
        lines = block.split(b"\n")
        assert b"destination:/queue/lengths" in lines
        if length:
            assert b"content-length:%d" % length in lines
        else:
            assert not any(line.startswith(b"content-length") for line in lines)
        assert block.endswith(b"\n\n")
