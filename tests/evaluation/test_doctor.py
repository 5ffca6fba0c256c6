"""`rlvr doctor`: it passes a recipe with a learning signal, fails one whose responses are all cut or whose
prompts do not fit, and its counts are the hand-computed ones; its responses are step 1's."""

from __future__ import annotations

import torch

import rlvr_cli.evaluation.doctor as doctor
from rlvr_cli.evaluation.doctor import Finding, _disagreement, _silent_groups
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.rl import train_rl
from rlvr_cli.train.rollouts import sources

from conftest import tiny_run  # tests/conftest.py


def test_dr_grpo_passes(cli):
    res = cli("doctor", "dr_grpo")
    assert res.code == 0, res.stderr
    assert "groups with no learning signal" in res.stderr and "doctor:" not in res.stderr
    assert "reward terms" in res.stderr and "sample: '" in res.stderr


def test_the_recipe_notes_of_recipes_validate_come_with_it(cli):
    res = cli("doctor", "dr_grpo", "--set", "optim.minibatches=1", "--prompts", "2")
    assert res.code == 0, res.stderr
    assert "note: optim.mu = 1 with one minibatch" in " ".join(res.stderr.split())


def test_every_response_cut_fails_with_one_line_per_reason(cli):
    res = cli("doctor", "dr_grpo", "--set", "rollout.max_new_tokens=1")
    assert res.code == 3, res.stderr
    reasons = [line for line in res.stderr.splitlines() if line.startswith("doctor:")]
    assert len(reasons) == 2, res.stderr
    assert reasons[0].startswith("doctor: truncated responses: every response was cut at rollout.max_new_tokens = 1")
    assert reasons[1].startswith("doctor: groups with no learning signal: every advantage is 0")


def test_a_prompt_longer_than_the_context_fails(cli):
    res = cli("doctor", "dr_grpo", "--set", "rollout.max_new_tokens=510")  # the built-in model has 512 positions
    assert res.code == 3, res.stderr
    (reason,) = [line for line in res.stderr.splitlines() if line.startswith("doctor:")]
    assert "prompts longer than the context" in reason and "exceeds the model's 512 positions" in reason


def test_an_sft_recipe_is_bad_input(cli):
    res = cli("doctor", "base_sft")
    assert res.code == 2 and "algorithm" in res.stderr, res.stderr


def test_help_states_the_exit_codes(cli):
    res = cli("doctor", "--help")
    text = " ".join(res.stdout.split())
    assert res.code == 0 and "3 the run would learn nothing or stop" in text and "2 bad input" in text, res.stdout


# --- the counts, by hand -----------------------------------------------------------------------------------------
def test_wrong_at_least_as_high_as_right_is_counted_per_pair():
    # group 1: right 1.0 vs wrongs 0.2 and 1.0 -> 1 bad of 2; group 2: right 0.5 vs wrong 0.5 -> 1 of 1; group 3: all wrong
    rewards = torch.tensor([[1.0, 0.2, 1.0], [0.5, 0.5, 0.5], [0.0, 0.0, 0.0]])
    correct = torch.tensor([[True, False, False], [True, False, True], [False, False, False]])
    f = _disagreement(rewards, correct)
    assert (f.value, f.verdict) == ("wrong >= right in 3 of 4 (75%) pairs", "warn")
    ok = _disagreement(torch.tensor([[1.0, 0.0]]), torch.tensor([[True, False]]))
    assert (ok.value, ok.verdict) == ("wrong >= right in 0 of 1 (0%) pairs", "ok")
    assert _disagreement(torch.zeros(1, 2), torch.zeros(1, 2, dtype=torch.bool)).verdict == "info"


def test_silent_groups_follow_the_baseline_and_the_mask():
    shaped = torch.tensor([[1.0, 1.0], [0.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    terms = shaped.unsqueeze(-1)
    cut = torch.tensor([[False, False], [False, False], [True, True]])
    grpo = load_recipe("grpo")
    assert _silent_groups(grpo, shaped, terms, cut).tolist() == [True, True, False]
    # without a baseline, a group of 1s still pushes up what it sampled; a group of 0s does not
    reinforce = load_recipe("grpo", ["advantage.baseline=none", "advantage.scale=none"])
    assert _silent_groups(reinforce, shaped, terms, cut).tolist() == [False, True, False]
    masked = load_recipe("grpo", ["overlong.mask_truncated=true"])
    assert _silent_groups(masked, shaped, terms, cut).tolist() == [True, True, True]


def test_failures_are_the_fail_findings():
    from rlvr_cli.evaluation.doctor import Diagnosis

    d = Diagnosis([Finding("a", "1", "ok"), Finding("b", "2", "FAIL", "why b"), Finding("c", "3", "warn", "why c")],
                  [], [], 1, 1)
    assert d.failures == ["b: why b"]


def test_the_doctors_responses_are_a_one_step_runs_step_1_samples(tiny_base, tmp_path, monkeypatch):
    """The doctor samples with the trainer's own round: its responses, prompt by prompt and sample by sample,
    are the ones a run samples at step 1 (top-p on: the truncated sampler and its keys too)."""
    r = load_recipe("grpo", [f"model.name={tiny_base}", *tiny_run("rollout.prompts_per_step=4", "rollout.group_size=3",
                                                                   "rollout.max_new_tokens=12", "steps=1"),
                             "rollout.top_p=0.9", "rollout.temperature=1.5"])
    trained, doctored = {}, []
    real_collect, real_round = sources.collect_rollouts, doctor.sample_round

    def collect(session, task, scorer, step):
        groups, stats = real_collect(session, task, scorer, step)
        trained[step] = groups
        return groups, stats

    def spy(*args):
        doctored.append(real_round(*args))
        return doctored[-1]

    monkeypatch.setattr(sources, "collect_rollouts", collect)
    monkeypatch.setattr(doctor, "sample_round", spy)
    train_rl(r, tmp_path / "run")
    diag = doctor.diagnose(r, num_prompts=4)
    (step1,) = trained.values()
    (sampled,) = doctored
    assert sampled.prompt_ids == [g.prompt_ids for g in step1]
    assert sampled.samples.response_ids == [ids for g in step1 for ids in g.response_ids]
    assert sampled.texts == [t for g in step1 for t in g.texts]
    assert len(set(sampled.texts)) > 3  # the responses differ: equal lists say something
    assert [s["response"] for s in diag.samples] == [g.texts[0] for g in step1]
    # what the top-p finding says is what the trainer does: step 1 keeps each token's sampling support, on which
    # the loss renormalises its log-probs (tests/algo/test_algo_logprobs.py checks that by hand)
    assert all(len(g.supports) == len(g.response_ids) for g in step1) and any(bool((s.sizes > 0).any()) for g in step1 for s in g.supports)
    (finding,) = [f for f in diag.findings if f.check == "sampling"]
    assert finding.verdict == "warn" and "renormalised on the support" in finding.detail


def test_the_sampling_finding_names_what_trains_and_where():
    """Top-p / top-k: a warning that the truncated policy trains, naming the code and doc that show it (they
    exist); the full distribution: ok."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for knob in ("rollout.top_p=0.9", "rollout.top_k=5"):
        f = doctor._sampling(load_recipe("grpo", [knob]))
        assert f.verdict == "warn" and "untruncated" not in f.detail and "renormalised" in f.detail
        assert (root / "rlvr_cli" / "algo" / "logprobs.py").is_file() and (root / "docs" / "async.md").is_file()
        assert "rlvr_cli/algo/logprobs.py" in f.detail and "docs/async.md" in f.detail
    f = doctor._sampling(load_recipe("grpo", []))
    assert f.verdict == "ok" and "full distribution" in f.value


def test_the_reward_checked_is_the_trainers_with_the_environments_parts():
    """get_reward() and environment.call_cost enter the doctor's reward as they enter step 1's: a group
    whose terms are all equal still has spread when its trajectories make different numbers of calls."""
    from rlvr_cli.evaluation.doctor import Diagnosis, Trajectories, _check_scores
    from rlvr_cli.rewards.scorer import Score, ScoreItem
    from rlvr_cli.tasks.base import Problem

    recipe = load_recipe("recipes/experiments/tools/mask.yaml", ["environment.call_cost=0.1"])
    g = recipe.rollout.group_size
    items = [ScoreItem(Problem(id="p", prompt="1*2=", reference="2"), "#2", k, 1, False, [1, 2]) for k in range(g)]
    scores = [Score(1.0, True, "correct", "2", {"task": 1.0}) for _ in range(g)]

    def spread(traj):
        d = Diagnosis([], [], [], 1, g)
        _check_scores(recipe, items, scores, d, traj)
        return next(f.value for f in d.findings if f.check == "groups with zero reward spread")

    assert spread(Trajectories([0.0] * g, [0] * g, [0] * g)) == "1 of 1 (100%)"
    assert spread(Trajectories([0.0] * g, [1] + [0] * (g - 1), [0] * g)) == "0 of 1 (0%)"  # one call priced 0.1
    assert spread(Trajectories([0.5] + [0.0] * (g - 1), [0] * g, [0] * g)) == "0 of 1 (0%)"  # get_reward() added
    free = load_recipe("recipes/experiments/tools/mask.yaml")  # call_cost 0: calls alone change nothing
    d = Diagnosis([], [], [], 1, g)
    _check_scores(free, items, scores, d, Trajectories([0.0] * g, [1] + [0] * (g - 1)))
    assert next(f.value for f in d.findings if f.check == "groups with zero reward spread") == "1 of 1 (100%)"


def test_the_tool_call_finding_warns_when_the_base_never_calls():
    from rlvr_cli.evaluation.doctor import Trajectories

    assert Trajectories([0.0] * 4, [0] * 4).finding([True] * 4) is None  # single-turn: no line
    never = Trajectories([0.0] * 4, [0] * 4, [0] * 4).finding([False, True, False, False])
    assert (never.check, never.value, never.verdict) == ("tool calls", "no trajectory of 4 calls the tool", "warn")
    # 2 of 4 call (3 calls, 1 failed); right 2/2 with a call, 0/2 without
    some = Trajectories([0.0] * 4, [1, 2, 0, 0], [0, 1, 0, 0]).finding([True, True, False, False])
    assert (some.value, some.verdict) == ("2 of 4 (50%) of trajectories call; 1 of 3 (33%) calls fail; "
                                          "accuracy 1.00 with a call, 0.00 without", "info")
