"""The README lists the export warnings of every shipped RL preset, generated from the exporters."""

from pathlib import Path


def test_readme_export_warnings_are_current():
    """Regenerate with `python -m rlvr_cli.bridges.docs README.md`."""
    from rlvr_cli.bridges.docs import END, START, markdown

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert f"{START}\n{markdown()}{END}" in readme
