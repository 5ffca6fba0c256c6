"""The export warnings of every shipped RL preset, and of `grpo` with each registered objective no preset
uses (rlvr_cli/recipe/objectives.py), generated from the exporters into docs/bridges.md (``python -m
rlvr_cli.bridges.docs``; tests/bridges/test_bridges_docs.py checks it is current)."""

from __future__ import annotations

from pathlib import Path

START, END = "<!-- EXPORT-WARNINGS:START -->", "<!-- EXPORT-WARNINGS:END -->"


def warnings_by_preset() -> dict[str, dict[str, list[str]]]:
    """{target: {warning line: [presets that get it]}} for every shipped RL preset; then, for each registered
    objective no preset chose, the warnings `grpo` gets with it and not without it."""
    from rlvr_cli.bridges import TARGETS, export_recipe
    from rlvr_cli.recipe.load import list_shipped, load_recipe
    from rlvr_cli.recipe.objectives import OBJECTIVES

    out: dict[str, dict[str, list[str]]] = {t: {} for t in TARGETS}
    chosen = set()
    for name, path in list_shipped():
        r = load_recipe(str(path))
        if r.algorithm != "rl":
            continue
        chosen.add(r.loss.objective.type)
        for target in TARGETS:
            for w in export_recipe(r, target).warnings:
                out[target].setdefault(w, []).append(name)
    for kind in (k for k in OBJECTIVES if k not in chosen):
        r = load_recipe("grpo", [f"loss.objective.type={kind}"])
        for target in TARGETS:
            base = set(export_recipe(load_recipe("grpo"), target).warnings)
            for w in export_recipe(r, target).warnings:
                if w not in base:
                    out[target].setdefault(w, []).append(f"grpo + loss.objective.type={kind}")
    return out


def markdown() -> str:
    lines = []
    for target, table in warnings_by_preset().items():
        lines += [f"**{target}** ({len(table)} distinct warnings)", "", "| warning | shipped presets (or objectives) that get it |", "|---|---|"]
        for w, presets in table.items():
            cell = ", ".join(f"`{p}`" for p in presets)
            lines.append(f"| `{w.split(': ', 1)[0]}`: {w.split(': ', 1)[1].replace('|', chr(92) + '|')} | {cell} |")
        lines.append("")
    return "\n".join(lines)


DOC = str(Path(__file__).resolve().parents[2] / "docs/bridges.md")


def update_doc(path: str = DOC) -> bool:
    """Rewrite the warnings between the page's markers; True when it changed."""
    from rlvr_cli.recipe import docs

    return docs.update_doc(path, START, END, markdown())


if __name__ == "__main__":  # python -m rlvr_cli.bridges.docs [docs/bridges.md]
    import sys

    print("updated" if update_doc(sys.argv[1] if len(sys.argv) > 1 else DOC) else "up to date")
