"""The trainer end to end: every shipped recipe runs, runs are deterministic and resumable, knobs act.

Runs here are tiny (a few prompts, a few steps) on the warm-started built-in model, built once per
test session by the `tiny_base` fixture.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from rlvr_cli.errors import RunFailed, UserError
from rlvr_cli.recipe.load import list_shipped, load_recipe
from rlvr_cli.train.rl import train_rl
from rlvr_cli.train.run_writer import RunDir
from rlvr_cli.train.sft import train_sft

from conftest import interrupted_at_step, tiny_run, write_word_llama  # tests/conftest.py: shared tiny-run overrides and models

TIMING = {"step_time_s", "time_sample_s", "time_verify_s", "time_ref_s", "time_update_s", "tokens_per_s", "sample_s"}
SMALL = tiny_run("rollout.prompts_per_step=4", "rollout.group_size=4", "rollout.max_new_tokens=40", "eval.n=4",
                 "eval.num_prompts=8", "eval.every=2", "checkpoint.every=2", without=("eval.at_start",))
RL_RECIPES = [n for n, _ in list_shipped()  # on the tiny model: not the presets of a real model (chat form, LoRA)
              if load_recipe(n).algorithm == "rl" and load_recipe(n).model.name.startswith("builtin:")]
SFT_RECIPES = [n for n, _ in list_shipped() if load_recipe(n).algorithm == "sft"]


def metrics(run_dir) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in RunDir(run_dir).read_metrics()]


def evals(run_dir) -> dict[int, dict]:
    out = {}
    for f in sorted((Path(run_dir) / "eval").glob("step_*.json")):
        e = json.loads(f.read_text())
        out[e["step"]] = {k: v for k, v in e.items() if k not in TIMING}
    return out


def recipe(name: str, tiny_base, *sets: str):
    return load_recipe(name, [f"model.name={tiny_base}", *SMALL, *sets])


@pytest.mark.parametrize("name", RL_RECIPES)
def test_every_shipped_rl_recipe_trains(name, tiny_base, tmp_path, cli):
    out = tmp_path / name
    small = SMALL + (["advantage.passk.k=2"] if load_recipe(name).advantage.passk else [])  # k <= the small G = 4
    res = cli("train", name, "--out", str(out), "--set", f"model.name={tiny_base}", *[a for s in small for a in ("--set", s)])
    assert res.code == 0, res.stderr
    rows = RunDir(out).read_metrics()
    assert [r["step"] for r in rows] == [1, 2]
    required = ("step reward_mean accuracy kl_mean kl_max entropy len_mean len_correct len_incorrect truncated_frac "
                "clip_low_frac clip_high_frac ratio_max zero_std_frac groups_dropped_frac grad_norm lr step_time_s gen_tokens").split()
    for r in rows:
        assert set(required) <= set(r), set(required) - set(r)
        assert 0 <= r["accuracy"] <= 1 and r["gen_tokens"] > 0
    status = json.loads((out / "run.json").read_text())
    rec = load_recipe(name)  # bf16 sampling, an IS correction or tool replies need the trainer's own log-probs
    ro = rec.rollout
    want = ("recompute" if ro.sample_autocast != "none" or ro.is_correction.mode != "none" or rec.environment
            else "sampler")
    assert status["status"] == "finished" and status["old_logprobs"] == want
    assert sorted(evals(out)) == [0, 2]
    assert (out / "checkpoints" / "step_2" / "model.safetensors").is_file()
    assert (out / "samples" / "step_2.jsonl").is_file()
    assert "pass@1" in res.stderr and str(out) in res.stderr  # the closing table


@pytest.mark.parametrize("name", SFT_RECIPES)
def test_every_shipped_sft_recipe_trains(name, tmp_path):
    sets = ["model.name=builtin:tiny-init", "steps=2", "sft.batch_size=8", "eval.n=2", "eval.num_prompts=4"]
    if load_recipe(name).sft.data:  # a recipe that reads an earlier stage's output: give it a file
        data = tmp_path / "pairs.jsonl"
        data.write_text("".join(json.dumps({"prompt": f"00{i}+00{i}=", "response": f"#{2 * i}"}) + "\n" for i in range(8)))
        sets.append(f"sft.data={data}")
    train_sft(load_recipe(name, sets), tmp_path / "run")
    assert [r["step"] for r in RunDir(tmp_path / "run").read_metrics()] == [1, 2]
    assert (tmp_path / "run" / "checkpoints" / "step_2" / "config.json").is_file()


def test_same_seed_same_metrics_and_resume_equals_uninterrupted(tiny_base, tmp_path, monkeypatch):
    r = recipe("grpo", tiny_base, "steps=4")
    train_rl(r, tmp_path / "a")
    train_rl(r, tmp_path / "b")
    assert metrics(tmp_path / "a") == metrics(tmp_path / "b")

    restore = interrupted_at_step(monkeypatch, 4)
    with pytest.raises(KeyboardInterrupt):
        train_rl(r, tmp_path / "c")
    assert json.loads((tmp_path / "c" / "run.json").read_text())["status"] == "interrupted"
    assert len(metrics(tmp_path / "c")) == 3  # step 3 was logged, but the last checkpoint is step 2
    restore()
    with pytest.raises(UserError, match="--resume"):
        train_rl(r, tmp_path / "c")
    train_rl(r, tmp_path / "c", resume=True)
    assert metrics(tmp_path / "c") == metrics(tmp_path / "a")
    assert evals(tmp_path / "c") == evals(tmp_path / "a")


def test_resume_after_a_kill_mid_write(tiny_base, tmp_path):
    r = recipe("dr_grpo", tiny_base, "steps=4")
    train_rl(r, tmp_path / "a")
    d = tmp_path / "d"
    train_rl(load_recipe("dr_grpo", [f"model.name={tiny_base}", *SMALL, "steps=4"]), d)
    # Make d look like a run killed while writing step 4's checkpoint and metrics line:
    import shutil

    shutil.rmtree(d / "checkpoints" / "step_4")
    (d / "checkpoints" / ".tmp-step_4-12345").mkdir()
    (d / "checkpoints" / ".tmp-step_4-12345" / "config.json").write_text("{")
    lines = (d / "metrics.jsonl").read_text().splitlines()
    (d / "metrics.jsonl").write_text("\n".join(lines[:3]) + "\n" + lines[3][:25])
    (d / "eval" / "step_4.json").unlink()
    train_rl(r, d, resume=True)
    assert metrics(d) == metrics(tmp_path / "a")
    assert not list((d / "checkpoints").glob(".tmp-*"))


def test_a_finished_run_continued_to_more_steps_equals_the_longer_run(tiny_base, tmp_path):
    """`--resume` with a larger `steps` (and another name) continues a finished run: its metrics and
    evaluations are those of the longer run trained from the start, and the saved recipe is the new one."""
    train_rl(recipe("grpo", tiny_base, "steps=4", "name=long"), tmp_path / "long")
    train_rl(recipe("grpo", tiny_base, "steps=2", "name=short"), tmp_path / "run")
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "finished"
    train_rl(recipe("grpo", tiny_base, "steps=4", "name=long"), tmp_path / "run", resume=True)
    assert [r["step"] for r in metrics(tmp_path / "run")] == [1, 2, 3, 4]
    assert metrics(tmp_path / "run") == metrics(tmp_path / "long")
    assert evals(tmp_path / "run") == evals(tmp_path / "long")
    status = json.loads((tmp_path / "run" / "run.json").read_text())
    assert status["status"] == "finished" and status["name"] == "long"
    assert status["extended"] == [{"from_steps": 2, "to_steps": 4, "at_step": 2}]
    assert load_recipe(str(tmp_path / "run" / "recipe.yaml")) == recipe("grpo", tiny_base, "steps=4", "name=long")
    # continued again, after run.json's record was hand-damaged: a fresh record, not a crash
    (tmp_path / "run" / "run.json").write_text(json.dumps({**status, "extended": "junk"}))
    train_rl(recipe("grpo", tiny_base, "steps=5", "name=long"), tmp_path / "run", resume=True)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["extended"] == [
        {"from_steps": 4, "to_steps": 5, "at_step": 4}]


@pytest.mark.parametrize("sets, problem", [
    (["steps=1"], "cannot be shortened below what it has trained"),
    (["steps=4", "optim.schedule=cosine"], "optim.schedule"),  # the schedule differs too: named as a difference
    (["steps=4", "loss.clip.eps_high=0.3"], "loss.clip.eps_high"),
])
def test_continuing_a_run_refuses_what_would_not_be_the_longer_run(tiny_base, tmp_path, sets, problem):
    train_rl(recipe("grpo", tiny_base, "steps=2"), tmp_path / "a")
    before = (tmp_path / "a" / "metrics.jsonl").read_text()
    with pytest.raises(UserError, match=problem):
        train_rl(recipe("grpo", tiny_base, *sets), tmp_path / "a", resume=True)
    assert (tmp_path / "a" / "metrics.jsonl").read_text() == before


def test_continuing_a_run_whose_saved_steps_was_edited_into_a_string_is_a_user_error(tiny_base, tmp_path):
    train_rl(recipe("grpo", tiny_base, "steps=2"), tmp_path / "a")
    saved = tmp_path / "a" / "recipe.yaml"
    saved.write_text(saved.read_text().replace("\nsteps: 2\n", "\nsteps: two\n"))
    with pytest.raises(UserError, match="saved steps is not an integer"):
        train_rl(recipe("grpo", tiny_base, "steps=4"), tmp_path / "a", resume=True)


def test_continuing_refuses_a_decaying_schedule(tiny_base, tmp_path):
    train_rl(recipe("grpo", tiny_base, "steps=2", "optim.schedule=linear"), tmp_path / "lin")
    with pytest.raises(UserError, match="function of the total steps"):
        train_rl(recipe("grpo", tiny_base, "steps=4", "optim.schedule=linear"), tmp_path / "lin", resume=True)


PRORL = ("optim.lr=1e-3", "eval.every=2")


def test_a_run_that_ended_on_a_reset_step_continued_makes_the_skipped_reset(tiny_base, tmp_path):
    """A run does not reset its reference on its last step; continued to more steps it makes that reset
    on resuming, as the longer run made it after that step."""
    train_rl(recipe("grpo", tiny_base, "steps=4", "kl.ref_reset_every=2", *PRORL), tmp_path / "long")
    train_rl(recipe("grpo", tiny_base, "steps=2", "kl.ref_reset_every=2", *PRORL), tmp_path / "run")
    train_rl(recipe("grpo", tiny_base, "steps=4", "kl.ref_reset_every=2", *PRORL), tmp_path / "run", resume=True)
    rows = metrics(tmp_path / "run")
    assert rows == metrics(tmp_path / "long") and evals(tmp_path / "run") == evals(tmp_path / "long")
    assert rows[2]["kl_mean"] < 1e-9 < rows[1]["kl_mean"]  # step 3 starts from the fresh reference


def test_a_run_without_resets_continued_with_them_from_the_first_reset_step(tiny_base, tmp_path):
    """The first N steps of a run that resets every N are those of the same run without resets: such a
    run (finished, or with its later checkpoints removed) continues as the run with resets, and says so."""
    train_rl(recipe("grpo", tiny_base, "steps=4", "kl.ref_reset_every=2", *PRORL), tmp_path / "reset")
    train_rl(recipe("grpo", tiny_base, "steps=4", *PRORL), tmp_path / "plain")
    import shutil

    shutil.copytree(tmp_path / "plain", tmp_path / "branch")
    shutil.rmtree(tmp_path / "branch" / "checkpoints" / "step_4")
    with pytest.raises(UserError, match="trained 4 steps without a reset"):  # a reset would have fallen inside
        train_rl(recipe("grpo", tiny_base, "steps=4", "kl.ref_reset_every=2", *PRORL), tmp_path / "plain", resume=True)
    train_rl(recipe("grpo", tiny_base, "steps=4", "kl.ref_reset_every=2", *PRORL), tmp_path / "branch", resume=True)
    assert metrics(tmp_path / "branch") == metrics(tmp_path / "reset")
    assert evals(tmp_path / "branch") == evals(tmp_path / "reset")
    assert metrics(tmp_path / "branch") != metrics(tmp_path / "plain")
    status = json.loads((tmp_path / "branch" / "run.json").read_text())
    assert status["ref_reset_changed"] == [{"from": None, "to": 2, "at_step": 2}]
    assert load_recipe(str(tmp_path / "branch" / "recipe.yaml")).kl.ref_reset_every == 2


def test_resume_refuses_a_different_recipe(tiny_base, tmp_path):
    r = recipe("grpo", tiny_base, "steps=2")
    train_rl(r, tmp_path / "a")
    with pytest.raises(UserError, match="loss.clip.eps_high"):
        train_rl(recipe("grpo", tiny_base, "steps=2", "loss.clip.eps_high=0.3"), tmp_path / "a", resume=True)


def _first_gradient(tiny_base, tmp_path, monkeypatch, name, *sets) -> dict[str, torch.Tensor]:
    """The accumulated gradient of the first optimiser update of a one-step run."""
    import rlvr_cli.train.loop as loop

    grads: list[dict] = []
    real = loop.grad_norm_and_clip

    def capture(params, max_norm):
        params = list(params)
        if not grads:
            grads.append({i: p.grad.detach().clone() for i, p in enumerate(params) if p.grad is not None})
        return real(params, max_norm)

    monkeypatch.setattr(loop, "grad_norm_and_clip", capture)
    r = recipe("grpo", tiny_base, "steps=1", "eval.at_start=false", "eval.every=0", *sets)
    train_rl(r, tmp_path / name)
    return grads[0]


@pytest.mark.parametrize("agg", ["seq_mean_token_mean", "token_mean", "seq_mean_token_sum_norm"])
def test_micro_batches_do_not_change_the_gradient(tiny_base, tmp_path, monkeypatch, agg):
    one = _first_gradient(tiny_base, tmp_path, monkeypatch, "m1", f"loss.aggregation={agg}", "optim.micro_batches=1")
    four = _first_gradient(tiny_base, tmp_path, monkeypatch, "m4", f"loss.aggregation={agg}", "optim.micro_batches=4")
    assert one.keys() == four.keys() and any(g.abs().max() > 0 for g in one.values())
    for k in one:
        assert torch.allclose(one[k], four[k], atol=1e-7, rtol=1e-4), k


def test_on_policy_single_update_never_clips(tiny_base, tmp_path):
    r = recipe("grpo", tiny_base, "optim.minibatches=1", "optim.mu=1", "eval.at_start=false")
    train_rl(r, tmp_path / "r")
    for row in metrics(tmp_path / "r"):
        assert row["clip_low_frac"] == 0 and row["clip_high_frac"] == 0
        assert abs(row["ratio_max"] - 1) < 1e-4 and abs(row["ratio_min"] - 1) < 1e-4


def test_kl_in_the_reward_subtracts_beta_times_the_sequence_k1(tiny_base, tmp_path):
    # A reference unlike the policy (the untrained model) makes sum_t k1 large.
    r = recipe("grpo_kl_in_reward", tiny_base, "model.reference=builtin:tiny-init", "kl.estimator=k1",
               "kl.beta=0.01", "steps=1", "eval.at_start=false")
    train_rl(r, tmp_path / "r")
    row = metrics(tmp_path / "r")[0]
    assert row["kl_seq_mean"] > 10
    assert row["reward_shaped_mean"] == pytest.approx(row["reward_mean"] - 0.01 * row["kl_seq_mean"], rel=1e-4)


def test_dynamic_sampling_refills_and_reports(tiny_base, tmp_path):
    r = recipe("dapo", tiny_base, "rollout.prompts_per_step=8", "dynamic_sampling.max_rounds=3", "steps=2",
               "eval.at_start=false")
    train_rl(r, tmp_path / "r")
    for row in metrics(tmp_path / "r"):
        assert row["ds_prompts"] == 8 * row["ds_rounds"]
        assert row["batch_groups"] <= 8
        dropped = round(row["groups_dropped_frac"] * row["ds_prompts"])
        # either the batch was filled, or every round was used
        assert row["batch_groups"] == 8 or row["ds_rounds"] == 3
        assert row["ds_prompts"] - dropped >= row["batch_groups"]
        assert row["zero_std_frac"] == 0  # no constant group survives the filter (accuracy-based, no shaping ties)


def test_dynamic_sampling_carries_on_with_an_empty_batch(tmp_path):
    # The untrained model is never right: every group is all-wrong and is filtered out.
    r = load_recipe("dapo", ["model.name=builtin:tiny-init", *SMALL, "dynamic_sampling.max_rounds=2",
                             "eval.at_start=false", "rollout.max_new_tokens=20"])
    train_rl(r, tmp_path / "r")
    for row in metrics(tmp_path / "r"):
        assert (row["ds_rounds"], row["batch_groups"], row["groups_dropped_frac"]) == (2, 0, 1.0)
        assert row["updates"] == row["updates_empty"] == 2 and row["accuracy"] == 0.0  # slots pass, no step


def test_non_finite_updates_are_skipped_then_fail_the_run(tiny_base, tmp_path, monkeypatch, cli):
    import rlvr_cli.algo.policy_loss as objective  # ppo_clip's registry entry calls it from here

    real = objective.clipped_surrogate

    def nan_loss(*a, **k):
        out = real(*a, **k)
        out.loss = out.loss * float("nan")
        return out

    monkeypatch.setattr(objective, "clipped_surrogate", nan_loss)
    r = recipe("grpo", tiny_base, "optim.max_skipped_in_row=3", "steps=3", "eval.at_start=false")
    with pytest.raises(RunFailed, match="non-finite"):
        train_rl(r, tmp_path / "r")
    rows = metrics(tmp_path / "r")
    assert rows[0]["updates_skipped"] == 2 and math.isnan(rows[0]["loss"])
    status = json.loads((tmp_path / "r" / "run.json").read_text())
    assert status["status"] == "failed" and "non-finite" in status["error"]


def test_reference_reset_and_resume_across_it(tiny_base, tmp_path, monkeypatch):
    sets = ("kl.ref_reset_every=2", "steps=4", "optim.lr=1e-3", "eval.every=0", "eval.at_start=false")
    r = recipe("grpo", tiny_base, *sets)
    train_rl(r, tmp_path / "a")
    rows = metrics(tmp_path / "a")
    assert rows[2]["kl_mean"] < 1e-9 < rows[1]["kl_mean"]  # step 3 starts from a fresh reference
    import rlvr_cli.train.rl as rl

    real = rl._train_step
    monkeypatch.setattr(rl, "_train_step", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt) if a[-1] == 3 else real(*a))
    with pytest.raises(KeyboardInterrupt):
        train_rl(r, tmp_path / "b")
    monkeypatch.setattr(rl, "_train_step", real)
    train_rl(r, tmp_path / "b", resume=True)
    assert metrics(tmp_path / "b") == rows


def test_a_local_model_with_another_tokenizer(tmp_path):
    """Nothing assumes the built-in tokenizer: a Llama from a config with a word-level vocabulary whose
    special ids differ, saved to a directory and loaded by path, on a dataset task from a JSONL file."""
    write_word_llama(tmp_path)
    data = tmp_path / "data.jsonl"
    r = load_recipe("grpo", [
        f"model.name={tmp_path / 'model'}", "task.name=dataset", f"task.path={data}", "task.question_field=q",
        "task.answer_field=a", "task.verifier=integer", "task.eval_fraction=0.2", 'task.prompt_template="{q}\\n"',
        *SMALL, "rollout.max_new_tokens=6", "eval.max_new_tokens=6"])
    train_rl(r, tmp_path / "run")
    assert len(metrics(tmp_path / "run")) == 2
    assert (tmp_path / "run" / "checkpoints" / "step_2" / "tokenizer.json").is_file()


def test_sft_from_a_jsonl_file_and_its_errors(tmp_path, cli):
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"{a:03d}+{a:03d}=", "response": f"#{2 * a}"}) + "\n" for a in range(40)))
    out = tmp_path / "sft"
    res = cli("train", "base_sft", "--out", str(out), "--set", f"sft.data={data}", "--set", "steps=3",
              "--set", "sft.batch_size=16", "--set", "eval.n=2", "--set", "eval.num_prompts=4")
    assert res.code == 0, res.stderr
    assert [r["step"] for r in RunDir(out).read_metrics()] == [1, 2, 3]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "1+1=", "response": "#2"}\nnot json\n{"prompt": 3}\n')
    res = cli("train", "base_sft", "--out", str(tmp_path / "sft2"), "--set", f"sft.data={bad}")
    assert res.code == 2
    assert f"{bad}:2: not JSON" in res.stderr and f"{bad}:3:" in res.stderr


def test_bad_input_to_train_exits_2(tmp_path, cli):
    assert cli("train", "grpo", "--set", "loss.clip.eps_low=2").code == 2
    assert cli("train", str(tmp_path / "missing.yaml")).code == 2
    res = cli("train", "grpo", "--out", str(tmp_path / "x"), "--set", "model.name=builtin:nope")
    assert res.code == 2 and "unknown built-in model" in res.stderr


def test_sft_warm_start_is_deterministic(tmp_path):
    r = load_recipe("base_sft", ["steps=3", "sft.batch_size=8", "eval.n=2", "eval.num_prompts=4"])
    train_sft(r, tmp_path / "a")
    train_sft(r, tmp_path / "b")
    assert metrics(tmp_path / "a") == metrics(tmp_path / "b")


def test_resume_of_a_run_with_a_corrupt_saved_recipe_is_a_user_error(tmp_path, cli):
    run = tmp_path / "run"
    run.mkdir()
    (run / "recipe.yaml").write_text("steps: [unclosed\n")
    res = cli("train", "grpo", "--out", str(run), "--resume")
    assert res.code == 2 and "cannot read the run's saved recipe" in res.stderr


def test_ignore_eos_makes_every_rollout_max_length(tiny_base, tmp_path):
    """`rollout.ignore_eos` reaches the trainer's sampler: fixed work per step (every response L_max tokens)."""
    sets = tiny_run(f"model.name={tiny_base}", "steps=1", "rollout.max_new_tokens=12", without=("eval.every",))
    normal = RunDir(train_rl(load_recipe("dr_grpo", sets), tmp_path / "eos")).read_metrics()[0]
    fixed = RunDir(train_rl(load_recipe("dr_grpo", [*sets, "rollout.ignore_eos=true"]), tmp_path / "fixed")).read_metrics()[0]
    assert normal["len_mean"] < 12  # the warm-started model answers in fewer than 12 tokens
    assert fixed["len_mean"] == 12 and fixed["truncated_frac"] == 1.0 and fixed["gen_tokens"] == 4 * 12
