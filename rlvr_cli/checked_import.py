"""The checked import of a user's code (reward functions, an environment's module): in a child process,
with a time and a memory limit.

A user's module runs its own code when imported. Imported in rlvr's process, a module that sleeps at
import hangs ``rlvr train`` and ``rlvr doctor`` for ever, and one that calls ``os._exit(0)`` ends them with
exit 0 and no word. So before anything else imports it, :func:`check_importable` imports each function
in ``python -m rlvr_cli.rewards.worker --check-functions``, a child process under the workers' memory limit
(``reward.worker_memory_mb``), dying with its parent, given ``IMPORT_TIMEOUT_S``; the child also checks
each signature (:func:`rlvr_cli.rewards.function.check_signature`). A hang, an exit, a crash, an
exception or a signature that cannot take rlvr's keywords is one line naming the function (exit 2).
An environment's module (rlvr_cli/envs/loading.py) is only imported there (``--import-only``): its
objects are built and called in rlvr's process, under the environment's own limits.

Protocol (JSON lines on the worker's private copy of its stdout, so the module's prints cannot corrupt it): ``{"importing": ref}`` before each import, then ``{"ref": ref,
"problem": null | "one line"}``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from rlvr_cli.processes import kill_worker

IMPORT_TIMEOUT_S = 60.0
"""How long importing the user's reward modules may take, all together (a module that imports torch
takes seconds on a loaded machine; one that waits for something at import would take for ever)."""


def check_importable(refs: list[str], names: set[str] | None, memory_mb: int | None = None,
                     timeout_s: float | None = None) -> dict[str, str]:
    """``{ref: problem}`` for each of ``refs`` that cannot be imported and called with the keywords
    ``names`` (an empty dict when all can), found in a child process (see the module docstring).
    ``names`` None: only import each reference's module (an environment's, imported by rlvr's own process
    next; rlvr_cli/envs/loading.py)."""
    if not refs:
        return {}
    timeout_s = IMPORT_TIMEOUT_S if timeout_s is None else timeout_s
    cmd = [sys.executable, "-m", "rlvr_cli.rewards.worker", "--check-functions", json.dumps(refs)]
    cmd += ["--import-only"] if names is None else ["--names", json.dumps(sorted(names))]
    if memory_mb:
        cmd += ["--memory-mb", str(memory_mb)]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, start_new_session=True,
                            close_fds=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        ended = f"ended the process ({_status(proc.returncode)})"
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            out, _ = proc.communicate(timeout=5.0)
        except subprocess.TimeoutExpired:  # a grandchild of its own session holds the pipe: give up on it
            kill_worker(proc)
            out = b""
        ended = f"did not finish within {timeout_s:g} s (does the module wait for something at import?); it was stopped"
    problems, answered, current = {}, set(), None
    for line in out.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if not isinstance(msg, dict):
            continue
        if "importing" in msg:
            current = msg["importing"]
        elif msg.get("ref") == current:
            answered.add(current)
            if msg.get("problem"):
                problems[current] = msg["problem"]
            current = None
    if current is not None:  # the child stopped, or was stopped, inside this import
        problems[current] = f"{current}: importing {current.rpartition(':')[0]} {ended}"
    elif not problems and not set(refs) <= answered:  # it never got to the import
        problems[refs[0]] = f"{refs[0]}: the checked import (a child process) {ended} before importing it"
    return problems


def _status(code: int | None) -> str:
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
