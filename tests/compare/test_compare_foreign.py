"""verl file-logger JSONL as a run of `rlvr compare` (the TRL side is tested on a real TRL run in
tests/bridges/test_bridges_trl.py). tests/fixtures/verl_file_logger.jsonl is HAND-WRITTEN in verl's documented
file-logger format (its first line says so and is not a log line); the Hydra config beside it is verl
0.9.1's shipped trainer config with the DAPO export applied, as Hydra would write it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from rlvr_cli.compare.foreign import load_verl, verl_recipe
from rlvr_cli.compare.load import load_runs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _verl_dir(tmp_path: Path, with_config: bool) -> Path:
    d = tmp_path / ("verl_dapo" if with_config else "verl_plain")
    d.mkdir()
    shutil.copy(FIXTURES / "verl_file_logger.jsonl", d / "dapo_run.jsonl")
    if with_config:
        cfg = yaml.safe_load((FIXTURES / "verl_0.9.1_ppo_trainer.yaml").read_text())
        actor = cfg["actor_rollout_ref"]["actor"]
        actor.update(clip_ratio_high=0.28, loss_agg_mode="token-mean", clip_ratio_c=1e9)
        cfg["algorithm"].update(adv_estimator="grpo")
        cfg["algorithm"]["filter_groups"]["enable"] = True
        cfg["actor_rollout_ref"]["rollout"]["n"] = 8
        (d / ".hydra").mkdir()
        (d / ".hydra" / "config.yaml").write_text(yaml.safe_dump(cfg))
    return d / "dapo_run.jsonl"


def test_verl_jsonl_metrics_are_mapped(tmp_path):
    run = load_verl(_verl_dir(tmp_path, with_config=True))
    assert list(run.metrics.index) == [1, 2, 3, 4]
    assert run.metrics["reward_mean"].tolist() == pytest.approx([0.31, 0.38, 0.45, 0.52])
    assert run.metrics["entropy"].iloc[-1] == pytest.approx(0.44)
    assert run.metrics["kl_mean"].iloc[1] == pytest.approx(0.002)
    assert run.metrics["len_mean"].iloc[0] == 41.0
    assert "timing_s/gen" in run.metrics.columns  # unknown names kept
    assert any("line 1: not a verl file-logger line" in w for w in run.warnings)
    r = run.recipe
    assert r["framework"] == "verl"
    assert r["loss"]["clip"]["eps_high"] == 0.28 and r["loss"]["aggregation"] == "token_mean"
    assert r["loss"]["clip"]["dual_clip"] is None and r["dynamic_sampling"]["enabled"] is True
    assert r["kl"]["placement"] == "none" and r["rollout"]["group_size"] == 8


def test_verl_recipe_reads_kl_and_gspo():
    cfg = yaml.safe_load((FIXTURES / "verl_0.9.1_ppo_trainer.yaml").read_text())
    cfg["algorithm"]["adv_estimator"] = "rloo"
    cfg["actor_rollout_ref"]["actor"].update(use_kl_loss=True, kl_loss_coef=0.04, kl_loss_type="low_var_kl")
    cfg["actor_rollout_ref"]["actor"]["policy_loss"]["loss_mode"] = "gspo"
    r = verl_recipe(cfg)
    assert r["advantage"]["baseline"] == "leave_one_out"
    assert r["kl"] == {"placement": "loss", "beta": 0.04, "estimator": "k3"}
    assert r["loss"]["ratio"] == "sequence" and r["loss"]["clip"]["dual_clip"] == 3.0


def test_compare_labels_and_skips(tmp_path, cli):
    with_cfg = _verl_dir(tmp_path, with_config=True)
    plain = _verl_dir(tmp_path, with_config=False)
    bad = tmp_path / "garbage.jsonl"
    bad.write_bytes(b"\xff\xfe not json at all\n")
    runs, skipped = load_runs([str(with_cfg), str(plain), str(bad)])
    assert len(runs) == 2
    assert any("variant unknown" in w for w in runs[1].warnings)
    assert skipped and skipped[0].path == str(bad) and "verl log" in skipped[0].reason
    res = cli("compare", str(with_cfg), str(plain), str(bad), "--out", str(tmp_path / "cmp"))
    assert res.code == 0, res.stderr
    summary = json.loads((tmp_path / "cmp" / "summary.json").read_text())
    assert len(summary["variants"]) == 2
    labels = " ".join(v["label"] for v in summary["variants"])
    assert "eps_high" in labels
    assert (tmp_path / "cmp" / "compare.png").is_file()


def test_verl_reward_function_uses_rlvrs_verifiers():
    from rlvr_cli.bridges.verl_reward import compute_score

    assert compute_score("arithmetic", "12,13,6#632", "632") == {"score": 1.0, "acc": 1.0, "outcome": "correct"}
    assert compute_score("arithmetic", "#632=631", "632")["outcome"] == "incorrect"
    assert compute_score("countdown", "#(5*3)+7", '{"numbers": [3, 5, 7], "target": 22}')["score"] == 1.0
    # a dataset answer: no marker, extracted from \boxed{} (through the worker pool for math)
    assert compute_score("math", "so \\boxed{\\frac{1}{2}}", "0.5")["acc"] == 1.0
    assert compute_score("integer", "#### 18", "18")["score"] == 1.0


@pytest.mark.parametrize(
    ("files", "warning"),
    [
        ({"export.yaml": "grpo_config:\n  steps_per_generation: abc\n"}, "grpo_config unreadable"),  # hand-edited
        ({"export.yaml": "grpo_config: {beta: 0}\nrlvr_recipe: not a mapping\n"}, "rlvr_recipe is not a mapping"),
        ({"export.yaml": "grpo_config: {beta: high}\n"}, "grpo_config unreadable"),
    ],
)
def test_trl_export_with_a_bad_field_is_a_warning_not_a_crash(tmp_path, files, warning):
    from rlvr_cli.compare.foreign import load_trl

    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 0.5}, {"step": 2, "loss": 0.4}]}))
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    run = load_trl(tmp_path)
    assert run.metrics["loss"].tolist() == [0.5, 0.4]
    assert run.recipe["framework"] == "trl"
    assert any(warning in w for w in run.warnings), run.warnings


def test_verl_config_with_a_bad_field_is_a_warning_not_a_crash(tmp_path):
    log = _verl_dir(tmp_path, with_config=True)
    cfg = yaml.safe_load((log.parent / ".hydra" / "config.yaml").read_text())
    cfg["actor_rollout_ref"]["actor"]["clip_ratio_c"] = "abc"
    (log.parent / ".hydra" / "config.yaml").write_text(yaml.safe_dump(cfg))
    run = load_verl(log)
    assert run.metrics["reward_mean"].tolist() == pytest.approx([0.31, 0.38, 0.45, 0.52])
    assert any(".hydra/config.yaml: unreadable field" in w for w in run.warnings), run.warnings


def test_an_rlvr_metrics_file_named_instead_of_its_run_is_read_as_the_run(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "recipe.yaml").write_text("seed: 3\n")
    (run / "run.json").write_text(json.dumps({"status": "finished", "seed": 3}))
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "reward_mean": 0.1 * s}) + "\n" for s in (1, 2)))
    other = tmp_path / "notes.jsonl"  # any other JSONL is tried as a verl log, and says why it is not one
    other.write_text(json.dumps({"step": 1, "reward_mean": 0.5}) + "\n")
    runs, skipped = load_runs([str(run / "metrics.jsonl"), str(other)])
    assert [r.path for r in runs] == [run] and runs[0].seed == 3
    assert len(skipped) == 1 and skipped[0].path == str(other)
    assert "no metric rows" in skipped[0].reason and "line 1: not a verl file-logger line" in skipped[0].reason


def test_a_verl_line_with_both_kl_names_keeps_the_losss_kl_as_kl_mean(tmp_path):
    log = tmp_path / "both.jsonl"
    log.write_text(json.dumps({"step": 1, "data": {"critic/kl": 0.5, "actor/kl_loss": 0.02}}) + "\n"
                   + json.dumps({"step": 2, "data": {"critic/kl": 0.7}}) + "\n")
    (run,), _ = load_runs([str(log)])
    assert run.series("kl_mean").tolist() == [0.02, 0.7]  # step 2 logged only critic/kl: that is its KL
    assert run.series("critic/kl").tolist()[0] == 0.5
