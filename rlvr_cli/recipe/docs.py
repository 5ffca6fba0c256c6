"""The recipe field reference, generated from the schema into docs/fields.md, and the objective tables of
docs/objectives.md, generated from the objective registry (so the docs and the code cannot drift; ``python
-m rlvr_cli.recipe.docs`` rewrites both; tests/recipe/test_load.py and tests/recipe/test_objectives.py
check they are current)."""

from __future__ import annotations

import typing
from pathlib import Path

from pydantic import BaseModel

from rlvr_cli.recipe.schema import Recipe


def _type_name(annotation) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        parts = [a for a in args if a is not type(None)]
        name = " \\| ".join(_type_name(a) for a in parts)
        return f"{name} \\| null" if len(parts) < len(args) else name
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (list, tuple):
        return f"{origin.__name__}[{', '.join(_type_name(a) for a in args if a is not Ellipsis)}]"
    return getattr(annotation, "__name__", str(annotation))


def _models_in(annotation) -> list[type[BaseModel]]:
    """The recipe sections an annotation refers to (one, or the variants of a discriminated union)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found = []
    for a in typing.get_args(annotation):
        found.extend(_models_in(a))
    return found


def _number(v) -> str:
    """A bound as a reader writes it: 1e7, 2**31 - 1, 4.8e8, 0.001."""
    if isinstance(v, int) and abs(v) >= 10**6:
        for k in range(20, 65):
            if abs(v) in (2**k, 2**k - 1):
                return ("-" if v < 0 else "") + f"2**{k}" + (" - 1" if abs(v) == 2**k - 1 else "")
        v = float(v)
    text = f"{v:g}"
    if "e" in text:
        mantissa, exp = text.split("e")
        text = f"{mantissa}e{int(exp)}"
    return text


def _bounds(metadata) -> tuple[str, str]:
    """The (low, high) ends written by ``metadata``'s ge/gt/le/lt constraints, '' where open."""
    low = high = ""
    for m in metadata:
        for attr, side in (("ge", "["), ("gt", "("), ("le", "]"), ("lt", ")")):
            v = getattr(m, attr, None)
            if v is not None:
                text = _number(v)
                if side in "[(":
                    low = f"{side}{text}"
                else:
                    high = f"{text}{side}"
    return low, high


def _range(info) -> str:
    """A numeric field's allowed interval, e.g. `[1, 1e+07]` or `(0, 1]`; '' for other fields. Constraints on
    an ``Annotated`` alias inside an optional or a tuple are found in the alias."""
    found = list(info.metadata)
    todo = [info.annotation]
    while todo:
        a = todo.pop()
        if typing.get_origin(a) is typing.Annotated:
            for extra in typing.get_args(a)[1:]:
                found += list(getattr(extra, "metadata", [extra]))
        todo += [x for x in typing.get_args(a) if not isinstance(x, (str, int, float))]
    low, high = _bounds(found)
    if not (low or high):
        return ""
    return f"{low or '(-inf'}, {high or 'inf)'}"


def field_rows(model: type[BaseModel] = Recipe, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(dotted field, type, default, description) for every leaf field, sections in schema order; a numeric
    field's type carries its allowed interval."""
    rows = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        subs = _models_in(info.annotation)
        if subs and info.annotation is not None:
            if len(subs) == 1:
                rows += field_rows(subs[0], f"{path}.")
            else:  # a discriminated union: each variant under its tag
                for sub in subs:
                    tag_name = "name" if "name" in sub.model_fields else "type"
                    tag_field = sub.model_fields[tag_name]
                    tag = " | ".join(typing.get_args(tag_field.annotation))
                    doc = (sub.__doc__ or "").strip() or tag_field.description or ""
                    rows.append((f"{path} ({tag_name}: {tag})", "variant", "", " ".join(doc.split())))
                    rows += [r for r in field_rows(sub, f"{path}.") if r[0] != f"{path}.{tag_name}"]
            continue
        default = info.get_default(call_default_factory=True) if not info.is_required() else "(required)"
        typ = _type_name(info.annotation) + (f" in {_range(info)}" if _range(info) else "")
        rows.append((path, typ, repr(default) if isinstance(default, str) else str(default),
                     " ".join((info.description or "").split())))
    return rows


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_table() -> str:
    lines = ["| field | type | default | meaning |", "|---|---|---|---|"]
    seen = set()
    for path, typ, default, desc in field_rows():
        if (path, desc) in seen:
            continue
        seen.add((path, desc))
        cells = [f"`{_escape(path)}`", typ, _escape(default), _escape(desc)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


START, END = "<!-- FIELDS:START -->", "<!-- FIELDS:END -->"


DOC = str(Path(__file__).resolve().parents[2] / "docs/fields.md")


def update_doc(path: str = DOC, start: str = START, end: str = END, body: str | None = None) -> bool:
    """Rewrite the field table (or ``body``) between a generated page's markers; True when it changed."""
    from rlvr_cli.io import rewrite_between_markers

    return rewrite_between_markers(path, start, end, markdown_table() if body is None else body)


OBJECTIVES_START, OBJECTIVES_END = "<!-- OBJECTIVES:START -->", "<!-- OBJECTIVES:END -->"
OBJECTIVES_DOC = str(Path(DOC).with_name("objectives.md"))


def update_objectives_doc(path: str = OBJECTIVES_DOC) -> bool:
    """Rewrite the objective tables of docs/objectives.md from the registry; True when they changed."""
    from rlvr_cli.recipe.objectives import markdown_tables

    return update_doc(path, OBJECTIVES_START, OBJECTIVES_END, markdown_tables())


if __name__ == "__main__":  # python -m rlvr_cli.recipe.docs [docs/fields.md [docs/objectives.md]]
    import sys

    changed = [update_doc(sys.argv[1] if len(sys.argv) > 1 else DOC),
               update_objectives_doc(sys.argv[2] if len(sys.argv) > 2 else OBJECTIVES_DOC)]
    print("updated" if any(changed) else "up to date")
