"""Seed grouping and labelling of variants by the recipe axes that differ."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the synthetic-run helpers, whatever pytest's import mode
from test_compare_synth import recipe, write_run

from rlvr_cli.compare.load import load_run
from rlvr_cli.compare.variants import differing_axes, format_value, group_variants
from rlvr_cli.errors import UserError


def _runs(tmp_path, recipes: dict[str, tuple[dict, int]]):
    return [
        load_run(write_run(tmp_path, name, rec=rec, seed=seed, steps=8, evals={}))
        for name, (rec, seed) in recipes.items()
    ]


def test_runs_differing_only_in_seed_and_bookkeeping_form_one_variant(tmp_path):
    runs = _runs(
        tmp_path,
        {
            "grpo_s0": (recipe(), 0),
            "grpo_s1": (recipe(**{"output_dir": "elsewhere", "threads": 2, "checkpoint.every": 10}), 1),
            "grpo_s2": (recipe(**{"eval.every": 5, "eval.pass_at_k": [1, 16], "reward.workers": 4}), 2),
        },
    )
    (v,) = group_variants(runs)
    assert v.seeds == [0, 1, 2] and v.label == "grpo"


def test_labels_name_the_differing_axes_not_the_directories(tmp_path):
    dapo_like = recipe(**{"kl.placement": "none", "kl.beta": 0.0, "loss.clip.eps_high": 0.28})
    runs = _runs(
        tmp_path, {"a_s0": (recipe(), 0), "b_s0": (dapo_like, 0), "a_s1": (recipe(), 1), "b_s1": (dapo_like, 1)}
    )
    base, dapo = group_variants(runs)
    assert [r.name for r in base.runs] == ["a_s0", "a_s1"] and dapo.seeds == [0, 1]
    assert differing_axes([base, dapo]) == ["loss.clip.eps_high", "kl.placement", "kl.beta"]
    assert base.label == "clip.eps_high=0.2, kl.placement=loss, kl.beta=0.04"
    assert dapo.label == "clip.eps_high=0.28, kl.placement=none"  # beta is implied by placement none
    assert dapo.axes == {"loss.clip.eps_high": 0.28, "kl.placement": "none", "kl.beta": 0.0}


def test_steps_identify_a_variant_only_under_a_decaying_schedule(tmp_path):
    runs = _runs(tmp_path, {"short": (recipe(steps=100), 0), "long": (recipe(steps=200), 1)})
    assert len(group_variants(runs)) == 1
    cos = {"optim.schedule": "cosine"}
    runs = _runs(tmp_path, {"c100": (recipe(steps=100, **cos), 0), "c200": (recipe(steps=200, **cos), 0)})
    assert [v.label for v in group_variants(runs)] == ["steps=100", "steps=200"]


def test_eval_settings_that_change_the_measurement_split_variants(tmp_path):
    runs = _runs(tmp_path, {"t1": (recipe(), 0), "t06": (recipe(**{"eval.temperature": 0.6}), 0)})
    assert [v.label for v in group_variants(runs)] == ["eval.temperature=1", "eval.temperature=0.6"]


def test_label_by_override_and_its_errors(tmp_path):
    runs = _runs(tmp_path, {"x_s0": (recipe(), 0), "y_s0": (recipe(**{"optim.lr": 3e-4, "optim.mu": 2}), 0)})
    assert [v.label for v in group_variants(runs, label_by="lr")] == ["optim.lr=0.0001", "optim.lr=0.0003"]
    assert [v.label for v in group_variants(runs, label_by="dir")] == ["x", "y"]
    with pytest.raises(UserError, match="not a recipe key"):
        group_variants(runs, label_by="kl.nonsense")
    assert [v.label for v in group_variants(runs, label_by="name")] == ["x", "y"]
    with pytest.raises(UserError, match="ambiguous, matches eval.every, checkpoint.every"):
        group_variants(runs, label_by="every")


def test_label_by_changed_names_only_what_each_arm_changes_from_the_control(tmp_path):
    runs = _runs(tmp_path, {
        "baseline_s0": (recipe(**{"kl.placement": "none", "kl.beta": 0.0}), 0),
        "higher_s0": (recipe(**{"kl.placement": "none", "kl.beta": 0.0, "loss.clip.eps_high": 0.28}), 0),
        "kl_s0": (recipe(**{"kl.placement": "loss", "kl.beta": 0.2}), 0),
    })
    assert [v.label for v in group_variants(runs)] == [
        "clip.eps_high=0.2, kl.placement=none", "clip.eps_high=0.28, kl.placement=none",
        "clip.eps_high=0.2, kl.placement=loss, kl.beta=0.2"]
    assert [v.label for v in group_variants(runs, label_by="changed")] == [
        "baseline", "clip.eps_high=0.28", "kl.placement=loss, kl.beta=0.2"]


def test_format_value_of_reward_terms():
    terms = [{"type": "task", "weight": 1.0}, {"type": "random", "p": 0.5, "weight": 1.0}]
    assert format_value(terms) == "[task*1, random(p=0.5)*1]"
    assert format_value(None) == "null" and format_value(True) == "true"


def test_a_section_set_in_one_variant_and_null_in_another_is_named_as_a_whole(tmp_path):
    plain, punished = recipe(), recipe()
    plain["overlong"] = {"mask_truncated": False, "soft_punish": None}
    punished["overlong"] = {"mask_truncated": False, "soft_punish": {"buffer": 16, "factor": 1.0}}
    runs = _runs(tmp_path, {"plain": (plain, 0), "punished": (punished, 0)})
    labels = sorted(v.label for v in group_variants(runs))
    assert labels == ["overlong.soft_punish=null", "overlong.soft_punish={buffer=16,factor=1}"]


def test_a_section_added_to_the_schema_later_does_not_split_old_and_new_runs(tmp_path):
    old, new = recipe(), recipe()
    new["environment"] = None  # written after the environment: section existed (off by default)
    on = recipe()
    on["environment"] = {"factory": "builtin:calculator"}
    (v,) = group_variants(_runs(tmp_path / "a", {"old": (old, 0), "new": (new, 1)}))
    assert v.seeds == [0, 1]
    # set in one run, the section is a real axis: absent and null there are the same choice, not a third
    variants = group_variants(_runs(tmp_path / "b", {"old": (old, 0), "new": (new, 1), "on": (on, 2)}))
    assert sorted(len(x.runs) for x in variants) == [1, 2]
