"""The objective family's schema (issue 30): each refusal is one `file:line: field: problem` line, exit 2,
and says why the other knob would be inert or meaningless; the allowed compositions load."""

from __future__ import annotations

import textwrap

import pytest

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.load import load_recipe

REFUSED = [
    # (yaml body extending grpo, the field the line names, words of the reason)
    ("loss:\n  objective:\n    type: sapo\n  clip:\n    eps_high: 0.28\n", "loss", "clip: only objective ppo_clip"),
    ("loss:\n  objective:\n    type: cispo\n  clip:\n    dual_clip: 3.0\n", "loss", "inert under cispo"),
    ("loss:\n  objective:\n    type: gmpo\n  ratio: sequence\n", "loss", "geometric mean of clipped token ratios"),
    ("loss:\n  objective:\n    type: dppo_tv\n  ratio: sequence\n", "loss", "each token's probability"),
    ("loss:\n  objective:\n    type: gmpo\n  aggregation: token_mean\n", "loss", "weight sequences by length"),
    ("loss:\n  entropy_coef: 0.5\n  entropy_control:\n    target: 0.3\n    coef_max: 0.1\n", "loss", "c_0"),
    ("loss:\n  entropy_control:\n    target: 0.3\n    coef_min: 0.2\n    coef_max: 0.1\n", "loss.entropy_control", "coef_min"),
    ("advantage:\n  scale: mean\nreward:\n  terms:\n    - type: task\n      weight: 2.0\n", "(recipe)", "binary reward"),
    ("advantage:\n  scale: mean\noverlong:\n  soft_punish:\n    buffer: 8\n", "(recipe)", "binary reward"),
    ("advantage:\n  scale: mean\nkl:\n  placement: reward\n", "(recipe)", "binary reward"),
    ("advantage:\n  scale: mean\n  passk:\n    method: pkpo\n    k: 2\n", "(recipe)", "passk"),
    ("loss:\n  objective:\n    type: cispo\n    eps_lo: 0.1\n", "loss.objective.eps_lo", "unknown field"),
    ("loss:\n  objective:\n    type: sapo\n    tau_pos: 0\n", "loss.objective.tau_pos", "greater than or equal to 0.000001"),
    ("loss:\n  objective:\n    type: dppo_kl\n    is_cap: 1.0\n", "loss.objective.is_cap", "greater than 1"),
    ("loss:\n  objective:\n    type: dppo_tv\n    delta_low: 2\n", "loss.objective", "must be <= 1"),
    ("loss:\n  objective:\n    type: cispo\n    eps_high: 1.0e+300\n", "loss.objective.eps_high", "less than or equal to 480000000"),
    ("loss:\n  objective:\n    type: sapo\n    tau_neg: 1.0e-300\n", "loss.objective.tau_neg", "greater than or equal to 0.000001"),
    ("loss:\n  objective:\n    type: trpo\n", "loss.objective", "ppo_clip"),
]


@pytest.mark.parametrize("body,field,words", REFUSED, ids=[f"{i}" for i in range(len(REFUSED))])
def test_refused_with_one_line_naming_the_field(body, field, words, tmp_path, cli):
    path = tmp_path / "r.yaml"
    path.write_text("extends: grpo\n" + body, encoding="utf-8")
    with pytest.raises(UserError) as e:
        load_recipe(str(path))
    lines = str(e.value).splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"{path}:") and f": {field}: " in lines[0] and words in lines[0], lines[0]
    res = cli("recipes", "validate", str(path))
    assert res.code == 2 and words in res.stderr


ALLOWED = [
    ["loss.objective.type=cispo", "loss.ratio=sequence"],  # one weight per sequence: a meaningful CISPO-GSPO
    ["loss.objective.type=sapo", "loss.ratio=sequence"],
    ["advantage.scale=mean", "advantage.baseline=none"],  # MaxRL without control variate: r / mean
    ["advantage.scale=mean", "advantage.baseline=leave_one_out"],
    ["loss.objective.type=dppo_tv", "loss.cov_penalty.type=clip_cov"],
    ["loss.entropy_control.target=0.3", "loss.top_entropy_quantile=0.2"],
    ["loss.objective.type=gmpo", "rollout.is_correction.mode=token_truncate"],
]


@pytest.mark.parametrize("sets", ALLOWED)
def test_compositions_the_math_allows_load(sets):
    load_recipe("grpo", sets)


def test_dppo_deltas_resolve_per_divergence_and_notes_say_on_policy():
    tv, kl = (load_recipe("grpo", [f"loss.objective.type={k}"]).loss.objective for k in ("dppo_tv", "dppo_kl"))
    assert (tv.delta_low, tv.delta_high, kl.delta_low, kl.delta_high) == (0.15, 0.15, 0.05, 0.05)
    r = load_recipe("grpo", ["loss.objective.type=cispo", "optim.minibatches=1"])
    assert any("differ only off-policy" in n for n in r.notes())
    loo = load_recipe("grpo", ["advantage.scale=mean", "advantage.baseline=leave_one_out"])
    assert any("G/(G-1)" in n for n in loo.notes())


def test_the_saved_recipe_round_trips(tmp_path):
    from rlvr_cli.recipe.load import dump_recipe

    r = load_recipe("grpo", ["loss.objective.type=dppo_kl", "loss.entropy_control.target=0.4", "advantage.scale=mean"])
    path = tmp_path / "saved.yaml"
    path.write_text(dump_recipe(r), encoding="utf-8")
    assert load_recipe(str(path)) == r


def test_the_presets_cite_their_papers():
    from rlvr_cli.recipe.load import find_recipe

    for name, arxiv in (("cispo", "2506.13585"), ("maxrl", "2602.02710"), ("sapo", "2511.20347"), ("gmpo", "2507.20673")):
        text = textwrap.dedent(find_recipe(name).read_text(encoding="utf-8"))
        assert f"arXiv:{arxiv}" in text.splitlines()[0] + text.splitlines()[1], name
    assert load_recipe("cispo").loss.objective.eps_high == 4.0 and load_recipe("cispo").loss.aggregation == "token_mean"
    assert load_recipe("maxrl").advantage.scale == "mean" and load_recipe("maxrl").loss.clip.dual_clip == 3.0
    assert load_recipe("sapo").loss.objective.tau_neg == 1.05
    assert load_recipe("gmpo").loss.objective.eps_low == 0.4
