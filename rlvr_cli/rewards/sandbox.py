"""Running an untrusted Python program against tests, with limits. Read this before trusting it.

Every run (``isolation: basic`` and above):

- a separate interpreter, ``python -I -B`` (no ``PYTHON*`` variables, no user site, no bytecode
  files), in a new session, so the run and everything it forks is one process group;
- an environment of ``PATH``, ``LANG``/``LC_ALL``, ``HOME``/``TMPDIR`` (its own directory) and
  one-thread settings for BLAS/OpenMP, nothing else: no inherited secrets (API keys, tokens);
- a fresh private temporary directory as its working directory, removed afterwards;
- ``resource`` limits set before the interpreter starts: address space (``RLIMIT_AS``), CPU seconds
  (``RLIMIT_CPU``), file size (``RLIMIT_FSIZE``), open files, no core dumps, and ``RLIMIT_NPROC``;
- a wall-clock limit; at the end the whole process group is killed (``SIGKILL``), pass or fail;
- stdout and stderr go nowhere: the result comes back on a separate pipe, tagged with a random
  nonce, and only after the tests ran to the end. Printing ``PASSED`` or exiting early
  (``os._exit(0)``, ``sys.exit``) is therefore a failure, never a pass.

With ``isolation: auto`` and when rlvr runs as root with the kernel's namespaces available (checked once
per process by a probe run), the program additionally runs

- under a fresh, random, unprivileged user id (``setresuid``, no groups, ``no_new_privs``): it cannot
  signal, trace or read the environment (``/proc/PID/environ``) of any other process, cannot read
  files that are not world-readable, and ``RLIMIT_NPROC`` holds: *this* is what stops a fork bomb
  (root ignores ``RLIMIT_NPROC``);
- in its own mount namespace where every mount is read-only except its working directory, which is
  a small private tmpfs (so the total it can write is bounded and vanishes with it); directories on the
  interpreter's path that the new user could not enter (e.g. ``/root``) are replaced by an empty
  tmpfs with only the interpreter's directories bound back: the rest of them (``~/.ssh``, caches of
  tokens) is hidden;
- in its own network namespace: no network at all, not even loopback;
- and at the end every process of that user id is killed, including any that left the process group.

What this does NOT protect against:

- Without root (or in a container without ``CAP_SYS_ADMIN``) only the basic layer applies: the program
  runs as you, can read and write whatever you can, signal your processes (the trainer included),
  reach the network, and read ``/proc/PID/environ`` of your other processes. ``RLIMIT_NPROC`` then
  counts all your processes (it is set to your current count plus ``max_processes``). Run untrusted
  code as root in a VM/container, or in a real sandbox (gVisor, firejail, a throwaway VM) for
  adversarial settings.
- As root *without* namespaces the basic layer is all there is and ``RLIMIT_NPROC`` does nothing:
  a fork bomb is only stopped by the wall-clock limit and the process-group kill.
- It is no defence against kernel exploits, and it does not hide world-readable files (the source
  tree, ``/etc``) or other processes' command lines in ``/proc``.
- The tests run in the same interpreter as the program: a program written to attack the harness
  (walk the stack or ``gc`` to find the nonce, redefine ``__eq__`` to always be true) can fake a pass.
  This catches accidents and casual cheating, not a determined adversary. Memory is limited per
  process, so the total is at most ``max_processes * memory_mb``.
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

ISOLATED, BASIC = "isolated", "basic"
STARTUP_ALLOWANCE_S = 0.5
"""Seconds added to the wall-clock limit for starting the interpreter and setting up the isolation
(about 0.05 s on an idle machine; the margin is for a loaded one)."""


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


# The harness runs inside the sandbox as `python -I -B -c HARNESS`. It reads its job from stdin, sets up
# the isolation while still privileged, then runs the program and the tests, and writes one JSON line
# to the result pipe only when it got to the end. It is kept dependency-free (stdlib only).
HARNESS = r'''
import json, os, sys
job = json.loads(sys.stdin.buffer.read().decode("utf-8", "surrogatepass"))
result_fd, nonce = job["result_fd"], job["nonce"]

def report(status, detail=""):
    msg = json.dumps({"nonce": nonce, "status": status, "detail": detail[:500]})
    try:
        os.write(result_fd, (msg + "\n").encode("utf-8", "replace"))
    finally:
        os._exit(0)

def isolate(iso):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    def call(fn, *args):
        if fn(*args) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), fn.__name__)
    enc = lambda s: None if s is None else s.encode()
    def mount(src, target, fstype, flags, data=None):
        call(libc.mount, enc(src), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))
    RDONLY, NOSUID, NODEV, NOEXEC, REMOUNT, BIND, REC, PRIVATE = 1, 2, 4, 8, 32, 4096, 16384, 1 << 18
    ATIME = {"noatime": 1024, "nodiratime": 2048, "relatime": 1 << 21, "strictatime": 1 << 24}
    call(libc.unshare, 0x00020000 | 0x40000000)  # CLONE_NEWNS | CLONE_NEWNET
    mount(None, "/", None, REC | PRIVATE)
    uid, workdir = iso["uid"], iso["workdir"]
    # directories the new user could not enter: an empty tmpfs on top, the needed ones bound back
    for cover, needed in iso["covers"]:
        fds = [os.open(p, os.O_PATH) for p in needed]
        mount("tmpfs", cover, "tmpfs", NOSUID | NODEV, "mode=755,size=64k")
        for p, fd in zip(needed, fds):
            os.makedirs(p, exist_ok=True)
            mount("/proc/self/fd/%d" % fd, p, None, BIND | REC)
            os.close(fd)
    # the working directory: a private, size-limited tmpfs owned by the sandbox user
    mount("tmpfs", workdir, "tmpfs", NOSUID | NODEV,
          "mode=700,uid=%d,gid=%d,size=%dk" % (uid, uid, iso["disk_kb"]))
    os.chdir(workdir)
    # everything else read-only (per-mount flags kept, so nothing is loosened)
    with open("/proc/self/mountinfo") as f:
        mounts = [line.split() for line in f]
    for fields in mounts:
        point = fields[4].encode().decode("unicode_escape")
        if point == workdir or "ro" in fields[5].split(","):
            continue
        flags = REMOUNT | BIND | RDONLY
        for opt in fields[5].split(","):
            flags |= {"nosuid": NOSUID, "nodev": NODEV, "noexec": NOEXEC}.get(opt, 0) | ATIME.get(opt, 0)
        try:
            mount(None, point, None, flags)
        except OSError as e:
            if os.path.ismount(point) and not os.access(point, os.W_OK):
                continue
            raise OSError(e.errno, "cannot make %s read-only: %s" % (point, e.strerror))
    call(libc.prctl, 38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)

if job["isolate"]:
    try:
        isolate(job["isolate"])
    except Exception as e:
        report("error", "isolation failed: %s: %s" % (type(e).__name__, e))

try:
    code = compile(job["program"], "<program>", "exec")
except BaseException as e:
    report("syntax", "%s: %s" % (type(e).__name__, e))

def failure(e):
    return "%s: %s" % (type(e).__name__, str(e)[:300])

if job["cases"] is None:
    try:
        tests = compile(job["tests"], "<tests>", "exec")
    except BaseException as e:
        report("error", "the tests do not compile: " + failure(e))
    space = {"__name__": "solution"}
    try:
        exec(code, space)
    except BaseException as e:
        report("failed", "the program raised " + failure(e))
    try:
        exec(tests, space)
    except BaseException as e:
        report("failed", "a test failed: " + failure(e))
    report("passed")
else:
    import io
    def lines(text):
        return [l.rstrip() for l in str(text).rstrip().splitlines()]
    real_stdin, real_stdout = sys.stdin, sys.stdout
    for i, (given, expected) in enumerate(job["cases"]):
        sys.stdin, sys.stdout = io.StringIO(str(given)), io.StringIO()
        try:
            try:
                exec(code, {"__name__": "__main__"})
            except SystemExit as e:
                if e.code not in (None, 0):
                    raise
            out = sys.stdout.getvalue()
        except BaseException as e:
            sys.stdin, sys.stdout = real_stdin, real_stdout
            report("failed", "case %d: the program raised %s" % (i, failure(e)))
        sys.stdin, sys.stdout = real_stdin, real_stdout
        if lines(out) != lines(expected):
            report("failed", "case %d: wrong output" % i)
    report("passed")
'''


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


def _live_processes_of(uid: int) -> list[int]:
    """Pids of the user's processes that are not zombies (a zombie is dead already, waiting to be reaped)."""
    pids = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.stat(f"/proc/{pid}").st_uid != uid:
                continue
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z":
            pids.append(int(pid))
    return pids


def kill_sandbox(pgid: int | None, uid: int | None) -> None:
    """SIGKILL a run's process group and, when it had its own user id, every process of that user."""
    if pgid:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if uid is None:
        return
    for _ in range(100):  # a process may fork while we scan: repeat until none is left
        alive = _live_processes_of(uid)
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
    uid = secrets.randbelow(2**30) + 2**20 if isolated else None
    if isolated:
        nproc = limits.max_processes
    elif os.geteuid() != 0:
        nproc = _user_process_count(os.getuid()) + limits.max_processes
    else:
        nproc = None  # root ignores RLIMIT_NPROC
    read_fd, write_fd = os.pipe()
    nonce = secrets.token_hex(16)
    job = {
        "program": program, "tests": tests, "cases": cases, "nonce": nonce, "result_fd": write_fd,
        "isolate": {"uid": uid, "workdir": workdir, "covers": covers, "disk_kb": limits.file_size_mb * 1024}
        if isolated else None,
    }
    data = json.dumps(job).encode("utf-8", "surrogatepass")
    proc = None
    try:
        try:
            proc = subprocess.Popen(
                [python, "-I", "-B", "-c", HARNESS],
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
            "passed", "failed", "syntax", "error"
        ):
            return msg
    return None
