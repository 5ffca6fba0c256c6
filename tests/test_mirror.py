"""Tests mirror modules: which modules of rlvr_cli/ have a test file of their own, and which do not and why.

A module ``rlvr_cli/PKG/MOD.py`` is mirrored by ``tests/PKG/test_MOD.py``, or by the house's prefixed form
``tests/PKG/test_PKG_MOD.py``, or by a file of either name with a suffix naming one aspect
(``test_MOD_ASPECT.py``: tests/tasks/test_dataset_csv_lines.py is tasks/dataset.py's); a module of a nested
package may be mirrored in the folder of any package above it (not above its top package: tests/test_base.py
is no mirror of tasks/base.py). ``__init__.py`` and ``__main__.py`` are not
counted. ``python tests/test_mirror.py`` prints the share and every module left, with the reason where one is
written in :data:`LEFT_AND_WHY`.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LEFT_AND_WHY = {
    # no behaviour of their own
    "errors.py": "two exception classes; every UserError path is tested where it is raised",
    "recipe/strict.py": "the strict pydantic base (extra='forbid'); tests/recipe/ refuse typos through it",
    "models/quiet.py": "silences transformers' logging; tests/train/test_lora_quiet.py checks the silence",
    "bridges/base.py": "the exporters' shared dataclass; tests/bridges/ test both exporters through it",
    # thin, or one side of something tested whole
    "cli/": "thin commands (parse, call one library function, print a table): run end to end as `rlvr ...` in "
            "tests/cli/ and beside each library's tests; a mirror per command would repeat them",
    "rewards/sandbox/": "harness, runner and server are one sandbox, tested whole (tests/rewards/test_code_tests.py, "
                        "test_sandbox_forgery.py); the codec has its own",
    "rewards/worker.py": "the verifier pool's child side: tests/rewards/test_rewards_pool.py and test_rewards_function.py",
    "checked_import.py": "the checked import of a user's module in a child: tests/rewards/test_rewards_function.py, tests/envs/test_envs_loading.py",
    "rewards/reasoning_gym.py": "test_safe_eval_in_reasoning_gym.py and tests/tasks/test_tasks_reasoning_gym.py",
    "rewards/samples.py": "`rlvr verify`'s input: tests/cli/test_verify_cli.py",
    "tasks/chat_worker.py": "the chat renderer's child side: tests/tasks/test_chat_render_limits.py",
    "evaluation/runs.py": "`rlvr eval RUN`'s targets: tests/cli/test_eval_cli.py",
    "evaluation/plot.py": "the eval figure: tests/cli/test_eval_cli.py (--plot)",
    "recipe/docs.py": "the generated field reference: tests/recipe/test_load.py keeps docs/fields.md generated",
    "warm_start.py": "tests/models/test_warm_start.py and test_builtin_shipped.py (named after what they build)",
    "bridges/": "tests/bridges/test_bridges_trl.py and test_bridges_verl.py test the exporters; renaming them "
                "touches tests/compare/ (the lead's this round)",
    # being edited on other branches this round: a rename or a new test file there waits for a quiet tree
    "compare/": "the lead's this round; tests/compare/test_compare_*.py test it by behaviour",
    "sweep/": "the lead's this round; tests/sweep/ test it by behaviour",
    "train/": "tested through runs in tests/train/ (test_train.py, test_disk_full.py, test_resume_refusals.py, ...), "
              "named by behaviour; rl.py, batch.py and rollouts/ are being edited on other branches",
    "sampling/decode_step.py": "being edited on another branch; tests/sampling/test_models_sampling.py tests it",
    "envs/": "the environment contract, being written on another branch",
    "recipe/environment.py": "the environment: section's schema, being written on another branch",
}
"""Modules with no test file of their own, and why: no behaviour of their own, tested whole with others, or
being edited elsewhere this round. A key ending in / covers a folder (a module mirrored there needs no entry)."""


def reason(rel: str) -> str | None:
    """Why ``rel`` (a path under rlvr_cli/) has no mirror, from the most specific entry of LEFT_AND_WHY."""
    keys = [k for k in LEFT_AND_WHY if rel == k or (k.endswith("/") and rel.startswith(k))]
    return LEFT_AND_WHY[max(keys, key=len)] if keys else None


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


MIRRORED_AT_LEAST = 90
"""Modules with a mirror on 2026-12-06 after issue 51 (from 58 before): a removed or renamed test file shows here."""


def test_the_share_of_mirrored_modules_does_not_fall():
    mirrored, left = mirror()
    assert len(mirrored) >= MIRRORED_AT_LEAST, f"{len(mirrored)} modules mirrored, fewer than {MIRRORED_AT_LEAST}"


def test_every_reason_names_a_module_or_folder_that_exists_and_a_module_still_left():
    mirrored, left = mirror()
    package = ROOT / "rlvr_cli"
    stale = [k for k in LEFT_AND_WHY if not (package / k).exists()]
    assert stale == [], f"LEFT_AND_WHY names what does not exist: {stale}"
    done = [k for k in LEFT_AND_WHY if not k.endswith("/") and k in mirrored]
    assert done == [], f"mirrored now: drop these from LEFT_AND_WHY: {done}"
    assert reason("train/rollouts/lag.py") == LEFT_AND_WHY["train/"] and reason("rewards/samples.py").startswith("`rlvr verify`")


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
        print(f"  {rel}: {reason(rel) or 'no test file of its own yet'}")
