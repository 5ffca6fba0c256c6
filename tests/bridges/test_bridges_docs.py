"""docs/bridges.md lists the export warnings of every shipped RL preset, generated from the exporters."""

from pathlib import Path


def test_docs_export_warnings_are_current():
    """Regenerate with `python -m rlvr_cli.bridges.docs`."""
    from rlvr_cli.bridges.docs import DOC, END, START, markdown

    assert Path(DOC) == Path(__file__).resolve().parents[2] / "docs" / "bridges.md"
    assert f"{START}\n{markdown()}{END}" in Path(DOC).read_text(encoding="utf-8")
