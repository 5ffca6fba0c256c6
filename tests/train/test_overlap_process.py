"""The overlapped mode's sampler process driven directly: it ignores Ctrl-C (the trainer's to handle),
close() stops it, and a dead sampler fails the trainer with a message naming it (the runs end to end
are in test_overlap.py). Every test kills what it started in a ``finally``, so a failing test leaves no
process behind."""

from __future__ import annotations

import os
import signal
import time

import pytest

from rlvr_cli.errors import RunFailed
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.overlap import OverlappedSource
from rlvr_cli.train.policy_versions import trainable_tensors
from rlvr_cli.train.session import open_session

from conftest import tiny_run


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (an orphan's zombie may wait for a reaper)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except ProcessLookupError:
            return False


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.1)
    return False


def kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture
def session(tiny_base, tmp_path):
    r = load_recipe("grpo", [f"model.name={tiny_base}", *tiny_run("steps=4", "rollout.staleness.max=1",
                                                                   "rollout.staleness.overlap=true")])
    s, _ = open_session(r, tmp_path / "run", False, updates_per_step=2)
    s.model.eval()
    return s


@pytest.fixture
def source(session):
    sources = []

    def start():
        sources.append(OverlappedSource(session, {0: trainable_tensors(session.model)}))
        return sources[-1]

    yield start
    for s in sources:
        s.close()
        kill(s.pid)


def test_a_killed_sampler_fails_the_trainer_naming_it(source):
    src = source()
    src.rollouts(1)
    os.kill(src.pid, signal.SIGKILL)
    assert gone_within(src.pid, 10)
    with pytest.raises(RunFailed, match=rf"sampler process \(pid {src.pid}\) was killed by SIGKILL .*--resume"):
        src.policy_updated(1)
        src.rollouts(2)


def test_the_sampler_ignores_ctrl_c_and_close_stops_it(source):
    src = source()
    src.rollouts(1)
    os.kill(src.pid, signal.SIGINT)  # Ctrl-C reaches the whole foreground process group
    src.policy_updated(1)
    assert src.rollouts(2).policy_version == 0
    src.close()
    assert not alive(src.pid)
    src.close()  # idempotent
