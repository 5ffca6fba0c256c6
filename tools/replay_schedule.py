"""Replay a checkout's results/reproduce.py scheduler with the job times of a regeneration it logged.

    python results/reproduce.py --runs /tmp/rr/runs --results /tmp/rr/results | tee /tmp/rr/reproduce.log
    python tools/replay_schedule.py /tmp/rr/reproduce.log                   # this checkout's scheduler
    git worktree add /tmp/old <commit>
    python tools/replay_schedule.py /tmp/rr/reproduce.log --root /tmp/old   # an older one, same job times

A change to the scheduler (the order work is queued in, what goes first) changes only when each job
starts; a full regeneration to time it takes an hour, and the machine's speed varies by a few percent
from one hour to the next, more than most scheduling changes save. So this runs the checkout's own
`reproduce()` over every experiment and script, with the jobs replaced by sleeps: a training run, a
continued run, a model build or a script sleeps the seconds the log's `[done] ... in Ns` line gives it,
divided by --scale (default 100: an hour replays in ~40 s), and a comparison takes no time. It prints
the replayed wall time (from the first job's start), the slots' busy time and its ideal packing
(busy / jobs), and with --tail N the last N jobs to end.

What it leaves out: a job's time is the logged one whatever runs beside it (on 2 cores two jobs slow
each other a little, and which jobs pair up changes with the schedule), and the comparisons, the copies
of continued runs and the scheduler's own start-up. Not a test; the figures are those of the log.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys
import threading
import time
from pathlib import Path

DONE = re.compile(r"\[done\] (?:build )?(\S+) in (\d+)s")


def fail(message: str):
    print(f"replay_schedule: {message}", file=sys.stderr)
    sys.exit(2)


def job_times(log: Path) -> dict[str, int]:
    """Seconds per job of a reproduce.py log, by the name it logs (a run directory, a model, a script)."""
    try:
        text = log.read_text(errors="replace")
    except OSError as e:
        fail(f"{log}: cannot read the log ({e.strerror})")
    return {m.group(1): int(m.group(2)) for m in map(DONE.match, text.splitlines()) if m}


def load_reproduce(root: Path):
    sys.path.insert(0, str(root))
    spec = importlib.util.spec_from_file_location("replayed_reproduce", root / "results" / "reproduce.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def runs_root(times: dict[str, int]) -> Path:
    """The --runs directory of the logged regeneration (the common parent of its experiments' runs)."""
    for name in times:
        m = re.match(r"(.*)/[^/]+/[^/]+-seed\d+$", name)
        if m:
            return Path(m.group(1))
    fail("the log has no training run's `[done] ... in Ns` line: is it the output of results/reproduce.py?")


def replay(root: Path, times: dict[str, int], jobs: int, scale: float, scratch: Path):
    """(wall seconds, busy slot seconds, [(start, end, job)]) of the replayed regeneration."""
    mod = load_reproduce(root)
    # the logged runs under a scratch directory (the comparisons' logs and commands.md go there, not
    # beside the logged runs); a prerequisite keeps its own relative path, as logged
    logged_runs = str(runs_root(times))
    as_logged = {(str(scratch / "runs") + name[len(logged_runs):] if name.startswith(logged_runs + "/") else name): name
                 for name in times}
    times = {name: times[logged] for name, logged in as_logged.items()}
    mod.RUNS, mod.RESULTS = scratch / "runs", scratch / "results"
    lock, spans, t0, missing = threading.Lock(), [], [], []

    def sleep(job: str) -> bool:
        if job not in times:  # a job this checkout plans that the logged regeneration did not run
            missing.append(job)
            return True
        start = time.perf_counter()
        with lock:
            t0.append(start) if not t0 else None
        time.sleep(times[job] / scale)
        with lock:
            spans.append((start, time.perf_counter(), job))
        return True

    mod.run_one = lambda cmd, out, dry, log: sleep(str(out))
    mod.continue_one = lambda cmd, out, start, dry, log: sleep(str(out))
    mod.build_one = lambda model, exp, dry: sleep(model)
    mod.run_script = lambda name, cmd, dry: sleep(name)
    mod.subprocess.run = lambda *a, **k: type("Done", (), {"returncode": 0})()
    mod.print = lambda *a, **k: None  # the scheduler's own progress lines
    mod.reproduce(mod.EXPERIMENTS, list(mod.SCRIPTS), seeds=3, jobs=jobs, dry=False)
    if missing:
        fail(f"the log has no time for {len(missing)} job(s) this checkout plans, e.g. "
             f"{os.path.relpath(missing[0], scratch / 'runs')}: replay a full regeneration of the same experiments")
    end = max(e for _, e, _ in spans)
    busy = sum(times[j] for _, _, j in spans)
    return (end - t0[0]) * scale, busy, [((s - t0[0]) * scale, (e - t0[0]) * scale, as_logged[j]) for s, e, j in spans]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("log", type=Path, help="the stdout of a full `results/reproduce.py` run")
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1],
                    help="the checkout whose scheduler to replay (default: this one)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--scale", type=float, default=100.0, help="replay this many times faster (default 100)")
    ap.add_argument("--tail", type=int, default=0, help="print the last N jobs to end")
    args = ap.parse_args()
    import tempfile

    times = job_times(args.log)
    with tempfile.TemporaryDirectory() as d:
        wall, busy, spans = replay(args.root.resolve(), times, args.jobs, args.scale, Path(d))
    print(f"{args.root}: replayed wall time {wall:.0f} s; slots busy {busy:.0f} s, ideal packing "
          f"{busy / args.jobs:.0f} s ({len(spans)} jobs, --jobs {args.jobs})")
    for s, e, j in sorted(spans, key=lambda x: x[1])[-args.tail:] if args.tail else ():
        print(f"  {s:6.0f} -> {e:6.0f} s  {j}")


if __name__ == "__main__":
    main()
