"""Reading a GGUF file's header with every count and length checked against the file before use.

A GGUF file starts with counts and lengths that a reader trusts: ``gguf.GGUFReader`` (and so
``transformers``) makes one numpy view per array item, so a 178-byte file that declares an array of
10^8 items takes minutes and gigabytes before it fails. :func:`read_header` walks the same layout
(magic, version, tensor and key-value counts, each key-value pair, each tensor's name, shape, type and
offset) with plain ``struct`` reads on a memory map, and refuses, naming the byte offset, anything
that does not fit in what is left of the file, an array longer than :data:`MAX_ARRAY_ITEMS`, arrays
nested deeper than :data:`MAX_NESTING`, a tensor of more than :data:`MAX_DIMS` dimensions, an unknown
value or tensor type, and tensor data outside the file. Only a header that passes is given to
``gguf``/``transformers``, so what they allocate is bounded by the file's size.

Layout (GGUF v2/v3, the specification github.com/ggml-org/ggml/blob/master/docs/gguf.md): ``"GGUF"``, uint32 version, uint64
tensor count, uint64 key-value count; each pair: string key, uint32 value type, value (a string is a
uint64 length and its bytes; an array is a uint32 item type, a uint64 count and the items); each
tensor: string name, uint32 dimension count, uint64 dimensions, uint32 ggml type, uint64 offset into
the data section, which starts at the next multiple of ``general.alignment`` (default 32). A file
written on a big-endian machine reads with every number byte-swapped (its version reads as 0 in the
low 16 bits), as ``GGUFReader`` detects it.
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

MAX_ARRAY_ITEMS = 1 << 22
"""Items in one metadata array (the largest vocabularies shipped, ~262k tokens with their scores,
types and merges, are far below this; every item costs the readers a Python object)."""
MAX_NESTING = 4
"""Arrays of arrays deeper than this are refused (llama.cpp writes none deeper than one)."""
MAX_DIMS = 4
"""ggml's GGML_MAX_DIMS: a tensor has at most 4 dimensions."""
MAX_STRING_BYTES = 1 << 26
"""A single metadata string (a chat template, a long license) longer than 64 MiB is refused."""
READABLE_VERSIONS = (2, 3)
"""The versions ``gguf.GGUFReader`` reads (version 1 used 32-bit counts)."""
DEFAULT_ALIGNMENT = 32

_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
"""GGUF value type -> struct code of its fixed-size scalar (8: string, 9: array)."""
_STRING, _ARRAY = 8, 9


class GGUFHeaderError(ValueError):
    """What is wrong with a GGUF header, with the byte offset where it was found."""


@dataclass(frozen=True)
class GGUFHeader:
    version: int
    architecture: str | None
    """``general.architecture`` when it is a string, else None."""
    tensors: int
    """Number of tensors."""
    elements: int
    """Total number of weights over all tensors (what a dequantised model can hold)."""
    data_bytes: int
    """Bytes of tensor data the header points to."""


def _quant_sizes() -> dict[int, tuple[int, int]]:
    """ggml type -> (elements per block, bytes per block), from the ``gguf`` package."""
    from gguf import GGML_QUANT_SIZES

    return {int(t): (int(b), int(s)) for t, (b, s) in GGML_QUANT_SIZES.items()}


class _Cursor:
    def __init__(self, buf, order: str):
        self.buf, self.pos, self.size, self.order = buf, 0, len(buf), order

    def take(self, n: int, what: str) -> int:
        """Advance over ``n`` bytes; the offset they start at."""
        if n < 0 or n > self.size - self.pos:
            raise GGUFHeaderError(f"{what} at byte {self.pos} needs {n:,} bytes; the file has {self.size - self.pos:,} left")
        start, self.pos = self.pos, self.pos + n
        return start

    def scalar(self, code: str, what: str):
        at = self.take(struct.calcsize(code), what)
        return struct.unpack_from(self.order + code, self.buf, at)[0]

    def string(self, what: str, limit: int = MAX_STRING_BYTES) -> bytes:
        n = self.scalar("Q", f"length of {what}")
        if n > limit:
            raise GGUFHeaderError(f"{what} at byte {self.pos - 8} declares {n:,} bytes (more than {limit:,})")
        at = self.take(n, what)
        return bytes(self.buf[at:at + n])

    def count(self, what: str, item_bytes: int, limit: int) -> int:
        """A uint64 count of items of at least ``item_bytes`` bytes each, checked against what is left."""
        at = self.pos
        n = self.scalar("Q", what)
        if n > limit or n * item_bytes > self.size - self.pos:
            raise GGUFHeaderError(f"{what} at byte {at} is {n:,}: more than the {self.size - self.pos:,} bytes left "
                                  f"can hold" + (f" (or more than {limit:,})" if n > limit else ""))
        return n


def _skip_value(cur: _Cursor, vtype: int, what: str, depth: int = 0):
    """Step over one value of type ``vtype``; return it when it is a scalar or a string (else None)."""
    if vtype in _SCALARS:
        return cur.scalar(_SCALARS[vtype], what)
    if vtype == _STRING:
        return cur.string(what)
    if vtype != _ARRAY:
        raise GGUFHeaderError(f"{what} at byte {cur.pos - 4}: unknown value type {vtype}")
    if depth >= MAX_NESTING:
        raise GGUFHeaderError(f"{what} at byte {cur.pos}: arrays nested deeper than {MAX_NESTING}")
    itype = cur.scalar("I", f"item type of {what}")
    item_bytes = struct.calcsize(_SCALARS[itype]) if itype in _SCALARS else (8 if itype == _STRING else 12)
    n = cur.count(f"item count of {what}", item_bytes, MAX_ARRAY_ITEMS)
    if itype in _SCALARS:
        cur.take(n * item_bytes, what)
    else:
        for i in range(n):
            _skip_value(cur, itype, f"{what}[{i}]", depth + 1)
    return None


def _decode(raw: bytes, what: str, at: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise GGUFHeaderError(f"{what} at byte {at}: not UTF-8") from None


def _walk(buf) -> GGUFHeader:
    if len(buf) < 24 or bytes(buf[:4]) != b"GGUF":
        raise GGUFHeaderError("no GGUF magic (the file does not start with 'GGUF' and a 20-byte header)")
    order = "<"
    version = struct.unpack_from("<I", buf, 4)[0]
    if version & 0xFFFF == 0:  # written on a machine of the other byte order
        order, version = ">", struct.unpack_from(">I", buf, 4)[0]
    if version not in READABLE_VERSIONS:
        raise GGUFHeaderError(f"GGUF version {version} (readable: {', '.join(map(str, READABLE_VERSIONS))})")
    cur = _Cursor(buf, order)
    cur.pos = 8
    n_tensors = cur.count("tensor count", 24, len(buf))
    n_kv = cur.count("key-value count", 13, len(buf))
    architecture, alignment = None, DEFAULT_ALIGNMENT
    for i in range(n_kv):
        at = cur.pos
        key = _decode(cur.string(f"key {i}", limit=1 << 16), f"key {i}", at)
        vtype = cur.scalar("I", f"value type of {key!r}")
        value = _skip_value(cur, vtype, repr(key))
        if key == "general.architecture" and isinstance(value, bytes):
            architecture = _decode(value, "general.architecture", at)
        elif key == "general.alignment":
            if vtype != 4 or not value or value & (value - 1):
                raise GGUFHeaderError(f"general.alignment at byte {at}: must be a uint32 power of two")
            alignment = value
    sizes = _quant_sizes()
    infos, names = [], set()
    for i in range(n_tensors):
        at = cur.pos
        name = _decode(cur.string(f"name of tensor {i}", limit=1 << 16), f"name of tensor {i}", at)
        if name in names:
            raise GGUFHeaderError(f"tensor {name!r} at byte {at}: a second tensor of that name")
        names.add(name)
        n_dims = cur.scalar("I", f"dimension count of tensor {name!r}")
        if n_dims > MAX_DIMS:
            raise GGUFHeaderError(f"tensor {name!r} at byte {at}: {n_dims} dimensions (at most {MAX_DIMS})")
        elements = 1
        for d in range(n_dims):
            elements *= cur.scalar("Q", f"dimension {d} of tensor {name!r}")
        ttype = cur.scalar("I", f"type of tensor {name!r}")
        if ttype not in sizes:
            raise GGUFHeaderError(f"tensor {name!r} at byte {at}: unknown ggml type {ttype}")
        block, block_bytes = sizes[ttype]
        if elements % block:
            raise GGUFHeaderError(f"tensor {name!r} at byte {at}: {elements:,} elements is not a whole number of "
                                  f"type {ttype}'s blocks of {block}")
        offset = cur.scalar("Q", f"offset of tensor {name!r}")
        infos.append((name, at, elements, elements // block * block_bytes, offset))
    data_start = -(-cur.pos // alignment) * alignment
    total_elements = total_bytes = 0
    for name, at, elements, nbytes, offset in infos:
        if offset % alignment or data_start + offset + nbytes > len(buf):
            raise GGUFHeaderError(f"tensor {name!r} (header byte {at}): its {nbytes:,} bytes at data offset {offset:,} "
                                  f"are not {alignment}-aligned inside the file's {len(buf):,} bytes")
        total_elements += elements
        total_bytes += nbytes
    return GGUFHeader(version, architecture, n_tensors, total_elements, total_bytes)


def read_header(path: str | Path) -> GGUFHeader:
    """The checked header of the GGUF file at ``path``; ``GGUFHeaderError`` saying what is wrong and
    where, ``OSError`` when the file cannot be read."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            raise GGUFHeaderError("the file is empty")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return _walk(buf)
