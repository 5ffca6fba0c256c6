"""The program's side of the sandbox: the process that runs the untrusted program and answers the
tests' requests about it (call a function, read an attribute, an item, a length, ...) with plain data
or handles (``codec.py``).

``harness.py`` imports this module before it forks, and the forked child, which holds nothing but fds 3
(requests) and 4 (answers), calls :func:`serve` once it has dropped to the program's user id and
installed its seccomp filter. The first request is the program: in ``tests`` mode its top-level names
are sent back and requests about them follow; in ``cases`` mode every request is one stdin to run the
program on, answered with its stdout. Standard library only (it runs in ``python -I``).
"""

import io
import os
import sys

from codec import Channel, decode, encode  # codec.py beside this file (harness.py puts it on the path)

objects = []
"""What the program's side keeps for the tests: handle n is objects[n]."""


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


def serve(rfd=3, wfd=4):
    """Run the program the first request names, then answer requests until the harness closes its end."""
    chan = Channel(rfd, wfd)
    job = chan.recv()
    code = compile(job["program"], "<program>", "exec")
    if job["mode"] == "tests":
        answer_tests(chan, code)
    else:
        answer_cases(chan, code)


def answer_tests(chan, code):
    """Run the program once; send its top-level names; then answer requests about them."""
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


def answer_cases(chan, code):
    """Run the program once per request, on that request's stdin; answer with its stdout."""
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
