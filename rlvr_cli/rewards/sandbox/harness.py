"""The sandbox's harness: the process that runs the tests of an untrusted program and alone gives the verdict.

``rlvr_cli/rewards/sandbox/runner.py`` starts it as ``python -I -B harness.py`` in a new session, under
resource limits, and writes its job to its stdin. It reads the public half of the job (how to isolate,
where the program runs), sets up the isolation while still privileged, forks the program's process
(``server.py``, under its own user id when isolated) before it has read a byte of the secret half
(the nonce, the result pipe, the tests), then reads that half, runs the tests itself and writes one
JSON line to the result pipe, which the program's process never holds. A fork, not a fresh
interpreter: half the start-up cost. docs/sandbox.md has the threat model.

A script, run by path and never imported by rlvr: standard library only, and it imports its two
siblings (``codec.py``, ``server.py``) before it reads its job, so the forked program's process needs
no file of the package (which isolation may hide from it).
"""

import builtins
import ctypes
import importlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import server  # noqa: E402
from codec import Channel, decode, encode  # noqa: E402

del sys.path[0]  # the program's process sees the interpreter's path only

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
    program's user id and the seccomp filter, close fd 5 to say it is set up, serve (server.py)."""
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
        sys.modules["__main__"] = types.ModuleType("__main__")
    except BaseException as e:
        os.write(5, ("cannot start the program: %s: %s" % (type(e).__name__, e)).encode()[:400])
        os._exit(127)
    os.close(5)
    try:
        server.serve(3, 4)
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
