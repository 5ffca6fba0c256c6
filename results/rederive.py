"""Re-derive every committed comparison from its per-prompt records, without the run directories (issue 47).

    python results/rederive.py                 # every results/**/sweep.yaml with a records/ folder beside it
    python results/rederive.py kl staleness    # some (the spec folders under results/)
    python results/rederive.py --check         # recompute into a scratch folder; exit 1 if a verdict differs
    python results/rederive.py r1 inference_compute   # the pipelines' summaries, from their records/ by their scripts
    python results/rederive.py prorl/prompts256        # a comparison made by hand, from its summary.json's runs

For each spec, the runs its sweep would compare (runs/experiments/NAME/ARM-seedK) are read from the thin
copies in records/ARM-seedK (results/records.py), with the spec's own comparison settings (control, labels,
smoothing, band), into the spec's comparison folder: summary.md, summary.json and the figure are what
`rlvr sweep` wrote, recomputed by the rule of this checkout. A spec whose records are incomplete is compared
on what is there, and says so. The two results made by pipelines rather than sweeps (SCRIPTED: the R1 stages
and the inference-compute table) are re-summarised by their own scripts from their records/.
"""

from __future__ import annotations

import json
import os
import re
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


SCRIPTED = {
    "r1": lambda out: ["results/r1_summary.py", "results/r1/records", str(out)],
    "inference_compute": lambda out: ["results/inference_compute.py", "--from-records", str(out)],
}
"""Results made by a pipeline script: NAME -> the script's argv (after python) writing summary.md into OUT."""

VERDICT_LINE = re.compile(r"^- \*\*(?P<label>[^*]+)\*\*: (?:\*\*(?P<word>[^*]+)\*\*|(?P<other>verdict withheld))"
                          r".*?pass@1 (?P<d>[+-]\d\.\d+)")


def script_verdicts(summary: Path) -> list[tuple[str, str, str]]:
    """(label, verdict, pass@1 difference as printed) of every verdict line of a scripted summary.md, in order."""
    out = []
    for line in summary.read_text(encoding="utf-8").splitlines():
        m = VERDICT_LINE.match(line)
        if m:
            out.append((m["label"], m["word"] or m["other"], m["d"]))
    return out


def this_checkout() -> dict:
    """The environment for a child that must import this checkout's rlvr_cli, installed or not (a script
    under results/ has results/ on its path, not the repository root)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def rederive_script(name: str, check: bool) -> int:
    """Re-summarise one scripted result from its records (into a scratch folder with --check); the failures."""
    folder = ROOT / "results" / name
    print(f"== results/{name} (records/ by its script)", flush=True)
    if not check:
        return subprocess.call([sys.executable, *SCRIPTED[name](folder.relative_to(ROOT))], cwd=ROOT,
                               env=this_checkout()) != 0
    with tempfile.TemporaryDirectory(prefix="rlvr-rederive-") as scratch:
        (Path(scratch) / "records").symlink_to(folder / "records")
        rc = subprocess.call([sys.executable, *SCRIPTED[name](scratch)], cwd=ROOT, env=this_checkout(),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        now = script_verdicts(Path(scratch) / "summary.md") if rc == 0 else []
    then = script_verdicts(folder / "summary.md")
    if now != then or not then:
        print(f"  committed {then}, re-derived {now}", flush=True)
        return 1
    return 0


def verdicts(summary: Path) -> dict:
    """{label: (verdict, pass@1 difference rounded to 1e-9)} of a summary.json's arms against the control."""
    out = {}
    for v in json.loads(summary.read_text(encoding="utf-8"))["variants"]:
        a = v.get("against_control")
        if a:
            out[v["label"]] = (a.get("verdict"), round(a["pass@1"]["mean"], 9) if a.get("pass@1") else None)
    return out


def argv_from_summary(summary: Path) -> list[str] | None:
    """`rlvr compare` arguments that remake a comparison made by hand (no sweep.yaml beside it: the 256-prompt
    re-evaluations, the 8-seed lag-8 comparison, your own task), read from its summary.json: the runs it
    compared and its settings. None unless every run is a records folder committed under results/."""
    d = json.loads(summary.read_text(encoding="utf-8"))
    st, runs = d.get("settings"), [r.get("path") for r in d.get("runs", [])]
    if not st or not runs or not all(r and r.startswith("results/") and (ROOT / r / "run.json").is_file()
                                     for r in runs):
        return None
    argv = ["compare", *runs, "--out", str(summary.parent.relative_to(ROOT)), "--smooth", str(st["smooth"]),
            "--band", st["band"], "--resamples", str(st["resamples"])]
    argv += ["--label-by", st["label_by"]] if st.get("label_by") else []
    return argv + (["--control", st["control"]] if st.get("control") else [])


def targets() -> list[tuple[str, list[str], str]]:
    """(name, `rlvr compare` argv, note) of every comparison under results/ that its records remake: each
    sweep spec with a records/ folder, then each hand-made comparison whose runs are all records."""
    out = []
    for spec in sorted(p for p in (ROOT / "results").rglob("sweep.yaml") if (p.parent / "records").is_dir()):
        argv, found, planned = argv_for(spec)
        note = "" if found == planned else f" ({found} of {planned} runs have records)"
        out.append((str(spec.parent.relative_to(ROOT / "results")), argv, note))
    for summary in sorted((ROOT / "results").rglob("summary.json")):
        folder = summary.parent
        if (folder / "sweep.yaml").exists() or "records" in folder.parts or folder.name in SCRIPTED:
            continue
        argv = argv_from_summary(summary)
        if argv:
            out.append((str(folder.relative_to(ROOT / "results")), argv, " (by hand: runs and settings from its summary.json)"))
    return out


def main(args: list[str]) -> int:
    check = "--check" in args
    names = [a for a in args if a != "--check"]
    compared = targets()
    scripted = [n for n in SCRIPTED if (ROOT / "results" / n / "records").is_dir()]
    if names:
        known = {n for n, _, _ in compared} | set(scripted)
        if set(names) - known:
            print(f"unknown or without records: {sorted(set(names) - known)} (known: {sorted(known)})", file=sys.stderr)
            return 2
        compared = [t for t in compared if t[0] in names]
        scripted = [n for n in scripted if n in names]
    failed = sum(rederive_script(n, check) for n in scripted)
    for name, argv, note in compared:
        print(f"== results/{name}{note}", flush=True)
        if not check:
            failed += subprocess.call([sys.executable, "-m", "rlvr_cli", *argv], cwd=ROOT) != 0
            continue
        with tempfile.TemporaryDirectory(prefix="rlvr-rederive-") as scratch:
            i = argv.index("--out")
            committed = ROOT / argv[i + 1] / "summary.json"
            argv = [*argv[:i + 1], scratch, *argv[i + 2:]]
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
