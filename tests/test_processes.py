"""rlvr_cli/processes.py's die_with_parent: a process whose parent is not the one it was told of exits at once."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])


def _child(parent: int) -> int:
    code = f"from rlvr_cli.processes import die_with_parent; import signal; die_with_parent(signal.SIGTERM, {parent})"
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([sys.executable, "-c", code], env=env, timeout=60).returncode


def test_a_child_of_its_named_parent_goes_on():
    assert _child(os.getpid()) == 0


def test_a_child_whose_parent_is_already_another_exits_1():
    assert _child(os.getpid() + 10_000_000) == 1
