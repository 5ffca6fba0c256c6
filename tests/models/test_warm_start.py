"""The built-in base model: shipped weights from its recipe, cached, imperfect but often right."""

from __future__ import annotations

import json
from pathlib import Path

from rlvr_cli.models import resolve_model_ref
from rlvr_cli.models.builtin import recipe_key, warm_start_target
from rlvr_cli.recipe.load import load_recipe


def test_warm_start_lands_in_the_pass_at_k_band(tiny_base):
    """Measured at build time on 64 held-out prompts x 32 samples (the recipe's eval settings), and shipped
    with the weights. The target band is pass@1 0.2-0.5 and pass@16 >= 0.9."""
    info = json.loads((Path(tiny_base) / "built.json").read_text())
    pk = info["pass_at_k"]
    assert 0.15 <= pk["1"] <= 0.55, pk
    assert pk["16"] >= 0.85, pk
    assert info["steps"] == load_recipe("base_sft").steps


def test_the_built_model_is_cached_and_a_built_one_is_keyed_by_its_recipe(tiny_base):
    again = resolve_model_ref("builtin:tiny")
    assert again.path == tiny_base  # second use: the same directory
    recipe = load_recipe("base_sft")
    edited = load_recipe("base_sft", ["optim.lr=0.002"])
    assert recipe_key(edited) != recipe_key(recipe)  # a built (not shipped) warm start is rebuilt after an edit
    check = load_recipe("base_sft_check")
    assert warm_start_target("builtin:tiny-check")[1].name == f"tiny-check-{recipe_key(check)}"
    # a field the schema gains later (left at its default) does not change the key
    assert recipe_key(load_recipe("base_sft", ["eval.every=" + str(recipe.eval.every)])) == recipe_key(recipe)


def test_sample_writes_the_promised_lines(tiny_base, tmp_path, cli):
    out = tmp_path / "s.jsonl"
    res = cli("sample", "builtin:tiny", "--task", "arithmetic", "--n", "3", "--num-prompts", "5",
              "--temperature", "0.8", "--max-new-tokens", "40", "--out", str(out))
    assert res.code == 0, res.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 15
    for r in rows:
        assert {"prompt_id", "prompt", "response", "num_tokens", "finish_reason", "sampling", "reference"} <= set(r)
        assert r["finish_reason"] in ("eos", "length") and 1 <= r["num_tokens"] <= 40
        assert r["sampling"]["temperature"] == 0.8 and r["sampling"]["n"] == 3
    assert [r["sample_index"] for r in rows[:3]] == [0, 1, 2]
    assert len({r["prompt_id"] for r in rows}) == 5
    # the base model is right some of the time, not always
    res = cli("verify", str(out))
    assert res.code == 0 and "accuracy" in res.stderr
    # the same seed gives the same file
    out2 = tmp_path / "s2.jsonl"
    cli("sample", "builtin:tiny", "--n", "3", "--num-prompts", "5", "--temperature", "0.8", "--max-new-tokens", "40",
        "--out", str(out2))
    assert out2.read_text() == out.read_text()


def test_sample_bad_input(cli, tmp_path):
    res = cli("sample", "builtin:tiny-init", "--task", "chess", "--out", str(tmp_path / "x.jsonl"))
    assert res.code == 2 and "--task chess" in res.stderr
    res = cli("sample", "builtin:tiny-init", "--split", "test", "--out", str(tmp_path / "x.jsonl"))
    assert res.code == 2 and "--split" in res.stderr
