"""`rlvr compare --control`: paired per-prompt statistics and fitted curves from synthetic run directories,
and the hostile inputs (different prompts, different n, no eval files, NaN) that must not sink the rest."""

from __future__ import annotations

import json
import math
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

# the synthetic-run helpers of test_compare_synth.py, in tests/ or (once the tests are reorganised) tests/compare/
sys.path[:0] = [str(Path(__file__).parents[1]), str(Path(__file__).parents[1] / "compare")]
from test_compare_synth import recipe, write_run

from rlvr_cli.compare import compare_runs
from rlvr_cli.errors import UserError

N = 16
PROMPTS = 96
STEPS = (0, 5, 10, 20, 40, 80, 160)


def _curve(step: int, a: float, mid: float, r0: float = 0.3, b: float = 1.5) -> float:
    return r0 if step == 0 else r0 + (a - r0) / (1 + (mid / step) ** b)


def write_arm(root: Path, name: str, seed: int, *, a: float, mid: float, prompts=None, n: int = N,
              greedy: bool = False, nan_at: int | None = None, salt: int = 0, **rec) -> Path:
    """A run whose eval files carry per-prompt counts drawn around a known learning curve: prompt i has
    difficulty d_i (shared by every arm: the pairing), and its success rate follows the curve."""
    rng = np.random.default_rng(1000 * seed + zlib.crc32(name.encode()) + salt)
    ids = prompts or [f"p{i}" for i in range(PROMPTS)]
    difficulty = np.random.default_rng(7).normal(0, 1.2, len(ids))
    evals = {}
    for step in STEPS:
        target = _curve(step, a, mid)
        logit = math.log(target / (1 - target)) - difficulty
        p = 1 / (1 + np.exp(-logit))
        c = rng.binomial(n, p)
        evals[step] = c
    d = write_run(root, f"{name}-s{seed}", seed=seed, rec=recipe(**{"loss.aggregation": name, **rec}),
                  evals={s: {1: float(np.mean(c)) / n, n: float(np.mean(c > 0))} for s, c in evals.items()})
    for step, c in evals.items():
        f = d / "eval" / f"step_{step}.json"
        ev = json.loads(f.read_text())
        counts = [int(x) for x in c]
        if nan_at is not None and step == max(STEPS):
            counts[nan_at] = math.nan
        ev.update(n=n, num_prompts=len(ids), per_prompt=[{"id": i, "correct": x} for i, x in zip(ids, counts)],
                  per_prompt_majority=[bool(x == x and 2 * x > n) for x in counts],
                  per_prompt_greedy=[bool(x == x and 2 * x >= n) for x in counts] if greedy else None)
        f.write_text(json.dumps(ev, allow_nan=True))
    return d


def _summary(out: Path) -> tuple[dict, str]:
    return json.loads((out / "summary.json").read_text()), (out / "summary.md").read_text()


def test_a_faster_arm_is_paired_by_seed_and_the_curves_say_faster(tmp_path):
    runs = [write_arm(tmp_path, "ctl", s, a=0.6, mid=60) for s in range(3)]
    runs += [write_arm(tmp_path, "fast", s, a=0.6, mid=12) for s in range(3)]
    res = compare_runs([str(r) for r in runs], tmp_path / "cmp", n_resamples=2000)
    summary, md = _summary(tmp_path / "cmp")
    assert summary["schema_version"] == 3 and summary["control"] == summary["variants"][0]["label"]
    fast = summary["variants"][1]["against_control"]
    assert fast["step"] == 160 and fast["paired_seeds"] is True and fast["binary"] == "majority"
    assert fast["bootstrap"]["n_resamples"] == 2000 and fast["bootstrap"]["seed"] == 0
    assert fast["bootstrap"]["resampled"] == "prompts and seeds" and fast["pass@1"]["prompts"] == PROMPTS
    t = fast["pass@1"]  # the primary test: paired seeds, its MDE and what would halve it
    assert t["design"] == "paired seeds" and t["seeds"] == [3, 3] and t["mde"] > 0 and t["p_holm"] == t["p"]
    assert t["low"] < t["mean"] < t["high"] and fast["seed_consistency"]["seeds"] == 3
    assert "MDE" in md
    assert summary["variants"][0]["against_control"] is None
    curve = summary["variants"][1]["curve"]
    assert curve["refused"] is None and curve["seeds_fitted"] == 3
    assert fast["curve_vs_control"]["efficiency"] == "faster"
    assert "## Against the control" in md and "**faster**" in md
    assert (tmp_path / "cmp" / "compare.png").is_file() and res.summary is summary or True


def test_same_arm_twice_is_not_distinguishable_and_verdict_rule_matches_the_numbers(tmp_path):
    runs = [write_arm(tmp_path, "ctl", 0, a=0.6, mid=40), write_arm(tmp_path, "same", 0, a=0.6, mid=40)]
    compare_runs([str(r) for r in runs], tmp_path / "cmp", n_resamples=2000)
    summary, md = _summary(tmp_path / "cmp")
    a = summary["variants"][1]["against_control"]
    d, mc = a["pass@1"], a["mcnemar"]
    assert d["low"] <= d["mean"] <= d["high"]
    # McNemar against scipy on the counts the summary reports
    m = mc["only_control"] + mc["only_other"]
    want = 1.0 if m == 0 else stats.binomtest(mc["only_control"], m, 0.5).pvalue
    assert mc["p"] == pytest.approx(want)
    if a["verdict"] == "better":
        assert d["low"] > 0 and mc["p"] < 0.05
    assert "not distinguishable at this budget" in md or a["verdict"] != "not distinguishable at this budget"
    # curves refused with the reason: one seed has an estimate but no seed interval; compare needs 2 seeds
    assert "need 2 for a test" in summary["variants"][1]["against_control"]["curve_vs_control"]["summary"]


def test_control_by_label_or_run_dir_and_unknown_control_exits_2(tmp_path):
    runs = [write_arm(tmp_path, "ctl", 0, a=0.6, mid=40), write_arm(tmp_path, "other", 0, a=0.5, mid=40)]
    compare_runs([str(r) for r in runs], tmp_path / "a", control=str(runs[1]), n_resamples=500)
    summary, _ = _summary(tmp_path / "a")
    assert summary["control"] == summary["variants"][1]["label"]
    assert summary["variants"][0]["against_control"]["step"] == 160
    with pytest.raises(UserError, match="--control nope: not a variant label"):
        compare_runs([str(r) for r in runs], tmp_path / "b", control="nope")


def test_hostile_arms_are_refused_with_the_reason_and_the_rest_is_compared(tmp_path):
    ctl = [write_arm(tmp_path, "ctl", s, a=0.6, mid=40) for s in range(2)]
    good = [write_arm(tmp_path, "good", s, a=0.6, mid=40) for s in range(2)]
    other_prompts = [write_arm(tmp_path, "moved", s, a=0.6, mid=40, prompts=[f"q{i}" for i in range(PROMPTS)])
                     for s in range(2)]
    other_n = [write_arm(tmp_path, "n4", s, a=0.6, mid=40, n=4) for s in range(2)]
    nan = [write_arm(tmp_path, "nan", s, a=0.6, mid=40, nan_at=3) for s in range(2)]
    no_evals = write_arm(tmp_path, "noeval", 0, a=0.6, mid=40)
    for f in (no_evals / "eval").iterdir():
        f.unlink()
    runs = ctl + good + other_prompts + other_n + nan + [no_evals]
    compare_runs([str(r) for r in runs], tmp_path / "cmp", n_resamples=500)
    summary, md = _summary(tmp_path / "cmp")
    by = {v["label"]: v["against_control"] for v in summary["variants"]}
    labels = {name: next(lbl for lbl in by if lbl.endswith("=" + name)) for name in
              ("good", "moved", "n4", "nan", "noeval")}
    assert by[labels["good"]]["refused"] is None and by[labels["good"]]["verdict"]
    assert "different prompts" in by[labels["moved"]]["refused"] and "'q0'" in by[labels["moved"]]["refused"]
    assert "different n (16 vs 4" in by[labels["n4"]]["refused"]
    assert "correct = nan" in by[labels["nan"]]["refused"] and "per_prompt[3] ('p3')" in by[labels["nan"]]["refused"]
    assert by[labels["noeval"]]["refused"].endswith("no eval files: nothing to pair")
    for name in ("moved", "n4", "nan", "noeval"):
        assert any(w.startswith(f"against the control, {labels[name]}:") for w in summary["warnings"])
    assert md.count("not paired") >= 3 and (tmp_path / "cmp" / "compare.png").is_file()
    # five arms: Holm over the McNemar p-values and simultaneous intervals at 1 - 0.05/5
    assert summary["against_control"]["confidence"] == pytest.approx(0.99)
    assert "Holm-adjusted over the 5 arms" in md


def test_greedy_outcomes_are_used_when_every_record_has_them(tmp_path):
    runs = [write_arm(tmp_path, "ctl", 0, a=0.6, mid=40, greedy=True),
            write_arm(tmp_path, "b", 0, a=0.7, mid=40, greedy=True)]
    compare_runs([str(r) for r in runs], tmp_path / "cmp", n_resamples=500)
    summary, md = _summary(tmp_path / "cmp")
    assert summary["variants"][1]["against_control"]["binary"] == "greedy"
    assert "McNemar (greedy)" in md


def test_old_eval_files_without_per_prompt_results_are_refused_not_crashed(tmp_path):
    runs = [write_run(tmp_path, "a", rec=recipe()), write_run(tmp_path, "b", rec=recipe(**{"kl.beta": 0.1}))]
    compare_runs([str(r) for r in runs], tmp_path / "cmp", n_resamples=200)
    summary, md = _summary(tmp_path / "cmp")
    a = summary["variants"][1]["against_control"]
    assert "no per_prompt list" in a["refused"]
    assert "not fitted" in md and "need 4" in md  # three evaluations after step 0: the curve is refused


def test_provenance_records_base_weights_hash_and_git_commit(tmp_path):
    runs = [write_arm(tmp_path, "ctl", 0, a=0.6, mid=40), write_arm(tmp_path, "x", 0, a=0.6, mid=40)]
    info = json.loads((runs[0] / "run.json").read_text())
    (runs[0] / "run.json").write_text(json.dumps({**info, "git_commit": "abcdef1234567890"}))
    ck = runs[0] / "checkpoints" / "step_0"
    ck.mkdir(parents=True)
    (ck / "config.json").write_text("{}")
    (ck / "model.safetensors").write_bytes(b"weights")
    compare_runs([str(r) for r in runs], tmp_path / "cmp", n_resamples=200)
    summary, md = _summary(tmp_path / "cmp")
    import hashlib

    want = "sha256:" + hashlib.sha256(b"weights").hexdigest()
    assert summary["runs"][0]["provenance"]["base_weights"] == want
    assert summary["provenance"]["git_commit"] == ["abcdef1234567890", None]
    assert "code revision: abcdef123456 (unknown for some runs)" in md


def test_cli_control_flag_prints_the_verdict_column_and_survives_a_nan(tmp_path, capsys, monkeypatch):
    from rlvr_cli.cli import main
    from rlvr_cli.cli.common import console

    monkeypatch.setattr(console, "_width", 250)
    runs = [write_arm(tmp_path, "ctl", 0, a=0.6, mid=40), write_arm(tmp_path, "nan", 0, a=0.6, mid=40, nan_at=0),
            write_arm(tmp_path, "ok", 0, a=0.6, mid=40)]
    with pytest.raises(SystemExit) as e:
        main(["compare", *map(str, runs), "--out", str(tmp_path / "cmp"), "--control", "loss.aggregation=ok",
              "--resamples", "300"])
    assert e.value.code == 0
    err = capsys.readouterr().err
    assert "vs loss.aggregation=ok" in err and "not paired" in err and "control" in err
    summary, md = _summary(tmp_path / "cmp")
    assert summary["settings"]["resamples"] == 300 and summary["control"] == "loss.aggregation=ok"
    assert "## Against the control (`loss.aggregation=ok`)" in md
    with pytest.raises(SystemExit) as e:
        main(["compare", *map(str, runs), "--out", str(tmp_path / "x"), "--control", "nope"])
    assert e.value.code == 2


def test_a_clearly_better_arm_is_better_and_the_mirror_is_worse(tmp_path):
    runs = [write_arm(tmp_path, "ctl", s, a=0.45, mid=40) for s in range(2)]
    runs += [write_arm(tmp_path, "up", s, a=0.85, mid=40) for s in range(2)]
    runs += [write_arm(tmp_path, "down", s, a=0.05, mid=40) for s in range(2)]
    compare_runs([str(r) for r in runs], tmp_path / "cmp", n_resamples=1000)
    summary, md = _summary(tmp_path / "cmp")
    up, down = (summary["variants"][i]["against_control"] for i in (1, 2))
    assert up["verdict"] == "better" and up["pass@1"]["low"] > 0 and up["mcnemar"]["p_holm"] < 0.05
    assert down["verdict"] == "worse" and down["pass@1"]["high"] < 0
    assert "**better** than" in md and "**worse** than" in md


def test_provenance_says_which_conditions_differ_between_runs(tmp_path):
    runs = [write_arm(tmp_path, "ctl", 0, a=0.6, mid=40), write_arm(tmp_path, "x", 0, a=0.6, mid=40)]
    for run, numerics in zip(runs, ["x86_64/AVX2", "x86_64/AVX512"]):
        info = json.loads((run / "run.json").read_text())
        fp = {"task_data": "blake2b:aa", "numerics": numerics, "torch": "2.13.0"}
        (run / "run.json").write_text(json.dumps({**info, "fingerprint": fp}))
    info = json.loads((runs[1] / "run.json").read_text())
    (runs[1] / "run.json").write_text(json.dumps({**info, "fingerprint_changes": [{"from_step": 3, "torch": "2.14"}]}))
    compare_runs([str(r) for r in runs], tmp_path / "cmp", n_resamples=200)
    summary, md = _summary(tmp_path / "cmp")
    assert summary["provenance"]["numerics"] == ["x86_64/AVX2", "x86_64/AVX512"]
    assert summary["runs"][0]["provenance"]["task_data"] == "blake2b:aa"
    assert "CPU numerics DIFFER between runs: x86_64/AVX2, x86_64/AVX512" in md
    assert "task data: blake2b:aa" in md and "torch: 2.13.0" in md
    resumed = md.split("Resumed under other conditions (run.json fingerprint_changes): ", 1)[1].split(".", 1)[0]
    assert resumed.endswith(runs[1].name) and runs[0].name not in resumed


def test_commits_that_ran_the_same_package_code_are_one_code_and_other_code_differs(tmp_path):
    def arms(code_b):
        runs = [write_arm(tmp_path / code_b, "ctl", 0, a=0.6, mid=40), write_arm(tmp_path / code_b, "x", 0, a=0.6, mid=40)]
        for run, commit, code in zip(runs, ["1111111111119999", "2222222222229999"], ["blake2b:" + "c" * 32, code_b]):
            info = json.loads((run / "run.json").read_text())
            (run / "run.json").write_text(json.dumps({**info, "git_commit": commit, "fingerprint": {"code": code}}))
        compare_runs([str(r) for r in runs], tmp_path / code_b / "cmp", n_resamples=200)
        return _summary(tmp_path / code_b / "cmp")

    summary, md = arms("blake2b:" + "c" * 32)  # a write-up committed mid-sweep: two commits, one package
    assert summary["provenance"]["code"] == ["blake2b:" + "c" * 32]
    assert ("code revision: 111111111111, 222222222222 (commits that differ only outside the package: the "
            "same package code blake2b:cccccccccccccccc in every run)") in md and "DIFFER" not in md
    _, md = arms("blake2b:" + "d" * 32)  # the package changed between the runs
    assert "code revision DIFFER between runs: 111111111111, 222222222222" in md


def test_paths_inside_the_working_directory_are_recorded_relative(tmp_path, monkeypatch):
    runs = [write_arm(tmp_path, "ctl", 0, a=0.6, mid=40), write_arm(tmp_path, "x", 0, a=0.6, mid=40)]
    monkeypatch.chdir(tmp_path)
    compare_runs([str(r.absolute()) for r in runs], tmp_path / "cmp", n_resamples=200)
    text = (tmp_path / "cmp" / "summary.json").read_text() + (tmp_path / "cmp" / "summary.md").read_text()
    assert str(tmp_path) not in text
    summary, _ = _summary(tmp_path / "cmp")
    assert summary["out_dir"] == "cmp" and summary["runs"][0]["path"] == str(runs[0].relative_to(tmp_path))


def test_each_variant_is_tested_against_its_base_and_a_flat_one_is_not(tmp_path):
    """The last common eval step against the same runs' step 0: an arm that learned (0.3 -> 0.85) is
    better than its base, one that stayed at r0 (a = r0) is not distinguishable, with its MDE; a variant
    whose runs lack step 0 has no base line (and the rest still has one). One variant alone gets it too."""
    runs = [write_arm(tmp_path, "up", s, a=0.85, mid=20) for s in range(2)]
    runs += [write_arm(tmp_path, "flat", s, a=0.3, mid=20) for s in range(2)]
    nobase = write_arm(tmp_path, "nobase", 0, a=0.5, mid=20)
    (nobase / "eval" / "step_0.json").unlink()
    compare_runs([str(r) for r in [*runs, nobase]], tmp_path / "cmp", n_resamples=200)
    summary, md = _summary(tmp_path / "cmp")
    up, flat, none = (v["against_base"] for v in summary["variants"])
    assert up["step"] == 160 and up["paired_seeds"] is True and up["verdict"] == "better"
    assert up["pass@1"]["low"] > 0 and up["pass@1"]["seeds"] == [2, 2]
    assert flat["verdict"].startswith("not distinguishable") and flat["pass@1"]["mde"] > 0
    assert none["refused"].startswith("no step-0 evaluation") and none["verdict"] is None
    # Holm over the 2 variants tested: the smaller p times 2, the larger at least that
    ps = sorted((up["pass@1"]["p"], flat["pass@1"]["p"]))
    assert sorted((up["pass@1"]["p_holm"], flat["pass@1"]["p_holm"])) == [pytest.approx(min(1, 2 * ps[0])),
                                                                           pytest.approx(max(min(1, 2 * ps[0]), ps[1]))]
    assert "## Against the base model (step 0)" in md and "**better** than its base at step 160" in md
    assert summary["against_base"]["confidence"] == pytest.approx(1 - 0.05 / 3)
    compare_runs([str(r) for r in runs[2:]], tmp_path / "alone", n_resamples=200)  # one variant, no control arm
    alone, md = _summary(tmp_path / "alone")
    assert alone["variants"][0]["against_base"]["verdict"].startswith("not distinguishable") and "its base" in md


def test_an_arm_from_other_base_weights_gets_its_verdict_withheld_not_a_crash(tmp_path):
    runs = [write_arm(tmp_path, "ctl", 0, a=0.45, mid=40), write_arm(tmp_path, "up", 0, a=0.85, mid=40)]
    for r, w in zip(runs, ("sha256:aaaa", "sha256:bbbb")):
        info = json.loads((r / "run.json").read_text())
        (r / "run.json").write_text(json.dumps({**info, "base_weights": w}))
    compare_runs([str(r) for r in runs], tmp_path / "cmp", n_resamples=200)
    summary, md = _summary(tmp_path / "cmp")
    up = summary["variants"][1]["against_control"]
    assert up["verdict"] == "withheld" and "sha256:bbbb" in up["verdict_withheld"]
    assert up["pass@1"]["mean"] > 0.2  # the numbers are still shown, only the word is withheld
    assert "verdict withheld (arm" in md


def test_arms_given_as_eval_records_get_the_verdicts_their_runs_get(tmp_path):
    """compare_records (the R1 pipeline's and the inference-compute table's path) equals compare_runs on the
    same eval files: same primary test, Holm family and verdict, no runs needed."""
    from rlvr_cli.compare.against import compare_records

    runs = [write_arm(tmp_path, name, 0, a=a, mid=40) for name, a in (("ctl", 0.45), ("up", 0.85), ("same", 0.45))]
    compare_runs([str(r) for r in runs], tmp_path / "cmp", n_resamples=500)
    summary, _ = _summary(tmp_path / "cmp")
    last = max(STEPS)
    rec = [json.loads((r / "eval" / f"step_{last}.json").read_text()) for r in runs]
    got = compare_records(("ctl", [rec[0]]), [("up", [rec[1]]), ("same", [rec[2]])], n_resamples=500)
    for i, label in ((1, "up"), (2, "same")):
        want = summary["variants"][i]["against_control"]
        arm = got["arms"][label]
        assert arm["verdict"] == want["verdict"] and arm["step"] == last
        assert arm["pass@1"]["p_holm"] == pytest.approx(want["pass@1"]["p_holm"])
        assert arm["pass@1"]["mde"] == pytest.approx(want["pass@1"]["mde"])
    assert got["arms"]["up"]["verdict"] == "better" and got["arms"]["same"]["verdict"] != "better"
