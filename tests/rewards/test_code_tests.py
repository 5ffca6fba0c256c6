"""Verifier `code`: programs run against tests in the sandbox; each hostile program is contained and
scored right. The cases run as one parallel batch through the worker pool, with a 1 s program limit."""

import json
import os
import uuid

import pytest

from rlvr_cli.rewards import Check, VerifierPool, sandbox, verify
from rlvr_cli.rewards.code_tests import program_text

LIMIT_S = 1.0
SECRET = "RLVR_TEST_SECRET"
ESCAPE = f"/tmp/rlvr-escape-{uuid.uuid4().hex}"
TESTS = "assert add(2, 3) == 5\nassert add(-1, 1) == 0\n"
ISOLATED = sandbox.isolation_level()[0] == sandbox.ISOLATED


def fenced(code: str) -> str:
    return f"Here is my solution:\n```python\n{code}\n```\nDone."


CASES = {  # name: (response, reference, expected outcome)
    "passing": (fenced("def add(a, b):\n    return a + b"), TESTS, "correct"),
    "failing": (fenced("def add(a, b):\n    return a - b"), TESTS, "incorrect"),
    "no fence": ("def add(a, b):\n    return a + b", TESTS, "correct"),
    "infinite loop": (fenced("while True:\n    pass"), TESTS, "timeout"),
    "sleeping forever": (fenced("import time\ntime.sleep(1000)"), TESTS, "timeout"),
    "memory hog": (fenced("hog = bytearray(8 * 1024**3)\ndef add(a, b):\n    return a + b"), TESTS, "incorrect"),
    "writes outside its directory": (
        fenced(f"open({ESCAPE!r}, 'w').write('escaped')\ndef add(a, b):\n    return a + b"), TESTS, "incorrect"),
    "writes inside its directory": (
        fenced("open('scratch.txt', 'w').write('ok')\ndef add(a, b):\n    return a + b"), TESTS, "correct"),
    "reads an environment secret": (
        fenced(f"import os\ndef add(a, b):\n    return a + b if os.environ.get({SECRET!r}) else None"), TESTS, "incorrect"),
    "os._exit(0) before the tests": (fenced("import os\nos._exit(0)"), TESTS, "incorrect"),
    "sys.exit(0) before the tests": (fenced("import sys\nsys.exit(0)"), TESTS, "incorrect"),
    "prints a fake PASSED": (
        fenced("print('PASSED')\nprint('All tests passed!')\ndef add(a, b):\n    return 0"), TESTS, "incorrect"),
    "syntax error": (fenced("def add(a, b) return a + b"), TESTS, "unparseable"),
    "NUL byte": (fenced("def add(a, b):\n    return a + b\x00"), TESTS, "unparseable"),
    "no program": ("```python\n```", TESTS, "unparseable"),
    "stdin/stdout, right": (fenced("a, b = map(int, input().split())\nprint(a + b)"),
                            json.dumps({"inputs": ["2 3", "10 -4\n"], "outputs": ["5", "6\n"]}), "correct"),
    "stdin/stdout, wrong": (fenced("a, b = map(int, input().split())\nprint(a * b)"),
                            json.dumps({"inputs": ["2 3"], "outputs": ["5"]}), "incorrect"),
    "tests that do not compile": (fenced("x = 1"), "assert x ==", "error"),
}
ISOLATED_CASES = {  # contained only with the private user id (see docs/sandbox.md): skipped without it
    "fork bomb": (fenced("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"), TESTS, "timeout"),
    "reads the parent's environment through /proc": (
        fenced(f"import os\nenv = open('/proc/%d/environ' % os.getppid(), 'rb').read()\n"
               f"def add(a, b):\n    return a + b if {SECRET!r}.encode() in env else None"), TESTS, "incorrect"),
    "kills every process it can": (fenced("import os, signal\nos.kill(-1, signal.SIGKILL)\ndef add(a, b):\n    return a + b"), TESTS, "correct"),
    "uses the network": (
        fenced("import socket\nsocket.create_connection(('127.0.0.1', 22), timeout=0.5)\ndef add(a, b):\n    return a + b"), TESTS, "incorrect"),
    "leaves a process behind in a new session": (
        fenced("import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(600)\ndef add(a, b):\n    return a + b"), TESTS, "correct"),
}


@pytest.fixture(scope="module")
def batch():
    """Every case, run once in parallel; (outcomes by name, sandbox uids seen)."""
    os.environ[SECRET] = "hunter2"  # the workers inherit it; the sandbox must not
    cases = dict(CASES, **(ISOLATED_CASES if ISOLATED else {}))
    options = {"timeout_s": LIMIT_S, "memory_mb": 256, "max_processes": 8}
    checks = [Check("code", r, ref, options, LIMIT_S + 3) for r, ref, _ in cases.values()]
    with VerifierPool(workers=2, preload=("code",)) as pool:
        outcomes = pool.run(checks)
    del os.environ[SECRET]
    return dict(zip(cases, outcomes))


@pytest.mark.parametrize("name", list(CASES))
def test_case(batch, name):
    assert batch[name].outcome == CASES[name][2], batch[name].detail


@pytest.mark.skipif(not ISOLATED, reason="needs root and namespaces: " + sandbox.isolation_level()[1])
@pytest.mark.parametrize("name", list(ISOLATED_CASES))
def test_isolated_case(batch, name):
    assert batch[name].outcome == ISOLATED_CASES[name][2], batch[name].detail


def test_nothing_escaped(batch):
    assert not os.path.exists(ESCAPE)
    if ISOLATED:
        # no live process of a sandbox user id survives (they are >= 2**20, real users far below);
        # killed ones may linger a moment as zombies until init reaps them
        leftovers = [p for p in os.listdir("/proc") if p.isdigit() and _uid(p) >= 2**20 and _state(p) not in ("Z", "?")]
        assert leftovers == []


def _uid(pid: str) -> int:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return -1


def _state(pid: str) -> str:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def test_details_say_what_happened(batch):
    assert "MemoryError" in batch["memory hog"].detail
    assert "before the tests finished" in batch["os._exit(0) before the tests"].detail
    assert "AssertionError" in batch["prints a fake PASSED"].detail


def test_program_extraction():
    assert program_text("```python\nx = 1\n```") == "x = 1\n"
    assert program_text("a\n```py\nx = 1\n```\nb\n```\ny = 2\n```\nc") == "\ny = 2\n"  # the last block
    assert program_text("```python\nx = 1\n```\n```python\ny = 2") == "y = 2"  # a block cut by the length limit
    assert program_text("x = 1") == "x = 1"
    assert program_text("``````") is None


def test_equal_programs_give_equal_answers():
    a = verify("code", fenced("def add(a, b):\n    return a + b"), TESTS, timeout_s=LIMIT_S)
    b = verify("code", "```\ndef add(a, b):\n    return a + b\n```", TESTS, timeout_s=LIMIT_S)
    assert a.outcome == b.outcome == "correct" and a.answer == b.answer


def test_bad_reference_is_an_error():
    assert verify("code", "x = 1", json.dumps({"inputs": [1], "outputs": []})).outcome == "error"


@pytest.mark.parametrize(
    "program, tests, status",
    [
        ("def add(a, b):\n    return a + b", TESTS, "passed"),
        ("def add(a, b):\n    return a", TESTS, "failed"),
        ("print('PASSED')\nimport os\nos._exit(0)", TESTS, "failed"),
        (f"import os\nsecret = os.environ.get({SECRET!r})", "assert secret is None", "passed"),
        ("import os\ncwd, home = os.getcwd(), os.environ['HOME']", "assert cwd == home and 'rlvr-code-' in cwd", "passed"),
        ("def f(:", "", "syntax"),
    ],
)
def test_the_basic_layer_alone(monkeypatch, program, tests, status):
    """What every run gets, also without root: limits, minimal environment, private directory, nonce."""
    monkeypatch.setenv(SECRET, "hunter2")
    run = sandbox.run_program(program, tests, None, sandbox.Limits(timeout_s=LIMIT_S, isolation="basic"))
    assert (run.status, run.isolation) == (status, sandbox.BASIC), run.detail
