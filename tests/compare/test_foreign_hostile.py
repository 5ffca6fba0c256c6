"""Issue 28: hostile foreign logs in `rlvr compare` are skipped (or their bad part ignored) with a warning
naming the file; the rest of the comparison is produced, with no hang, crash or runaway memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from rlvr_cli.compare.foreign import load_trl, load_verl


def _good(tmp_path):
    d = tmp_path / "good"
    d.mkdir()
    log = d / "ok.jsonl"
    log.write_text("".join(json.dumps({"step": s, "data": {"critic/score/mean": 0.1 * s}}) + "\n" for s in (1, 2, 3)))
    return log


def _compare(cli, tmp_path, *paths):
    res = cli("compare", *map(str, paths), "--out", str(tmp_path / "cmp"))
    assert res.code == 0, res.stderr
    summary = json.loads((tmp_path / "cmp" / "summary.json").read_text())
    return res, summary


def _skipped(cli, tmp_path, bad, why):
    res, summary = _compare(cli, tmp_path, _good(tmp_path), bad)
    assert len(summary["variants"]) == 1
    out = res.stdout + res.stderr
    assert bad.name in out and why in " ".join(out.split()), out


def test_deep_json_line_is_skipped(cli, tmp_path):
    bad = tmp_path / "deep.jsonl"
    bad.write_text("[" * 100_000 + "\n")
    _skipped(cli, tmp_path, bad, "nested deeper")


def test_an_integer_of_thousands_of_digits_is_a_skipped_line(cli, tmp_path):
    bad = tmp_path / "digits.jsonl"
    bad.write_text('{"step": 1, "data": {"critic/score/mean": ' + "9" * 5000 + "}}\n")
    _skipped(cli, tmp_path, bad, "no metric rows")


def test_numbers_beyond_float_range_are_kept_as_nonfinite(tmp_path):
    log = tmp_path / "big.jsonl"
    log.write_text('{"step": 1, "data": {"critic/score/mean": 1e999}}\n'
                   '{"step": 2, "data": {"critic/score/mean": ' + "9" * 400 + "}}\n"
                   '{"step": 3, "data": {"critic/score/mean": 0.5}}\n')
    run = load_verl(log)
    assert run.nonfinite["reward_mean"].tolist() == [True, True, False]


@pytest.mark.parametrize("line", ['{"step": "one", "data": {}}', '{"step": 1, "data": [1, 2]}', "[1, 2]", "3",
                                  '{"step": 1.5, "data": {"x": 1}}'])
def test_wrong_types_are_skipped_lines(tmp_path, line):
    log = tmp_path / "types.jsonl"
    log.write_text(line + "\n" + json.dumps({"step": 2, "data": {"critic/score/mean": 0.2, "x": {"a": [1]}}}) + "\n")
    run = load_verl(log)
    assert run.metrics.index.tolist() == [2]
    assert any("line 1" in w for w in run.warnings)


def test_a_directory_named_like_a_log_is_skipped(cli, tmp_path):
    bad = tmp_path / "dir.jsonl"
    bad.mkdir()
    res, summary = _compare(cli, tmp_path, _good(tmp_path), bad)
    assert len(summary["variants"]) == 1 and "dir.jsonl" in res.stdout + res.stderr


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(9))


def test_a_yaml_alias_bomb_in_a_trl_export_is_not_expanded(tmp_path):
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 0.5}]}))
    (tmp_path / "export.yaml").write_text("grpo_config: {beta: 0}\n" + BOMB)
    run = load_trl(tmp_path)
    assert run.metrics["loss"].tolist() == [0.5]
    assert any("export.yaml: unreadable" in w and "aliases" in w for w in run.warnings), run.warnings


def test_a_yaml_alias_bomb_in_a_verl_config_is_not_expanded(cli, tmp_path):
    log = _good(tmp_path)
    (log.parent / ".hydra").mkdir()
    (log.parent / ".hydra" / "config.yaml").write_text(BOMB)
    run = load_verl(log)
    assert any("config.yaml: unreadable" in w for w in run.warnings), run.warnings
    _compare(cli, tmp_path, log)


@pytest.mark.parametrize("text", ["a:\n" + "".join("  " * i + "- \n" for i in range(1, 10_000)),
                                  "[" * 10_000 + "]" * 10_000, "x: " + "9" * 5000],
                         ids=["deep-list", "deep-brackets", "5000-digit-int"])
def test_deep_or_huge_yaml_is_a_warning(tmp_path, text):
    log = _good(tmp_path)
    (log.parent / ".hydra").mkdir()
    (log.parent / ".hydra" / "config.yaml").write_text(text)
    run = load_verl(log)
    assert any("config.yaml: unreadable" in w for w in run.warnings), run.warnings


def test_deep_trainer_state_is_skipped(tmp_path):
    (tmp_path / "trl").mkdir()
    (tmp_path / "trl" / "trainer_state.json").write_text("[" * 100_000)
    from rlvr_cli.compare.load import load_runs

    runs, skipped = load_runs([str(tmp_path / "trl"), str(_good(tmp_path))])
    assert len(runs) == 1 and "nested deeper" in skipped[0].reason


def _run_compare(tmp_path, *paths):
    """The CLI in a child process, so a hang fails the test instead of stalling it."""
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    return subprocess.run([sys.executable, "-m", "rlvr_cli", "compare", *map(str, paths), "--out", str(tmp_path / "cmp")],
                          capture_output=True, text=True, timeout=120, env=env)


def test_fifos_and_devices_are_never_opened_blocking(tmp_path):
    good = _good(tmp_path)
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.jsonl"
    zero.symlink_to("/dev/zero")
    trl = tmp_path / "trl"
    trl.mkdir()
    (trl / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 0.5}]}))
    os.mkfifo(trl / "export.yaml")  # read for the variant: must be skipped, not waited on
    (trl / "zero.yaml").symlink_to("/dev/zero")
    res = _run_compare(tmp_path, good, fifo, zero, trl)
    assert res.returncode == 0, res.stderr
    assert len(json.loads((tmp_path / "cmp" / "summary.json").read_text())["variants"]) == 2
    out = res.stdout + res.stderr
    assert "fifo.jsonl" in out and "zero.jsonl" in out


def test_an_oversized_log_is_skipped(tmp_path, monkeypatch):
    from rlvr_cli.compare import foreign

    monkeypatch.setattr(foreign, "MAX_BYTES", 1000)
    monkeypatch.setattr(foreign.read_bounded, "__defaults__", (1000,))
    log = tmp_path / "big.jsonl"
    log.write_text(json.dumps({"step": 1, "data": {"x": 1}}) + "\n" + " " * 2000 + "\n")
    from rlvr_cli.compare.run import RunUnreadable

    with pytest.raises(RunUnreadable, match="larger than"):
        load_verl(log)


# --- issue 50: a step, a count or a recipe field that rlvr's arithmetic or grouping cannot take ---------------
def _trl(tmp_path, history, export: str | None = None, name: str = "trl"):
    d = tmp_path / name
    d.mkdir()
    (d / "trainer_state.json").write_text(history if isinstance(history, str) else json.dumps({"log_history": history}))
    if export is not None:
        (d / "export.yaml").write_text(export)
    return d


GOOD_HISTORY = [{"step": s, "reward": 0.25 * s, "loss": 0.5} for s in (1, 2, 3)]


def _grouped(*runs):
    """What `rlvr compare` does first with the runs' recipes (where a list seed or field raised TypeError)."""
    from rlvr_cli.compare.report import comparability_warnings
    from rlvr_cli.compare.variants import group_variants

    variants = group_variants(list(runs))
    comparability_warnings(variants)
    return variants


@pytest.mark.parametrize("step", ["1" + "0" * 400, "1e30", "-3", "true"], ids=["10**400", "1e30", "negative", "bool"])
def test_a_trl_step_rlvr_cannot_index_by_is_a_skipped_entry(tmp_path, step):
    """10**400 as a JSON integer was an OverflowError (exit 1) in the step mapping; the others are not steps."""
    d = _trl(tmp_path, '{"log_history": [{"step": %s, "reward": 0.1}, {"step": 2, "reward": 0.2}]}' % step)
    run = load_trl(d)
    assert run.metrics.index.tolist() == [2] and run.metrics["reward_mean"].tolist() == [0.2]
    assert any("log_history[0] has no integer step in 0..2**53; skipped" in w for w in run.warnings), run.warnings


def test_a_trl_log_of_only_huge_steps_is_refused_by_compare_exit_2(cli, tmp_path):
    d = _trl(tmp_path, '{"log_history": [{"step": 1%s, "reward": 0.1}]}' % ("0" * 400))
    res = cli("compare", str(d), "--out", str(tmp_path / "cmp"))
    assert res.code == 2 and "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    assert f"{d}: trl log: trainer_state.json: no metric rows" in res.stderr


def test_a_verl_step_of_400_digits_or_below_zero_is_a_skipped_line_named_by_number(tmp_path):
    log = tmp_path / "v.jsonl"
    log.write_text('{"step": 1%s, "data": {"critic/score/mean": 1}}\n{"step": -3, "data": {"critic/score/mean": 1}}\n'
                   '{"step": 2, "data": {"critic/score/mean": 0.5}}\n' % ("0" * 400))
    run = load_verl(log)
    assert run.metrics.index.tolist() == [2]
    assert "v.jsonl line 1: step 10000000... (401 digits) is not in 0..2**53; skipped" in run.warnings
    assert "v.jsonl line 2: step -3 is not in 0..2**53; skipped" in run.warnings


def test_exported_inf_and_nan_values_are_read_as_nonfinite_and_compared(cli, tmp_path):
    d = _trl(tmp_path, '{"log_history": [{"step": 1, "reward": Infinity, "loss": -Infinity}, '
                       '{"step": 2, "reward": NaN, "loss": 1.5}, {"step": 3, "reward": 0.5, "loss": 1}]}')
    run = load_trl(d)
    assert run.nonfinite["reward_mean"].tolist() == [True, True, False]
    assert run.nonfinite["loss"].tolist() == [True, False, False]
    assert run.metrics["loss"].tolist()[1:] == [1.5, 1.0]
    res = cli("compare", str(d), str(_trl(tmp_path, GOOD_HISTORY, name="good")), "--out", str(tmp_path / "cmp"))
    assert res.code == 0 and "Traceback" not in res.stderr, res.stderr


@pytest.mark.parametrize("config", [
    "per_device_train_batch_size: abc\n  steps_per_generation: 100000000000000",
    "per_device_train_batch_size: 100000000000000\n  steps_per_generation: abc",
    "per_device_train_batch_size: [1]\n  steps_per_generation: 4",
], ids=["text-times-huge", "huge-times-text", "list"])
def test_a_text_count_in_grpo_config_is_ignored_never_multiplied(tmp_path, config):
    """``"abc" * 10**14`` was a MemoryError (exit 1) while rlvr read the prompts per step."""
    run = load_trl(_trl(tmp_path, GOOD_HISTORY, f"grpo_config:\n  num_generations: 4\n  {config}\n"))
    assert run.recipe["rollout"]["group_size"] == 4
    assert run.recipe["rollout"]["prompts_per_step"] == 16  # rlvr's default: the product could not be formed
    assert run.metrics["loss"].tolist()[-1] == 0.5


def test_counts_of_400_digits_or_infinite_leave_steps_as_trl_logs_them(tmp_path):
    big = "1" + "0" * 400
    run = load_trl(_trl(tmp_path, GOOD_HISTORY, f"grpo_config:\n  steps_per_generation: {big}\n  num_iterations: .inf\n"
                                                "  num_generations: .nan\n  beta: 1e400\n"))
    assert run.metrics.index.tolist() == [1, 2, 3]
    assert run.recipe["rollout"]["group_size"] == 8 and run.recipe["seed"] == 42


@pytest.mark.parametrize("embedded, field, shapes", [
    ("loss: [1, 2]", "loss", ("list", "mapping")),
    ("kl: x", "kl", ("value", "mapping")),
    ("loss: {clip: [1]}", "loss.clip", ("list", "mapping")),
    ("steps: {a: 1}", "steps", ("mapping", "value")),
], ids=["list-for-mapping", "value-for-mapping", "nested", "mapping-for-value"])
def test_an_embedded_recipe_field_of_the_wrong_shape_keeps_the_default_with_a_warning(tmp_path, embedded, field, shapes):
    """A list where rlvr has a mapping was a TypeError (exit 1) while grouping variants."""
    d = _trl(tmp_path, GOOD_HISTORY, f"grpo_config: {{num_generations: 2}}\nrlvr_recipe:\n  {embedded}\n  optim: {{lr: 0.5}}\n")
    run = load_trl(d)
    said = f"rlvr export YAML: rlvr_recipe: {field} is a {shapes[0]} where rlvr has a {shapes[1]}; the default kept"
    assert said in run.warnings, run.warnings
    assert run.recipe["optim"]["lr"] == 0.5 and isinstance(run.recipe["loss"]["clip"], dict)
    _grouped(run, load_trl(_trl(tmp_path, GOOD_HISTORY, name="good")))


@pytest.mark.parametrize("seed", ["[2]", "{a: 1}", "abc", "-1", "1" + "0" * 400])
def test_a_seed_that_is_not_a_seed_is_unknown_not_a_crash(tmp_path, seed):
    """A list seed was `unhashable type: 'list'` (exit 1) in the same-seed warning."""
    d = _trl(tmp_path, GOOD_HISTORY, f"grpo_config: {{num_generations: 2, seed: {seed}}}\n")
    run = load_trl(d)
    assert run.seed in (None, 0), run.seed  # the default kept (a list, a mapping), or unknown
    _grouped(run, load_trl(_trl(tmp_path, GOOD_HISTORY, name="good")))


def test_a_list_seed_through_the_cli_is_compared(cli, tmp_path):
    d = _trl(tmp_path, GOOD_HISTORY, "grpo_config: {num_generations: 2, seed: [2]}\nrlvr_recipe: {seed: [3], loss: [1]}\n")
    res = cli("compare", str(d), str(_trl(tmp_path, GOOD_HISTORY, name="good")), "--out", str(tmp_path / "cmp"))
    assert res.code == 0 and "Traceback" not in res.stderr, res.stderr
    said = " ".join((tmp_path / "cmp" / "summary.md").read_text().split())
    assert "rlvr_recipe: seed is a list where rlvr has a value; the default kept" in said


def test_yaml_dates_sets_and_binary_in_an_embedded_recipe_reach_summary_json_as_text(cli, tmp_path):
    d = _trl(tmp_path, GOOD_HISTORY, "grpo_config: {num_generations: 2}\nrlvr_recipe:\n  name: 2020-01-01\n"
                                     "  mine: !!set {a, b}\n  blob: !!binary aGVsbG8=\n  loss: {clip: {eps_low: 2020-01-02}}\n")
    run = load_trl(d)
    assert run.recipe["name"] == "2020-01-01" and run.recipe["loss"]["clip"]["eps_low"] == "2020-01-02"
    assert isinstance(run.recipe["mine"], str) and run.recipe["blob"] == "b'hello'"
    res = cli("compare", str(d), str(_trl(tmp_path, GOOD_HISTORY, name="good")), "--out", str(tmp_path / "cmp"))
    assert res.code == 0 and "Traceback" not in res.stderr, res.stderr
    json.loads((tmp_path / "cmp" / "summary.json").read_text())


def test_a_verl_config_of_wrong_types_and_huge_numbers_is_a_warning(tmp_path):
    d = tmp_path / "v"
    (d / ".hydra").mkdir(parents=True)
    (d / "log.jsonl").write_text('{"step": 1, "data": {"critic/score/mean": 1}}\n')
    (d / ".hydra" / "config.yaml").write_text(
        "actor_rollout_ref: {actor: {clip_ratio_c: 1.0e+400, clip_ratio_high: 1.0e+400, clip_ratio_low: [1]}, rollout: {n: abc, temperature: {a: 1}}}\n")
    run = load_verl(d / "log.jsonl")
    assert run.recipe["loss"]["clip"]["eps_low"] == 0.2 and run.recipe["rollout"]["temperature"] == 1.0
    assert run.recipe["loss"]["clip"]["dual_clip"] is None and run.recipe["loss"]["clip"]["eps_high"] == float("inf")
    assert any("loss.clip.eps_low is a list where rlvr has a value" in w for w in run.warnings), run.warnings
    assert any("rollout.temperature is a mapping where rlvr has a value" in w for w in run.warnings), run.warnings


def test_an_embedded_recipe_is_read_as_rlvr_wrote_it_nulls_included(tmp_path):
    """The checked overlay keeps a recipe's own nulls (an exported run groups with its rlvr twin) and fills only
    the fields an older export lacks."""
    from rlvr_cli.recipe.schema import Recipe

    own = Recipe().model_dump(mode="json")
    own["output_dir"] = None
    del own["environment"]
    text = json.dumps({"grpo_config": {"num_generations": 2}, "rlvr_recipe": own})  # JSON is YAML
    run = load_trl(_trl(tmp_path, GOOD_HISTORY, text))
    assert run.recipe["output_dir"] is None and run.recipe["environment"] == Recipe().model_dump(mode="json")["environment"]
    assert not [w for w in run.warnings if "rlvr_recipe" in w], run.warnings
