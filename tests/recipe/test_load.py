"""Recipe loading and validation: shipped recipes, broken recipes, `extends`, `--set`, `recipes show`."""

from __future__ import annotations

import textwrap

import pytest
import yaml

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.load import dump_recipe, list_shipped, load_recipe, validate_recipe_data
from rlvr_cli.recipe.schema import Recipe

SHIPPED = [name for name, _ in list_shipped()]


def write(tmp_path, name: str, text: str):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return p


def test_the_required_presets_ship():
    for name in ("grpo", "dr_grpo", "dapo", "gspo", "grpo_kl_in_reward", "base_sft", "base_sft_countdown"):
        assert name in SHIPPED


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_recipe_validates(name, cli):
    r = load_recipe(name)
    assert isinstance(r, Recipe)
    assert cli("recipes", "validate", name).code == 0


def test_presets_set_what_their_papers_say():
    grpo, dr, dapo, gspo, klr = (load_recipe(n) for n in ("grpo", "dr_grpo", "dapo", "gspo", "grpo_kl_in_reward"))
    assert (grpo.advantage.scale, grpo.loss.aggregation, grpo.kl.placement, grpo.kl.estimator) == (
        "group_std", "seq_mean_token_mean", "loss", "k3")
    assert (dr.advantage.scale, dr.loss.aggregation, dr.kl.placement) == ("none", "seq_mean_token_sum_norm", "none")
    assert dr.loss.length_constant == dr.rollout.max_new_tokens  # a recipe constant, never the padded length
    assert (dapo.loss.clip.eps_low, dapo.loss.clip.eps_high, dapo.loss.aggregation) == (0.2, 0.28, "token_mean")
    assert dapo.dynamic_sampling.enabled and dapo.overlong.soft_punish is not None and dapo.kl.placement == "none"
    assert gspo.loss.ratio == "sequence" and gspo.loss.clip.eps_high < 1e-3
    assert klr.kl.placement == "reward" and klr.kl.beta == grpo.kl.beta
    # placement none means no KL term: beta is resolved to 0 so the saved recipe says so
    assert dr.kl.beta == 0.0 and dapo.kl.beta == 0.0


BROKEN = [
    # (yaml body, field named in the error, a word of the message)
    ("loss:\n  clip:\n    eps_low: 0.3\n    eps_high: 0.2\n", "loss.clip", "eps_high"),
    ("loss:\n  clip:\n    eps_low: 1.0\n", "loss.clip.eps_low", "less than 1"),
    ("kl:\n  beta: -0.1\n", "kl.beta", "greater than or equal"),
    ("rollout:\n  group_size: 1\n", "rollout.group_size", "greater than or equal to 2"),
    ("rollout:\n  temprature: 0.7\n", "rollout.temprature", "unknown field"),
    ("advantage:\n  baseline: median\n", "advantage.baseline", "group_mean"),
    ("loss:\n  aggregation: mean\n", "loss.aggregation", "token_mean"),
    ("kl:\n  estimator: k4\n", "kl.estimator", "k3"),
    ("task:\n  name: chess\n", "task", "arithmetic"),
    ("task:\n  name: arithmetic\n  digits: 0\n", "task.digits", "greater than or equal to 1"),
    ("reward:\n  terms:\n    - type: random\n      p: 1.5\n", "reward.terms.0.p", "less than or equal to 1"),
    ("reward:\n  terms:\n    - type: oracle\n", "reward.terms.0", "type"),
    ("reward:\n  terms: []\n", "reward.terms", "at least 1"),
    ("overlong:\n  soft_punish:\n    buffer: 64\n", "(recipe)", "buffer"),
    ("eval:\n  n: 4\n  pass_at_k: [1, 8]\n", "eval", "outside 1..n"),
    ("optim:\n  lr: 0\n", "optim.lr", "greater than 0"),
    ("steps: many\n", "steps", "integer"),
    ("bogus_section: 1\n", "bogus_section", "unknown field"),
]


@pytest.mark.parametrize("body,field,word", BROKEN)
def test_broken_recipe_names_the_field_and_exits_2(tmp_path, cli, body, field, word):
    p = write(tmp_path, "bad.yaml", body)
    res = cli("recipes", "validate", str(p))
    assert res.code == 2
    assert "Traceback" not in res.stderr
    err = " ".join(res.stderr.split())
    assert f"{p}" in err and f": {field}:" in err and word in err, err


def test_error_line_points_at_the_yaml_line(tmp_path):
    p = write(tmp_path, "bad.yaml", """
        steps: 10
        loss:
          aggregation: token_mean
          entropy_coef: -1
        """)
    with pytest.raises(UserError) as e:
        load_recipe(str(p))
    assert e.value.problems == [f"{p}:4: loss.entropy_coef: Input should be greater than or equal to 0 (got -1)"]


def test_every_problem_is_reported_not_only_the_first(tmp_path):
    p = write(tmp_path, "bad.yaml", "kl:\n  beta: -1\nrollout:\n  group_size: 0\n")
    with pytest.raises(UserError) as e:
        load_recipe(str(p))
    assert len(e.value.problems) == 2


def test_invalid_yaml_names_file_and_line(tmp_path, cli):
    p = write(tmp_path, "bad.yaml", "steps: 10\nloss: [unclosed\n")
    res = cli("recipes", "validate", str(p))
    assert res.code == 2 and f"{p}:" in res.stderr and "invalid YAML" in res.stderr


def test_a_recipe_must_be_a_mapping(tmp_path, cli):
    p = write(tmp_path, "list.yaml", "- 1\n- 2\n")
    res = cli("recipes", "validate", str(p))
    assert res.code == 2 and "mapping" in res.stderr


def test_extends_merges_parent_first_and_relative_paths(tmp_path):
    write(tmp_path, "parent.yaml", """
        extends: grpo
        steps: 7
        loss:
          clip:
            eps_high: 0.3
        """)
    child = write(tmp_path, "child.yaml", """
        extends: parent.yaml
        loss:
          clip:
            eps_low: 0.1
        """)
    r = load_recipe(str(child))
    assert r.steps == 7  # from parent
    assert (r.loss.clip.eps_low, r.loss.clip.eps_high) == (0.1, 0.3)  # merged key by key
    assert r.kl.placement == "loss" and r.optim.minibatches == 2  # from grpo
    assert r.name == "child"


def test_extends_cycle_is_an_error(tmp_path):
    write(tmp_path, "a.yaml", "extends: b.yaml\n")
    b = write(tmp_path, "b.yaml", "extends: a.yaml\n")
    with pytest.raises(UserError, match="cycle"):
        load_recipe(str(b))


def test_extends_missing_parent_is_an_error(tmp_path):
    p = write(tmp_path, "a.yaml", "extends: no_such_recipe\n")
    with pytest.raises(UserError, match="no_such_recipe"):
        load_recipe(str(p))


def test_set_overrides_are_parsed_and_validated():
    r = load_recipe("grpo", ["loss.clip.eps_high=0.28", "kl.placement=none", "eval.pass_at_k=[1,2]", "seed=3"])
    assert r.loss.clip.eps_high == 0.28 and r.kl.placement == "none" and r.kl.beta == 0.0
    assert r.eval.pass_at_k == [1, 2] and r.seed == 3
    with pytest.raises(UserError) as e:
        load_recipe("grpo", ["loss.clip.eps_high=0.1", "loss.clip.eps_low=0.2"])
    assert e.value.problems[0].startswith("--set loss.clip.")
    with pytest.raises(UserError, match="unknown field"):
        load_recipe("grpo", ["loss.clip.eps_hihg=0.3"])
    with pytest.raises(UserError, match="KEY=VALUE"):
        load_recipe("grpo", ["loss.clip.eps_high"])


def test_set_can_switch_the_task_kind():
    r = load_recipe("grpo", ["task.name=countdown"])
    assert r.task.name == "countdown" and r.task.count == 3


def test_derived_values_follow_their_source_unless_set():
    r = load_recipe("dr_grpo", ["rollout.max_new_tokens=32"])
    assert r.loss.length_constant == 32 and r.eval.max_new_tokens == 32
    r = load_recipe("dr_grpo", ["rollout.max_new_tokens=32", "loss.length_constant=100"])
    assert r.loss.length_constant == 100


def test_show_prints_a_complete_recipe_that_loads_back(tmp_path, cli):
    res = cli("recipes", "show", "dapo")
    assert res.code == 0
    data = yaml.safe_load(res.stdout)
    assert data["loss"]["clip"]["eps_high"] == 0.28
    assert data["optim"]["max_skipped_in_row"] == 5  # every default is written out
    saved = tmp_path / "saved.yaml"
    saved.write_text(res.stdout)
    again = load_recipe(str(saved))
    assert dump_recipe(again) == res.stdout


def test_show_of_a_bad_recipe_exits_2_with_nothing_on_stdout(tmp_path, cli):
    p = write(tmp_path, "bad.yaml", "kl:\n  beta: -1\n")
    res = cli("recipes", "show", str(p))
    assert res.code == 2 and res.stdout == ""


def test_list_names_every_shipped_recipe_on_stdout(cli):
    """The list is the command's data: a pipe gets it (issue 44), one unfolded line per recipe."""
    res = cli("recipes", "list")
    assert res.code == 0 and "grpo" not in res.stderr
    for name in ("grpo", "dr_grpo", "dapo", "gspo", "experiments/remedies/top_entropy"):
        assert any(line.startswith(f"│ {name} ") for line in res.stdout.splitlines()), name


def test_notes_say_when_clipping_cannot_act():
    r = validate_recipe_data({"optim": {"mu": 1, "minibatches": 1}})
    assert any("clipping never acts" in n for n in r.notes())
    assert not any("clipping" in n for n in load_recipe("grpo").notes())


def test_unknown_recipe_reference(cli):
    res = cli("recipes", "show", "nope")
    assert res.code == 2 and "no such recipe" in res.stderr


def test_docs_field_table_matches_the_schema():
    """docs/fields.md is generated; regenerate with `python -m rlvr_cli.recipe.docs`."""
    from pathlib import Path

    from rlvr_cli.recipe.docs import DOC, END, START, markdown_table

    page = Path(__file__).resolve().parents[2] / "docs" / "fields.md"
    assert Path(DOC) == page
    assert f"{START}\n{markdown_table()}{END}" in page.read_text(encoding="utf-8")


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi")
)


def test_a_yaml_alias_bomb_is_refused_quickly(tmp_path, cli):
    import time

    p = write(tmp_path, "bomb.yaml", ALIAS_BOMB)
    start = time.monotonic()
    res = cli("recipes", "validate", str(p))
    assert res.code == 2 and f"{p}" in res.stderr and "alias" in res.stderr, res.stderr
    assert time.monotonic() - start < 5


def test_deep_nesting_and_a_huge_file_are_refused(tmp_path, cli):
    deep = write(tmp_path, "deep.yaml", "steps: " + "[" * 20_000 + "]" * 20_000 + "\n")
    res = cli("recipes", "validate", str(deep))
    assert res.code == 2 and f"{deep}" in res.stderr and "nested" in res.stderr, res.stderr
    block = write(tmp_path, "block.yaml", "".join("  " * i + f"k{i}:\n" for i in range(300)))
    res = cli("recipes", "validate", str(block))
    assert res.code == 2 and "nested" in res.stderr, res.stderr
    huge = write(tmp_path, "huge.yaml", "description: " + "x" * 2_000_000 + "\n")
    res = cli("recipes", "validate", str(huge))
    assert res.code == 2 and "too large" in res.stderr, res.stderr


def test_a_recursive_alias_is_refused_naming_the_file(tmp_path, cli):
    p = write(tmp_path, "loop.yaml", "steps: 2\nextra: &x\n  self: *x\n")
    res = cli("recipes", "validate", str(p))
    assert res.code == 2 and f"{p}:2" in res.stderr and "itself" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


def test_a_few_anchors_and_aliases_still_work(tmp_path):
    p = write(tmp_path, "anchors.yaml", """
        rollout: &r
          temperature: 0.7
        eval:
          temperature: 0.7
          pass_at_k: &ks [1, 2]
          maj_at_k: *ks
    """)
    r = load_recipe(str(p))
    assert r.eval.maj_at_k == [1, 2] and r.rollout.temperature == 0.7


def test_a_key_given_twice_is_an_error_naming_both_lines(tmp_path, cli):
    p = write(tmp_path, "dup.yaml", "steps: 10\nkl:\n  beta: 0.1\n  beta: 0.2\nsteps: 20\n")
    res = cli("recipes", "validate", str(p))
    assert res.code == 2, res.stderr
    assert f"{p}:5: steps: given twice (first at line 1)" in res.stderr
    assert f"{p}:4: kl.beta: given twice (first at line 3)" in res.stderr


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n# and another\n", "---\n"])
def test_an_empty_or_comment_only_recipe_is_an_error(tmp_path, cli, text):
    p = tmp_path / "empty.yaml"
    p.write_text(text)
    res = cli("recipes", "validate", str(p))
    assert res.code == 2 and f"{p}" in res.stderr and "empty" in res.stderr, res.stderr
    assert cli("train", str(p), "--out", str(tmp_path / "run")).code == 2
    assert not (tmp_path / "run").exists()
