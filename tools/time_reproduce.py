"""How long `python results/reproduce.py` takes on this machine, estimated from short probe runs; with
--baseline, side by side with another checkout (e.g. a git worktree of an older commit).

    python tools/time_reproduce.py                               # this checkout, 2 jobs
    git worktree add /tmp/old <commit>
    python tools/time_reproduce.py --baseline /tmp/old --json t.json   # before/after, probes interleaved

A full regeneration is ~100 runs of 1-5 minutes: too long to time twice for a before/after. Instead
every distinct training recipe of the checkout's results/reproduce.py (variants, prerequisites and
the R1 pipeline's stages) is run once for --probe-steps steps with an evaluation at step 0 and at the
last step, with that checkout's code (`python -m rlvr_cli` from its root) and --threads 1, as
reproduce.py runs them. A probe gives the seconds per step (the median of its steps after the
first), per evaluation (`sample_s` of its eval records) and the rest of its wall time (start-up,
model load, writing); a run of S steps with E evaluations is then estimated as
rest + S x step + E x eval. With --baseline the two checkouts' probes of the same experiment run
side by side (one process each), so both see the same load, as reproduce.py's 2 jobs do. Each
checkout starts from an empty model cache ($RLVR_CACHE), as on a fresh machine: the first probe of a
built-in model runs twice, and what the first took longer is that model's build, counted once.

The wall time of the whole regeneration is then simulated with each checkout's own scheduler: one
pool of --jobs slots fed in the order of its `schedule()` (this checkout), or one experiment at a
time with its prerequisites and the scripts run alone (a reproduce.py without `schedule`). The
scripts: the R1 pipeline is the sum of its stages plus its rejection sampling (1024 prompts x 4,
timed as evaluations of the same tokens per sample) and three more process start-ups;
inference_compute is 6 evaluations of 64 prompts x 16 on the base model, each its own process.

What the estimate leaves out: a step's cost follows the responses' length, so runs whose responses
grow (the length experiment) or shrink over training are under- or over-estimated by the probe of
their first steps; a probe of a recipe that starts from a prerequisite run uses the prerequisite's
own base model instead. Not a test; the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
R1_STAGES = ["recipes/experiments/r1/cold_start.yaml", "recipes/experiments/r1/rl_stage1.yaml",
             "recipes/experiments/r1/sft_stage2.yaml", "recipes/experiments/r1/rl_stage2.yaml"]
R1_SAMPLES = 1024 * 4
INFERENCE_EVALS, INFERENCE_SAMPLES = 6, 64 * 16


@dataclass
class Probe:
    wall: float
    """Seconds the probe run took, start-up included."""
    step: float
    """Seconds per step (median of the steps after the first)."""
    eval: float
    """Seconds per evaluation (mean `sample_s`)."""
    samples_per_eval: int
    steps_s: float
    evals_s: float

    @property
    def rest(self) -> float:
        """Start-up, model load and writing: the wall time not spent in steps or evaluations."""
        return max(0.0, self.wall - self.steps_s - self.evals_s)


def load_reproduce(root: Path):
    spec = importlib.util.spec_from_file_location(f"reproduce_{abs(hash(root))}", root / "results" / "reproduce.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def recipe_facts(root: Path, recipe: str) -> dict:
    """steps, eval cadence and model of a recipe, read by the checkout's own loader (in a subprocess)."""
    code = ("import json,sys; from rlvr_cli.recipe.load import load_recipe; r=load_recipe(sys.argv[1]); "
            "print(json.dumps({'steps': r.steps, 'every': r.eval.every, 'at_start': r.eval.at_start, "
            "'model': r.model.name, 'samples': r.eval.n * r.eval.num_prompts, "
            "'sft_data': str(r.sft.data) if r.algorithm == 'sft' and r.sft.data else None}))")
    out = subprocess.run([sys.executable, "-c", code, recipe], cwd=root, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"reading {recipe} in {root} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)


def evals_of(facts: dict) -> int:
    """Evaluations a run makes: at the start, every `every` steps, and after the last step."""
    steps, every = facts["steps"], facts["every"]
    marks = {s for s in range(1, steps + 1) if every > 0 and s % every == 0} | {steps}
    return len(marks) + bool(facts["at_start"])


def probe(root: Path, recipe: str, steps: int, model: str | None, work: Path, sft_data_made: bool = False) -> Probe:
    """One short run of ``recipe``; ``model`` replaces its model, ``sft_data_made`` its SFT data (data an earlier
    pipeline stage writes: the built-in traces instead)."""
    out = work / f"probe-{time.monotonic_ns()}"
    cmd = [sys.executable, "-m", "rlvr_cli", "train", recipe, "--out", str(out), "--seed", "0",
           "--set", f"steps={steps}", "--set", f"eval.every={steps}", "--set", "eval.at_start=true",
           "--set", "checkpoint.every=0"] + (["--set", f"model.name={model}"] if model else []) + (
           ["--set", "sft.data=null"] if sft_data_made else [])
    tag = hashlib.blake2b(str(root).encode(), digest_size=4).hexdigest()
    env = dict(os.environ, RLVR_CACHE=str((MODELS_DIR or work) / f"models-{root.name}-{tag}"))
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"probe of {recipe} in {root} failed:\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    step_s = [r["step_time_s"] for r in rows]
    evals = [json.loads(p.read_text()) for p in sorted((out / "eval").glob("step_*.json"))]
    ev = [e["sample_s"] for e in evals]
    return Probe(wall=wall, step=statistics.median(step_s[1:] or step_s), eval=statistics.mean(ev) if ev else 0.0,
                 samples_per_eval=evals[0]["n"] * evals[0]["num_prompts"] if evals else 1,
                 steps_s=sum(step_s), evals_s=sum(ev))


def estimate(p: Probe, facts: dict) -> float:
    return p.rest + facts["steps"] * p.step + evals_of(facts) * p.eval


def plan(root: Path) -> dict:
    """Every run a checkout's reproduce.py would start: {experiment: {"prereq": [...], "runs": [...]}}."""
    mod = load_reproduce(root)
    seeds = 3
    out = {}
    for e in mod.EXPERIMENTS:
        out[e.name] = {
            "prereq": [r for r, _ in e.prerequisites],
            "prereq_dirs": [d for _, d in e.prerequisites],
            "runs": [r for _ in range(e.seeds or seeds) for r in e.variants.values()],
        }
    if hasattr(mod, "schedule"):  # one pool, fed in this order
        order = [item if kind == "script" else item.name for kind, item in mod.schedule(mod.EXPERIMENTS, list(mod.SCRIPTS))]
    else:  # an experiment at a time in their order, then inference_compute and the R1 pipeline
        order = [e.name for e in mod.EXPERIMENTS] + ["inference_compute", "r1"]
    return {"experiments": out, "order": order, "pool": hasattr(mod, "schedule")}


def probe_checkout(root: Path, steps: int, work: Path, todo: list[str], prereq_of: dict[str, str],
                   cache: dict) -> dict:
    """{recipe: (Probe, facts)} for the recipes in ``todo``, in order. ``prereq_of`` maps a prerequisite's
    run directory to its recipe: a recipe starting from that run is probed on the prerequisite's model.
    ``cache`` holds probes already made (--cache), keyed by checkout and recipe."""
    got = {}
    for recipe in todo:
        key = f"{root}::{recipe}"
        if key in cache:
            got[recipe] = (Probe(**cache[key]["probe"]), cache[key]["facts"])
            WARM.setdefault(str(root), {}).update(cache[key].get("warm", {}))
            continue
        facts = recipe_facts(root, recipe)
        made = bool(facts.get("sft_data") and facts["sft_data"].startswith("runs/"))
        model = None
        if facts["model"] in prereq_of:
            model = recipe_facts(root, prereq_of[facts["model"]])["model"]
        elif facts["model"].startswith("runs/"):  # a run made by some other step (the R1 pipeline's stages)
            model = "builtin:tiny"
        name = model or facts["model"]
        warm = {}
        if name not in WARM.setdefault(str(root), {}):  # the first run of a built-in model builds and caches it
            t0 = time.perf_counter()
            probe(root, recipe, steps, model, work, made)
            first = time.perf_counter() - t0
            got[recipe] = (probe(root, recipe, steps, model, work, made), facts)
            WARM[str(root)][name] = warm[name] = max(0.0, first - got[recipe][0].wall)
            print(f"  [{root.name}] {name}: the first run took {warm[name]:.0f} s longer (building it)")
        else:
            got[recipe] = (probe(root, recipe, steps, model, work, made), facts)
        cache[key] = {"probe": vars(got[recipe][0]), "facts": facts, "warm": warm}
        if CACHE_FILE:
            tmp = Path(f"{CACHE_FILE}.tmp")
            tmp.write_text(json.dumps(cache, indent=1))
            os.replace(tmp, CACHE_FILE)
        print(f"  [{root.name}] {recipe}: {got[recipe][0].step:.2f} s/step, {got[recipe][0].eval:.1f} s/eval, "
              f"{got[recipe][0].rest:.1f} s rest -> {estimate(*got[recipe]) / 60:.1f} min", flush=True)
    return got



CACHE_FILE: str | None = None
MODELS_DIR: Path | None = None
"""Where each checkout's model cache lives: next to --cache (so a resumed estimate keeps its built models),
else the run's temporary directory."""
WARM: dict[str, dict[str, float]] = {}
"""checkout -> model -> seconds its first run spent building it (counted once in the wall time)."""


def simulate(root_plan: dict, cost: dict, jobs: int) -> float:
    """Wall seconds of the regeneration under the checkout's scheduler (see the module docstring)."""
    exps = root_plan["experiments"]
    script = {"r1": cost["__r1__"], "inference_compute": cost["__inference__"]}
    if not root_plan["pool"]:  # one experiment at a time (its prerequisites alone first), then the scripts alone
        wall = 0.0
        for name in root_plan["order"]:
            if name not in exps:
                wall += script[name]
                continue
            wall += sum(cost[r] for r in exps[name]["prereq"])
            free = [0.0] * jobs
            for r in exps[name]["runs"]:
                heapq.heappush(free, heapq.heappop(free) + cost[r])
            wall += max(free)
        return wall
    # one first-in-first-out pool: a prerequisite chain takes one slot; when it ends its experiment's runs
    # join the queue; everything else is queued at the start, in the scheduler's order
    queue: list[tuple[float, int, float, str | None]] = []  # (queued at, order, seconds, experiment it unlocks)
    seq = 0
    for name in root_plan["order"]:
        if name not in exps:
            queue.append((0.0, seq, script[name], None))
        elif exps[name]["prereq"]:
            queue.append((0.0, seq, sum(cost[r] for r in exps[name]["prereq"]), name))
        else:
            for r in exps[name]["runs"]:
                queue.append((0.0, seq, cost[r], None))
                seq += 1
        seq += 1
    heapq.heapify(queue)
    free = [0.0] * jobs
    end = 0.0
    while queue:
        queued, _, seconds, unlocks = heapq.heappop(queue)
        start = max(heapq.heappop(free), queued)
        heapq.heappush(free, start + seconds)
        end = max(end, start + seconds)
        if unlocks:
            for r in exps[unlocks]["runs"]:
                heapq.heappush(queue, (start + seconds, seq, cost[r], None))
                seq += 1
    return end


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", help="another checkout (its own code and recipes) to estimate side by side")
    ap.add_argument("--probe-steps", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=2, help="the pool size to simulate (reproduce.py's --jobs)")
    ap.add_argument("--json", help="also write the estimates to this file")
    ap.add_argument("--cache", help="keep the probes in this JSON file and reuse those already there (resume)")
    args = ap.parse_args()
    global CACHE_FILE, MODELS_DIR
    CACHE_FILE = args.cache
    MODELS_DIR = Path(f"{args.cache}.models") if args.cache else None
    cache = json.loads(Path(args.cache).read_text()) if args.cache and Path(args.cache).is_file() else {}
    roots = [HERE] + ([Path(args.baseline).resolve()] if args.baseline else [])
    for root in roots:
        if not (root / "results" / "reproduce.py").is_file() or not (root / "rlvr_cli").is_dir():
            print(f"error: --baseline {root}: not an rlvr checkout (no results/reproduce.py and rlvr_cli/)",
                  file=sys.stderr)
            sys.exit(2)
    plans = {root: plan(root) for root in roots}
    prereq_of = {root: {d: r for e in plans[root]["experiments"].values() for r, d in zip(e["prereq"], e["prereq_dirs"])}
                 for root in roots}
    results: dict = {"load_avg_start": os.getloadavg(), "checkouts": {}}
    probes: dict = {root: {} for root in roots}
    with tempfile.TemporaryDirectory(prefix="time_reproduce_") as tmp:
        work = Path(tmp)
        names = list(dict.fromkeys(n for root in roots for n in plans[root]["experiments"]))
        for name in names + ["r1"]:
            def todo(root, name=name):
                if name == "r1":
                    return [r for r in R1_STAGES if (root / r).is_file()]
                e = plans[root]["experiments"].get(name)
                return list(dict.fromkeys((e["prereq"] + e["runs"]) if e else []))
            print(f"== {name}", flush=True)
            with ThreadPoolExecutor(max_workers=len(roots)) as pool:  # side by side: the same load for both
                futs = {root: pool.submit(probe_checkout, root, args.probe_steps, work, todo(root), prereq_of[root],
                                           cache) for root in roots}
                for root, f in futs.items():
                    probes[root][name] = f.result()
    for root in roots:
        cost = {r: estimate(p, facts) for got in probes[root].values() for r, (p, facts) in got.items()}
        r1 = probes[root].get("r1", {})
        per_sample = [p.eval / p.samples_per_eval for p, _ in r1.values() if p.eval > 0]
        tiny = [p for name, got in probes[root].items() if name != "r1" for p, f in got.values()
                if f["model"] == "builtin:tiny" and p.eval > 0]
        start = statistics.median(p.rest for got in probes[root].values() for p, _ in got.values())
        # the R1 pipeline also runs `rlvr sample`, `rlvr verify` and its summary; inference_compute one `rlvr eval`
        # per protocol: each a process start-up like a training run's
        cost["__r1__"] = (sum(cost[r] for r in r1) + (statistics.median(per_sample) * R1_SAMPLES if per_sample else 0)
                          + 3 * start)
        cost["__inference__"] = INFERENCE_EVALS * start + (statistics.median(p.eval / p.samples_per_eval for p in tiny)
                                                           * INFERENCE_SAMPLES * INFERENCE_EVALS if tiny else 0.0)
        runs = sum(len(e["runs"]) + len(e["prereq"]) for e in plans[root]["experiments"].values())
        serial = sum(cost[r] for e in plans[root]["experiments"].values() for r in e["prereq"] + e["runs"])
        serial += cost["__r1__"] + cost["__inference__"]
        build = sum(WARM.get(str(root), {}).values())  # parallel runs wait on the build's lock: no overlap
        serial += build
        wall = simulate(plans[root], cost, args.jobs) + build
        other = simulate(dict(plans[root], pool=not plans[root]["pool"]), cost, args.jobs) + build
        results["checkouts"][str(root)] = {"runs": runs, "serial_s": serial, "wall_s": wall, "build_s": build,
                                           "wall_other_scheduler_s": other,
                                           "scheduler": "one pool" if plans[root]["pool"] else "experiment at a time",
                                           "per_recipe_s": {r: round(c, 1) for r, c in cost.items()}, "cost": cost}
        print(f"\n{root}: {runs} training runs + the R1 pipeline and inference_compute; one job after another "
              f"{serial / 60:.0f} min; with --jobs {args.jobs} and its scheduler "
              f"({results['checkouts'][str(root)]['scheduler']}) about {wall / 60:.0f} min (with the other scheduler "
              f"{other / 60:.0f} min; building the built-in models {build / 60:.1f} min of it)")
    if args.baseline:  # like for like: only the experiments both checkouts have, and both scripts
        common = set(plans[roots[0]]["experiments"]) & set(plans[roots[1]]["experiments"])
        for root in roots:
            sub = dict(plans[root], experiments={k: v for k, v in plans[root]["experiments"].items() if k in common},
                       order=[n for n in plans[root]["order"] if n in common or n not in plans[root]["experiments"]])
            wall = simulate(sub, results["checkouts"][str(root)]["cost"], args.jobs) + sum(WARM.get(str(root), {}).values())
            results["checkouts"][str(root)]["common_wall_s"] = wall
            print(f"{root}: the {len(common)} experiments both have, with the scripts: about {wall / 60:.0f} min")
    for r in results["checkouts"].values():
        r.pop("cost")
    results["load_avg_end"] = os.getloadavg()
    print(f"(load average {results['load_avg_start'][0]:.1f} at the start, {results['load_avg_end'][0]:.1f} at the end)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
