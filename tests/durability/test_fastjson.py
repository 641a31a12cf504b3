"""``durability.ground.fastjson`` parses and writes exactly what ``json`` does: the
hook uses it to stay clear of ``json``'s import of ``re``."""

from __future__ import annotations

import json
import math

import pytest

from durability.ground import fastjson

DOCUMENTS = [
    b'{"session_id": "abc", "tool_input": {"file_path": "/x/y.py"}}',
    b'  {"a": [1, -2.5e3, "x\\u00e9\\n", null, true, false, {}]}  \n',
    '{"name": "caf\u00e9 \u2603 \U0001f600"}'.encode(),
    b'\xef\xbb\xbf{"bom": 1}',
    b'"just a string"',
    b"[]",
    b"12345678901234567890",
]
INVALID = [b"", b"{", b"{bad", b'{"a":1}x', b"[1,2", b"\xff\xfe{", b'{"a": 1,}', b"1 2"]


@pytest.mark.parametrize("data", DOCUMENTS)
def test_loads_equals_json(data: bytes) -> None:
    assert fastjson.loads(data) == json.loads(data)
    assert fastjson.loads(data.decode("utf-8-sig")) == json.loads(data.decode("utf-8-sig"))


@pytest.mark.parametrize("data", INVALID)
def test_invalid_input_raises_what_json_raises(data: bytes) -> None:
    with pytest.raises(ValueError) as expected:
        json.loads(data)
    with pytest.raises(type(expected.value)):
        fastjson.loads(data)


def test_constants_parse_like_json() -> None:
    assert math.isnan(fastjson.loads(b"NaN"))
    assert fastjson.loads(b"[Infinity, -Infinity]") == [math.inf, -math.inf]


@pytest.mark.parametrize("value", [
    {"v": 1, "op": "capture", "label": 'Write "q\u00e9"\n', "tool_use_id": None, "ok": True},
    [1, "two", [3, {"four": False}]],
    {},
    "\u2603",
    -7,
])
def test_dumps_equals_compact_json(value: object) -> None:
    assert fastjson.dumps(value) == json.dumps(value, separators=(",", ":"))


def test_dumps_hands_unusual_values_to_json() -> None:
    assert fastjson.dumps({"f": 1.5}) == json.dumps({"f": 1.5}, separators=(",", ":"))
    with pytest.raises(TypeError):
        fastjson.dumps({"s": {1, 2}})
