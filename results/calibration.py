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
           "power_lag8_vs_sync": power, "step": STEP}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "calibration.json").write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(out, indent=1))
    _figure(out)
    return 0


def _figure(out: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
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
    fig.tight_layout()
    fig.savefig(OUT / "calibration.png", dpi=110)


if __name__ == "__main__":
    raise SystemExit(main())
