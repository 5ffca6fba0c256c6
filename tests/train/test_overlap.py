"""The overlapped trainer end to end (``rollout.staleness.overlap``): at a fixed lag with ``wait`` it equals
the in-process lagged run to the bit, for a full fine-tune and a LoRA adapter, and resumes to it; bounded
staleness keeps every lag within its bound (``drop`` drops and counts the older batches); and it leaves no
process behind on Ctrl-C, a kill -9 of either process or a failed step.

Every test that starts processes kills them in a ``finally``, so a failing test leaves none behind.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import rlvr_cli.train.rl as rl
import rlvr_cli.train.rollouts.sources as sources
from rlvr_cli.metrics import METRICS
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.run_writer import RunDir

from conftest import interrupted_at_step, tiny_run

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="finds processes through /proc (Linux)")

ROOT = Path(__file__).resolve().parents[2]
TIMING = {m.name for m in METRICS if m.timing}
LAG1 = tiny_run("steps=4", "checkpoint.every=2", "rollout.staleness.max=1")
LORA = ("model.lora.rank=4", "model.lora.alpha=8", "optim.lr=0.01")


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (an orphan's zombie may wait for a reaper)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not alive(pid)


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def recipe(tiny_base, *sets, name="grpo"):
    return load_recipe(name, [f"model.name={tiny_base}", *LAG1, *sets])


def metrics(run) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in RunDir(run).read_metrics()]


@pytest.fixture
def started(monkeypatch):
    """The overlapped sources the runs of a test start (to find their sampler processes); killed at the end."""
    made = []

    class Recorded(sources.OverlappedSource):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(sources, "OverlappedSource", Recorded)
    yield made
    for s in made:
        kill(s.pid)


@pytest.fixture(scope="module")
def lagged(tiny_base, tmp_path_factory):
    """The in-process run at fixed lag 1: what the overlapped run must equal."""
    out = tmp_path_factory.mktemp("lagged") / "run"
    rl.train_rl(recipe(tiny_base), out)
    return metrics(out)


def test_overlapped_equals_the_in_process_lag_and_resumes_to_it_in_either_mode(tiny_base, lagged, started, tmp_path, monkeypatch):
    """Interrupted (Ctrl-C in the trainer) at step 4 with the checkpoint of step 2: the sampler had step 4's
    batch in flight; on resume steps 3 and 4 are sampled again with versions 1 and 2 from the checkpoint,
    by a new sampler process or in this process."""
    r = recipe(tiny_base, "rollout.staleness.overlap=true")
    restore = interrupted_at_step(monkeypatch, 4)
    with pytest.raises(KeyboardInterrupt):
        rl.train_rl(r, tmp_path / "run")
    assert not alive(started[0].pid)
    got = metrics(tmp_path / "run")
    assert [row["policy_lag"] for row in got] == [0, 1, 1]
    assert got == lagged[:3]
    restore()
    shutil.copytree(tmp_path / "run", tmp_path / "in_process")
    rl.train_rl(r, tmp_path / "run", resume=True)
    assert metrics(tmp_path / "run") == lagged
    rows = RunDir(tmp_path / "run").read_metrics()
    assert all(row["time_wait_s"] is not None and row["time_handover_s"] is not None for row in rows)
    # where a fixed lag's batches are sampled is not part of the run: it resumes in this process too
    rl.train_rl(recipe(tiny_base, "rollout.staleness.overlap=false"), tmp_path / "in_process", resume=True)
    assert metrics(tmp_path / "in_process") == lagged


def test_a_lora_adapter_overlapped_equals_the_in_process_lag(tiny_base, started, tmp_path):
    """Only the adapter's tensors travel; the sampler builds the same base and adapter. Dynamic sampling's
    extra rounds run in the sampler, with the same version."""
    for overlap in ("false", "true"):
        rl.train_rl(recipe(tiny_base, *LORA, "steps=3", "rollout.staleness.max=2", "checkpoint.every=0",
                           "dynamic_sampling.enabled=true", f"rollout.staleness.overlap={overlap}"), tmp_path / overlap)
    rows = metrics(tmp_path / "true")
    assert [row["policy_lag"] for row in rows] == [0, 1, 2] and max(row["ds_rounds"] for row in rows) > 1
    assert rows == metrics(tmp_path / "false")
    assert not alive(started[0].pid)


@pytest.mark.parametrize("strategy", ["wait", "drop"])
def test_bounded_staleness_keeps_every_lag_within_the_bound(tiny_base, started, tmp_path, monkeypatch, strategy):
    """A slow trainer (each update 1 s longer): a `drop` sampler, one batch further ahead than the bound
    allows, samples batches that are 2 steps old when the trainer takes them: dropped, counted, sampled again."""
    real = rl._update

    def slow(*args):
        time.sleep(1.0)
        return real(*args)

    monkeypatch.setattr(rl, "_update", slow)
    rl.train_rl(recipe(tiny_base, "checkpoint.every=0", "rollout.staleness.mode=bounded",
                       f"rollout.staleness.strategy={strategy}", "rollout.staleness.overlap=true"), tmp_path / "run")
    rows = RunDir(tmp_path / "run").read_metrics()
    assert [row["step"] for row in rows] == [1, 2, 3, 4]
    assert all(0 <= row["policy_lag"] <= 1 for row in rows), [row["policy_lag"] for row in rows]
    dropped = sum(row["stale_batches_dropped"] for row in rows)
    assert dropped >= 1 if strategy == "drop" else dropped == 0


def test_a_failed_step_stops_the_sampler(tiny_base, started, tmp_path, monkeypatch):
    def broken(session, batch, step):
        raise RuntimeError("a bug in the update")

    monkeypatch.setattr(rl, "_update", broken)
    with pytest.raises(RuntimeError, match="a bug in the update"):
        rl.train_rl(recipe(tiny_base, "rollout.staleness.overlap=true"), tmp_path / "run")
    assert not alive(started[0].pid)
    assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "failed"


def test_bad_input_the_sampler_meets_ends_the_run_with_exit_2(cli, tiny_base, started, tmp_path):
    """builtin:tiny has 512 positions: the sampler process is the first to sample, and says so."""
    res = cli("train", "grpo", "--out", str(tmp_path / "run"), *[a for s in (f"model.name={tiny_base}", *LAG1,
              "rollout.max_new_tokens=600", "rollout.staleness.overlap=true") for a in ("--set", s)])
    assert res.code == 2 and "max_new_tokens: a prompt of" in res.stderr and "512 positions" in res.stderr
    assert gone_within(started[0].pid, 10)


def test_overlap_that_cannot_overlap_or_oversubscribes_is_noted():
    at_zero = load_recipe("grpo", ["rollout.staleness.overlap=true"]).notes()
    assert any("overlap with max 0" in n and "nothing overlaps" in n for n in at_zero)
    threads = load_recipe("grpo", ["rollout.staleness.overlap=true", "rollout.staleness.max=1", "threads=null"]).notes()
    assert any("overlap with threads null" in n for n in threads)
    assert not any("overlap" in n for n in load_recipe("grpo", ["rollout.staleness.overlap=true",
                                                                "rollout.staleness.max=1"]).notes())


def test_overlap_on_several_processes_is_refused(cli, tmp_path):
    res = cli("train", "grpo", "--nproc", "2", "--out", str(tmp_path / "run"), "--set", "rollout.staleness.max=1",
              "--set", "rollout.staleness.overlap=true")
    assert res.code == 2 and "rollout.staleness.overlap: its sampler process serves one trainer process" in res.stderr
    assert not (tmp_path / "run").exists()


# --- the trainer as the command line runs it, killed or interrupted from outside --------------------------
def start_trainer(tiny_base, out: Path) -> subprocess.Popen:
    """`rlvr train` with the overlapped sampler, long enough to be stopped mid-run, in its own process group
    (as a terminal's foreground job)."""
    sets = [f"model.name={tiny_base}", *tiny_run("steps=500", "rollout.max_new_tokens=32",
                                                 "rollout.staleness.max=1", "rollout.staleness.overlap=true")]
    cmd = [sys.executable, "-m", "rlvr_cli", "train", "grpo", "--out", str(out), *[a for s in sets for a in ("--set", s)]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True)


def sampler_of(trainer: subprocess.Popen, out: Path, timeout: float = 90.0) -> int:
    """The pid of the trainer's sampler process, once the run has logged a step (both are at work)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and trainer.poll() is None:
        if (out / "metrics.jsonl").is_file() and (out / "metrics.jsonl").read_text().strip():
            for pid in (int(d) for d in os.listdir("/proc") if d.isdigit()):
                try:
                    stat = Path(f"/proc/{pid}/stat").read_text()
                    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == trainer.pid and b"sampler_process" in cmdline:
                    return pid
        time.sleep(0.2)
    raise AssertionError(f"no sampler process under the trainer: {trainer.stderr.read().decode()[-2000:] if trainer.poll() is not None else 'still starting'}")


def stopped(trainer: subprocess.Popen, sampler: int | None) -> None:
    kill(trainer.pid)
    trainer.wait()
    if sampler is not None:
        kill(sampler)


def test_killing_the_trainer_ends_the_sampler(tiny_base, tmp_path):
    trainer, sampler = start_trainer(tiny_base, tmp_path / "run"), None
    try:
        sampler = sampler_of(trainer, tmp_path / "run")
        os.kill(trainer.pid, signal.SIGKILL)
        trainer.wait()
        assert gone_within(sampler, 10)
    finally:
        stopped(trainer, sampler)


def test_killing_the_sampler_fails_the_run_naming_it(tiny_base, tmp_path):
    trainer, sampler = start_trainer(tiny_base, tmp_path / "run"), None
    try:
        sampler = sampler_of(trainer, tmp_path / "run")
        os.kill(sampler, signal.SIGKILL)
        _, err = trainer.communicate(timeout=60)
        said = f"the sampler process (pid {sampler}) was killed by SIGKILL"
        assert trainer.returncode == 1 and said in " ".join(err.decode().split()), err.decode()[-2000:]
        status = json.loads((tmp_path / "run" / "run.json").read_text())
        assert status["status"] == "failed" and said in status["error"] and "--resume" in status["error"]
    finally:
        stopped(trainer, sampler)


def test_ctrl_c_ends_both_processes(tiny_base, tmp_path):
    """SIGINT to the foreground process group, as a terminal sends it: the sampler ignores it, the trainer
    stops as interrupted and closes the sampler."""
    trainer, sampler = start_trainer(tiny_base, tmp_path / "run"), None
    try:
        sampler = sampler_of(trainer, tmp_path / "run")
        os.killpg(trainer.pid, signal.SIGINT)
        trainer.communicate(timeout=60)
        assert trainer.returncode == 130
        assert gone_within(sampler, 10)
        assert json.loads((tmp_path / "run" / "run.json").read_text())["status"] == "interrupted"
    finally:
        stopped(trainer, sampler)


SLOW_EXIT = '''
import atexit, time

atexit.register(time.sleep, 2.0)  # a slow interpreter exit (torch's own atexit can take this long): SIGTERM lands in it
'''


@pytest.mark.parametrize("how", ["raises", "exits"])
def test_a_reward_error_in_the_sampler_ends_it_without_noise(tiny_base, tmp_path, how):
    """The sampler reports the user's error and exits; the trainer's SIGTERM (and its own, at end of input)
    then lands in the interpreter's exit, which must stay silent: no `Exception ignored in atexit
    callback ... SystemExit`, no traceback, exit 2 with the error's lines only (issue 50)."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SLOW_EXIT)
    (tmp_path / "reward.py").write_text("import sys\n\ndef raises(completions, **kw):\n    raise ValueError('no grader')\n\n"
                                        "def exits(completions, **kw):\n    sys.exit(3)\n")
    ref = f"{tmp_path / 'reward.py'}:{how}"
    sets = [f"model.name={tiny_base}", *tiny_run("steps=3", "rollout.staleness.max=1", "rollout.staleness.overlap=true"),
            f"reward.terms=[{{type: task}}, {{type: function, function: '{ref}'}}]"]
    cmd = [sys.executable, "-m", "rlvr_cli", "train", "grpo", "--out", str(tmp_path / "run"),
           *[a for s in sets for a in ("--set", s)]]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(ROOT), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, timeout=240)
    assert res.returncode == 2, res.stderr[-3000:]
    lines = [ln for ln in res.stderr.splitlines() if ln.strip() and "0/3" not in ln]  # the progress bar aside
    assert lines and all(ln.startswith("error: ") for ln in lines), res.stderr[-3000:]
    assert f"reward.terms[1].function {ref}:" in lines[0]
    assert "Exception ignored" not in res.stderr and "raise SystemExit(0)" not in res.stderr
    assert "Traceback" not in res.stderr


def test_an_environment_in_the_loop_overlapped_equals_the_in_process_lag(tiny_base, started, tmp_path):
    """The sampler process builds the environment from the recipe and sends each trajectory's origins and
    counters with its batch: the overlapped run's metrics, tools/* included, are the in-process run's."""
    env = ("environment.factory=builtin:calculator", "rollout.old_logprobs=auto", "steps=2", "checkpoint.every=0")
    for overlap in ("false", "true"):
        rl.train_rl(recipe(tiny_base, *env, f"rollout.staleness.overlap={overlap}"), tmp_path / overlap)
    rows = metrics(tmp_path / "true")
    assert [row["policy_lag"] for row in rows] == [0, 1]
    assert all(row["tools/turns_mean"] is not None and row["tools/call_rate"] is not None for row in rows)
    assert rows == metrics(tmp_path / "false")
    assert not alive(started[0].pid)
