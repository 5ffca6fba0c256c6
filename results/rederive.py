"""Re-derive every committed comparison from its per-prompt records, without the run directories (issue 47).

    python results/rederive.py                 # every results/**/sweep.yaml with a records/ folder beside it
    python results/rederive.py kl staleness    # some (the spec folders under results/)
    python results/rederive.py --check         # recompute into a scratch folder; exit 1 if a verdict differs

For each spec, the runs its sweep would compare (runs/experiments/NAME/ARM-seedK) are read from the thin
copies in records/ARM-seedK (results/records.py), with the spec's own comparison settings (control, labels,
smoothing, band), into the spec's comparison folder: summary.md, summary.json and the figure are what
`rlvr sweep` wrote, recomputed by the rule of this checkout. A spec whose records are incomplete is compared
on what is there, and says so.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def argv_for(spec: Path) -> tuple[list[str], int, int]:
    """`rlvr compare` arguments for SPEC from its records, with (runs found, runs the spec plans)."""
    sys.path.insert(0, str(ROOT))
    from rlvr_cli.compare.paired import N_RESAMPLES
    from rlvr_cli.sweep.commands import compare_kwargs
    from rlvr_cli.sweep.spec import load_plan

    records = spec.parent / "records"
    plan = load_plan(str(spec.relative_to(ROOT)), None, None, [])
    kw = compare_kwargs(plan)
    runs = [records / Path(r).name for r in kw["runs"]]
    found = [str(r.relative_to(ROOT)) for r in runs if (r / "run.json").is_file()]
    argv = ["compare", *found, "--out", kw["out"], "--smooth", str(kw["smooth"]), "--band", kw["band"],
            "--resamples", str(N_RESAMPLES)]
    argv += ["--label-by", kw["label_by"]] if kw["label_by"] else []
    if kw["control"]:
        control = records / Path(kw["control"]).name
        argv += ["--control", str(control.relative_to(ROOT))] if (control / "run.json").is_file() else []
    return argv, len(found), len(runs)


def verdicts(summary: Path) -> dict:
    """{label: (verdict, pass@1 difference rounded to 1e-9)} of a summary.json's arms against the control."""
    out = {}
    for v in json.loads(summary.read_text(encoding="utf-8"))["variants"]:
        a = v.get("against_control")
        if a:
            out[v["label"]] = (a.get("verdict"), round(a["pass@1"]["mean"], 9) if a.get("pass@1") else None)
    return out


def main(args: list[str]) -> int:
    check = "--check" in args
    names = [a for a in args if a != "--check"]
    specs = sorted(p for p in (ROOT / "results").rglob("sweep.yaml") if (p.parent / "records").is_dir())
    if names:
        known = {str(s.parent.relative_to(ROOT / "results")) for s in specs}
        if set(names) - known:
            print(f"unknown or without records: {sorted(set(names) - known)} (known: {sorted(known)})", file=sys.stderr)
            return 2
        specs = [s for s in specs if str(s.parent.relative_to(ROOT / "results")) in names]
    failed = 0
    for spec in specs:
        argv, found, planned = argv_for(spec)
        note = "" if found == planned else f" ({found} of {planned} runs have records)"
        print(f"== {spec.relative_to(ROOT)}{note}", flush=True)
        if not check:
            failed += subprocess.call([sys.executable, "-m", "rlvr_cli", *argv], cwd=ROOT) != 0
            continue
        with tempfile.TemporaryDirectory(prefix="rlvr-rederive-") as scratch:
            i = argv.index("--out")
            committed = ROOT / argv[i + 1] / "summary.json"
            argv[i + 1] = scratch
            rc = subprocess.call([sys.executable, "-m", "rlvr_cli", *argv], cwd=ROOT, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            now, then = (verdicts(Path(scratch) / "summary.json") if rc == 0 else {}), verdicts(committed)
        for label in sorted(set(now) | set(then)):
            if now.get(label) != then.get(label):
                failed += 1
                print(f"  {label}: committed {then.get(label)}, re-derived {now.get(label)}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
