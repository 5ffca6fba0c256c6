"""Synthetic run directories with known properties for the `rlvr compare` tests, and tests of reading them.

`write_run` writes recipe.yaml / run.json / metrics.jsonl / eval/step_N.json (docs/design.md §3) from
arrays; `healthy_metrics` gives a run that learns without any failure mode, which the other tests
bend into one failure at a known step.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import yaml

from rlvr_cli.compare.load import load_run, load_runs

RL_KEYS = (
    "reward_mean",
    "accuracy",
    "kl_mean",
    "kl_max",
    "entropy",
    "len_mean",
    "len_correct",
    "len_incorrect",
    "truncated_frac",
    "clip_low_frac",
    "clip_high_frac",
    "ratio_max",
    "zero_std_frac",
    "groups_dropped_frac",
    "grad_norm",
    "lr",
    "step_time_s",
    "gen_tokens",
)
BASE_PASSK = {1: 0.34, 2: 0.5, 4: 0.7, 8: 0.87, 16: 0.975}


def recipe(**overrides) -> dict:
    """A resolved-looking recipe; overrides use dotted keys: recipe(**{"kl.placement": "none"})."""
    r = {
        "name": "grpo",
        "description": "",
        "algorithm": "rl",
        "seed": 0,
        "steps": 60,
        "device": "cpu",
        "threads": 1,
        "output_dir": "runs",
        "model": {"name": "builtin:tiny", "reference": None, "dtype": "auto"},
        "task": {"name": "arithmetic", "digits": 3, "num_eval": 256, "split_seed": 1234},
        "rollout": {"group_size": 8, "prompts_per_step": 16, "max_new_tokens": 64, "temperature": 1.0},
        "advantage": {"baseline": "group_mean", "scale": "group_std", "eps": 1e-6},
        "loss": {
            "ratio": "token",
            "clip": {"eps_low": 0.2, "eps_high": 0.2, "dual_clip": None},
            "aggregation": "seq_mean_token_mean",
            "length_constant": 64,
            "entropy_coef": 0.0,
        },
        "kl": {"placement": "loss", "estimator": "k3", "beta": 0.04, "track": True, "ref_reset_every": None},
        "reward": {"terms": [{"type": "task", "weight": 1.0}], "timeout_s": 5.0, "workers": 0},
        "optim": {"lr": 1e-4, "schedule": "constant", "warmup_steps": 0, "mu": 1, "minibatches": 2, "micro_batches": 1},
        "eval": {
            "every": 20,
            "at_start": True,
            "n": 16,
            "num_prompts": 64,
            "temperature": 1.0,
            "top_p": 1.0,
            "max_new_tokens": 64,
            "pass_at_k": [1, 2, 4, 8, 16],
            "maj_at_k": [1, 16],
            "seed": 1234,
        },
        "checkpoint": {"every": 50, "keep_last": None},
    }
    for dotted, value in overrides.items():
        node = r
        *parents, leaf = dotted.split(".")
        for p in parents:
            node = node[p]
        node[leaf] = value
    return r


def healthy_metrics(steps: int = 60, seed: int = 0) -> dict[str, np.ndarray]:
    """A run that learns: accuracy 0.35 -> ~0.7, KL drifting to ~2e-3, entropy 0.21 -> ~0.17, flat lengths."""
    rng = np.random.default_rng(seed)
    t = np.arange(1, steps + 1, dtype=float)
    acc = 0.35 + 0.35 * (1 - np.exp(-t / 25)) + rng.normal(0, 0.02, steps)
    kl = 2e-3 * (1 - np.exp(-(t - 1) / 20)) + 1e-5
    return {
        "reward_mean": acc.copy(),
        "accuracy": acc,
        "kl_mean": kl,
        "kl_max": kl * 30 + rng.uniform(0, 0.02, steps),
        "entropy": 0.21 - 0.04 * t / steps + rng.normal(0, 0.004, steps),
        "len_mean": 22 + rng.normal(0, 0.5, steps),
        "len_correct": 21 + rng.normal(0, 0.5, steps),
        "len_incorrect": 23 + rng.normal(0, 0.8, steps),
        "truncated_frac": np.full(steps, 0.01),
        "clip_low_frac": rng.uniform(0, 0.01, steps),
        "clip_high_frac": rng.uniform(0, 0.01, steps),
        "ratio_max": 1.2 + rng.uniform(0, 0.3, steps),
        "zero_std_frac": rng.uniform(0.1, 0.3, steps),
        "groups_dropped_frac": np.zeros(steps),
        "grad_norm": rng.uniform(0.2, 0.5, steps),
        "lr": np.full(steps, 1e-4),
        "step_time_s": np.full(steps, 0.8),
        "gen_tokens": np.full(steps, 2800.0),
    }


def healthy_evals(steps: int = 60, every: int = 20) -> dict[int, dict[int, float]]:
    out = {0: dict(BASE_PASSK)}
    for s in range(every, steps + 1, every):
        gain = 0.3 * s / steps
        out[s] = {k: min(1.0, v + gain * (1 - v)) for k, v in BASE_PASSK.items()}
    return out


def write_run(
    root: Path,
    name: str,
    *,
    seed: int = 0,
    rec: dict | None = None,
    metrics: dict[str, np.ndarray] | None = None,
    evals: dict[int, dict[int, float]] | None = None,
    status: str = "finished",
    steps: int = 60,
) -> Path:
    """Write a run directory; ``metrics`` arrays are per step from step 1 (None entries -> null)."""
    d = Path(root) / name
    (d / "eval").mkdir(parents=True, exist_ok=True)
    rec = dict(rec or recipe())
    rec["seed"], rec["name"] = seed, name
    (d / "recipe.yaml").write_text(yaml.safe_dump(rec, sort_keys=False), encoding="utf-8")
    (d / "run.json").write_text(json.dumps({"status": status, "seed": seed, "started": "2025-01-01T00:00:00+00:00"}))
    metrics = healthy_metrics(steps, seed) if metrics is None else metrics
    n = len(next(iter(metrics.values())))
    lines = []
    for i in range(n):
        row = {"step": i + 1}
        row.update({k: (None if v[i] is None else float(v[i])) for k, v in metrics.items()})
        lines.append(json.dumps(row))
    (d / "metrics.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for step, passk in (healthy_evals(n) if evals is None else evals).items():
        ev = {
            "step": step,
            "model": "m",
            "task": "arithmetic",
            "n": 16,
            "num_prompts": 64,
            "temperature": 1.0,
            "seed": 1234,
            "pass_at_k": {str(k): v for k, v in passk.items()},
            "maj_at_k": {"1": passk.get(1)},
            "len_mean": 21.0,
            "budget": None,
        }
        (d / "eval" / f"step_{step}.json").write_text(json.dumps(ev), encoding="utf-8")
    return d


# --- tests of reading ------------------------------------------------------------------------------
def test_healthy_run_reads_back_every_step_and_eval(tmp_path):
    run = load_run(write_run(tmp_path, "grpo_s0"))
    assert run.last_step == 60 and list(run.metrics.index[:3]) == [1, 2, 3]
    assert set(RL_KEYS) <= set(run.metrics.columns)
    assert sorted(run.evals) == [0, 20, 40, 60] and run.evals[0]["pass_at_k"][16] == 0.975
    assert run.status == "finished" and run.seed == 0 and run.warnings == []


def test_corrupt_metrics_line_is_skipped_and_reported(tmp_path):
    d = write_run(tmp_path, "run")
    lines = (d / "metrics.jsonl").read_text().splitlines()
    lines[9] = '{"step": 10, "reward_mean": 0.4, "accur'  # a torn line in the middle (step 10)
    lines[19] = "not json at all"
    (d / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    run = load_run(d)
    assert 10 not in run.metrics.index and 20 not in run.metrics.index and run.last_step == 60
    assert any("line 10" in w and "skipped" in w for w in run.warnings)
    assert any("line 20" in w for w in run.warnings)


def test_half_written_last_line_keeps_the_run_up_to_its_last_full_line(tmp_path):
    d = write_run(tmp_path, "run", status="running")
    text = (d / "metrics.jsonl").read_text()
    (d / "metrics.jsonl").write_text(text + '{"step": 61, "reward_mean": 0.5, "kl_')
    run = load_run(d)
    assert run.last_step == 60 and run.status == "running"
    assert any("incomplete last line" in w for w in run.warnings)


def test_nan_and_infinity_tokens_are_kept_apart_from_nulls(tmp_path):
    m = healthy_metrics(10)
    m["kl_max"] = np.array([0.1] * 7 + [np.inf, np.nan, np.nan])
    m["len_correct"] = np.array([None] * 10, dtype=object)
    run = load_run(write_run(tmp_path, "run", metrics=m, evals={}))
    assert list(run.nonfinite["kl_max"].to_numpy()) == [False] * 7 + [True] * 3
    assert run.series("len_correct") is None  # never logged a value: not plotted, not diagnosed
    assert any("no eval" in w for w in run.warnings)


def test_missing_recipe_or_metrics_or_path_is_skipped_with_a_reason(tmp_path):
    good = write_run(tmp_path, "good")
    no_recipe = write_run(tmp_path, "no_recipe")
    (no_recipe / "recipe.yaml").unlink()
    empty = write_run(tmp_path, "empty")
    (empty / "metrics.jsonl").write_text("")
    runs, skipped = load_runs([str(good), str(no_recipe), str(empty), str(tmp_path / "nowhere")])
    assert [r.name for r in runs] == ["good"]
    reasons = {Path(s.path).name: s.reason for s in skipped}
    assert "recipe.yaml missing" in reasons["no_recipe"]
    assert "no complete line" in reasons["empty"]
    assert reasons["nowhere"] == "does not exist"


def test_a_directory_of_runs_expands_to_its_runs(tmp_path):
    write_run(tmp_path / "runs", "a")
    write_run(tmp_path / "runs", "b")
    runs, skipped = load_runs([str(tmp_path / "runs"), str(tmp_path / "runs" / "a")])
    assert sorted(r.name for r in runs) == ["a", "b"] and skipped == []
