"""Issue 28: a run whose weights become non-finite ends `failed` (exit 1) naming the step, and never
writes a checkpoint of non-finite weights; the last finite checkpoint is kept and resumes."""

from __future__ import annotations

import json

import torch
from safetensors.torch import load_file

SMALL = ["rollout.prompts_per_step=2", "rollout.group_size=2", "rollout.max_new_tokens=8",
         "eval.at_start=false", "eval.every=0", "checkpoint.every=1", "steps=3"]


def sets(model, *extra):
    return [a for s in [f"model.name={model}", *SMALL, *extra] for a in ("--set", s)]


def _finite(ck):
    return all(torch.isfinite(t).all() for t in load_file(ck / "model.safetensors").values())


def test_a_diverging_run_fails_at_its_first_step_without_a_checkpoint(tiny_base, tmp_path, cli, monkeypatch):
    # the recipe that used to diverge (optim.weight_decay 1e300) is refused since issue 44 (bounds from the math:
    # AdamW multiplies the weights by 1 - lr * weight_decay), so the update itself leaves a NaN here
    res = cli("train", "grpo", "--out", str(tmp_path / "refused"), *sets(tiny_base, "optim.weight_decay=1e300"))
    assert res.code == 2 and "optim.weight_decay" in res.stderr and not (tmp_path / "refused").exists()
    step = torch.optim.AdamW.step

    def poisoned(self, *a, **k):
        out = step(self, *a, **k)
        with torch.no_grad():
            self.param_groups[0]["params"][0].view(-1)[0] = float("nan")
        return out

    monkeypatch.setattr(torch.optim.AdamW, "step", poisoned)
    run = tmp_path / "run"
    res = cli("train", "grpo", "--out", str(run), *sets(tiny_base))
    assert res.code == 1, res.stderr
    status = json.loads((run / "run.json").read_text())
    assert status["status"] == "failed" and status["error"].startswith("step 1: the weights became non-finite")
    assert not (run / "checkpoints").exists() or not any((run / "checkpoints").glob("step_*"))


def test_weights_going_nan_mid_run_keep_the_last_finite_checkpoint_and_resume(tiny_base, tmp_path, cli, monkeypatch):
    from rlvr_cli.train.run_writer import RunDir

    step, save = torch.optim.AdamW.step, RunDir.save_checkpoint
    armed = []

    def saved(self, *a, **k):  # step 1's checkpoint is written: arm the poison for step 2
        out = save(self, *a, **k)
        armed.append(1)
        return out

    def poisoned(self, *a, **k):  # step 2's update leaves a NaN in the weights (loss and grad were finite)
        out = step(self, *a, **k)
        if armed:
            with torch.no_grad():
                self.param_groups[0]["params"][0].view(-1)[0] = float("nan")
        return out

    monkeypatch.setattr(RunDir, "save_checkpoint", saved)
    run = tmp_path / "run"
    monkeypatch.setattr(torch.optim.AdamW, "step", poisoned)
    res = cli("train", "grpo", "--out", str(run), *sets(tiny_base))
    assert res.code == 1, res.stderr
    status = json.loads((run / "run.json").read_text())
    assert status["status"] == "failed" and "step 2: the weights became non-finite" in status["error"]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step_1"]
    assert _finite(run / "checkpoints" / "step_1")
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()] == [1]

    monkeypatch.setattr(torch.optim.AdamW, "step", step)
    res = cli("train", "grpo", "--out", str(run), "--resume", *sets(tiny_base))
    assert res.code == 0, res.stderr
    assert json.loads((run / "run.json").read_text())["status"] == "finished"
    assert all(_finite(d) for d in (run / "checkpoints").glob("step_*"))


def test_the_check_names_the_first_bad_parameter():
    from rlvr_cli.train.loop import first_nonfinite_parameter

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    assert first_nonfinite_parameter(model) is None
    with torch.no_grad():
        model[1].bias[0] = float("inf")
    assert first_nonfinite_parameter(model) == "1.bias"
    with torch.no_grad():
        model[0].weight[0, 0] = 3.4e38  # huge but finite: not flagged (a sum or norm would overflow)
        model[1].bias[0] = 0.0
    assert first_nonfinite_parameter(model) is None
