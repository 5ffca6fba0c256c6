"""Runs at the ends of the numeric bounds train without NaN (issue 44): each knob the hostile cases broke
(CISPO / SAPO / GMPO / DPPO bounds, SAPO's tau, entropy control, GDPO weights, LoRA alpha, ...) at its
largest or smallest allowed value, two steps of the tiny run with mu = 2 so that the second update of each
step is off-policy and the bounds act. Their values of 1e300 / 1e-300 are refused (tests/recipe/
test_numeric_bounds.py)."""

from __future__ import annotations

import math

import pytest

from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.rl import train_rl
from rlvr_cli.train.run_writer import RunDir

from conftest import tiny_run, write_word_llama  # tests/conftest.py

AT_THE_BOUNDS = {
    "cispo": ["loss.objective.type=cispo", "loss.objective.eps_high=4.8e8", "loss.entropy_control.target=45",
              "loss.entropy_control.delta=1e4", "loss.entropy_control.coef_max=1e4", "kl.beta=1e4"],
    "sapo_gdpo": ["loss.objective.type=sapo", "loss.objective.tau_pos=1e-6", "loss.objective.tau_neg=1e6",
                  "reward.combination=decoupled", "reward.terms=[{type: task, weight: 1e4}, {type: format, weight: -1e4}]",
                  "overlong.soft_punish={buffer: 4, factor: 1e4}", "optim.adam_eps=1e-30"],
    "sapo_entropy": ["loss.objective.type=sapo", "loss.objective.tau_pos=1e6", "loss.objective.tau_neg=1e-6",
                     "loss.entropy_coef=1e4", "optim.adam_eps=1"],
    "gmpo": ["loss.objective.type=gmpo", "loss.objective.eps_low=20", "loss.objective.eps_high=20", "optim.lr=1",
             "optim.grad_clip=1e-30", "optim.weight_decay=1", "rollout.top_p=1e-6"],
    "dppo_kl": ["loss.objective.type=dppo_kl", "loss.objective.delta_low=125", "loss.objective.delta_high=125",
                "loss.objective.is_cap=4.8e8", "optim.grad_clip=1e30", "loss.cov_penalty={type: kl_cov, coef: 1e4}"],
    "ppo_clip": ["loss.clip.eps_high=4.8e8", "loss.clip.dual_clip=4.8e8", "kl.placement=reward", "kl.beta=1e4",
                 "loss.cov_penalty={type: clip_cov, lb: -1e6, ub: 1e6}"],
}


def _non_finite(run) -> list:
    return [(row["step"], k, v) for row in RunDir(run).read_metrics() for k, v in row.items()
            if isinstance(v, float) and not math.isfinite(v)]


@pytest.mark.parametrize("name", list(AT_THE_BOUNDS))
def test_a_run_at_the_bounds_has_finite_metrics(name, tiny_base, tmp_path):
    train_rl(load_recipe("grpo", [f"model.name={tiny_base}", *tiny_run("optim.mu=2"), *AT_THE_BOUNDS[name]]), tmp_path)
    rows = RunDir(tmp_path).read_metrics()
    assert len(rows) == 2 and not _non_finite(tmp_path)
    assert all(row["updates_skipped"] == 0 for row in rows)


def test_a_lora_run_at_the_largest_alpha_and_learning_rate_has_finite_metrics(tmp_path):
    pytest.importorskip("peft")
    root = write_word_llama(tmp_path)
    r = load_recipe("grpo", [
        f"model.name={root / 'model'}", "task.name=dataset", f"task.path={root / 'data.jsonl'}", "task.question_field=q",
        "task.answer_field=a", "task.verifier=integer", "task.eval_fraction=0.2", 'task.prompt_template="{q}\\n"',
        *tiny_run("optim.mu=2", "steps=3"), "model.lora.rank=1", "model.lora.alpha=65504", "optim.lr=1",
        "loss.entropy_coef=1"])  # the bonus moves the adapter even where every advantage is 0
    train_rl(r, tmp_path / "run")
    rows = RunDir(tmp_path / "run").read_metrics()
    assert not _non_finite(tmp_path / "run") and rows[-1]["kl_mean"] > 0  # the adapter moved the policy
