"""Running an untrusted Python program against tests, with limits: the API (:func:`run_program`).

The work is done by three real programs beside this file, run by path in a fresh interpreter:
``harness.py`` (runs the tests and alone gives the verdict), ``server.py`` (the program's process,
which answers the tests' requests) and ``codec.py`` (the plain data both sides exchange). What each
isolation level protects against, and what it does not, is in docs/sandbox.md: read it before
trusting this with adversarial code.
"""

from __future__ import annotations

import json
import os
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HARNESS = Path(__file__).resolve().with_name("harness.py")
"""The harness program, run as ``python -I -B HARNESS`` (it imports ``server.py`` and ``codec.py`` beside it)."""

ISOLATED, BASIC = "isolated", "basic"
STARTUP_ALLOWANCE_S = 0.5
"""Seconds added to the wall-clock limit for starting the interpreter and setting up the isolation
(a small part of it on an idle machine; the margin is for a loaded one)."""


@dataclass(frozen=True)
class Limits:
    """What a program may use (see ``CodeSpec`` in the recipe schema for the fields' meaning)."""

    timeout_s: float = 3.0
    memory_mb: int = 512
    max_processes: int = 16
    file_size_mb: int = 16
    isolation: str = "auto"
    python: str | None = None


@dataclass(frozen=True)
class RunResult:
    status: str
    """`passed`, `failed` (a test failed or the program did not finish its tests), `syntax` (does not
    compile), `timeout` (wall-clock or CPU limit) or `error` (the harness or the tests are broken)."""
    detail: str = ""
    isolation: str = BASIC


def _minimal_env(workdir: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": workdir,
        "TMPDIR": workdir,
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


def _user_process_count(uid: int) -> int:
    """Processes (and threads count for RLIMIT_NPROC, roughly) of a user now, from /proc."""
    count = 0
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}").st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


def _limit_setter(limits: Limits, nproc: int | None):
    """The preexec_fn: the child's resource limits, set after fork and before exec. It only calls
    ``setrlimit`` on a module imported before the fork, so it takes no lock another thread could hold."""
    import resource

    cpu = max(1, int(limits.timeout_s + 0.999))
    mem = limits.memory_mb * 1024 * 1024
    fsize = limits.file_size_mb * 1024 * 1024

    def set_limits():
        resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if nproc is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))

    return set_limits


def _enterable_by_others(path: str) -> bool:
    try:
        return bool(os.stat(path).st_mode & 0o001)
    except OSError:
        return False


def _covers(python: str) -> list[tuple[str, list[str]]]:
    """For each topmost directory on the interpreter's paths that an unprivileged user cannot enter:
    (that directory, the interpreter's directories below it to bind back)."""
    where = "import json, os, sys; print(json.dumps([os.path.realpath(sys.executable), sys.prefix, sys.base_prefix, sys.exec_prefix] + sys.path))"
    probe = subprocess.run(
        [python, "-I", "-c", where], capture_output=True, text=True, timeout=30, env=_minimal_env("/"), check=True
    )
    paths = json.loads(probe.stdout)
    paths[0] = os.path.dirname(paths[0])
    needed = sorted({os.path.realpath(p) for p in paths if p and os.path.isdir(p)})
    plan: dict[str, list[str]] = {}
    for p in needed:
        parts = p.strip("/").split("/")
        for i in range(1, len(parts)):
            ancestor = "/" + "/".join(parts[:i])
            if not _enterable_by_others(ancestor):
                plan.setdefault(ancestor, []).append(p)
                break
    # a needed directory inside another needed one is bound back with it (the binds are recursive)
    return [(c, [p for p in ps if not any(p != q and p.startswith(q + "/") for q in ps)]) for c, ps in plan.items()]


_isolation_cache: dict[str, tuple[str, str, list]] = {}


def isolation_level(limits: Limits = Limits()) -> tuple[str, str]:
    """(`isolated` or `basic`, why) for these limits in this process; probed once per interpreter."""
    return _isolation(limits)[:2]


def _isolation(limits: Limits) -> tuple[str, str, list]:
    python = limits.python or sys.executable
    if limits.isolation == BASIC:
        return BASIC, "isolation: basic (set in the recipe)", []
    if os.geteuid() != 0:
        return BASIC, "not running as root: no private user id, namespaces or read-only filesystem", []
    if python not in _isolation_cache:
        try:
            covers = _covers(python)
        except (OSError, ValueError, subprocess.SubprocessError) as e:
            _isolation_cache[python] = (BASIC, f"cannot inspect the interpreter {python}: {e}", [])
        else:
            probe = _run(
                "x = 1", "assert x == 1", None, Limits(timeout_s=10, python=python), isolated=True, covers=covers
            )
            if probe.status == "passed":
                _isolation_cache[python] = (ISOLATED, "private user id, read-only filesystem, no network", covers)
            else:
                _isolation_cache[python] = (BASIC, f"isolation unavailable ({probe.detail})", [])
    return _isolation_cache[python]


def _live_processes_of(*uids: int) -> list[int]:
    """Pids of the users' processes that are not zombies (a zombie is dead already, waiting to be reaped)."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid not in uids:
                continue
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z":
            pids.append(int(pid))
    return pids


def kill_sandbox(pgid: int | None, uid: int | None) -> None:
    """SIGKILL a run's process group and, when it had its own user ids (the program's ``uid`` and the
    harness's ``uid + 1``), every process of those users."""
    if pgid:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if uid is None:
        return
    for _ in range(100):  # a process may fork while we scan: repeat until none is left
        alive = _live_processes_of(uid, uid + 1)
        if not alive:
            return
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.005)


def run_program(program: str, tests: str | None, cases: list | None, limits: Limits, on_start=None) -> RunResult:
    """Run ``program`` then the assert-style ``tests`` (or the stdin/stdout ``cases``) under ``limits``.

    ``on_start(pgid, uid)`` is called once the process exists, so a supervisor that may have to kill
    the caller can also kill the run.
    """
    level, _why, covers = _isolation(limits)
    return _run(program, tests, cases, limits, isolated=level == ISOLATED, covers=covers, on_start=on_start)


def _run(program, tests, cases, limits: Limits, isolated: bool, covers: list, on_start=None) -> RunResult:
    python = limits.python or sys.executable
    level = ISOLATED if isolated else BASIC
    workdir = tempfile.mkdtemp(prefix="rlvr-code-")
    uid = 2 * secrets.randbelow(2**29) + 2**20 if isolated else None  # the harness runs as uid + 1
    if isolated:
        nproc = limits.max_processes
    elif os.geteuid() != 0:
        nproc = _user_process_count(os.getuid()) + limits.max_processes
    else:
        nproc = None  # root ignores RLIMIT_NPROC
    read_fd, write_fd = os.pipe()
    nonce = secrets.token_hex(16)
    setup = json.dumps({
        "workdir": workdir,
        "isolate": {"uid": uid, "workdir": workdir, "covers": covers, "disk_kb": limits.file_size_mb * 1024}
        if isolated else None,
    }).encode("utf-8")
    job = {"program": program, "tests": tests, "cases": cases, "nonce": nonce, "result_fd": write_fd}
    data = b"%012d" % len(setup) + setup + json.dumps(job).encode("utf-8", "surrogatepass")
    proc = None
    try:
        try:
            proc = subprocess.Popen(
                [python, "-I", "-B", str(HARNESS)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                cwd=workdir, env=_minimal_env(workdir), start_new_session=True,
                preexec_fn=_limit_setter(limits, nproc), pass_fds=(write_fd,), close_fds=True,  # noqa: PLW1509
            )
        except OSError as e:
            return RunResult("error", f"cannot start {python}: {e}", level)
        finally:
            os.close(write_fd)
        if on_start is not None:
            on_start(proc.pid, uid)
        deadline = time.monotonic() + limits.timeout_s + STARTUP_ALLOWANCE_S
        timed_out = not _send(proc, data, deadline) or not _wait_unreaped(proc, deadline)
        # kill before reaping: while the leader is an unreaped zombie its pid cannot be reused, so the
        # group id still names this run's processes only
        kill_sandbox(proc.pid, uid)
        status = proc.wait()
        message = _read_result(read_fd, nonce)
    finally:
        os.close(read_fd)
        if proc is not None and proc.poll() is None:
            kill_sandbox(proc.pid, uid)
            proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)
    if message is not None:
        return RunResult(message["status"], message.get("detail", ""), level)
    if timed_out:
        return RunResult("timeout", f"wall-clock limit of {limits.timeout_s + STARTUP_ALLOWANCE_S:g} s", level)
    if status in (-signal.SIGXCPU, -signal.SIGKILL):
        return RunResult("timeout", f"CPU time limit of {max(1, int(limits.timeout_s + 0.999))} s", level)
    if status < 0:
        return RunResult("failed", f"killed by {signal.Signals(-status).name} before the tests finished", level)
    return RunResult("failed", f"exited with status {status} before the tests finished", level)


def _send(proc: subprocess.Popen, data: bytes, deadline: float) -> bool:
    """Write the job to the harness's stdin and close it; False if the deadline passed first."""
    fd = proc.stdin.fileno()
    os.set_blocking(fd, False)
    view = memoryview(data)
    try:
        while view:
            _, ready, _ = select.select([], [fd], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                return False
            view = view[os.write(fd, view[:65536]) :]
    except (BrokenPipeError, OSError):
        pass  # the harness died before reading its job: judged by its exit status
    finally:
        try:
            proc.stdin.close()
        except OSError:
            pass
    return True


def _wait_unreaped(proc: subprocess.Popen, deadline: float) -> bool:
    """Wait until the harness exits, without reaping it; False if the deadline passed first."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = None
    if pidfd is not None:
        try:
            ready, _, _ = select.select([pidfd], [], [], max(0.0, deadline - time.monotonic()))
            return bool(ready)
        finally:
            os.close(pidfd)
    delay = 0.0005
    while time.monotonic() < deadline:  # no pidfd: poll with waitid(WNOWAIT), which does not reap
        if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        time.sleep(delay)
        delay = min(delay * 2, 0.01)
    return False


def _read_result(fd: int, nonce: str) -> dict | None:
    """The harness's message, if one with the right nonce arrived (never blocks)."""
    os.set_blocking(fd, False)
    try:
        raw = os.read(fd, 65536)
    except BlockingIOError:
        return None
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if isinstance(msg, dict) and msg.get("nonce") == nonce and msg.get("status") in (
            "passed", "failed", "syntax", "error", "timeout"
        ):
            return msg
    return None
