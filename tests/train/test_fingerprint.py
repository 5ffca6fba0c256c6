"""A run's fingerprint (run.json): everything that decides its numbers, and what changed on a resume."""

from __future__ import annotations

import json

import pytest

from conftest import tiny_run
from rlvr_cli.models.builtin import shipped_manifest
from rlvr_cli.numerics import numerics_kind
from rlvr_cli.tasks import build_task, data_fingerprint

SMALL = tiny_run("checkpoint.every=1")


def _sets(*extra):
    return [a for s in [*SMALL, *extra] for a in ("--set", s)]


def test_a_run_records_its_fingerprint_and_a_resume_under_other_conditions_says_so(cli, tmp_path, monkeypatch):
    run = tmp_path / "run"
    res = cli("train", "grpo", "--out", str(run), *_sets())
    assert res.code == 0, res.stderr
    fp = json.loads((run / "run.json").read_text())["fingerprint"]
    assert set(fp) == {"base_weights", "task_data", "recipe", "code", "code_revision", "reward_code",
                       "reward_functions", "environment_code", "environment_functions", "torch", "numerics",
                       "threads", "device"}
    assert fp["environment_code"] is None and fp["environment_functions"] == {}  # single-turn
    assert fp["reward_code"] is None and fp["reward_functions"] == {}  # no function term
    assert fp["base_weights"] == shipped_manifest()["tiny"]["weights"]
    assert fp["numerics"] == numerics_kind() and fp["device"] == "cpu" and fp["threads"] == 1
    assert fp["task_data"] == data_fingerprint(build_task("arithmetic"))
    # the same run again elsewhere: the same fingerprint (the name is a label, not a knob)
    res = cli("train", "grpo", "--out", str(tmp_path / "again"), *_sets("name=other"))
    again = json.loads((tmp_path / "again" / "run.json").read_text())["fingerprint"]
    assert {k: v for k, v in again.items()} == fp
    # continued to more steps under another CPU kind: the first fingerprint stays, the change is listed
    monkeypatch.setattr("rlvr_cli.train.fingerprint.numerics_kind", lambda: "aarch64/DEFAULT")
    res = cli("train", "grpo", "--out", str(run), "--resume", *_sets("steps=3"))
    assert res.code == 0, res.stderr
    info = json.loads((run / "run.json").read_text())
    assert info["fingerprint"] == fp
    (change,) = info["fingerprint_changes"]
    assert change["from_step"] == 3 and change["numerics"] == "aarch64/DEFAULT" and "recipe" in change


def test_the_reward_functions_source_is_in_the_fingerprint(cli, tmp_path, monkeypatch):
    """Issue 49: editing the user's reward module between two runs changed reward_mean and no fingerprint
    field. Now `reward_code` differs (and names each function's digest), and a resume after the edit lists it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text("def credit(completions, **kwargs):\n    return [0.5] * len(completions)\n")
    terms = "reward.terms=[{type: task}, {type: function, function: 'mine.py:credit', weight: 0.1}]"
    assert cli("train", "grpo", "--out", "a", *_sets(terms)).code == 0
    fp = json.loads((tmp_path / "a" / "run.json").read_text())["fingerprint"]
    assert fp["reward_code"].startswith("blake2b:") and list(fp["reward_functions"]) == ["mine.py:credit"]
    # each term's mean as TRL logs it (issue 49: a run shows which term earned its reward)
    rows = [json.loads(line) for line in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["rewards/credit/mean"] == 0.5 and 0 <= r["rewards/task/mean"] <= 1 for r in rows)
    assert all(r["reward_mean"] == pytest.approx(r["rewards/task/mean"] + 0.1 * 0.5) for r in rows)
    (tmp_path / "mine.py").write_text("def credit(completions, **kwargs):\n    return [0.25] * len(completions)\n")
    assert cli("train", "grpo", "--out", "b", *_sets(terms)).code == 0
    edited = json.loads((tmp_path / "b" / "run.json").read_text())["fingerprint"]
    assert edited["reward_code"] != fp["reward_code"]
    assert {k: v for k, v in edited.items() if not k.startswith("reward_")} == {
        k: v for k, v in fp.items() if not k.startswith("reward_")}
    res = cli("train", "grpo", "--out", "a", "--resume", *_sets(terms, "steps=3"))
    assert res.code == 0, res.stderr
    (change,) = json.loads((tmp_path / "a" / "run.json").read_text())["fingerprint_changes"]
    assert change["reward_code"] == edited["reward_code"]


def test_the_task_data_fingerprint_follows_the_rows():
    from rlvr_cli.recipe.load import load_recipe

    a = data_fingerprint(build_task("arithmetic"))
    assert a == data_fingerprint(build_task("arithmetic")) and a.startswith("blake2b:")
    other = load_recipe("grpo", ["task.num_eval=255"]).task
    assert data_fingerprint(build_task(other)) != a
    assert data_fingerprint(build_task("countdown")) != a


class _OwnRows:
    name, verifier, answer_marker = "mine", "integer", "#"

    def data_fingerprint(self):
        return "blake2b:own"


def test_a_task_with_its_own_fingerprint_says_it():
    assert data_fingerprint(_OwnRows()) == "blake2b:own"


@pytest.mark.parametrize("path", ["/work/x", "rel/x"])
def test_display_path(path, tmp_path, monkeypatch):
    from rlvr_cli.io import display_path

    monkeypatch.chdir(tmp_path)
    assert display_path(path) == path
    assert display_path(tmp_path / "runs" / "a") == "runs/a"


def test_a_users_environment_code_is_in_the_fingerprint(tmp_path, monkeypatch):
    """Issue 49 (the environment part): editing the environment's module changes `environment_code`; a
    built-in factory is the package's code (None here, `code` covers it)."""
    from rlvr_cli.recipe.environment import EnvironmentSpec
    from rlvr_cli.train.fingerprint import environment_code_fingerprint

    monkeypatch.chdir(tmp_path)
    (tmp_path / "env.py").write_text("class Env:\n    def reset(self, **row):\n        return None\n")
    (tmp_path / "tools.py").write_text("def add(a, b):\n    return a + b\n")
    spec = EnvironmentSpec(factory="env.py:Env", tools=["tools.py:add"])
    digest, each = environment_code_fingerprint(spec)
    assert digest.startswith("blake2b:") and sorted(each) == ["env.py:Env", "tools.py:add"]
    (tmp_path / "tools.py").write_text("def add(a, b):\n    return b + a\n")
    assert environment_code_fingerprint(spec)[0] != digest
    assert environment_code_fingerprint(EnvironmentSpec(factory="builtin:calculator")) == (None, {})
    assert environment_code_fingerprint(None) == (None, {})
