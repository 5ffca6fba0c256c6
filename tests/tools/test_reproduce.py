"""results/reproduce.py: one `rlvr sweep` of every experiment's spec and both scripts, with this checkout's code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "results"))  # the scripts are files, not a package
import reproduce  # noqa: E402  results/reproduce.py

ROOT = Path(__file__).resolve().parents[2]


def test_every_experiment_is_a_spec_and_the_command_passes_the_options_on():
    specs = {str(p.parent.relative_to(ROOT / "results")) for p in (ROOT / "results").rglob("sweep.yaml")}
    assert sorted([*reproduce.EXPERIMENTS, *reproduce.AFTER]) == sorted(specs)  # every results/ directory, one command
    argv = reproduce.command(["kl"], ["r1"], 3, 2, ["steps=5"], True, False, False)
    assert argv == ["sweep", "results/kl/sweep.yaml", "--jobs", "3", "--script", "r1=bash results/r1_pipeline.sh",
                    "--threads", "2", "--set", "steps=5", "--dry-run", "--no-continue", "--no-fork-server"]


def test_the_dry_run_plans_every_run_and_an_unknown_name_exits_2():
    out = subprocess.run([sys.executable, "results/reproduce.py", "--only", "kl", "prorl", "--dry-run"], cwd=ROOT,
                         capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"})
    assert out.returncode == 0, out.stderr
    said = out.stdout + out.stderr
    assert said.count("│ new") == 15 and "from step 100 of runs/experiments/prorl/no_reset-seed0" in said
    bad = subprocess.run([sys.executable, "results/reproduce.py", "--only", "nope"], cwd=ROOT, capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "unknown experiment(s) ['nope']" in bad.stderr
    # the spec that loads another spec's run is a second pool, after the first
    out = subprocess.run([sys.executable, "results/reproduce.py", "--only", "length_free", "length_free/seed3",
                          "--dry-run"], cwd=ROOT, capture_output=True, text=True, env={"PATH": "/usr/bin:/bin",
                                                                                         "COLUMNS": "200"})
    pools = [line for line in out.stdout.splitlines() if line.startswith("== rlvr sweep")]
    assert out.returncode == 0 and len(pools) == 2 and "length_free/seed3" in pools[1] and "seed3" not in pools[0]


def test_scripts_call_this_checkouts_rlvr_and_python():
    env = reproduce.checkout_env()
    out = subprocess.run(["sh", "-c", "command -v rlvr && rlvr --help >/dev/null && python -c 'import rlvr_cli' "
                                      "&& echo ok"], env=env, capture_output=True, text=True, cwd="/")
    assert out.stdout.splitlines()[-1] == "ok", out.stderr
    assert str(ROOT) in env["PYTHONPATH"].split(":")
