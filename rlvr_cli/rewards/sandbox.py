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
- the program runs in its own process, forked by the harness before the harness has read the secret
  half of its job, holding nothing but two pipes to it: no copy of the tests, the nonce or the result
  pipe. The tests run in
  the harness's process; the program's top-level names reach them as plain data (``None``, ``bool``,
  ``int``, ``float``, ``complex``, ``str``, ``bytes``, lists, tuples, dicts, sets), rebuilt there as
  exact built-in types, or as handles whose calls, attributes, items, ``len``, truth and iteration
  are asked of the program's process; equality and hashing of a handle are identity. Arguments the
  tests pass (data or handles) go the other way, and a list/dict/set/bytearray argument the program
  changes in place is changed in the tests too. An exception the program raises is re-raised in the
  tests as the built-in class (or a local class of the same name for one the program defines);
- the verdict comes from the harness alone, on a separate pipe tagged with a random nonce, only after
  the tests ran to the end. Calling the harness's reporter, printing ``PASSED``, exiting early
  (``os._exit(0)``, ``sys.exit``), monkeypatching ``unittest``/``builtins``/``sys.exit``, an
  ``__eq__`` that is always true, writing an "expected output" file or killing the harness is
  therefore a failure, never a pass (``tests/test_sandbox_forgery.py`` tries each);
- a seccomp filter on the program's process makes ``socket()``, ``socketpair()`` and
  ``io_uring_setup()`` fail with ``EPERM`` (x86-64 and aarch64; elsewhere only with isolation's
  network namespace): no unix socket on the filesystem (a read-only mount does not stop
  ``connect()``), no abstract socket, no network. The harness's process is not dumpable, so a program
  running as the same user cannot read its memory or descriptors through ``/proc``.

In the tests' namespace a built-in name (``abs``, ``len``, ``sorted``) is always Python's and a
standard-library module name (``math``) always the real module, whatever the program bound to it; a
program name bound to a standard-library object (``from math import isclose``) is the harness's own
copy. So the tests never call a program's stand-in for Python. What the tests call by a name they
neither define nor import, and that the program defines, is the program's code: tests should import
what they use. Tests that pass a function (a lambda, a callback) to the program cannot run: only data
and handles cross; such a test fails with a message saying so.

With ``isolation: auto`` and when rlvr runs as root with the kernel's namespaces available (checked once
per process by a probe run), the program additionally runs

- under a fresh, random, unprivileged user id (``setresuid``, no groups, ``no_new_privs``; the harness
  runs under the next one): it cannot
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
  runs as you, can read and write whatever you can, signal your processes (the trainer included)
  and read ``/proc/PID/environ`` of your other processes (sockets stay blocked by seccomp). ``RLIMIT_NPROC`` then
  counts all your processes (it is set to your current count plus ``max_processes``). Run untrusted
  code as root in a VM/container, or in a real sandbox (gVisor, firejail, a throwaway VM) for
  adversarial settings.
- As root *without* namespaces the basic layer is all there is and ``RLIMIT_NPROC`` does nothing:
  a fork bomb is only stopped by the wall-clock limit and the process-group kill.
- It is no defence against kernel exploits, and it does not hide world-readable files (the source
  tree, ``/etc``) or other processes' command lines in ``/proc``.
- The basic layer (no separate user id) keeps the verdict out of the program's reach only as far as
  the kernel keeps one process of a user from another: a program running as you can kill the
  trainer, and where ``ptrace`` of a non-child is allowed (``kernel.yama.ptrace_scope = 0``) read
  the trainer's memory for the nonce. Only the isolated layer guarantees an unforgeable verdict.
  Memory is limited per process, so the total is at most ``max_processes * memory_mb``.
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


# The value codec, shared by both sides (prepended to both programs below). Only plain data crosses
# between the program and the tests: the types below, rebuilt as exact built-in types on arrival, so
# nothing the program defines (an ``__eq__`` that is always true, an ``int`` subclass) reaches the
# tests. Anything else the program returns stays in the program and is represented by a handle.
CODEC = r'''
import json, os, sys
MAX_DEPTH = 200

def encode(v, other, depth=0):
    if depth > MAX_DEPTH:
        raise ValueError("a value nested more than %d deep" % MAX_DEPTH)
    t = type(v)
    if v is None or t is bool:
        return v
    if t is int:
        return ["i", format(v, "x")]
    if t is float:
        return ["f", float.hex(v)]
    if t is str:
        return ["s", v]
    if t is complex:
        return ["c", float.hex(v.real), float.hex(v.imag)]
    if t is bytes or t is bytearray:
        return ["b" if t is bytes else "ba", v.hex()]
    for tag, kind in (("l", list), ("t", tuple), ("set", set), ("fs", frozenset)):
        if t is kind:
            return [tag, [encode(x, other, depth + 1) for x in v]]
    if t is dict:
        return ["d", [[encode(k, other, depth + 1), encode(x, other, depth + 1)] for k, x in v.items()]]
    return other(v, depth)

def decode(m, handle, depth=0):
    if depth > MAX_DEPTH:
        raise ValueError("a value nested more than %d deep" % MAX_DEPTH)
    if m is None or m is True or m is False:
        return m
    tag = m[0]
    if tag == "i":
        return int(m[1], 16)
    if tag == "f":
        return float.fromhex(m[1])
    if tag == "s":
        return str(m[1])
    if tag == "c":
        return complex(float.fromhex(m[1]), float.fromhex(m[2]))
    if tag in ("b", "ba"):
        return (bytes if tag == "b" else bytearray).fromhex(m[1])
    kinds = {"l": list, "t": tuple, "set": set, "fs": frozenset}
    if tag in kinds:
        return kinds[tag](decode(x, handle, depth + 1) for x in m[1])
    if tag == "d":
        return {decode(k, handle, depth + 1): decode(x, handle, depth + 1) for k, x in m[1]}
    return handle(m)

class Channel:
    """Newline-delimited JSON over a pair of pipes."""
    def __init__(self, rfd, wfd):
        self.r, self.w = os.fdopen(rfd, "rb", 0), wfd
        self.buf = b""
    def send(self, obj):
        data = (json.dumps(obj) + "\n").encode("utf-8", "surrogatepass")
        view = memoryview(data)
        while view:
            view = view[os.write(self.w, view[:1 << 16]):]
    def recv(self):
        while b"\n" not in self.buf:
            chunk = self.r.read(1 << 16)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line.decode("utf-8", "surrogatepass"))
'''

# The program's side, started by the harness as a fresh interpreter (`python -I -B -c SERVER`) that
# holds nothing but fds 3 (requests) and 4 (answers): it runs the program, then answers the tests'
# requests (call a function, read an attribute, ...) with plain data or handles.
SERVER = CODEC + r'''
import io
chan = Channel(3, 4)
objects = []

def keep(v, depth=0):
    objects.append(v)
    return ["h", len(objects) - 1, type(v).__name__[:60]]

def out(v):
    return encode(v, keep)

def arg(m):
    return decode(m, lambda h: objects[h[1]])

def describe(e):
    t = type(e)
    base = next(c.__name__ for c in t.__mro__ if c.__module__ == "builtins")
    return {"raised": [t.__name__[:60], base, str(e)[:300]]}

job = chan.recv()
code = compile(job["program"], "<program>", "exec")
if job["mode"] == "tests":
    space = {"__name__": "solution"}
    try:
        exec(code, space)
    except BaseException as e:
        chan.send(describe(e))
        os._exit(0)
    names = {}
    for name, v in list(space.items()):
        if name.startswith("__"):
            continue
        if type(v).__name__ == "module" and isinstance(getattr(v, "__name__", None), str):
            names[name] = ["module", v.__name__]
        elif isinstance(v, type) and issubclass(v, BaseException):
            names[name] = ["exception", next(c.__name__ for c in v.__mro__ if c.__module__ == "builtins")]
        elif callable(v) and isinstance(getattr(v, "__module__", None), str) and v.__module__.partition(".")[0] in sys.stdlib_module_names:
            names[name] = ["stdlib", v.__module__, str(getattr(v, "__qualname__", "")), keep(v)]
        else:
            try:
                names[name] = out(v)
            except ValueError:
                names[name] = keep(v)
    chan.send({"names": names})
    while True:
        req = chan.recv()
        if req is None:
            os._exit(0)
        op, target = req["op"], objects[req["id"]]
        try:
            if op == "call":
                args = [arg(a) for a in req["args"]]
                kwargs = {k: arg(a) for k, a in req["kwargs"].items()}
                value = target(*args, **kwargs)
                chan.send({"value": out(value), "args": [out(a) if type(a) in (list, dict, set, bytearray) else None for a in args]})
                continue
            if op == "getattr":
                value = getattr(target, req["name"])
            elif op == "setattr":
                value = setattr(target, req["name"], arg(req["value"]))
            elif op == "getitem":
                value = target[arg(req["key"])]
            elif op == "len":
                value = len(target)
            elif op == "bool":
                value = bool(target)
            elif op == "iter":
                value = iter(target)
            elif op == "next":
                value = next(target)
            else:
                value = None
            chan.send({"value": out(value)})
        except BaseException as e:
            chan.send(describe(e))
else:
    real_stdin, real_stdout = sys.stdin, sys.stdout
    chan.send({"ready": True})
    while True:
        req = chan.recv()
        if req is None:
            os._exit(0)
        sys.stdin, sys.stdout = io.StringIO(req["stdin"]), io.StringIO()
        try:
            try:
                exec(code, {"__name__": "__main__"})
            except SystemExit as e:
                if e.code not in (None, 0):
                    raise
            text = sys.stdout.getvalue()
        except BaseException as e:
            sys.stdin, sys.stdout = real_stdin, real_stdout
            chan.send(describe(e))
            continue
        sys.stdin, sys.stdout = real_stdin, real_stdout
        chan.send({"stdout": str(text)})
'''

# The harness runs inside the sandbox as `python -I -B -c HARNESS`. It reads the public half of its job
# from stdin, sets up the isolation while still privileged, forks the program's process (SERVER, under
# its own user id when isolated) before it has read a byte of the secret half (nonce, result pipe,
# tests), then reads that half, runs the tests itself and writes one JSON line to the result pipe,
# which the program's process never holds. A fork, not a fresh interpreter: half the start-up cost.
# It is kept dependency-free (stdlib only).
HARNESS = CODEC + r'''
import builtins, ctypes, importlib
libc = ctypes.CDLL(None, use_errno=True)

def read_exact(n):
    """n bytes of stdin, read without a buffer (a buffer would read ahead into the secret part)."""
    data = b""
    while len(data) < n:
        chunk = os.read(0, n - len(data))
        if not chunk:
            os._exit(2)
        data += chunk
    return data

def call(fn, *args):
    if fn(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), fn.__name__)

def isolate(iso):
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
    # the working directory: a private, size-limited tmpfs owned by the program's user
    mount("tmpfs", workdir, "tmpfs", NOSUID | NODEV,
          "mode=700,uid=%d,gid=%d,size=%dk" % (uid, uid, iso["disk_kb"]))
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

def drop_to(uid):
    call(libc.prctl, 38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)

def forbid_sockets():
    """A seccomp filter: socket(), socketpair() and io_uring_setup() fail with EPERM, so the program
    can reach no unix socket on the filesystem (a read-only mount does not stop connect()), no
    abstract socket and no network, whatever the isolation level."""
    import struct
    arch, calls = {"x86_64": (0xC000003E, (41, 53, 425)), "aarch64": (0xC00000B7, (198, 199, 425))}[os.uname().machine]
    ld, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    n = len(calls)
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, arch), (ret, 0, 0, deny), (ld, 0, 0, 0), (jge, n + 1, 0, 0x40000000)]
    prog += [(jeq, n - i, 0, nr) for i, nr in enumerate(calls)]
    prog += [(ret, 0, 0, allow), (ret, 0, 0, deny)]
    raw = b"".join(struct.pack("HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(raw)
    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    fprog = Fprog(len(prog), ctypes.addressof(buf))
    call(libc.prctl, 38, 1, 0, 0, 0)  # PR_SET_NO_NEW_PRIVS (needed for an unprivileged filter)
    call(libc.prctl, 22, 2, ctypes.byref(fprog), 0, 0)  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER

def start_program(setup, to_prog, to_harness, status_w):
    """In the forked child, which holds nothing secret (see below): keep only fds 3 and 4, take the
    program's user id and the seccomp filter, close fd 5 to say it is set up, run SERVER."""
    iso = setup["isolate"]
    try:
        import fcntl, types
        devnull = os.open(os.devnull, os.O_RDWR)
        moves = [(fcntl.fcntl(fd, fcntl.F_DUPFD, 64), target) for fd, target in
                 ((devnull, 0), (devnull, 1), (devnull, 2), (to_prog, 3), (to_harness, 4), (status_w, 5))]
        for fd, target in moves:
            os.dup2(fd, target)
        os.closerange(6, 1 << 16)
        os.chdir(setup["workdir"])
        if iso:
            drop_to(iso["uid"])
        try:
            forbid_sockets()
        except (OSError, KeyError):
            if iso:
                raise
        server = compile(setup["server"], "<server>", "exec")
        sys.modules["__main__"] = types.ModuleType("__main__")
    except BaseException as e:
        os.write(5, ("cannot start the program: %s: %s" % (type(e).__name__, e)).encode()[:400])
        os._exit(127)
    os.close(5)
    try:
        exec(server, {"__name__": "__server__"})
    finally:
        os._exit(0)

# 1. The public part of the job (how to isolate, where the program runs), length-prefixed and read
# without a buffer: when the program's process is forked below, no byte of the secret part (the
# nonce, the result pipe's number, the tests) has been read into this process's memory yet.
setup = json.loads(read_exact(int(read_exact(12))).decode("utf-8"))
iso = setup["isolate"]
problem = None
if iso:
    try:
        isolate(iso)
    except Exception as e:
        problem = "isolation failed: %s: %s" % (type(e).__name__, e)
if problem is None:
    to_prog, from_harness = os.pipe()
    from_prog, to_harness = os.pipe()
    status_r, status_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        start_program(setup, to_prog, to_harness, status_w)
    for fd in (to_prog, to_harness, status_w):
        os.close(fd)
    if iso:
        drop_to(iso["uid"] + 1)
    call(libc.prctl, 4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no /proc/PID/{mem,fd,environ} for the same user

# 2. The secret part.
job = json.loads(sys.stdin.buffer.read().decode("utf-8", "surrogatepass"))
result_fd, nonce = job["result_fd"], job["nonce"]

def report(status, detail=""):
    msg = json.dumps({"nonce": nonce, "status": status, "detail": detail[:500]})
    try:
        os.write(result_fd, (msg + "\n").encode("utf-8", "replace"))
    finally:
        os._exit(0)

if problem:
    report("error", problem)
with os.fdopen(status_r, "rb") as f:
    problem = f.read()
if problem:
    report("error", problem.decode("utf-8", "replace"))
try:
    code = compile(job["program"], "<program>", "exec")
except BaseException as e:
    report("syntax", "%s: %s" % (type(e).__name__, e))
del code

def failure(e):
    return "%s: %s" % (type(e).__name__, str(e)[:300])

if job["cases"] is None:
    try:
        tests = compile(job["tests"], "<tests>", "exec")
    except BaseException as e:
        report("error", "the tests do not compile: " + failure(e))

chan = Channel(from_prog, from_harness)

def report_gone(why):
    """The program's process is gone: say how it ended (the CPU limit is a timeout)."""
    import signal, time
    for _ in range(100):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.002)
    else:
        report("failed", "the program " + why)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig in (signal.SIGXCPU, signal.SIGKILL):
            report("timeout", "CPU time limit")
        report("failed", "the program was killed by %s before the tests finished" % signal.Signals(sig).name)
    report("failed", "the program " + why)

BUILTIN_NAMES = frozenset(dir(builtins))

def stdlib_object(module, qualname):
    """``module`` (a standard-library one) or the object at ``qualname`` in it; None when not found."""
    if module.partition(".")[0] not in sys.stdlib_module_names:
        return None
    try:
        obj = importlib.import_module(module)
        for part in filter(None, qualname.split(".")):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError):
        return None
    return obj

class ProgramGone(BaseException):
    """The program's process closed its side (exited, crashed, was killed): the tests cannot finish."""

EXCEPTIONS = {n: c for n, c in vars(builtins).items() if isinstance(c, type) and issubclass(c, Exception)}
local_exceptions = {}

gone = []  # once the program is gone, nothing the tests do afterwards (a bare `except:`) is a pass

def lost(why):
    gone.append(why)
    return ProgramGone(why)

def ask(req):
    try:
        chan.send(req)
    except OSError:
        raise lost("exited before the tests finished")
    return answer()

def answer():
    try:
        msg = chan.recv()
    except (ValueError, RecursionError, MemoryError) as e:
        raise lost("sent an unreadable answer (%s)" % type(e).__name__)
    except OSError:
        msg = None
    if not isinstance(msg, dict):
        raise lost("exited before the tests finished")
    return msg

def raise_remote(raised):
    name, base, text = (str(x) for x in raised)
    cls = local_exceptions.get(name) or EXCEPTIONS.get(name) or EXCEPTIONS.get(base) or RuntimeError
    raise cls(text)

def value_of(msg):
    if "raised" in msg:
        raise_remote(msg["raised"])
    return decode(msg["value"], lambda h: Remote(int(h[1]), str(h[2])))

def rpc(**req):
    return value_of(ask(req))

def to_program(v, depth=0):
    if isinstance(v, Remote):
        return ["h", object.__getattribute__(v, "_id")]
    raise TypeError("the tests pass a %s to the program, which cannot cross to its process" % type(v).__name__)

class Remote:
    """An object that lives in the program's process. Equality, hashing and ordering are the
    harness's own (identity): the program's ``__eq__`` is never asked."""
    __slots__ = ("_id", "_type")
    def __init__(self, id, type_name):
        object.__setattr__(self, "_id", id)
        object.__setattr__(self, "_type", type_name)
    def _ask(self, op, **kw):
        return rpc(op=op, id=object.__getattribute__(self, "_id"), **kw)
    def __call__(self, *args, **kwargs):
        msg = ask({"op": "call", "id": object.__getattribute__(self, "_id"),
                   "args": [encode(a, to_program) for a in args],
                   "kwargs": {str(k): encode(a, to_program) for k, a in kwargs.items()}})
        value = value_of(msg)
        for local, after in zip(args, msg.get("args") or []):  # arguments the program changed in place
            if after is None or type(local) not in (list, dict, set, bytearray):
                continue
            new = decode(after, lambda h: Remote(int(h[1]), str(h[2])))
            if type(new) is type(local) is dict or type(new) is type(local) is set:
                local.clear()
                local.update(new)
            elif type(new) is type(local):
                local[:] = new
        return value
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._ask("getattr", name=name)
    def __setattr__(self, name, value):
        self._ask("setattr", name=name, value=encode(value, to_program))
    def __getitem__(self, key):
        return self._ask("getitem", key=encode(key, to_program))
    def __len__(self):
        n = self._ask("len")
        if type(n) is not int:
            raise TypeError("len() of a program object is not an int")
        return n
    def __bool__(self):
        return self._ask("bool") is True
    def __iter__(self):
        it = self._ask("iter")
        while True:
            try:
                yield it._ask("next")
            except StopIteration:
                return
    def __repr__(self):
        return "<%s object of the program>" % object.__getattribute__(self, "_type")

try:
    first = ask({"program": job["program"], "mode": "tests" if job["cases"] is None else "cases"})
    if job["cases"] is None:
        msg = first
        if "raised" in msg:
            name, base, text = (str(x) for x in msg["raised"])
            report("failed", "the program raised %s: %s" % (name, text))
        space = {"__name__": "tests"}
        for name, spec in dict(msg.get("names") or {}).items():
            name = str(name)
            kind = spec[0] if isinstance(spec, list) and spec else None
            if name in BUILTIN_NAMES:
                continue  # `abs`, `sorted`, `len` in the tests are Python's, never the program's
            if name in sys.stdlib_module_names:
                kind, spec = "module", ["module", name]  # `math` is the real math, whatever the program bound
            if kind in ("module", "stdlib"):
                # a standard-library module or object: the harness's own copy (trusted code; a program
                # that claims one for its function gets exactly what `from math import isclose` gives)
                found = stdlib_object(str(spec[1]), str(spec[2]) if kind == "stdlib" and len(spec) > 2 else "")
                if found is not None:
                    space[name] = found
                elif kind == "stdlib" and len(spec) > 3:  # not found here: the program's object after all
                    space[name] = decode(spec[3], lambda h: Remote(int(h[1]), str(h[2])))
            elif kind == "exception":
                base = EXCEPTIONS.get(str(spec[1]), Exception)
                space[name] = local_exceptions[name] = type(name, (base,), {})
            else:
                space[name] = decode(spec, lambda h: Remote(int(h[1]), str(h[2])))
        try:
            exec(tests, space)
        except ProgramGone as e:
            report_gone(str(e))
        except BaseException as e:
            report("failed", "a test failed: " + failure(e))
        if gone:
            report_gone(gone[0])
        report("passed")
    def lines(text):
        return [l.rstrip() for l in str(text).rstrip().splitlines()]
    for i, (given, expected) in enumerate(job["cases"]):
        msg = ask({"stdin": str(given)})
        if "raised" in msg:
            name, base, text = (str(x) for x in msg["raised"])
            report("failed", "case %d: the program raised %s: %s" % (i, name, text))
        if lines(msg.get("stdout", "")) != lines(expected):
            report("failed", "case %d: wrong output" % i)
    report("passed")
except ProgramGone as e:
    report_gone(str(e))
except (ValueError, TypeError, KeyError, IndexError, RecursionError, MemoryError) as e:
    report("failed", "the program's answer could not be read: " + failure(e))
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
        "workdir": workdir, "server": SERVER,
        "isolate": {"uid": uid, "workdir": workdir, "covers": covers, "disk_kb": limits.file_size_mb * 1024}
        if isolated else None,
    }).encode("utf-8")
    job = {"program": program, "tests": tests, "cases": cases, "nonce": nonce, "result_fd": write_fd}
    data = b"%012d" % len(setup) + setup + json.dumps(job).encode("utf-8", "surrogatepass")
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
            "passed", "failed", "syntax", "error", "timeout"
        ):
            return msg
    return None
