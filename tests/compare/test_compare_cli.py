"""End to end: `compare_runs` and `rlvr compare` on synthetic runs, including broken and unfinished ones."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).parent))  # the synthetic-run helpers, whatever pytest's import mode
from test_compare_synth import healthy_metrics, recipe, write_run

from rlvr_cli.cli import main
from rlvr_cli.cli.common import console
from rlvr_cli.compare import compare_runs
from rlvr_cli.compare.load import load_runs
from rlvr_cli.compare.plot import make_figure
from rlvr_cli.compare.series import across_seeds
from rlvr_cli.compare.variants import group_variants
from rlvr_cli.errors import UserError

STEPS = 30


def _no_nan_tokens(token):
    raise AssertionError(f"summary.json must be strict JSON, found {token}")


@pytest.fixture
def ablation(tmp_path):
    """Two variants x two seeds; one no-KL seed explodes at step ~15, one has a torn metrics line,
    one lost its eval files; plus a run in progress, an SFT run and a directory that is not a run."""
    runs = tmp_path / "runs"
    no_kl = recipe(**{"kl.placement": "none", "kl.beta": 0.0})
    paths = [write_run(runs, f"grpo_s{s}", seed=s, steps=STEPS) for s in (0, 1)]
    t = np.arange(1, STEPS + 1)
    exploding = healthy_metrics(STEPS, 1)
    exploding["kl_mean"] = np.where(t < 14, 1e-3, np.minimum(1e-3 * 10 ** ((t - 13) * 0.75), 3.0))
    exploding["kl_max"] = exploding["kl_mean"] * 30
    exploding["kl_max"][-3:] = np.inf
    paths += [
        write_run(runs, "nokl_s0", seed=0, rec=no_kl, steps=STEPS),
        write_run(runs, "nokl_s1", seed=1, rec=no_kl, metrics=exploding),
    ]
    lines = (paths[1] / "metrics.jsonl").read_text().splitlines()
    lines[4] = lines[4][:25]
    (paths[1] / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    for f in (paths[2] / "eval").iterdir():
        f.unlink()
    live = write_run(runs, "live_s0", rec=recipe(**{"optim.lr": 3e-4}), steps=20, status="running")
    with open(live / "metrics.jsonl", "a") as f:
        f.write('{"step": 21, "reward_mean": 0.4, "kl_me')
    sft = write_run(
        runs,
        "sft",
        rec=recipe(algorithm="sft"),
        evals={},
        metrics={"loss": np.linspace(2, 1, 10), "lr": np.full(10, 1e-3), "grad_norm": np.ones(10)},
    )
    (tmp_path / "notes").mkdir()
    return [str(p) for p in paths + [live, sft]] + [str(tmp_path / "notes")]


def test_compare_writes_figure_and_summary_and_reports_what_it_skipped(ablation, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(console, "_width", 200)  # one table row per line, so labels are not folded
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        main(["compare", *ablation, "--out", str(out), "--band", "std", "--smooth", "3"])
    assert e.value.code == 0
    err = capsys.readouterr().err
    assert "KL explosion 1/2 from" in err and "kl.placement=none" in err and "skipped" in err and "notes" in err
    for name in ("compare.png", "compare.svg", "summary.json", "summary.md"):
        assert (out / name).stat().st_size > 0
    s = json.loads((out / "summary.json").read_text(), parse_constant=_no_nan_tokens)
    assert s["schema_version"] == 3 and len(s["runs"]) == 6 and s["settings"]["band"] == "std"
    assert [Path(x["path"]).name for x in s["skipped"]] == ["notes"]
    labels = [v["label"] for v in s["variants"]]
    assert len(labels) == 4 and "kl.placement=none" in " ".join(labels) and "algorithm=sft" in " ".join(labels)
    nokl = next(v for v in s["variants"] if v["runs"][0].endswith("nokl_s0"))
    assert nokl["seeds"] == [0, 1] and nokl["diagnosis"]["kl_explosion"]["detected"] == 1
    assert 13 <= nokl["diagnosis"]["kl_explosion"]["onset_steps"][0] <= 17
    assert nokl["final"]["pass@1"]["n"] == 1  # the seed without eval files is left out, not a crash
    by_name = {Path(r["path"]).name: r for r in s["runs"]}
    assert by_name["nokl_s0"]["final"]["pass@k"] is None and by_name["nokl_s0"]["final"]["k"] is None
    assert any("line 5" in w for w in by_name["grpo_s1"]["warnings"])
    assert by_name["live_s0"]["last_step"] == 20 and by_name["live_s0"]["status"] == "running"
    assert by_name["sft"]["diagnosis"]["kl_explosion"]["status"] == "n/a"
    assert s["variants"][0]["final"]["accuracy"]["std"] is not None and s["thresholds"]["KL_RISE_FACTOR"] == 100
    md = (out / "summary.md").read_text()
    assert "## Diagnosis" in md and "KL explosion: **detected**" in md and "notes" in md


def test_a_run_in_progress_is_plotted_up_to_its_last_full_line(ablation):
    runs, _ = load_runs([p for p in ablation if p.endswith("live_s0")])
    fig = make_figure(group_variants(runs), smooth=0)
    reward_panel = fig.axes[0]
    assert max(max(line.get_xdata()) for line in reward_panel.get_lines()) == 20


def test_mean_over_seeds_has_a_gap_where_a_seed_diverged_and_skips_unlogged_steps():
    a = pd.Series([1.0, 2.0, 3.0, 4.0], index=[1, 2, 3, 4])
    b = pd.Series([3.0, np.inf, 5.0], index=[1, 2, 3])  # diverged at step 2, still running after step 3
    agg = across_seeds([a, b], "minmax")
    assert agg.loc[1, "mean"] == 2.0 and (agg.loc[1, "lo"], agg.loc[1, "hi"]) == (1.0, 3.0)
    assert np.isnan(agg.loc[2, "mean"]) and np.isnan(agg.loc[2, "hi"])
    assert agg.loc[4, "mean"] == 4.0 and agg.loc[4, "n"] == 1
    assert across_seeds([a, b], "std").loc[3, "hi"] == pytest.approx(4.0 + np.sqrt(2))


def test_cli_exits_2_naming_each_run_when_nothing_is_readable(tmp_path, capsys):
    broken = write_run(tmp_path, "broken", steps=5)
    (broken / "metrics.jsonl").write_text('{"step": 1, "rew')
    with pytest.raises(SystemExit) as e:
        main(["compare", str(broken), str(tmp_path / "missing"), "--out", str(tmp_path / "o")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "no readable run" in err and "broken: metrics.jsonl has no complete line" in err
    assert "missing: does not exist" in err
    assert not (tmp_path / "o").exists()


def test_bad_band_is_a_user_error(tmp_path):
    write_run(tmp_path, "r", steps=5, evals={})
    with pytest.raises(UserError, match="--band"):
        compare_runs([str(tmp_path / "r")], tmp_path / "o", band="iqr")


def test_one_hostile_run_does_not_sink_the_comparison(tmp_path, capsys):
    """Huge integers, deep JSON (in metrics, run.json and eval files) and an all-NaN run inside
    `compare runs/`: each bad line or run is reported, the rest compared, the all-NaN run plots empty."""
    runs = tmp_path / "runs"
    write_run(runs, "good", steps=STEPS)
    huge = write_run(runs, "huge", steps=STEPS)
    with open(huge / "metrics.jsonl", "a") as f:
        f.write('{"step": 31, "reward_mean": ' + "9" * 5000 + "}\n")
        f.write('{"step": 32, "reward_mean": 1' + "0" * 400 + "}\n")  # beyond float: +inf
    (huge / "eval" / "step_0.json").write_text('{"pass_at_k": {"1": ' + "9" * 5000 + "}}")
    deep = write_run(runs, "deep", steps=STEPS)
    with open(deep / "metrics.jsonl", "a") as f:
        f.write('{"step": 31, "x": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    (deep / "run.json").write_text("[" * 100_000 + "]" * 100_000)
    nan = np.full(STEPS, np.nan)
    write_run(runs, "all_nan", steps=STEPS, metrics={k: nan for k in healthy_metrics(STEPS, 0)})
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        main(["compare", str(runs), "--out", str(out)])
    assert e.value.code == 0, capsys.readouterr().err
    s = json.loads((out / "summary.json").read_text())
    by_name = {Path(r["path"]).name: r for r in s["runs"]}
    assert sorted(by_name) == ["all_nan", "deep", "good", "huge"]
    assert any("line 31" in w and "4300" in w for w in by_name["huge"]["warnings"])
    assert by_name["huge"]["last_step"] == 32
    assert any("line 31" in w and "nested too deeply" in w for w in by_name["deep"]["warnings"])
    assert any("run.json" in w for w in by_name["deep"]["warnings"])
    assert (out / "compare.png").stat().st_size > 0


def test_length_bias_panels_and_conditional_verbosity_columns_appear_when_runs_logged_them(tmp_path):
    """Runs that logged the gw_* metrics get the length-bias panels (labels from rlvr_cli/metrics.py);
    eval files with conditional verbosity put the base's and the final P(filler|wrong/right) in summary.md."""
    runs = tmp_path / "runs"
    paths = []
    for s, (short, long_) in enumerate([(0.30, 0.10), (0.28, 0.12)]):
        m = healthy_metrics(STEPS, s)
        m.update(gw_incorrect_share=np.full(STEPS, 0.6), gw_incorrect_short_share=np.full(STEPS, short),
                 gw_incorrect_mid_share=np.full(STEPS, 0.6 - short - long_),
                 gw_incorrect_long_share=np.full(STEPS, long_), gw_len_corr_incorrect=np.full(STEPS, -0.5))
        d = write_run(runs, f"grpo_s{s}", seed=s, metrics=m, evals={0: {1: 0.5, 16: 0.9}, STEPS: {1: 0.6, 16: 0.95}})
        for step, (wrong, right) in {0: (0.66, 0.13), STEPS: (0.8 + 0.1 * s, 0.05)}.items():
            f = d / "eval" / f"step_{step}.json"
            f.write_text(json.dumps({**json.loads(f.read_text()), "filler_given_incorrect": wrong,
                                     "filler_given_correct": right}))
        paths.append(d)
    plain = write_run(runs, "plain", steps=STEPS)

    titles = lambda fig: [ax.get_title() for ax in fig.axes]  # noqa: E731
    runs_gw, _ = load_runs([str(p) for p in paths])
    fig = make_figure(group_variants(runs_gw), smooth=0)
    panel = fig.axes[titles(fig).index("per-token gradient weight on incorrect responses (share)")]
    legend = [t.get_text() for t in panel.get_legend().get_texts()]
    assert legend == ["short third", "long third", "incorrect share"]
    assert [round(float(y[0]), 2) for y in (line.get_ydata() for line in panel.get_lines())] == [0.29, 0.11, 0.6]
    assert "incorrect: corr(length, weight); truncation" in titles(fig)
    runs_plain, _ = load_runs([str(plain)])
    assert not any("gradient weight" in t for t in titles(make_figure(group_variants(runs_plain), smooth=0)))

    out = tmp_path / "out"
    compare_runs([str(p) for p in paths], out)
    s = json.loads((out / "summary.json").read_text(), parse_constant=_no_nan_tokens)
    v = s["variants"][0]
    assert v["base"]["filler|wrong"]["mean"] == pytest.approx(0.66) and v["final"]["filler|wrong"]["max"] == pytest.approx(0.9)
    assert v["final"]["gw_incorrect_long_share"]["mean"] == pytest.approx(0.11)
    md = (out / "summary.md").read_text()
    assert "| P(filler\\|wrong) base -> final | P(filler\\|right) base -> final |" in md
    assert "0.660 ± 0.000 [0.660, 0.660] -> 0.850 ± 0.071 [0.800, 0.900]" in md
