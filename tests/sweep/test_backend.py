"""The sweep's seams without training: a backend is found by name and says what it takes, the watcher
stops the process groups it was told of once its stdin ends without `done`, and the view prints a
progress line per running run (step, reward, ETA) every so often off a terminal."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rlvr_cli.errors import UserError
from rlvr_cli.sweep.backend import BACKENDS, Backend, backend_class, check_flags
from rlvr_cli.sweep.local import LocalBackend
from rlvr_cli.sweep.view import SweepView, duration
from rlvr_cli.sweep.watch import Watcher

ROOT = Path(__file__).resolve().parents[2]


def test_each_backend_is_found_by_its_name_and_an_unknown_one_is_refused():
    for name in BACKENDS:
        kind = backend_class(name)
        assert issubclass(kind, Backend) and kind.name == name
    assert backend_class("local") is LocalBackend
    with pytest.raises(UserError, match="--backend slurm: expected local or ray"):
        backend_class("slurm")


def test_address_and_script_are_refused_with_a_backend_that_does_not_take_them():
    with pytest.raises(UserError, match="--address: only with --backend ray"):
        check_flags(backend_class("local"), "x:1", scripts=False)
    with pytest.raises(UserError, match="--script: only with --backend local"):
        check_flags(backend_class("ray"), None, scripts=True)
    check_flags(backend_class("ray"), "x:1", scripts=False)


def test_default_jobs_fill_this_machine_locally_and_ask_ray_for_every_run():
    cores = len(os.sched_getaffinity(0))
    assert LocalBackend.default_jobs([1, 1, 1]) == cores
    assert LocalBackend.default_jobs([cores * 2]) == 1
    assert backend_class("ray").default_jobs([4, 4, 4]) == 3


def _sleeper() -> subprocess.Popen:
    """A process group of two sleeping processes (a run and its child, as torchrun and its ranks)."""
    proc = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                             "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
                             "print('ready', flush=True); time.sleep(60)"],
                            start_new_session=True, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"  # a signal now finds it asleep, not half started
    return proc


def _group_gone(pgid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_the_watcher_stops_the_groups_it_watches_when_its_sweep_dies_and_nothing_after_done():
    kept, stopped, ended = _sleeper(), _sleeper(), _sleeper()
    try:
        calm = Watcher(grace=5)
        calm.add(kept.pid)
        calm.close()  # done: the sweep stopped its runs itself, the watcher leaves them alone
        assert calm.proc.returncode == 0 and kept.poll() is None
        watcher = Watcher(grace=5)
        watcher.add(stopped.pid)
        watcher.add(ended.pid)
        watcher.remove(ended.pid)  # ended (as far as the sweep knows): not signalled
        watcher.proc.stdin.close()  # the sweep died: its end of the pipe closes
        assert stopped.wait(timeout=30) == -signal.SIGINT  # SIGINT first, as Ctrl-C: the run records itself
        assert _group_gone(stopped.pid, 30)  # its child too
        assert watcher.proc.wait(timeout=30) == 0 and ended.poll() is None
    finally:
        for p in (kept, stopped, ended):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()


def test_a_run_is_a_progress_line_every_so_often_with_its_step_reward_and_eta(capsys):
    now = [100.0]
    view = SweepView(total_steps=200, done_steps=0, runs=1, skipped=0, every=60, clock=lambda: now[0])
    with view:
        view.started("a-seed0", 20, 200, "resumed")
        now[0] += 30
        view.running("a-seed0", 25, 0.5)  # 30 s since its start: no line yet
        now[0] += 60
        view.running("a-seed0", 50, 0.4123)  # 30 steps in 90 s: 150 steps left take 450 s, 7.5 min
        view.running("a-seed0", 51, 0.4)  # just said: no line
        now[0] += 60
        view.running("a-seed0", 60, None)
        view.ended("a-seed0", True, 150.0)
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("[progress]")]
    assert lines == ["[progress] a-seed0: step 50/200, reward 0.412, eta 8 min",
                     "[progress] a-seed0: step 60/200, eta 9 min"]  # 40 steps in 150 s: 140 left take 525 s
    assert (duration(42), duration(420), duration(3 * 3600)) == ("42 s", "7 min", "3.0 h")
