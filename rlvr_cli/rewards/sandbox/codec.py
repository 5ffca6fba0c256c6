"""The sandbox's value codec, used on both sides of it: the program's process (``server.py``) and the
harness that runs the tests (``harness.py``). Standard library only: it runs in the sandbox's bare
interpreter (``python -I``), next to untrusted code.

Only plain data crosses between the program and the tests: ``None``, ``bool``, ``int``, ``float``,
``complex``, ``str``, ``bytes``, ``bytearray``, lists, tuples, sets, frozensets and dicts, rebuilt as
exact built-in types on arrival, so nothing the program defines (an ``__eq__`` that is always true, an
``int`` subclass) reaches the tests. Anything else stays on its side and crosses as a handle, made by
the ``other`` callback of :func:`encode` and turned back by the ``handle`` callback of :func:`decode`.
"""

import json
import os

MAX_DEPTH = 200
"""Deepest nesting of a value that crosses (deeper is a ValueError, not a RecursionError)."""


def encode(v, other, depth=0):
    """``v`` as JSON-ready tagged lists; a value of any other type is ``other(v, depth)``."""
    if depth > MAX_DEPTH:
        raise ValueError("a value nested more than %d deep" % MAX_DEPTH)
    t = type(v)
    if v is None or t is bool:
        return v
    if t is int:
        return ["i", format(v, "x")]
    if t is float:
        return ["f", float.hex(v)]
    if t is str:
        return ["s", v]
    if t is complex:
        return ["c", float.hex(v.real), float.hex(v.imag)]
    if t is bytes or t is bytearray:
        return ["b" if t is bytes else "ba", v.hex()]
    for tag, kind in (("l", list), ("t", tuple), ("set", set), ("fs", frozenset)):
        if t is kind:
            return [tag, [encode(x, other, depth + 1) for x in v]]
    if t is dict:
        return ["d", [[encode(k, other, depth + 1), encode(x, other, depth + 1)] for k, x in v.items()]]
    return other(v, depth)


def decode(m, handle, depth=0):
    """The value :func:`encode` made ``m`` from; a handle is ``handle(m)``."""
    if depth > MAX_DEPTH:
        raise ValueError("a value nested more than %d deep" % MAX_DEPTH)
    if m is None or m is True or m is False:
        return m
    tag = m[0]
    if tag == "i":
        return int(m[1], 16)
    if tag == "f":
        return float.fromhex(m[1])
    if tag == "s":
        return str(m[1])
    if tag == "c":
        return complex(float.fromhex(m[1]), float.fromhex(m[2]))
    if tag in ("b", "ba"):
        return (bytes if tag == "b" else bytearray).fromhex(m[1])
    kinds = {"l": list, "t": tuple, "set": set, "fs": frozenset}
    if tag in kinds:
        return kinds[tag](decode(x, handle, depth + 1) for x in m[1])
    if tag == "d":
        return {decode(k, handle, depth + 1): decode(x, handle, depth + 1) for k, x in m[1]}
    return handle(m)


class Channel:
    """Newline-delimited JSON over a pair of pipes."""
    def __init__(self, rfd, wfd):
        self.r, self.w = os.fdopen(rfd, "rb", 0), wfd
        self.buf = b""

    def send(self, obj):
        data = (json.dumps(obj) + "\n").encode("utf-8", "surrogatepass")
        view = memoryview(data)
        while view:
            view = view[os.write(self.w, view[:1 << 16]):]

    def recv(self):
        while b"\n" not in self.buf:
            chunk = self.r.read(1 << 16)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line.decode("utf-8", "surrogatepass"))
