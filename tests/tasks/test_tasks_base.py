"""rlvr_cli/tasks/base.py: the one process-independent string hash, and a problem's defaults."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from rlvr_cli.tasks.base import Problem, stable_hash


def test_stable_hash_by_hand_and_in_another_process():
    want = int.from_bytes(hashlib.blake2b(b"add3:007+085", digest_size=8).digest(), "little")
    assert stable_hash("add3:007+085") == want and 0 <= want < 2**64
    other = subprocess.run([sys.executable, "-c", "print(hash('add3:007+085'))"], capture_output=True, text=True,
                           env={"PYTHONHASHSEED": "random"}).stdout.strip()
    assert other != str(want)  # Python's hash is not this one
    assert stable_hash("é") == int.from_bytes(hashlib.blake2b("é".encode(), digest_size=8).digest(), "little")


def test_a_problem_keeps_its_own_meta():
    a, b = Problem("a", "1+1=", "2"), Problem("b", "1+2=", "3")
    a.meta["x"] = 1
    assert b.meta == {}
