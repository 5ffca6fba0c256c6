"""Files written atomically: a reader (or a resumed run) sees the old content or the new, never a part."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write into a temp file in the same directory, fsync, then rename over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write a UTF-8 text file atomically (see :func:`atomic_write_bytes`)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")


def atomic_write_jsonl(path: str | Path, records) -> None:
    """One JSON object per line, UTF-8. A lone surrogate (from a ``\\ud800`` escape in the input, which
    UTF-8 cannot encode) is written back as that same JSON escape, so every line reads back equal."""
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    atomic_write_bytes(path, text.encode("utf-8", "backslashreplace"))


def rewrite_between_markers(path: str | Path, start: str, end: str, body: str) -> bool:
    """Replace the text between the ``start`` and ``end`` marker lines of a file (a generated README
    table) with ``body``; True when the file changed."""
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    new = f"{head}{start}\n{body}{end}{tail}"
    if new != text:
        atomic_write_text(p, new)
    return new != text


def display_path(path: str | Path) -> str:
    """``path`` as a written record should name it: relative to the working directory when it lies
    under it (so results/ and sweep records made in a checkout hold no machine's absolute paths),
    otherwise as given."""
    p = Path(path)
    if not p.is_absolute():
        return str(p)
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except (OSError, ValueError):
        return str(p)
