"""The send path's own encoder writes the bytes proton writes for the same message."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from proton import Message

from failover_client.amqp._convert import MESSAGE_ID_HEADER, encode_message


def _proton(body: bytes, headers: Mapping[str, str]) -> bytes:
    """What proton writes for the message ``_convert`` describes."""
    properties = {k: v for k, v in headers.items() if k != "persistent"}
    durable = headers.get("persistent", "true").strip().lower() != "false"
    message = Message(body=body, durable=durable, inferred=True, properties=properties or None)
    if MESSAGE_ID_HEADER in headers:
        message.id = headers[MESSAGE_ID_HEADER]
    return message.encode()


CASES: list[tuple[bytes, dict[str, str]]] = [
    (b"", {}),
    (b"x" * 128, {"persistent": "false"}),
    (b"x" * 128, {"persistent": " FALSE "}),
    (b"x" * 128, {"persistent": "true", MESSAGE_ID_HEADER: "m-1"}),
    (b"\x00\xff" * 200, {MESSAGE_ID_HEADER: "m-2", "color": "blue"}),
    (b"y" * 255, {MESSAGE_ID_HEADER: "i" * 253}),
    (b"y" * 256, {MESSAGE_ID_HEADER: "i" * 254}),
    (b"z", {MESSAGE_ID_HEADER: "i" * 300, "k": "v" * 70000}),
    (b"z", {"h\u00e9": "v\u00e4lue \u2603", "empty": ""}),
    (b"z", {f"key-{n}": f"value-{n}" for n in range(100)}),
]


@pytest.mark.parametrize(("body", "headers"), CASES)
def test_the_bytes_are_the_ones_proton_writes(body: bytes, headers: dict[str, str]) -> None:
    assert encode_message(body, headers) == _proton(body, headers)


@pytest.mark.parametrize(("body", "headers"), CASES)
def test_proton_decodes_what_it_means(body: bytes, headers: dict[str, str]) -> None:
    decoded = Message()
    decoded.decode(encode_message(body, headers))
    assert bytes(decoded.body or b"") == body
    assert decoded.durable is (headers.get("persistent", "").strip().lower() != "false")
    assert decoded.id == headers.get(MESSAGE_ID_HEADER)
    expected = {k: v for k, v in headers.items() if k != "persistent"}
    assert (decoded.properties or {}) == expected
