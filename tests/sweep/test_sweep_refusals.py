"""`rlvr sweep` refuses bad input before any run trains, as a user meets it through the CLI: each problem one
line, exit 2, nothing written. Paths it could not write (out a file, /proc, a name too long, a run directory
replaced by a file, compare.out a file), sizes past their bounds (seeds, grids, nproc, gpus), `--set seed`,
files of the user's where the sweep would write (sweep.json, the comparison's), special files that would block
a read (a FIFO), and a second sweep on one --out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rlvr_cli.errors import UserError
from rlvr_cli.sweep.lock import SweepLock

ROOT = Path(__file__).resolve().parents[2]
SPEC = "base: grpo\nset: [model.name=builtin:tiny-init]\nsteps: 2\nseeds: 2\nvariants:\n  - name: control\n" \
       "  - {name: wide, set: [loss.clip.eps_high=0.28]}\n"
"""Two arms x two seeds; `control` at line 6, `wide` at line 7."""


def tree(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for a directory or a special file)."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = p.read_bytes() if p.is_file() else None
    return out


def spec(tmp_path: Path, text: str = SPEC) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def refused(cli, tmp_path: Path, *args: str) -> list[str]:
    """The error lines of `rlvr sweep ARGS`, which must exit 2 without writing under ``tmp_path``."""
    before = tree(tmp_path)
    res = cli("sweep", *args)
    assert res.code == 2, (res.code, res.stderr)
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr
    assert tree(tmp_path) == before
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert lines and all(ln.startswith("error: ") for ln in lines), lines
    return [ln.removeprefix("error: ") for ln in lines]


@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "run"])
def test_an_out_that_is_a_file_or_cannot_be_created_is_refused(cli, tmp_path, dry):
    path = spec(tmp_path)
    (tmp_path / "file").write_text("mine\n")
    flag = ["--dry-run"] if dry else []
    (line,) = refused(cli, tmp_path, str(path), "--out", str(tmp_path / "file"), *flag)
    assert line == f"--out {tmp_path / 'file'}: is a file"
    (line,) = refused(cli, tmp_path, str(path), "--out", str(tmp_path / "file" / "sub"), *flag)
    assert line == f"--out {tmp_path / 'file' / 'sub'}: {tmp_path / 'file'} is a file, so it cannot be created"
    (line, *_) = refused(cli, tmp_path, str(path), "--out", "/proc/rlvr-sweep", *flag)
    assert line.startswith("--out /proc/rlvr-sweep: cannot write in /proc (")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in a read-only directory (/proc stands in above)")
def test_a_read_only_parent_is_refused(cli, tmp_path):
    parent = tmp_path / "ro"
    parent.mkdir()
    parent.chmod(0o500)
    try:
        (line, *_) = refused(cli, tmp_path, str(spec(tmp_path)), "--out", str(parent / "out"))
    finally:
        parent.chmod(0o700)
    assert line.startswith(f"--out {parent / 'out'}: cannot write in {parent} (Permission denied)")


def test_a_300_character_arm_name_and_a_too_long_out_are_refused_at_their_lines(cli, tmp_path):
    long = "a" * 300
    path = spec(tmp_path, f"base: grpo\nvariants:\n  - name: ok\n  - name: {long}\n")
    (line,) = refused(cli, tmp_path, str(path), "--dry-run")
    assert line.startswith(f"{path}:4: variants.1.name: an arm's name is at most 200 characters")
    path = spec(tmp_path, "base: grpo\nvariants:\n  - name: v\ngrid:\n  description: [" + "b" * 240 + "]\n")
    (line,) = refused(cli, tmp_path, str(path), "--dry-run")
    assert line.startswith(f"{path}:3: arm v_description") and "is 253 characters, at most 200" in line
    (line,) = refused(cli, tmp_path, str(spec(tmp_path)), "--out", str(tmp_path / ("o" * 300)), "--dry-run")
    assert line.endswith("a name of 300 bytes; the file system holds at most 255")


def test_a_run_directory_replaced_by_a_file_or_holding_other_files_is_refused(cli, tmp_path):
    path = spec(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "wide-seed1").write_text("not a run\n")
    (out / "control-seed0").mkdir()
    (out / "control-seed0" / "notes.txt").write_text("mine\n")
    lines = refused(cli, tmp_path, str(path), "--out", str(out))
    assert lines == [f"{path}:6: arm control: {out / 'control-seed0'} holds files but no run (no recipe.yaml), and "
                     "`rlvr train` does not write into it; move them away, or choose another --out",
                     f"{path}:7: arm wide: {out / 'wide-seed1'}: is a file, not a run directory; remove it, or choose "
                     "another --out"]


def test_a_compare_out_that_is_a_file_or_under_proc_is_refused(cli, tmp_path):
    (tmp_path / "cmp").write_text("mine\n")
    path = spec(tmp_path, SPEC + f"out: {tmp_path / 'out'}\ncompare: {{out: {tmp_path / 'cmp'}}}\n")
    (line,) = refused(cli, tmp_path, str(path))
    assert line == f"{path}: compare.out {tmp_path / 'cmp'}: is a file"
    path = spec(tmp_path, SPEC + f"out: {tmp_path / 'out'}\ncompare: {{out: /proc/rlvr-compare}}\n")
    (line,) = refused(cli, tmp_path, str(path))
    assert line.startswith(f"{path}: compare.out /proc/rlvr-compare: cannot write in /proc (")


@pytest.mark.parametrize("text, line, message", [
    ("seeds: 1000000000000\n", 2, "seeds: at most 1000 seeds (a spec plans at most 1000 runs)"),
    ("seeds: [" + ", ".join(map(str, range(1001))) + "]\n", 2, "seeds: at most 1000 seeds"),
    ("seeds: 11\ngrid:\n  optim.lr: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n  loss.clip.eps_high: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n",
     3, "the spec plans 1100 runs (arms x seeds), at most 1000; split it into several specs"),
    ("nproc: 1000000\n", 2, "nproc: Input should be less than or equal to 1024"),
    ("gpus: 1.0e+300\n", 2, "gpus: Input should be less than or equal to 1024"),
], ids=["seeds-count", "seeds-list", "grid", "nproc", "gpus"])
def test_numbers_past_their_bounds_are_refused_before_anything_is_expanded(cli, tmp_path, text, line, message):
    path = spec(tmp_path, "base: grpo\n" + text)
    (got,) = refused(cli, tmp_path, str(path), "--dry-run")
    assert got.startswith(f"{path}:{line}: {message}"), got


def test_more_processes_than_a_run_can_use_are_refused_naming_the_arm(cli, tmp_path):
    path = spec(tmp_path, SPEC + "nproc: 8\n")  # grpo samples 4 prompts a step: 8 processes cannot share them
    lines = refused(cli, tmp_path, str(path), "--out", str(tmp_path / "out"), "--set", "rollout.prompts_per_step=4")
    said = ("rollout.prompts_per_step (4) is smaller than the 8 processes: a group never straddles ranks, so "
            "every rank needs at least one prompt; use at most that many processes (--nproc)")
    assert lines == [f"{path}:6: arm control: nproc 8: {said}", f"{path}:7: arm wide: nproc 8: {said}"]


def test_an_arm_that_cannot_start_is_refused_before_any_run_trains(cli, tmp_path, monkeypatch):
    """Issue 50: a missing reward-function file, a missing data file, the overlapped trainer on 2 processes,
    a function the file lacks and a bad override: each named at its arm's line, exit 2, nothing written
    (before, the good arm trained first and the sweep ended `1 of 2 runs failed`, exit 1)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rows.jsonl").write_text("".join(f'{{"question": "{i}+1=", "answer": {i + 1}}}\n' for i in range(8)))
    (tmp_path / "reward.py").write_text("def mine(completions, **kw):\n    return [0.0 for _ in completions]\n")
    data = f"task.name=dataset, task.path={tmp_path / 'rows.jsonl'}"
    fn = "{type: function, function: '%s', weight: 0.5}"
    path = spec(tmp_path, f"""\
        base: grpo
        set: [{data}, "reward.terms=[{{type: task}}, {fn % (tmp_path / 'reward.py:mine')}]"]
        steps: 2
        nproc: 2
        variants:
          - name: good
          - {{name: nofile, set: ["reward.terms=[{{type: task}}, {fn % (tmp_path / 'gone.py:mine')}]"]}}
          - {{name: nodata, set: [task.path={tmp_path / 'gone.jsonl'}]}}
          - {{name: overlapped, set: [rollout.staleness.overlap=true, rollout.staleness.max=1]}}
          - {{name: misspelt, set: ["reward.terms=[{{type: task}}, {fn % (tmp_path / 'reward.py:mien')}]"]}}
        """)
    lines = refused(cli, tmp_path, str(path), "--out", str(tmp_path / "out"))
    assert len(lines) == 4, lines
    overlapped, nofile, nodata, misspelt = lines
    assert overlapped.startswith(f"{path}:9: arm overlapped: nproc 2: rollout.staleness.overlap: its sampler process")
    assert nofile.startswith(f"{path}:7: arm nofile: reward.terms[1].function: {tmp_path / 'gone.py:mine'}: ")
    assert "no such file" in nofile
    assert nodata.startswith(f"{path}:8: arm nodata: task.path: {tmp_path / 'gone.jsonl'}: no such file")
    assert misspelt.startswith(f"{path}:10: arm misspelt: reward.terms[1].function: ") and "'mien'" in misspelt
    assert "did you mean" in misspelt and "mine" in misspelt
    (bad,) = refused(cli, tmp_path, str(path), "--set", "loss.clip.eps_low=-1")
    assert bad.startswith("--set loss.clip.eps_low=-1: "), bad


def test_an_arm_whose_model_cannot_load_is_refused_before_any_run_trains(cli, tmp_path):
    """An unknown built-in, a directory that holds no model, a file: named at the arm's line (a need's
    directory, trained first by the sweep, and a path another sweep may make first are not refused)."""
    (tmp_path / "file").write_text("not a model\n")
    (tmp_path / "empty").mkdir()
    path = spec(tmp_path, f"""\
        base: grpo
        set: [model.name=builtin:tiny-init]
        steps: 2
        variants:
          - name: good
          - {{name: unknown, set: ["model.name=builtin:tiny-nope"]}}
          - {{name: empty, set: [model.name={tmp_path / 'empty'}]}}
          - {{name: file, set: [model.name={tmp_path / 'file'}]}}
          - {{name: later, set: [model.name={tmp_path / 'made-by-another-sweep'}]}}
        """)
    lines = refused(cli, tmp_path, str(path), "--out", str(tmp_path / "out"), "--dry-run")
    assert [ln.split(": model.name: ")[0] for ln in lines] == [f"{path}:{n}: arm {a}" for n, a in
                                                            ((6, "unknown"), (7, "empty"), (8, "file"))], lines
    assert "builtin:tiny-nope: unknown built-in model (known: builtin:tiny-init" in lines[0]
    assert lines[1].endswith(f"{tmp_path / 'empty'}: directory holds no model (no config.json) and is not a run directory")
    assert lines[2].endswith(f"{tmp_path / 'file'}: a model must be a directory (run, checkpoint or model), not a file")


def test_set_seed_or_name_on_the_command_line_is_refused_as_in_the_spec(cli, tmp_path):
    path = spec(tmp_path)
    assert refused(cli, tmp_path, str(path), "--set", "seed=5", "--dry-run") == [
        "--set seed=5: seed: set by the sweep (seeds:); give the spec's `seeds:` instead"]
    assert refused(cli, tmp_path, str(path), "--set", " name = x", "--dry-run") == [
        "--set  name = x: name: set by the sweep (the arm name); remove it"]


def test_a_sweep_json_or_comparison_the_sweep_did_not_write_is_refused_and_kept(cli, tmp_path):
    path = spec(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "sweep.json").write_text("my notes about this sweep\n")
    (line,) = refused(cli, tmp_path, str(path), "--out", str(out))
    assert line == (f"{out / 'sweep.json'}: not a record of rlvr sweep (no JSON object with a `runs` list), and the "
                    "sweep would overwrite it; move it away, or choose another --out")
    (out / "sweep.json").unlink()
    (out / "compare").mkdir()
    (out / "compare" / "summary.md").write_text("# My own summary\n")
    (out / "compare" / "summary.json").write_text(json.dumps({"variants": []}))  # not compare's schema
    lines = refused(cli, tmp_path, str(path), "--out", str(out))
    assert [ln.split(":")[0] for ln in lines] == [str(out / "compare" / "summary.md"),
                                                  str(out / "compare" / "summary.json")]
    assert "not written by rlvr compare, and the sweep's comparison would replace it" in lines[0]


def test_the_committed_comparisons_are_the_sweep_s_own_and_out_re_roots_everything_the_sweep_writes(tmp_path):
    """results/ holds comparisons compare wrote: the sweep may write them again (no refusal); with --out the
    comparison, the `needs` and the arms' model that names one all move under it."""
    from rlvr_cli.sweep.preflight import _foreign_compare_files
    from rlvr_cli.sweep.spec import load_plan

    for s in sorted((ROOT / "results").glob("*/sweep.yaml")):
        compare_out = ROOT / load_plan(s).compare_out
        assert (compare_out / "summary.md").is_file() and _foreign_compare_files(compare_out) == [], s
    plan = load_plan(ROOT / "results" / "prorl" / "sweep.yaml", out=tmp_path, sets=["steps=2"])
    assert plan.compare_out == tmp_path / "compare" and all(r.dir.parent == tmp_path for r in plan.runs)
    plan = load_plan(ROOT / "results" / "length_free" / "sweep.yaml", out=tmp_path)
    (need,) = plan.needs
    assert need.dir == tmp_path / "base" and all(r.after == [need.dir] for r in plan.runs)
    assert {r.recipe.model.name for r in plan.runs} == {str(tmp_path / "base")}
    assert all(r.overrides[-1] == f"model.name={tmp_path / 'base'}" for r in plan.runs)


def test_a_second_sweep_on_one_out_is_refused_naming_the_first_one_s_pid(cli, tmp_path):
    path = spec(tmp_path)
    out = tmp_path / "out"
    with SweepLock([out]):
        before = tree(tmp_path)
        res = cli("sweep", str(path), "--out", str(out))
        after = tree(tmp_path)
    assert res.code == 2, res.stderr
    assert res.stderr.strip() == (f"error: {out}: another rlvr sweep (pid {os.getpid()}) holds {out / '.sweep.lock'}: "
                                  "wait for it to finish (or stop it), or choose another --out")
    assert after == before


def test_the_lock_of_a_killed_sweep_is_waited_for_while_its_runs_stop(tmp_path):
    """The holder's pid is gone but the lock is held (its watcher still stopping its runs): wait, then take
    it once let go, or say so after the wait."""
    out = tmp_path / "out"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    code = (f"import fcntl, os, sys, time; fd = os.open({str(out / '.sweep.lock')!r}, os.O_RDWR | os.O_CREAT); "
            f"os.ftruncate(fd, 0); os.write(fd, b'{dead.stdout.strip()}\\n'); fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); "
            "time.sleep(float(sys.argv[1]))")
    out.mkdir()
    for hold, waits in ((1.5, True), (30, False)):
        holder = subprocess.Popen([sys.executable, "-c", code, str(hold)], stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline() == "held\n"
        try:
            if waits:
                with SweepLock([out], wait=20) as lock:
                    assert len(lock.fds) == 1 and holder.poll() is not None
            else:
                with pytest.raises(UserError, match=rf"the runs of a stopped sweep \(pid {dead.stdout.strip()}\), "
                                                    "still stopping after 1 s"):
                    SweepLock([out], wait=1).__enter__()
        finally:
            holder.kill()
            holder.wait()


def _sweep(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """`rlvr sweep ARGS` as its own process: a hang fails the test instead of stopping the suite."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "rlvr_cli", "sweep", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_fifos_where_the_sweep_reads_or_writes_are_refused_or_fail_their_run_never_hang(tmp_path):
    path = spec(tmp_path, SPEC.replace("seeds: 2", "seeds: 1"))
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "sweep.json")
    res = _sweep(str(path), "--out", str(out))
    assert res.returncode == 2 and f"error: {out / 'sweep.json'}: not a regular file" in res.stderr, res.stderr
    (out / "sweep.json").unlink()
    (out / "control-seed0").mkdir()
    os.mkfifo(out / "control-seed0" / "metrics.jsonl")
    res = _sweep(str(path), "--out", str(out), "--dry-run")
    assert res.returncode == 2 and f"{out / 'control-seed0' / 'metrics.jsonl'}: not a regular file" in res.stderr
    (out / "control-seed0" / "metrics.jsonl").unlink()
    (out / "control-seed0").rmdir()
    (out / "logs").mkdir()
    for run in ("control-seed0", "wide-seed0"):  # a log that cannot be written fails its run alone
        os.mkfifo(out / "logs" / f"{run}.log")
    res = _sweep(str(path), "--out", str(out), "--no-fork-server")  # no server: no torch to import for nothing
    assert res.returncode == 1, res.stderr
    assert f"cannot write its log {out / 'logs' / 'wide-seed0.log'}: not a regular file" in " ".join(res.stderr.split())
