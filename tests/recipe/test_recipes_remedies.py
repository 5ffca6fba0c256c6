"""Recipe fields of the entropy / pass@k / mismatch remedies: domains, cross-field checks, notes, presets."""

from __future__ import annotations

import textwrap

import pytest

from rlvr_cli.recipe.load import load_recipe, validate_recipe_data

BROKEN = [
    # (yaml body, field named in the error, a word of the message)
    ("loss:\n  top_entropy_quantile: 0\n", "loss.top_entropy_quantile", "greater than 0"),
    ("loss:\n  top_entropy_quantile: 1.5\n", "loss.top_entropy_quantile", "less than or equal to 1"),
    ("loss:\n  cov_penalty:\n    type: entropy_cov\n", "loss.cov_penalty", "clip_cov"),
    ("loss:\n  cov_penalty:\n    type: clip_cov\n    lb: 6\n", "loss.cov_penalty", "lb (6.0) must be <= ub"),
    ("loss:\n  cov_penalty:\n    type: kl_cov\n    kl_ratio: 0\n", "loss.cov_penalty.kl_ratio", "greater than 0"),
    ("loss:\n  cov_penalty:\n    type: kl_cov\n    clip_ratio: 0.1\n", "loss.cov_penalty.clip_ratio", "unknown field"),
    ("advantage:\n  passk:\n    method: pkpo\n    k: 16\n", "(recipe)", "exceeds rollout.group_size"),
    ("advantage:\n  passk:\n    method: pkpo\n    k: 0\n", "advantage.passk.k", "greater than or equal to 1"),
    ("advantage:\n  passk:\n    method: best_of\n    k: 2\n", "advantage.passk.method", "pkpo"),
    ("advantage:\n  passk:\n    k: 2\n", "advantage.passk.method", "required"),
    (
        "advantage:\n  passk:\n    method: analytic\n    k: 2\n"
        "reward:\n  terms:\n    - type: task\n    - type: format\n",
        "(recipe)", "binary",
    ),
    (
        "advantage:\n  passk:\n    method: pkpo\n    k: 2\noverlong:\n  soft_punish:\n    buffer: 8\n",
        "(recipe)", "soft_punish",
    ),
    ("rollout:\n  is_correction:\n    mode: token_clip\n", "rollout.is_correction.mode", "token_truncate"),
    ("rollout:\n  is_correction:\n    mode: token_mask\n    cap: 1\n", "rollout.is_correction.cap", "greater than 1"),
    (
        "rollout:\n  old_logprobs: sampler\n  is_correction:\n    mode: token_truncate\n",
        "(recipe)", "recomputed log-probs",
    ),
    ("rollout:\n  sample_autocast: int8\n", "rollout.sample_autocast", "bfloat16"),
]


@pytest.mark.parametrize("body,field,word", BROKEN)
def test_broken_remedy_field_names_the_field_and_exits_2(tmp_path, cli, body, field, word):
    p = tmp_path / "bad.yaml"
    p.write_text(body, encoding="utf-8")
    res = cli("recipes", "validate", str(p))
    assert res.code == 2 and "Traceback" not in res.stderr
    err = " ".join(res.stderr.split())
    assert f"{p}" in err and f": {field}:" in err and word in err, err


def test_defaults_are_off_and_the_papers_values():
    r = validate_recipe_data({})
    assert r.loss.top_entropy_quantile is None and r.loss.cov_penalty is None and r.advantage.passk is None
    assert (r.rollout.is_correction.mode, r.rollout.is_correction.cap, r.rollout.sample_autocast) == (
        "none", 2.0, "none")
    cc = validate_recipe_data({"loss": {"cov_penalty": {"type": "clip_cov"}}}).loss.cov_penalty
    kc = validate_recipe_data({"loss": {"cov_penalty": {"type": "kl_cov"}}}).loss.cov_penalty
    assert (cc.clip_ratio, cc.lb, cc.ub) == (2e-4, 1.0, 5.0) and (kc.kl_ratio, kc.coef) == (2e-3, 1.0)


def test_k_equal_to_the_group_size_is_allowed():
    r = validate_recipe_data({"rollout": {"group_size": 8}, "advantage": {"passk": {"method": "pkpo", "k": 8}}})
    assert r.advantage.passk.k == 8


def test_cap_low_is_below_one_and_cap_above():
    from rlvr_cli.errors import UserError

    ok = validate_recipe_data({"rollout": {"is_correction": {"mode": "token_mask", "cap": 1.5, "cap_low": 0.5}}})
    assert ok.rollout.is_correction.cap_low == 0.5
    with pytest.raises(UserError, match="cap_low"):
        validate_recipe_data({"rollout": {"is_correction": {"mode": "token_mask", "cap": 1.5, "cap_low": 1.2}}})


def _notes(data) -> str:
    return " ".join(validate_recipe_data(data).notes())


def test_notes_flag_inert_kl_cov_on_policy_but_not_clip_cov():
    on = {"optim": {"mu": 1, "minibatches": 1}}
    assert "KL-Cov is inert" in _notes({**on, "loss": {"cov_penalty": {"type": "kl_cov"}}})
    assert "KL-Cov is inert" not in _notes({**on, "loss": {"cov_penalty": {"type": "clip_cov"}}})
    off = {"optim": {"mu": 2, "minibatches": 2}, "loss": {"cov_penalty": {"type": "kl_cov"}}}
    assert "KL-Cov is inert" not in _notes(off)


def test_notes_say_when_the_fraction_is_under_one_token():
    # 16 * 8 * 64 / 2 = 4096 tokens at most per minibatch: 2e-4 * 4096 < 1, 2e-3 * 4096 > 1
    base = {"optim": {"mu": 2, "minibatches": 2}}
    assert "exactly one token" in _notes({**base, "loss": {"cov_penalty": {"type": "clip_cov"}}})
    assert "exactly one token" not in _notes({**base, "loss": {"cov_penalty": {"type": "kl_cov"}}})


def test_notes_on_is_correction():
    assert "correction is inert" in _notes({"rollout": {"is_correction": {"mode": "token_truncate"}}})
    real = {"rollout": {"sample_autocast": "bfloat16", "is_correction": {"mode": "token_truncate"}}}
    assert "inert" not in _notes(real)
    assert "measured but not corrected" in _notes({"rollout": {"sample_autocast": "bfloat16"}})


def test_note_when_analytic_passk_overrides_baseline_and_scale():
    pk = {"passk": {"method": "analytic", "k": 4}}
    assert "both are ignored" in _notes({"advantage": {**pk, "scale": "none"}})
    assert "both are ignored" not in _notes({"advantage": pk})


REMEDIES = ["baseline", "clip_higher", "kl_loss", "entropy_bonus", "top_entropy", "clip_cov", "kl_cov", "pkpo_k4",
            "passk_adv"]


def test_remedy_arms_differ_from_the_collapse_config_in_one_axis_each():
    base = load_recipe("experiments/remedies/baseline")
    collapse = load_recipe("experiments/entropy/collapse")
    assert (base.kl.placement, base.loss.clip.eps_high, base.optim.mu, base.optim.minibatches) == ("none", 0.2, 2, 2)
    assert base.optim.lr == collapse.optim.lr and base.eval.every == collapse.eval.every and base.steps == 100
    arms = {name: load_recipe(f"experiments/remedies/{name}") for name in REMEDIES}
    assert arms["clip_higher"].loss.clip.eps_high == 0.28
    assert arms["kl_loss"].kl.placement == "loss" and arms["kl_loss"].kl.beta > 0
    assert arms["entropy_bonus"].loss.entropy_coef > 0
    assert arms["top_entropy"].loss.top_entropy_quantile == 0.2
    assert arms["clip_cov"].loss.cov_penalty.type == "clip_cov"
    assert arms["kl_cov"].loss.cov_penalty.type == "kl_cov"
    assert (arms["pkpo_k4"].advantage.passk.method, arms["pkpo_k4"].advantage.passk.k) == ("pkpo", 4)
    assert arms["passk_adv"].advantage.passk.method == "analytic"


MISMATCH = {"none": 2.0, "token_truncate": 2.0, "token_mask": 2.0, "sequence_truncate": 2.0, "sequence_mask": 2.0,
            "token_truncate_tight": 1.02, "sequence_mask_tight": 1.05}


@pytest.mark.parametrize("name", sorted(MISMATCH))
def test_mismatch_arms_sample_in_bf16(name):
    r = load_recipe(f"experiments/mismatch/{name}")
    assert r.rollout.sample_autocast == "bfloat16" and r.rollout.is_correction.mode == name.removesuffix("_tight")
    assert r.rollout.is_correction.cap == MISMATCH[name]


def test_documented_example_loads(tmp_path):
    p = tmp_path / "r.yaml"
    p.write_text(textwrap.dedent("""
        loss:
          top_entropy_quantile: 0.2
          cov_penalty: {type: clip_cov, clip_ratio: 0.001}
        advantage:
          passk: {method: pkpo, k: 4}
        rollout:
          sample_autocast: bfloat16
          is_correction: {mode: sequence_mask, cap: 3.0}
        """), encoding="utf-8")
    r = load_recipe(str(p))
    assert r.loss.cov_penalty.clip_ratio == 0.001 and r.rollout.is_correction.cap == 3.0


def test_note_when_pkpo_with_k_equal_to_g_has_no_signal():
    k8 = {"rollout": {"group_size": 8}, "advantage": {"passk": {"method": "pkpo", "k": 8}}}
    assert "every advantage is 0" in _notes(k8)
    assert "every advantage is 0" not in _notes({"rollout": {"group_size": 8}, "advantage": {"passk": {"method": "pkpo", "k": 4}}})
    assert "every advantage is 0" not in _notes({**k8, "advantage": {"passk": {"method": "pkpo", "k": 8}, "baseline": "none"}})


def test_no_note_calls_a_remedy_unapplied_now_the_loop_applies_them():
    text = _notes({
        "loss": {"top_entropy_quantile": 0.2, "cov_penalty": {"type": "clip_cov"}},
        "advantage": {"passk": {"method": "pkpo", "k": 2}},
        "rollout": {"sample_autocast": "bfloat16", "is_correction": {"mode": "token_mask"}},
    })
    assert "does not apply" not in text and "trains without it" not in text
