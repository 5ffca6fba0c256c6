"""Tests mirror modules: which modules of rlvr_cli/ have a test file of their own, and which do not and why.

A module ``rlvr_cli/PKG/MOD.py`` is mirrored by ``tests/PKG/test_MOD.py``, or by the house's prefixed form
``tests/PKG/test_PKG_MOD.py``, or by a file of either name with a suffix naming one aspect
(``test_MOD_ASPECT.py``: tests/tasks/test_dataset_csv_lines.py is tasks/dataset.py's); a module of a nested
package may be mirrored in the folder of any package above it (not above its top package: tests/test_base.py
is no mirror of tasks/base.py). ``__init__.py`` and ``__main__.py`` are not
counted. ``python tests/test_mirror.py`` prints the share and every module left, with the reason where one is
written in :data:`NO_BEHAVIOUR_OF_ITS_OWN`.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

NO_BEHAVIOUR_OF_ITS_OWN = {
    "errors.py": "two exception classes; every UserError path is tested where it is raised",
    "recipe/strict.py": "the strict pydantic base (extra='forbid'); tests/recipe/ refuse typos through it",
    "models/quiet.py": "silences transformers' logging; tests/train/test_lora_quiet.py checks the silence",
    "bridges/base.py": "the exporters' shared dataclass; tests/bridges/ test both exporters through it",
    "envs/protocol.py": "the environment contract (a Protocol); its behaviour lands with the multi-turn sampler",
    "recipe/environment.py": "the environment: section's schema, being written on another branch",
}
"""Modules with no behaviour a test of their own would check, each with where its behaviour is tested."""


def mirror(root: Path = ROOT) -> tuple[list[str], list[str]]:
    """(mirrored, not mirrored): modules of ``root/rlvr_cli`` by path relative to it."""
    package = root / "rlvr_cli"
    tests = {p.relative_to(root / "tests").as_posix() for p in (root / "tests").rglob("test_*.py")}
    mirrored, left = [], []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        if rel.name in ("__init__.py", "__main__.py"):
            continue
        *folders, module = rel.with_suffix("").parts
        found = False
        for depth in range(min(1, len(folders)), len(folders) + 1):  # inside its top package's folder
            prefix = "/".join(folders[:depth]) + "/" if depth else ""
            stems = {module, "_".join([*folders[:depth], module]), "_".join([*folders, module])}
            found |= any(t.startswith(prefix) and "/" not in t[len(prefix):]
                         and (t[len(prefix):] == f"test_{s}.py" or t[len(prefix):].startswith(f"test_{s}_"))
                         for t in tests for s in stems)
        (mirrored if found else left).append(rel.as_posix())
    return mirrored, left


MIRRORED_AT_LEAST = 87
"""Modules with a mirror on 2026-12-06 after issue 51 (from 58 before): a removed or renamed test file shows here."""


def test_the_share_of_mirrored_modules_does_not_fall():
    mirrored, left = mirror()
    assert len(mirrored) >= MIRRORED_AT_LEAST, f"{len(mirrored)} modules mirrored, fewer than {MIRRORED_AT_LEAST}"


def test_every_module_let_off_exists_and_has_no_mirror():
    """An entry of NO_BEHAVIOUR_OF_ITS_OWN names a module that exists and still has no test file of its own."""
    mirrored, left = mirror()
    assert set(NO_BEHAVIOUR_OF_ITS_OWN) <= set(left) | set(mirrored)
    assert not set(NO_BEHAVIOUR_OF_ITS_OWN) & set(mirrored), "mirrored now: drop it from NO_BEHAVIOUR_OF_ITS_OWN"


def test_the_mirror_rule_by_hand(tmp_path):
    for name in ("rlvr_cli/io.py", "rlvr_cli/rewards/outcome.py", "rlvr_cli/rewards/sandbox/codec.py",
                 "rlvr_cli/tasks/dataset.py", "rlvr_cli/tasks/base.py", "rlvr_cli/rewards/__init__.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    for name in ("tests/test_io.py", "tests/rewards/test_rewards_outcome.py", "tests/rewards/test_codec.py",
                 "tests/tasks/test_dataset_csv_lines.py", "tests/test_base.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    mirrored, left = mirror(tmp_path)
    # tests/test_base.py sits above tasks/: it is no mirror of tasks/base.py (a top-level base.py's, if one existed)
    assert mirrored == ["io.py", "rewards/outcome.py", "rewards/sandbox/codec.py", "tasks/dataset.py"]
    assert left == ["tasks/base.py"]


if __name__ == "__main__":
    mirrored, left = mirror()
    total = len(mirrored) + len(left)
    print(f"{len(mirrored)} of {total} modules mirrored ({len(mirrored) / total:.0%})")
    for rel in left:
        print(f"  {rel}: {NO_BEHAVIOUR_OF_ITS_OWN.get(rel, 'no test file of its own yet')}")
