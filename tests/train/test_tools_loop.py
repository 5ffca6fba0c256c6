"""Tools in the loop end to end (issue 48, the trainer side): a tiny model trains with a stand-in environment
under each ``environment.env_tokens`` mode, evaluates multi-turn, and resumes to the uninterrupted run.

The stand-in answers every model turn that ends with "," by "1" (the built-in model writes its carries
"15,3,10#..." with commas), so trajectories carry environment tokens without a warm start, and its own reward
(TRL's ``get_reward``) is 0.5 per call, so groups have a spread whatever the answers; the real environments are
the other side's (rlvr_cli/envs), tested there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import rlvr_cli.evaluation.decoding as decoding
from rlvr_cli.envs.protocol import EpisodeStats, ToolReply
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.rl import train_rl
from rlvr_cli.train.run_writer import RunDir

from conftest import interrupted_at_step, tiny_run

TIMING = {"step_time_s", "time_sample_s", "time_verify_s", "time_ref_s", "time_update_s", "tokens_per_s", "sample_s"}
SMALL = tiny_run("rollout.prompts_per_step=3", "rollout.group_size=4", "rollout.max_new_tokens=32", "eval.n=2",
                 "eval.num_prompts=4", "environment.factory=builtin:calculator")


class StandIn:
    """A turn ending with "," is a call, answered "1"; a turn with neither a call nor "#" is void."""

    stop_strings = (",",)

    def __init__(self, row: dict):
        self.stats, self.row = EpisodeStats(), row

    def reset(self, row):
        return None

    def step(self, text):
        self.stats.turns += 1
        if text.endswith(","):
            self.stats.calls += 1
            return ToolReply("1")
        if "#" not in text:
            self.stats.void_turns += 1
        return None

    def reward(self):
        return 0.5 * self.stats.calls


@pytest.fixture
def stand_in(monkeypatch):
    made = []

    def factory(spec, tokenizer, model_name, has_answer=None):
        made.append("factory")

        def build(row):
            made.append(row)
            return StandIn(row)
        return build

    monkeypatch.setattr(decoding, "episode_factory", factory)
    return made


def metrics(run_dir) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in RunDir(run_dir).read_metrics()]


def evals(run_dir) -> dict[int, dict]:
    out = {}
    for f in sorted((Path(run_dir) / "eval").glob("step_*.json")):
        e = json.loads(f.read_text())
        out[e["step"]] = {k: v for k, v in e.items() if k not in TIMING}
    return out


def test_each_env_tokens_mode_trains_and_the_modes_differ(tiny_base, tmp_path, stand_in):
    rows = {}
    for mode in ("mask", "train", "echo"):
        r = load_recipe("grpo", [f"model.name={tiny_base}", *SMALL, f"environment.env_tokens={mode}",
                                 "environment.echo_weight=0.5"])
        train_rl(r, tmp_path / mode)
        rows[mode] = metrics(tmp_path / mode)
    first = rows["mask"][0]
    assert first["tools/call_rate"] > 0 and 0 < first["tools/env_token_share"] < 1
    assert first["tools/prefix_mismatches"] == 0  # the character tokenizer
    assert first["tools/turns_mean"] > 1 and first["tools/failure_rate"] == 0
    for mode in ("train", "echo"):  # step 1 samples the same trajectories; the loss on them differs
        assert rows[mode][0]["reward_mean"] == first["reward_mean"]
        assert rows[mode][0]["tools/call_rate"] == first["tools/call_rate"]
        assert rows[mode][0]["loss"] != pytest.approx(first["loss"], abs=1e-7), mode
    assert len(rows["mask"]) == 2 and all(row["loss"] is not None for rs in rows.values() for row in rs)


def test_a_single_turn_run_logs_null_tool_metrics(tiny_base, tmp_path):
    r = load_recipe("grpo", [f"model.name={tiny_base}", *tiny_run("steps=1")])
    train_rl(r, tmp_path / "a")
    assert all(v is None for k, v in metrics(tmp_path / "a")[0].items() if k.startswith("tools/"))


def test_evaluation_is_multi_turn_and_a_resumed_run_equals_the_uninterrupted(tiny_base, tmp_path, monkeypatch,
                                                                              stand_in):
    r = load_recipe("grpo", [f"model.name={tiny_base}", *SMALL, "steps=3", "eval.at_start=true", "eval.every=2",
                             "checkpoint.every=2", "environment.void_turn_filter=true"])
    train_rl(r, tmp_path / "a")
    trained = r.rollout.prompts_per_step * r.rollout.group_size * r.steps
    rows = [m for m in stand_in if m != "factory"]
    assert len(rows) >= trained + 2 * r.eval.n * r.eval.num_prompts  # the evaluations (steps 0, 2, 3) made episodes too
    assert stand_in.count("factory") == 1  # the environment is loaded once per run, not per step or evaluation
    restore = interrupted_at_step(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        train_rl(r, tmp_path / "c")
    restore()
    train_rl(r, tmp_path / "c", resume=True)
    assert metrics(tmp_path / "c") == metrics(tmp_path / "a")
    assert evals(tmp_path / "c") == evals(tmp_path / "a")
    single = load_recipe("grpo", [f"model.name={tiny_base}", *[s for s in SMALL if not s.startswith("environment.")],
                                  "steps=1", "eval.at_start=true", "eval.every=0"])
    train_rl(single, tmp_path / "single")
    # the same initial weights, prompts and keys: the trajectories with the tool differ from the plain samples
    assert evals(tmp_path / "single")[0]["samples_digest"] != evals(tmp_path / "a")[0]["samples_digest"]


GDPO = ("reward.combination=decoupled", "reward.terms=[{type: task}, {type: format, weight: 0.5}]")


@pytest.mark.parametrize("changes, words", [
    (("rollout.top_k=5",), "rollout.top_k"), (("rollout.top_p=0.9",), "rollout.top_p"),
    (("rollout.ignore_eos=true",), "ignore_eos"), (("rollout.old_logprobs=sampler",), "old_logprobs"),
    (GDPO, "decoupled"),
])
def test_what_multi_turn_rollouts_would_get_wrong_is_refused(changes, words):
    with pytest.raises(Exception, match=words) as info:
        load_recipe("grpo", ["environment.factory=builtin:calculator", *changes])
    assert "environment:" in str(info.value)
    load_recipe("grpo", list(changes))  # single-turn, the same settings load


def test_the_notes_say_what_an_environment_costs_and_ignores():
    r = load_recipe("grpo", ["environment.factory=builtin:calculator", "environment.echo_weight=0.3",
                             "environment.kl_on_env_tokens=true", "kl.placement=none"])
    notes = " ".join(r.notes())
    assert "recomputed" in notes and "echo_weight" in notes and "kl_on_env_tokens" in notes
    assert "environment" not in " ".join(load_recipe("grpo").notes())
