"""The remedies in the loop: each knob changes the gradient as its equation says, off equals absent.

Per-token checks on hand-sized tensors (token_mean over a (1, 4) or (2, 1) batch, on-policy so the
ratio is 1 and d loss_t / d logp_t = -A_t); then one-update gradients of the real loop on the tiny
model: micro-batching does not change the remedies' gradient, the degenerate settings equal off, the
sampler-mismatch metrics are logged.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from rlvr_cli.algo.aggregation import aggregate
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.objective import LossInputs, TokenSelection, step_advantages, token_loss, token_selection
from rlvr_cli.train.run_writer import RunDir
from test_train import _first_gradient as first_gradient  # one update of a tiny run, its gradient captured


def _recipe(*sets: str):
    return load_recipe("grpo", ["kl.placement=none", "kl.track=false", "loss.aggregation=token_mean", *sets])


def _grad(r, logp0, old, adv, mask, sel=None, is_weights=None, entropy=None):
    logp = logp0.clone().requires_grad_(True)
    ent = torch.zeros_like(logp0) if entropy is None else entropy
    loss, _ = token_loss(r, logp, ent, LossInputs(old, None, adv, mask, is_weights), sel=sel)
    aggregate(loss, mask, "token_mean", normalizer=float(mask.sum())).backward()
    return logp.grad


# --- the per-token loss, by hand ----------------------------------------------------------------------
def test_top_entropy_mask_keeps_the_numerator_of_the_top_tokens_and_the_whole_normaliser():
    logp = torch.tensor([[-1.0, -2.0, -0.5, -1.5]])
    mask, adv, ent = torch.ones(1, 4), torch.tensor([[1.0]]), torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    r = _recipe("loss.top_entropy_quantile=0.25")
    sel = token_selection(r, logp, ent, logp, adv, mask, torch.Generator())
    assert sel.threshold == pytest.approx(2.25)  # the 0.75 quantile of [0, 1, 2, 3]
    assert sel.keep.tolist() == [[False, False, False, True]]
    # off: every token -A / Z = -1/4; on: only the kept one, still over Z = 4 (not 1)
    assert _grad(r, logp, logp, adv, mask).tolist() == [[-0.25] * 4]
    assert _grad(r, logp, logp, adv, mask, sel=sel).tolist() == [[0.0, 0.0, 0.0, -0.25]]
    everything = token_selection(_recipe("loss.top_entropy_quantile=1"), logp, ent, logp, adv, mask, torch.Generator())
    assert torch.equal(_grad(r, logp, logp, adv, mask, sel=everything), _grad(r, logp, logp, adv, mask))


def test_clip_cov_detaches_one_candidate_and_without_candidates_equals_off():
    # the worked example of algo/entropy_remedies.py: logp [-1, -3], A [1, -1] -> cov [1, 1]
    logp, adv, mask = torch.tensor([[-1.0], [-3.0]]), torch.tensor([[1.0], [-1.0]]), torch.ones(2, 1)
    r = _recipe("loss.cov_penalty.type=clip_cov", "loss.cov_penalty.clip_ratio=0.5")
    sel = token_selection(r, logp, torch.zeros_like(logp), logp, adv, mask, torch.Generator().manual_seed(0))
    assert sel.cov.tolist() == [[1.0], [1.0]] and int(sel.cut.sum()) == 1  # max(1, floor(0.5 * 2))
    g = _grad(r, logp, logp, adv, mask, sel=sel)
    plain = _grad(r, logp, logp, adv, mask)
    assert plain.tolist() == [[-0.5], [0.5]]
    assert torch.equal(g, torch.where(sel.cut, torch.zeros_like(plain), plain))
    none = token_selection(_recipe("loss.cov_penalty.type=clip_cov", "loss.cov_penalty.lb=10", "loss.cov_penalty.ub=20"),
                           logp, torch.zeros_like(logp), logp, adv, mask, torch.Generator())
    assert not none.cut.any() and torch.equal(_grad(r, logp, logp, adv, mask, sel=none), plain)


def test_kl_cov_adds_coef_times_the_sign_of_the_log_ratio_on_the_top_token_and_is_inert_on_policy():
    logp, adv, mask = torch.tensor([[-1.0], [-2.0], [-3.0]]), torch.tensor([[2.0], [-1.0], [-1.0]]), torch.ones(3, 1)
    old = logp - 0.1  # log-ratio 0.1, inside the clip
    r = _recipe("loss.cov_penalty.type=kl_cov", "loss.cov_penalty.kl_ratio=0.34", "loss.cov_penalty.coef=2")
    sel = token_selection(r, logp, torch.zeros_like(logp), old, adv, mask, torch.Generator())
    assert sel.cov.tolist() == [[2.0], [0.0], [1.0]] and sel.penalised.tolist() == [[True], [False], [False]]
    diff = _grad(r, logp, old, adv, mask, sel=sel) - _grad(r, logp, old, adv, mask)
    assert diff.flatten().tolist() == pytest.approx([2 / 3, 0.0, 0.0])  # coef * sign(0.1) / Z
    on_policy = token_selection(r, logp, torch.zeros_like(logp), logp, adv, mask, torch.Generator())
    assert torch.equal(_grad(r, logp, logp, adv, mask, sel=on_policy), _grad(r, logp, logp, adv, mask))


def test_is_weights_scale_each_tokens_policy_gradient():
    logp, adv, mask = torch.tensor([[-1.0, -2.0, -0.5]]), torch.tensor([[1.0]]), torch.ones(1, 3)
    w = torch.tensor([[2.0, 0.5, 0.0]])
    r = _recipe()
    assert _grad(r, logp, logp, adv, mask, is_weights=w).flatten().tolist() == pytest.approx([-2 / 3, -0.5 / 3, 0.0])
    assert torch.equal(_grad(r, logp, logp, adv, mask, is_weights=torch.ones(1, 3)), _grad(r, logp, logp, adv, mask))


def test_selection_rows_follow_the_micro_batch():
    sel = TokenSelection(keep=torch.tensor([[True, False, True], [False, True, True]]), threshold=1.0)
    part = sel.rows(torch.tensor([1]), 2)
    assert part.keep.tolist() == [[False, True]] and part.cut is None and part.threshold == 1.0


# --- the advantage step ---------------------------------------------------------------------------
def test_passk_advantages_k1_is_plain_and_the_g4_c2_k2_example():
    rewards = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    plain, _, none = step_advantages(_recipe(), rewards)
    pk1, spread, passk = step_advantages(_recipe("advantage.passk.method=pkpo", "advantage.passk.k=1"), rewards)
    assert none is None and torch.equal(pk1, plain) and passk == pytest.approx(0.375)  # mean of 2/4 and 1/4
    pk2, spread, passk = step_advantages(
        _recipe("advantage.passk.method=pkpo", "advantage.passk.k=2", "advantage.scale=none"), rewards[:1])
    assert pk2.flatten().tolist() == pytest.approx([1 / 6, 1 / 6, -1 / 6, -1 / 6]) and passk == pytest.approx(5 / 6)
    assert spread.flatten().tolist() == pytest.approx([1, 1, 2 / 3, 2 / 3])  # the transformed rewards
    an, _, _ = step_advantages(_recipe("advantage.passk.method=analytic", "advantage.passk.k=2"), rewards[:1])
    a = (1 / 6) / math.sqrt(5 / 36)
    assert an.flatten().tolist() == pytest.approx([a, a, -a, -a], abs=1e-6)


def test_pkpo_with_k_equal_to_g_has_no_signal_under_a_group_mean_baseline():
    # any correct sample makes every R_i = 1: the group's rewards have no spread, so A = 0 everywhere
    rewards = torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    adv, spread, passk = step_advantages(_recipe("advantage.passk.method=pkpo", "advantage.passk.k=4"), rewards)
    assert torch.equal(adv, torch.zeros_like(adv)) and passk == 0.5


# --- the loop -------------------------------------------------------------------------------------
def _first_gradient(tiny_base, out: Path, monkeypatch, *sets: str) -> dict:
    return first_gradient(tiny_base, out.parent, monkeypatch, out.name, *sets)


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.allclose(a[k], b[k], atol=1e-7, rtol=1e-4) for k in a)


REMEDIES = ["loss.top_entropy_quantile=0.3", "loss.cov_penalty.type=clip_cov", "loss.cov_penalty.clip_ratio=0.05",
            "loss.cov_penalty.lb=-100", "loss.cov_penalty.ub=100"]


def test_micro_batches_do_not_change_the_remedies_gradient(tiny_base, tmp_path, monkeypatch):
    one = _first_gradient(tiny_base, tmp_path / "m1", monkeypatch, *REMEDIES, "optim.micro_batches=1")
    three = _first_gradient(tiny_base, tmp_path / "m3", monkeypatch, *REMEDIES, "optim.micro_batches=3")
    off = _first_gradient(tiny_base, tmp_path / "off", monkeypatch, "optim.micro_batches=1")
    assert _same(one, three)
    assert not _same(one, off)  # and the remedies do act
    rows = RunDir(tmp_path / "m3").read_metrics()
    assert 0.25 < rows[0]["top_entropy_kept_frac"] < 0.35 and rows[0]["cov_selected_frac"] > 0
    plain = RunDir(tmp_path / "off").read_metrics()[0]  # off: nothing to report, and the sampler's log-probs
    assert plain["top_entropy_kept_frac"] is None and plain["cov_mean"] is None and plain["mismatch_abs_mean"] is None


@pytest.mark.parametrize("sets", [
    ["loss.top_entropy_quantile=1"],
    ["loss.cov_penalty.type=clip_cov", "loss.cov_penalty.lb=1000", "loss.cov_penalty.ub=2000"],
    # mu = 1, one minibatch, behaviour log-probs recomputed in the update's chunks: log-ratio exactly 0
    ["loss.cov_penalty.type=kl_cov", "rollout.old_logprobs=recompute"],
    ["advantage.passk.method=pkpo", "advantage.passk.k=1"],
], ids=["top_entropy_q1", "clip_cov_no_candidate", "kl_cov_on_policy", "pkpo_k1"])
def test_degenerate_settings_give_the_plain_gradient(sets, tiny_base, tmp_path, monkeypatch):
    plain = _first_gradient(tiny_base, tmp_path / "plain", monkeypatch, *[s for s in sets if "old_logprobs" in s])
    assert _same(_first_gradient(tiny_base, tmp_path / "knob", monkeypatch, *sets), plain)


def test_bf16_sampling_logs_the_mismatch_and_the_correction_acts(tiny_base, tmp_path, monkeypatch):
    base = ["rollout.sample_autocast=bfloat16"]
    none = _first_gradient(tiny_base, tmp_path / "none", monkeypatch, *base)
    cut = _first_gradient(tiny_base, tmp_path / "cut", monkeypatch, *base, "rollout.is_correction.mode=token_mask",
                          "rollout.is_correction.cap=1.01")
    assert not _same(none, cut)
    status = json.loads((tmp_path / "none" / "run.json").read_text())
    assert status["old_logprobs"] == "recompute"
    n, c = RunDir(tmp_path / "none").read_metrics()[0], RunDir(tmp_path / "cut").read_metrics()[0]
    assert n["mismatch_abs_mean"] > 0 and n["is_ratio_p01"] < 1 < n["is_ratio_p99"]
    assert n["is_corrected_frac"] == 0 and n["is_weight_mean"] == 1
    assert c["mismatch_abs_mean"] == n["mismatch_abs_mean"]  # same samples, same recompute
    assert 0 < c["is_corrected_frac"] < 1 and c["is_weight_mean"] < 1
