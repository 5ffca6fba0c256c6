"""Rows whose token loss is zero whatever the weights are forwarded without a backward.

A group with no reward spread has advantage exactly 0 under a group baseline, and without a loss term
that does not carry A (KL in the loss, an entropy bonus, KL-Cov's penalty) its rows' token losses are
-min(rho * 0, clip(rho) * 0) = 0: their backward adds nothing to the gradient. The trainer forwards
them without one (for the step's ratio, clip and entropy statistics and the loss value), which saves
the backward's two thirds of their cost. These tests hold the predicate to `token_loss` itself, and
the trainer to the same gradient, statistics and weights as backpropagating every row.
"""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

import rlvr_cli.train.rl as rl
from rlvr_cli.algo.aggregation import aggregate, aggregation_normalizer
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.objective import LossInputs, token_loss, token_selection, zero_loss_rows
from rlvr_cli.train.rl import train_rl
from rlvr_cli.train.run_writer import RunDir

TIMING = {"step_time_s", "time_sample_s", "time_verify_s", "time_ref_s", "time_update_s", "tokens_per_s"}

# recipe overrides -> whether rows with A = 0 may skip their backward
CASES = {
    "no KL (Dr. GRPO)": (["kl.placement=none"], True),
    "sequence ratio (GSPO)": (["kl.placement=none", "loss.ratio=sequence"], True),
    "dual clip": (["kl.placement=none", "loss.clip.dual_clip=3.0"], True),
    "top-entropy mask": (["kl.placement=none", "loss.top_entropy_quantile=0.5"], True),
    "Clip-Cov": (["kl.placement=none", "loss.cov_penalty.type=clip_cov"], True),
    "KL in the reward": (["kl.placement=reward", "kl.beta=0.1"], True),
    "KL in the loss": (["kl.placement=loss", "kl.beta=0.1"], False),
    "entropy bonus": (["kl.placement=none", "loss.entropy_coef=0.01"], False),
    "KL-Cov": (["kl.placement=none", "loss.cov_penalty.type=kl_cov", "loss.cov_penalty.kl_ratio=0.5"], False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_rows_it_names_get_exactly_zero_gradient_from_token_loss(case):
    sets, zero_loss_allowed = CASES[case]
    r = load_recipe("grpo", sets)
    g = torch.Generator().manual_seed(0)
    b, t = 6, 5
    logp = (-torch.rand(b, t, generator=g) * 3).requires_grad_()
    old = logp.detach() + 0.1 * torch.randn(b, t, generator=g)
    ref = logp.detach() + 0.3 * torch.randn(b, t, generator=g)
    ent = (torch.rand(b, t, generator=g) * 2).requires_grad_()
    adv = torch.tensor([0.0, 1.5, 0.0, -0.7, 0.0, 0.4])
    mask = torch.ones(b, t)
    mask[1, 3:] = 0
    mask[3] = 0  # no loss token (e.g. truncated and masked): zero-loss in every recipe
    sel = None
    if r.loss.top_entropy_quantile is not None or r.loss.cov_penalty is not None:
        sel = token_selection(r, logp.detach(), ent.detach(), old, adv.unsqueeze(1), mask, torch.Generator().manual_seed(1))
    zero_loss = zero_loss_rows(r, adv, ref, mask)
    loss, _ = token_loss(r, logp, ent, LossInputs(old, ref, adv.unsqueeze(1), mask), sel=sel)
    agg = aggregate(loss, mask, r.loss.aggregation, r.loss.length_constant,
                    normalizer=aggregation_normalizer(mask, r.loss.aggregation))
    agg.backward()
    grad = logp.grad.abs().sum(1) + (ent.grad.abs().sum(1) if ent.grad is not None else 0)
    assert torch.all(grad[zero_loss] == 0), grad  # exactly: nothing is lost by not backpropagating them
    assert grad[~zero_loss].max() > 0  # (a mask may still zero some of the others)
    if zero_loss_allowed:
        assert zero_loss.tolist() == [True, False, True, True, True, False]
    else:
        assert zero_loss.tolist() == [False, False, False, True, False, False]
        assert grad[[0, 2, 4]].min() > 0  # a term without A reaches the A = 0 rows: they must be backpropagated


def _run(tmp_path, name, monkeypatch, zero_groups, skip: bool, *sets):
    """A short Dr. GRPO run on the built-in model whose advantages are +-1 in each group but 0 in the
    groups ``zero_groups(step)`` (zero-loss rows and others however the samples fall); with ``skip`` False
    every row is backpropagated, as before the trainer forwarded zero-loss rows alone."""
    real_adv = rl.step_advantages
    calls = {"steps": 0, "forward_only_rows": 0}

    def advantages(recipe, shaped, terms=None):  # (P, G): +-1 within each group, 0 in the named groups (whatever was sampled)
        adv, spread, passk = real_adv(recipe, shaped, terms)
        adv = torch.tensor([1.0, -1.0]).repeat(adv.numel() // 2).view_as(adv)
        adv[zero_groups(calls["steps"])] = 0.0
        calls["steps"] += 1
        return adv, spread, passk

    real_micro = rl._micro_batch

    def micro(session, batch, idx, *a, backward, **k):
        if not backward:
            calls["forward_only_rows"] += len(idx)
        return real_micro(session, batch, idx, *a, backward=backward, **k)

    monkeypatch.setattr(rl, "step_advantages", advantages)
    monkeypatch.setattr(rl, "_micro_batch", micro)
    if not skip:
        monkeypatch.setattr(rl, "zero_loss_rows", lambda recipe, adv, ref, mask: torch.zeros_like(adv, dtype=torch.bool))
    out = tmp_path / name
    train_rl(load_recipe("dr_grpo", list(sets)), out)
    monkeypatch.undo()
    rows = [{k: v for k, v in row.items() if k not in TIMING} for row in RunDir(out).read_metrics()]
    return rows, load_file(out / "checkpoints" / f"step_{len(rows)}" / "model.safetensors"), calls["forward_only_rows"]


def _assert_close(a, b, rel=2e-5):
    assert a.keys() == b.keys()
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, float) and isinstance(y, float):
            assert abs(x - y) <= rel * max(abs(x), abs(y)) + 1e-7, (k, x, y)
        else:
            assert x == y, (k, x, y)


# adam_eps 1e-3: Adam's m / sqrt(v) would turn the rounding of a near-zero gradient into a whole lr step
SETS = ["rollout.prompts_per_step=4", "rollout.group_size=4", "rollout.max_new_tokens=40", "optim.mu=2",
        "optim.minibatches=2", "optim.micro_batches=2", "optim.lr=3e-4", "optim.adam_eps=1e-3",
        "eval.at_start=false", "eval.every=0", "checkpoint.every=0", "kl.track=false"]


def test_forwarding_them_alone_keeps_the_statistics_and_the_weights(tiny_base, tmp_path, monkeypatch):
    sets = [f"model.name={tiny_base}", *SETS, "steps=2"]
    halves = lambda step: [0, 2]  # noqa: E731 - two of the four groups, every step
    with_skip, w_skip, forwarded = _run(tmp_path, "skip", monkeypatch, halves, True, *sets)
    without, w_all, none_forwarded = _run(tmp_path, "all", monkeypatch, halves, False, *sets)
    assert forwarded > 0 and none_forwarded == 0  # the zero-loss rows took the forward-only path, and only here
    for a, b in zip(with_skip, without):
        _assert_close(a, b)  # entropy, ratios, clip fractions, loss, grad norm: the same to float rounding
    assert with_skip[0]["adv_abs_mean"] > 0
    for k in w_all:
        assert torch.allclose(w_skip[k], w_all[k], atol=1e-6, rtol=0), k


def test_a_minibatch_of_only_zero_loss_rows_still_steps_with_zero_gradients(tiny_base, tmp_path, monkeypatch):
    # step 1 trains; step 2's advantages are all zero: AdamW's moments still move the weights, as they
    # did when the rows were backpropagated with their zero gradients
    sets = [f"model.name={tiny_base}", *SETS, "steps=2", "optim.mu=1", "optim.minibatches=1", "optim.weight_decay=0.1"]
    second_all = lambda step: [0, 1, 2, 3] if step >= 1 else []  # noqa: E731
    untouched = lambda step: []  # noqa: E731
    rows_skip, w_skip, forwarded = _run(tmp_path, "skip", monkeypatch, second_all, True, *sets)
    rows_all, w_all, _ = _run(tmp_path, "all", monkeypatch, second_all, False, *sets)
    _, w_one_step, _ = _run(tmp_path, "one", monkeypatch, untouched, True, *sets, "steps=1")
    assert forwarded == 16  # every row of step 2
    assert rows_skip[1]["adv_abs_mean"] == 0 and rows_skip[1]["updates"] == 1 and rows_skip[1]["updates_empty"] == 0
    assert rows_skip[1]["grad_norm"] == 0.0
    for k in w_all:
        assert torch.allclose(w_skip[k], w_all[k], atol=1e-7, rtol=0), k
    assert any(not torch.equal(w_skip[k], w_one_step[k]) for k in w_skip)  # step 2 did move the weights
