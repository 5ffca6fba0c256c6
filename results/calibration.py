"""results/calibration (issue 47): how often each verdict rule calls one recipe different from itself (A/A, real
runs), and how often it calls a real, replicated drop (lag 8 against sync) with 2, 3, 5 and 8 seeds.

    python results/calibration.py        # reads results/*/records, writes results/calibration/calibration.{json,md,png}

A/A: the synchronous staleness control on 20 training seeds (0-2 results/staleness, 3 results/staleness/seed3,
4-19 results/calibration); each draw splits SPLIT_SEEDS + SPLIT_SEEDS disjoint seeds into two pretend arms.
The new rule (rlvr_cli/compare/paired.py::verdict on the crossed test) is applied as `rlvr compare` applies it
to arms with other seeds ("unpaired seeds") and with the pretend arms' seeds matched in order ("paired
seeds": independent runs, so the pairing removes nothing and the test is valid); the old rule
(legacy_verdict: bootstrap interval AND the largest per-seed McNemar p on majority correctness) as it
applied to paired seeds. Power: subsets of seeds 0-7, lag8 and sync on the same seeds.

Simulation (rlvr_cli/compare/simulate.py, the logit world fitted to results/staleness): DRAWS_SIM null draws
per setting over prompts 32-512, paired seeds 1-8 and arm seed SDs about 0.01-0.05 (type-I and interval
coverage of the primary test); with one seed the null is about the two checkpoints (no seed effect), and
the rate at which a one-seed verdict is wrong as a claim about the recipes is reported beside it; power at a
drop of about 0.035 with 64 prompts against the seeds. Prompts against seeds on real runs: lag 8 against sync
at step 100 with 3 seeds x 64 prompts, 3 seeds x 256 prompts (the same checkpoints evaluated on 256
held-out prompts: records in calibration/prompts256) and 6 seeds x 64 prompts.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from rlvr_cli.compare import crossed, paired  # noqa: E402

STEP = 100
SPLIT_SEEDS = 3
DRAWS = 300
RESAMPLES = 2000
DRAWS_SIM = 2000
SIM_PROMPTS = (32, 128, 512)
SIM_SEEDS = (1, 2, 3, 5, 8)
SIM_SEED_SD = (0.05, 0.2, 0.5)
"""Logit seed SDs: an arm's pass@1 seed SD of about 0.007-0.018, 0.019-0.025 and 0.044-0.048 (512-32 prompts)."""
OUT = ROOT / "results" / "calibration"


def load(arm: str, seed: int) -> dict:
    for d in ("staleness/records", "staleness/seed3/records", "calibration/records"):
        f = ROOT / "results" / d / f"{arm}-seed{seed}" / "eval" / f"step_{STEP}.json"
        if f.is_file():
            return json.loads(f.read_text(encoding="utf-8"))
    raise FileNotFoundError(f"{arm}-seed{seed}")


def rules(ctl: list[dict], oth: list[dict], seeds_c, seeds_o, paired_seeds: bool) -> tuple[str, str | None]:
    a = paired.arm_from_records("A", seeds_c, ctl)
    b = paired.arm_from_records("B", seeds_o, oth)
    x, y = paired.per_prompt_scores(a), paired.per_prompt_scores(b)
    t = crossed.crossed_test(x, y, paired_seeds=paired_seeds, n=a.n)
    new = paired.verdict(t, t.p_value)
    old = None
    if paired_seeds:
        diff = paired.paired_difference(x, y, paired_seeds=True, n_resamples=RESAMPLES)
        pairing = paired.Pairing(a, b, True)
        old = paired.legacy_verdict(diff, paired.paired_mcnemar(pairing))
    return new, old


def main() -> int:
    rng = np.random.default_rng(47)
    sync = {s: load("sync", s) for s in range(20)}
    lag8 = {s: load("lag8", s) for s in range(8)}
    aa = {"new (paired)": 0, "new (unpaired)": 0, "old (paired)": 0}
    for _ in range(DRAWS):
        pick = rng.choice(20, 2 * SPLIT_SEEDS, replace=False)
        sa, sb = list(pick[:SPLIT_SEEDS]), list(pick[SPLIT_SEEDS:])
        ctl, oth = [sync[s] for s in sa], [sync[s] for s in sb]
        new_p, old_p = rules(ctl, oth, list(range(SPLIT_SEEDS)), list(range(SPLIT_SEEDS)), True)
        new_u, _ = rules(ctl, oth, sa, sb, False)
        aa["new (paired)"] += new_p != paired.UNDECIDED
        aa["old (paired)"] += old_p != paired.UNDECIDED
        aa["new (unpaired)"] += new_u != paired.UNDECIDED
    power = {}
    for k in (2, 3, 5, 8):
        subsets = [sorted(rng.choice(8, k, replace=False)) for _ in range(60 if k < 8 else 1)]
        hits_new = hits_old = 0
        for sub in subsets:
            new, old = rules([sync[s] for s in sub], [lag8[s] for s in sub], list(sub), list(sub), True)
            hits_new += new == "worse"
            hits_old += old == "worse"
        power[k] = {"draws": len(subsets), "new": hits_new / len(subsets), "old": hits_old / len(subsets)}
    out = {"a_a": {"draws": DRAWS, "seeds_per_arm": SPLIT_SEEDS, "alpha": paired.ALPHA,
                   "false_verdict_rate": {k: v / DRAWS for k, v in aa.items()}},
           "power_lag8_vs_sync": power, "step": STEP,
           "prompts_or_seeds": prompts_or_seeds(sync, lag8), "simulation": simulation()}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "calibration.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=1))
    _figure(out)
    return 0


def prompts_or_seeds(sync: dict, lag8: dict) -> dict:
    """lag 8 against sync: do 4x the held-out prompts buy more than 3 more seeds? MDE and p of each design."""
    wide = {arm: {s: json.loads((OUT / "prompts256" / f"{arm}-seed{s}" / "eval" / f"step_{STEP}.json").read_text())
                  for s in (0, 1, 2)} for arm in ("sync", "lag8")}

    def test(ctl, oth, seeds):
        a, b = paired.arm_from_records("A", seeds, ctl), paired.arm_from_records("B", seeds, oth)
        t = crossed.crossed_test(paired.per_prompt_scores(a), paired.per_prompt_scores(b), paired_seeds=True, n=a.n)
        return {"prompts": t.prompts, "seeds": t.seeds[0], "mean": t.mean, "se": t.se, "df": t.df, "p": t.p_value,
                "mde": t.mde(paired.ALPHA)}

    three, six = [0, 1, 2], [0, 1, 2, 4, 5, 6]
    return {"3 seeds x 64 prompts": test([sync[s] for s in three], [lag8[s] for s in three], three),
            "3 seeds x 256 prompts": test([wide["sync"][s] for s in three], [wide["lag8"][s] for s in three], three),
            "6 seeds x 64 prompts": test([sync[s] for s in six], [lag8[s] for s in six], six)}


def simulation() -> dict:
    """Type-I and coverage of the primary test over the grid, one-seed over-claims, power against seeds."""
    from rlvr_cli.compare import simulate

    rows = []
    for p in SIM_PROMPTS:
        for s in SIM_SEEDS:
            for sd in SIM_SEED_SD if s > 1 else (0.0, *SIM_SEED_SD):
                world = simulate.World(prompts=p, seeds=s, seed_sd=sd)
                rng = np.random.default_rng(1000 * p + 10 * s + int(100 * sd))
                hit = cover = 0
                for _ in range(DRAWS_SIM):
                    a, b, truth = simulate.draw(world, 0.0, rng)
                    t = crossed.crossed_test(a, b, paired_seeds=True, n=world.n)
                    hit += t.p_value < paired.ALPHA
                    lo, hi = t.interval(1 - paired.ALPHA)
                    cover += lo <= truth <= hi
                rows.append({"prompts": p, "seeds": s, "seed_sd_logit": sd,
                             "null": "checkpoints" if s == 1 and sd == 0.0 else "recipes",
                             "type_one": hit / DRAWS_SIM, "coverage": cover / DRAWS_SIM})
    valid = [r for r in rows if r["seeds"] > 1 or r["null"] == "checkpoints"]
    power = {}
    world = simulate.World(prompts=64, seeds=2, seed_sd=0.1)
    drop = simulate.true_difference(world, np.random.default_rng(0).normal(world.mu_mean, world.mu_sd, 4096), -0.35)
    for s in (2, 3, 5, 8):
        rng = np.random.default_rng(7 + s)
        w = simulate.World(prompts=64, seeds=s, seed_sd=0.1)
        hits = sum(crossed.crossed_test(*simulate.draw(w, -0.35, rng, truth=False)[:2], paired_seeds=True,
                                        n=w.n).p_value < paired.ALPHA for _ in range(DRAWS_SIM))
        power[s] = hits / DRAWS_SIM
    return {"draws": DRAWS_SIM, "rows": rows, "max_type_one": max(r["type_one"] for r in valid),
            "min_coverage": min(r["coverage"] for r in valid),
            "one_seed_as_recipe_claim": [min(r["type_one"] for r in rows if r["seeds"] == 1 and r["null"] == "recipes"),
                                         max(r["type_one"] for r in rows if r["seeds"] == 1 and r["null"] == "recipes")],
            "power_64_prompts": {"drop": drop, "by_seeds": power}}


def _figure(out: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(14, 3.6))
    rates = out["a_a"]["false_verdict_rate"]
    ax1.bar(list(rates), list(rates.values()), color=["tab:blue", "tab:cyan", "tab:grey"])
    ax1.axhline(out["a_a"]["alpha"], color="red", lw=1, ls="--", label="nominal 0.05")
    ax1.set_ylabel("false verdicts (sync vs sync)")
    ax1.set_title(f"A/A: {out['a_a']['draws']} splits, {out['a_a']['seeds_per_arm']} seeds per arm", fontsize=10)
    ax1.legend(fontsize=8)
    ks = sorted(out["power_lag8_vs_sync"], key=int)
    ax2.plot([int(k) for k in ks], [out["power_lag8_vs_sync"][k]["new"] for k in ks], "o-", label="new rule")
    ax2.plot([int(k) for k in ks], [out["power_lag8_vs_sync"][k]["old"] for k in ks], "s--", color="grey",
             label="old rule")
    ax2.set_xlabel("paired training seeds per arm")
    ax2.set_ylabel("share of seed subsets called 'worse'")
    ax2.set_ylim(-0.03, 1.03)
    ax2.set_title("power: lag 8 vs sync (pass@1 at step 100)", fontsize=10)
    ax2.legend(fontsize=8)
    sim = out["simulation"]
    for p, marker in zip(SIM_PROMPTS, "os^"):
        rs = [r for r in sim["rows"] if r["prompts"] == p and (r["seeds"] > 1 or r["null"] == "checkpoints")]
        ax3.scatter([r["seeds"] + 0.1 * SIM_PROMPTS.index(p) for r in rs], [r["type_one"] for r in rs], marker=marker,
                    label=f"{p} prompts", s=18)
    ax3.axhline(0.05, color="red", lw=1, ls="--")
    ax3.axhline(0.06, color="grey", lw=1, ls=":")
    ax3.set_xlabel("paired training seeds per arm (1: the checkpoints' null)")
    ax3.set_ylabel("type-I rate (simulation)")
    ax3.set_title(f"simulation: {sim['draws']} null draws per setting, arm seed SD 0.01-0.05", fontsize=10)
    ax3.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(OUT / "calibration.png", dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
