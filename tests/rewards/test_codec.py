"""rlvr_cli/rewards/sandbox/codec.py: plain data crosses the sandbox as exact built-in types, by hand; anything
else crosses as a handle; nesting is bounded; the channel carries lines whole."""

from __future__ import annotations

import json
import os
import threading

import pytest

from rlvr_cli.rewards.sandbox.codec import MAX_DEPTH, Channel, decode, encode


def _refuse(v, depth):
    raise AssertionError(f"not plain data: {v!r}")


def test_the_tagged_form_by_hand():
    assert encode(255, _refuse) == ["i", "ff"] and encode(-1, _refuse) == ["i", "-1"]
    assert encode(0.5, _refuse) == ["f", "0x1.0000000000000p-1"]
    assert encode(b"\x01", _refuse) == ["b", "01"] and encode(bytearray(b"\x01"), _refuse) == ["ba", "01"]
    assert encode({"a": (1, None)}, _refuse) == ["d", [[["s", "a"], ["t", [["i", "1"], None]]]]]
    assert encode(True, _refuse) is True  # a bool stays a bool, not the int 1


def test_plain_values_come_back_equal_and_of_the_exact_type():
    values = [None, False, 7, -2**70, 0.1, float("inf"), 1 + 2j, "é\ud800", b"x", bytearray(b"y"), [1, [2]], (3,),
              {4}, frozenset({5}), {"k": [1.5]}]
    for v in values:
        m = json.loads(json.dumps(encode(v, _refuse)))  # as it travels
        back = decode(m, _refuse)
        assert back == v and type(back) is type(v)
    nan = decode(encode(float("nan"), _refuse), _refuse)
    assert nan != nan


def test_a_subclass_or_object_crosses_as_a_handle():
    class Liar(int):
        def __eq__(self, other):
            return True

    handles = []
    m = encode([Liar(3), object()], lambda v, depth: handles.append(v) or ["h", len(handles) - 1])
    assert m[1][0] == ["h", 0] and isinstance(handles[0], Liar)  # never decoded as an int
    assert decode(m, lambda h: f"handle {h[1]}") == ["handle 0", "handle 1"]


def test_nesting_beyond_the_bound_is_a_value_error():
    deep = []
    for _ in range(MAX_DEPTH + 1):
        deep = [deep]
    with pytest.raises(ValueError, match=f"nested more than {MAX_DEPTH} deep"):
        encode(deep, _refuse)
    with pytest.raises(ValueError, match="nested more than"):
        decode(_nested_tags(MAX_DEPTH + 2), _refuse)


def _nested_tags(n):
    m = ["l", []]
    for _ in range(n):
        m = ["l", [m]]
    return m


def test_the_channel_carries_lines_whole_and_ends_with_none():
    r, w = os.pipe()
    ch = Channel(r, w)
    big = {"s": "x" * 200_000, "u": "\ud800"}  # larger than a pipe's buffer and one write, a lone surrogate

    def write():
        ch.send(big)
        ch.send([1])
        os.close(w)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    assert ch.recv() == big and ch.recv() == [1] and ch.recv() is None
    writer.join(timeout=5)
