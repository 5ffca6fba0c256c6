"""A program cannot forge the code verifier's verdict or reach out through a socket.

Every forgery below sits in front of tests the program cannot pass (``add`` is never right), so any
``passed`` is a forged verdict. They run in both isolation levels where available.
"""

import os
import socket
import tempfile
import threading

import pytest

from rlvr_cli.rewards import sandbox

IMPOSSIBLE = (
    "import math\nassert add(2, 3) == 5\nassert add(-1, 1) == 0\n"
    "assert abs(add(1, 1) - 2) < 1e-9\nassert math.isclose(add(1, 2), 3)\n"
)
WRONG = "def add(a, b):\n    return 0\n"
LEVELS = ["basic"] + (["auto"] if sandbox.isolation_level()[0] == sandbox.ISOLATED else [])

FORGERIES = {
    "calls the harness's reporter": "import sys\nsys.modules['__main__'].report('passed')\n",
    "calls the reporter from a test-time hook": (
        "import sys\nm = sys.modules['__main__']\n"
        "def add(a, b):\n    m.report('passed')\n"),
    "writes a verdict with the nonce to the result descriptor": (
        "import sys, os, json\nm = sys.modules['__main__']\n"
        "os.write(m.result_fd, (json.dumps({'nonce': m.nonce, 'status': 'passed'}) + '\\n').encode())\n"
        "os._exit(0)\n"),
    "writes a verdict to every open descriptor": (
        "import os, json, gc\n"
        "nonces = [o for o in gc.get_objects() if isinstance(o, str) and len(o) == 32]\n"
        "for fd in range(3, 64):\n"
        "    for n in nonces[:200] or ['x']:\n"
        "        try:\n            os.write(fd, (json.dumps({'nonce': n, 'status': 'passed'}) + '\\n').encode())\n"
        "        except OSError:\n            break\n"
        "os._exit(0)\n"),
    "exits 0 early": "import os\nos._exit(0)\n",
    "sys.exit(0) early": "import sys\nsys.exit(0)\n",
    "os._exit mid-test": "import os\ndef add(a, b):\n    os._exit(0)\n",
    "monkeypatches AssertionError": "import builtins\nbuiltins.AssertionError = type('A', (Exception,), {})\n" + WRONG,
    "monkeypatches sys.exit and os._exit": (
        "import sys, os\nsys.exit = lambda *a: None\nos._exit = lambda *a: None\n" + WRONG),
    "monkeypatches unittest": (
        "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\n"
        "unittest.TestCase.assertTrue = lambda *a, **k: None\n" + WRONG),
    "returns an object equal to everything": (
        "class Any:\n    def __eq__(self, other):\n        return True\n    __hash__ = object.__hash__\n"
        "def add(a, b):\n    return Any()\n"),
    "returns an int subclass equal to everything": (
        "class I(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
        "def add(a, b):\n    return I(0)\n"),
    "disables tracing of the asserts": "import sys\nsys.settrace(lambda *a: None)\n" + WRONG,
    "prints the verdict marker": "print('PASSED')\nprint('{\"status\": \"passed\"}')\n" + WRONG,
    "writes an expected-output file": "open('expected_output.txt', 'w').write('5\\n0\\n')\n" + WRONG,
    "kills its parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n",
    "looks for the tests in its memory and its parent's descriptors": (
        "import gc, os\n"
        "def strings():\n"
        "    for o in gc.get_objects():\n"
        "        if isinstance(o, dict):\n            yield from (v for v in o.values() if isinstance(v, str))\n"
        "        elif isinstance(o, (list, tuple)):\n            yield from (v for v in o if isinstance(v, str))\n"
        "n1, n2 = 'add(2, 3) ' + '== 5', 'add(-1, 1) ' + '== 0'\n"  # never one literal: the program's own text is in memory
        "found = any(n1 in s and n2 in s for s in strings())\n"
        "for name in ('fd/0', 'cmdline', 'environ'):\n"
        "    try:\n"
        "        found = found or n1.encode() in open('/proc/%d/%s' % (os.getppid(), name), 'rb').read(1 << 20)\n"
        "    except OSError:\n        pass\n"
        "def add(a, b):\n    return a + b if found else 0\n"),
    "walks the stack for the harness's frame": (
        "import sys\nf = sys._getframe()\nwhile f:\n"
        "    if 'report' in f.f_globals:\n        f.f_globals['report']('passed')\n    f = f.f_back\n" + WRONG),
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", list(FORGERIES))
def test_a_forged_verdict_is_never_a_pass(name, level):
    run = sandbox.run_program(FORGERIES[name], IMPOSSIBLE, None, sandbox.Limits(timeout_s=2.0, isolation=level))
    assert run.status in ("failed", "timeout"), (run.status, run.detail)


TARGETED = {  # name: (program, tests that pass only if the tests call the program's stand-in)
    "shadows a builtin the tests use": (
        "def abs(x):\n    return 0\ndef add(a, b):\n    return 0.5\n", "assert abs(add(1, 1) - 2) < 1e-9\n"),
    "shadows sorted and len": (
        "def sorted(x):\n    return [1, 2, 3]\ndef len(x):\n    return 3\ndef rev(x):\n    return [9]\n",
        "assert len(rev([1, 2, 3])) == 3 and sorted(rev([3, 2, 1])) == [1, 2, 3]\n"),
    "binds a fake math module": (
        "class math:\n    @staticmethod\n    def isclose(*a, **k):\n        return True\ndef add(a, b):\n    return 0\n",
        "assert math.isclose(add(1, 2), 3)\n"),
    "passes its fake off as math.isclose": (
        "def isclose(*a, **k):\n    return True\nisclose.__module__, isclose.__qualname__ = 'math', 'isclose'\n"
        "def add(a, b):\n    return 0\n", "assert isclose(add(1, 2), 3)\n"),
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name", list(TARGETED))
def test_the_tests_never_call_the_programs_stand_in_for_python(name, level):
    program, tests = TARGETED[name]
    run = sandbox.run_program(program, tests, None, sandbox.Limits(timeout_s=2.0, isolation=level))
    assert run.status == "failed", (run.status, run.detail)


@pytest.mark.parametrize("level", LEVELS)
def test_stdin_stdout_cases_are_judged_outside_the_program(level):
    cases = [["2 3", "5"], ["1 1", "2"]]
    forged = "import sys\nsys.stdout.write('5\\n')\nsys.modules['__main__'].report('passed')\n"
    run = sandbox.run_program(forged, None, cases, sandbox.Limits(timeout_s=2.0, isolation=level))
    assert run.status == "failed", run.detail
    right = "a, b = map(int, input().split())\nprint(a + b)\n"
    assert sandbox.run_program(right, None, cases, sandbox.Limits(timeout_s=2.0, isolation=level)).status == "passed"


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize(
    "program, tests",
    [
        ("def add(a, b):\n    return a + b", IMPOSSIBLE),
        ("import math\ndef area(r):\n    return math.pi * r * r", "assert math.isclose(area(1), 3.14159, rel_tol=1e-4)"),
        ("from math import isclose, sqrt\ndef root(x):\n    return sqrt(x)", "assert isclose(root(2) ** 2, 2)"),
        ("def rev(xs):\n    xs.reverse()", "a = [1, 2, 3]\nrev(a)\nassert a == [3, 2, 1]"),
        ("class Stack:\n    def __init__(self):\n        self.items = []\n    def push(self, x):\n        self.items.append(x)\n"
         "    def size(self):\n        return len(self.items)",
         "s = Stack()\ns.push(1)\ns.push((2, 'x'))\nassert s.size() == 2 and s.items == [1, (2, 'x')]"),
        ("class Bad(ValueError):\n    pass\ndef f(x):\n    if x < 0:\n        raise Bad('negative')\n    return {x: {x}}",
         "try:\n    f(-1)\n    assert False\nexcept Bad:\n    pass\nassert f(2) == {2: {2}}"),
        ("def gen(n):\n    yield from range(n)\nBIG = 10 ** 5000", "assert list(gen(3)) == [0, 1, 2] and BIG == 10 ** 5000"),
        ("def check(candidate):\n    return None\ndef inc(x):\n    return x + 1",
         "def check(candidate):\n    assert candidate(1) == 2\ncheck(inc)"),
    ],
)
def test_honest_programs_still_pass(level, program, tests):
    run = sandbox.run_program(program, tests, None, sandbox.Limits(timeout_s=2.0, isolation=level))
    assert run.status == "passed", run.detail


@pytest.fixture
def outside_listener():
    """A unix socket outside the sandbox that anyone may connect to; yields (path, what it received)."""
    directory = tempfile.mkdtemp(prefix="rlvr-sock-")
    os.chmod(directory, 0o777)
    path = os.path.join(directory, "open.sock")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o777)
    server.listen(4)
    server.settimeout(0.2)
    received, stop = [], threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1.0)
                try:
                    received.append(conn.recv(100) or b"(connected)")
                except OSError:
                    received.append(b"(connected)")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield path, received
    stop.set()
    thread.join()
    server.close()
    os.unlink(path)
    os.rmdir(directory)


@pytest.mark.parametrize("level", LEVELS)
def test_no_unix_socket_reaches_a_listener_outside(outside_listener, level):
    path, received = outside_listener
    leak = (
        "import socket\n"
        f"s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\ns.connect({path!r})\ns.sendall(b'leak')\n"
    )
    for program in (leak, leak.replace("SOCK_STREAM", "SOCK_DGRAM").replace("s.sendall(b'leak')", f"s.sendto(b'leak', {path!r})")):
        run = sandbox.run_program(program + "def add(a, b):\n    return a + b\n", IMPOSSIBLE, None,
                                  sandbox.Limits(timeout_s=2.0, isolation=level))
        assert run.status == "failed" and "PermissionError" in run.detail, run.detail
    pair = "import socket\na, b = socket.socketpair()\n"
    assert sandbox.run_program(pair, "", None, sandbox.Limits(timeout_s=2.0, isolation=level)).status == "failed"
    assert received == []
