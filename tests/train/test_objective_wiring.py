"""loss.objective, advantage.scale `mean` and loss.entropy_control wired into the trainer (issue 30).

The formulas' own tests are tests/test_algo_{objectives,trust_region,maxrl,entropy_control}.py; here: the
recipe -> formula glue on hand-made tensors, then the trainer path (micro-batching leaves an off-policy
update's gradient unchanged for every objective; the adaptive entropy state survives a resume).
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from rlvr_cli import algo
from rlvr_cli.algo.advantages import maxrl_advantages
from rlvr_cli.algo.objectives import cispo_surrogate, gmpo_surrogate, sapo_surrogate
from rlvr_cli.algo.policy_loss import RATIOS, clipped_surrogate, token_log_ratio
from rlvr_cli.algo.trust_region import dppo_surrogate
from rlvr_cli.errors import UserError
from rlvr_cli.recipe import schema
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train import objective as train_objective
from rlvr_cli.train.objective import EntropyControl, LossInputs, policy_surrogate, step_advantages, token_loss
from rlvr_cli.train.rl import train_rl
from rlvr_cli.train.run_writer import RunDir

from conftest import interrupted_at_step  # tests/conftest.py

SMALL = ["rollout.prompts_per_step=4", "rollout.group_size=4", "rollout.max_new_tokens=40", "eval.n=4",
         "eval.num_prompts=8", "eval.every=0", "eval.at_start=false", "checkpoint.every=0", "steps=1"]
TIMING = {"step_time_s", "time_sample_s", "time_verify_s", "time_ref_s", "time_update_s", "tokens_per_s", "sample_s"}
OBJECTIVE_SETS = {
    "ppo_clip": [],
    "cispo": ["loss.objective.type=cispo", "loss.objective.eps_high=0.01"],
    "sapo": ["loss.objective.type=sapo"],
    "gmpo": ["loss.objective.type=gmpo", "loss.objective.eps_low=0.01", "loss.objective.eps_high=0.01"],
    "dppo_tv": ["loss.objective.type=dppo_tv", "loss.objective.delta_low=0.01", "loss.objective.delta_high=0.01"],
    "dppo_kl": ["loss.objective.type=dppo_kl", "loss.objective.delta_low=1e-6", "loss.objective.delta_high=1e-6"],
}


def _recipe(*sets: str):
    return load_recipe("grpo", list(sets))


# --- one source for the names (the objectives' own: tests/recipe/test_objectives.py) -------------
def test_maxrl_scale_name_agrees():
    assert "mean" in schema.literal_values(schema.AdvantageScale) and "mean" in algo.SCALES


# --- the glue on tensors ----------------------------------------------------------------------------
def _tensors():
    logp = torch.tensor([[-0.5, -1.0, -2.0], [-0.2, -0.1, -3.0]], requires_grad=True)
    old = torch.tensor([[-0.9, -0.7, -2.0], [-0.2, -0.6, -1.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    adv = torch.tensor([[1.0], [-0.5]])
    return logp, old, mask, adv


@pytest.mark.parametrize("name", list(OBJECTIVE_SETS))
def test_policy_surrogate_calls_the_objectives_function_with_the_recipes_parameters(name):
    r = _recipe(*OBJECTIVE_SETS[name], "loss.ratio=token")
    logp, old, mask, adv = _tensors()
    got = policy_surrogate(r, logp, old, adv, mask)
    o, lr = r.loss.objective, token_log_ratio(logp, old, mask)
    want = {
        "ppo_clip": lambda: clipped_surrogate(lr, adv, 0.2, 0.2, None).loss,
        "cispo": lambda: cispo_surrogate(logp, lr, adv, None, 0.01).loss,
        "sapo": lambda: sapo_surrogate(lr, adv, 1.0, 1.05).loss,
        "gmpo": lambda: gmpo_surrogate(lr, adv, mask, 0.01, 0.01).loss,
        "dppo_tv": lambda: dppo_surrogate(logp, old, adv, "tv", 0.01, 0.01, o.is_cap).loss,
        "dppo_kl": lambda: dppo_surrogate(logp, old, adv, "kl", 1e-6, 1e-6, o.is_cap).loss,
    }[name]()
    assert torch.equal(got.loss, want)
    assert got.dual_clip.shape == got.loss.shape and not bool(got.dual_clip.any())


def test_cispo_keeps_the_gradient_ppo_clip_cuts_through_token_loss():
    # token 0 of row 0: rho = exp(0.4) = 1.49 > 1.2 with A = +1: PPO's gradient is 0, CISPO's -1.2 (capped)
    logp, old, mask, adv = _tensors()
    rows = LossInputs(old, None, adv, mask)
    for sets, want in (([], 0.0), (["loss.objective.type=cispo", "loss.objective.eps_high=0.2"], -1.2)):
        lp = logp.detach().clone().requires_grad_(True)
        loss, sur = token_loss(_recipe(*sets), lp, torch.zeros_like(lp), rows)
        (g,) = torch.autograd.grad((loss * mask).sum(), lp)
        assert g[0, 0].item() == pytest.approx(want) and bool(sur.clip_high[0, 0])


def test_sequence_ratio_reaches_cispo_and_sapo():
    logp, old, mask, adv = _tensors()
    for kind in ("cispo", "sapo"):
        r = _recipe(f"loss.objective.type={kind}", "loss.ratio=sequence")
        seq = RATIOS["sequence"](logp, old, mask)
        got = policy_surrogate(r, logp, old, adv, mask)
        assert got.ratio[0, 0] == got.ratio[0, 1] == pytest.approx(math.exp(seq[0, 0].item()))


def test_maxrl_scale_is_maxrl_advantages():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    adv, _, _ = step_advantages(_recipe("advantage.scale=mean"), rewards)
    assert torch.allclose(adv, maxrl_advantages(rewards), atol=1e-5)
    assert adv[0].tolist() == pytest.approx([3.0, -1.0, -1.0, -1.0], abs=1e-4)  # the example
    assert adv[2].abs().sum() == 0 and adv[3].abs().sum() == 0


def test_entropy_control_state_steps_as_the_worked_example():
    # target 0.2, delta 0.005, c_0 0: e = 0.5 -> c 0 (alpha 0); e = 0.1 -> c 0.005, alpha 0.005; e 0.1 -> 0.010; e 0.3 -> 0.005
    r = _recipe("loss.entropy_control.target=0.2")
    state: dict = {}
    ctl = EntropyControl.from_state(r, state)
    assert ctl.alpha(r) == 0.0 and ctl.last_entropy == math.inf
    seen = []
    for e in (0.5, 0.1, 0.1, 0.3):
        ctl.advance(r, e)
        ctl.save(state)
        ctl = EntropyControl.from_state(r, state)  # through the saved state, as across a checkpoint
        seen.append((round(ctl.coef, 6), round(ctl.alpha(r), 6)))
    assert seen == [(0.0, 0.0), (0.005, 0.005), (0.01, 0.01), (0.005, 0.0)]


def test_the_adaptive_alpha_replaces_the_fixed_coefficient_in_token_loss():
    logp, old, mask, adv = _tensors()
    r = _recipe("loss.entropy_control.target=0.2", "loss.entropy_coef=0.3")
    ent = torch.ones_like(old)
    base, _ = token_loss(r, logp, ent, LossInputs(old, None, adv, mask), entropy_coef=0.0)
    bonus, _ = token_loss(r, logp, ent, LossInputs(old, None, adv, mask), entropy_coef=0.1)
    assert torch.allclose(base - bonus, torch.full_like(base, 0.1))


# --- the trainer path -----------------------------------------------------------------------------
# bf16 sampling with the sampler's log-probs as the behaviour policy's: the first update is already
# off-policy (rho != 1 from the rounding), from the same weights whatever the micro-batching, so every
# objective acts on it (comparing a later update would compare two runs that already differ by rounding)
OFF_POLICY = ["rollout.sample_autocast=bfloat16", "rollout.old_logprobs=sampler", "kl.placement=none"]


def _update_gradient(tiny_base, out, monkeypatch, *sets: str, update: int = 1) -> dict:
    """The accumulated gradient of optimiser update ``update``."""
    import rlvr_cli.train.loop as loop

    grads: list[dict] = []
    real = loop.grad_norm_and_clip

    def capture(params, max_norm):
        params = list(params)
        grads.append({i: p.grad.detach().clone() for i, p in enumerate(params) if p.grad is not None})
        return real(params, max_norm)

    monkeypatch.setattr(loop, "grad_norm_and_clip", capture)
    train_rl(load_recipe("grpo", [f"model.name={tiny_base}", *SMALL, "optim.lr=3e-3", *sets]), out)
    monkeypatch.setattr(loop, "grad_norm_and_clip", real)
    return grads[update - 1]


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-7, rtol=1e-4) for k in a)


@pytest.mark.parametrize("name", [n for n in OBJECTIVE_SETS if n != "ppo_clip"])
def test_micro_batches_leave_each_objectives_off_policy_gradient_unchanged(name, tiny_base, tmp_path, monkeypatch):
    sets = [*OBJECTIVE_SETS[name], *OFF_POLICY]
    one = _update_gradient(tiny_base, tmp_path / "m1", monkeypatch, *sets, "optim.micro_batches=1")
    three = _update_gradient(tiny_base, tmp_path / "m3", monkeypatch, *sets, "optim.micro_batches=3")
    ppo = _update_gradient(tiny_base, tmp_path / "ppo", monkeypatch, *OFF_POLICY, "optim.micro_batches=1")
    assert any(g.abs().max() > 0 for g in one.values())
    assert _same(one, three), name
    assert not _same(one, ppo), name  # off-policy the objective acts
    m1, m3 = (RunDir(tmp_path / d).read_metrics()[0] for d in ("m1", "m3"))
    assert m1["clip_low_frac"] + m1["clip_high_frac"] > 0 or name == "sapo"  # the bounds were reached
    for key in ("loss", "clip_low_frac", "clip_high_frac", "ratio_max", "ratio_min"):
        assert m1[key] == pytest.approx(m3[key], rel=1e-4, abs=1e-7), key


ADAPTIVE = ["loss.entropy_control.target=45", "loss.entropy_control.delta=0.01", "kl.placement=none"]


def test_adaptive_entropy_acts_and_its_state_survives_a_resume(tiny_base, tmp_path, monkeypatch):
    # target far above any entropy (45 nats, the bound: log 2**64 = 44.4): c grows by delta every update (2 per step), alpha from update 2 on
    r = load_recipe("grpo", [f"model.name={tiny_base}", *SMALL, "steps=4", "checkpoint.every=2", *ADAPTIVE])
    train_rl(r, tmp_path / "a")
    rows = [{k: v for k, v in row.items() if k not in TIMING} for row in RunDir(tmp_path / "a").read_metrics()]
    assert [row["entropy_coef_state"] for row in rows] == pytest.approx([0.02, 0.04, 0.06, 0.08])
    assert [row["entropy_coef"] for row in rows] == pytest.approx([0.005, 0.025, 0.045, 0.065])  # mean of the 2 alphas (c before each update; 0 on the first)
    restore = interrupted_at_step(monkeypatch, 4)
    with pytest.raises(KeyboardInterrupt):
        train_rl(r, tmp_path / "c")
    restore()
    train_rl(r, tmp_path / "c", resume=True)  # from the step-2 checkpoint: steps 3 and 4 again
    resumed = [{k: v for k, v in row.items() if k not in TIMING} for row in RunDir(tmp_path / "c").read_metrics()]
    assert resumed == rows
    assert json.loads((tmp_path / "c" / "run.json").read_text())["status"] == "finished"


def test_without_entropy_control_the_new_metrics_are_null(tiny_base, tmp_path):
    train_rl(load_recipe("grpo", [f"model.name={tiny_base}", *SMALL]), tmp_path / "r")
    row = RunDir(tmp_path / "r").read_metrics()[0]
    assert row["entropy_coef"] is None and row["entropy_coef_state"] is None


# --- GDPO: reward.combination decoupled -----------------------------------------------------------------
GDPO = ["reward.combination=decoupled", "reward.terms=[{type: task}, {type: format, weight: 0.5}]"]


def test_decoupled_combination_is_refused_where_it_would_be_inert_or_undefined():
    with pytest.raises(UserError, match="at least two reward.terms"):
        _recipe("reward.combination=decoupled")
    with pytest.raises(UserError, match="advantage.baseline must be group_mean"):
        load_recipe("dr_grpo", GDPO)  # no std: decoupling equals the centred sum
    with pytest.raises(UserError, match="kl.placement = reward"):
        _recipe(*GDPO, "kl.placement=reward", "kl.beta=0.01")


def test_step_advantages_of_decoupled_terms_is_the_worked_example():
    """The worked example of algo/reward_combination.py through the recipe: weights 1 and 1."""
    r = _recipe("reward.combination=decoupled", "reward.terms=[{type: task}, {type: format, weight: 1}]",
                "rollout.group_size=2", "rollout.prompts_per_step=2")
    values = torch.tensor([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    terms = train_objective.decoupled_terms(r, values, torch.tensor([5, 5, 5, 5]))
    shaped = (values * torch.tensor([1.0, 1.0])).sum(dim=1).view(2, 2)
    adv, spread, passk = step_advantages(r, shaped, terms)
    assert adv.flatten().tolist() == pytest.approx([0.5477, -0.5477, 1.0954, -1.0954], abs=1e-4)
    assert passk is None and torch.equal(spread, shaped)
    summed, _, _ = step_advantages(r, shaped)  # the sum normalised: both prompts alike
    assert summed.flatten().tolist() == pytest.approx([0.7071, -0.7071, 0.7071, -0.7071], abs=1e-4)


def test_decoupled_terms_add_the_soft_overlong_penalty_as_a_term_of_weight_one():
    r = _recipe(*GDPO, "rollout.max_new_tokens=10", "overlong.soft_punish={buffer: 4, factor: 1.0}")
    values, weights = train_objective.decoupled_terms(r, torch.zeros(2, 2), torch.tensor([4, 8]))
    assert weights == [1.0, 0.5, 1.0]
    assert values[:, 2].tolist() == pytest.approx([0.0, -0.5])  # start 10 - 4 = 6: (6 - 8) / 4
    assert train_objective.decoupled_terms(_recipe(), torch.zeros(2, 1), torch.tensor([4, 8])) is None


def test_a_decoupled_run_trains_end_to_end(tiny_base, tmp_path):
    r = load_recipe("grpo", [f"model.name={tiny_base}", *SMALL, *GDPO])
    train_rl(r, tmp_path / "g")
    row = RunDir(tmp_path / "g").read_metrics()[0]
    assert math.isfinite(row["loss"]) and row["step"] == 1


def test_a_rank_without_groups_builds_an_empty_batch_with_term_values():
    """A rank that gets no group of the step (fewer groups than ranks) must not fail on the reward terms."""
    from rlvr_cli.train.batch import Batch

    batch = Batch.from_groups([], range(0, 0), group_size=4, pad_id=0, device=torch.device("cpu"))
    assert batch.term_values.shape == (0, 0) and len(batch) == 0
