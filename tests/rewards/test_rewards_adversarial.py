"""Hostile model output: every check returns within its time limit with a non-correct outcome.

Integer and countdown checks run in-process (bounded by construction); math checks go through the worker
pool with a short hard limit, in one parallel batch.
"""

import json
import threading
import time

import pytest

from rlvr_cli.rewards import Check, VerifierPool, run_checks, verify

LIMIT_S = 1.5
SLACK_S = 1.0  # the pool notices an expired deadline within milliseconds; this is for a loaded machine

ADVERSARIAL = {
    "power tower": "9**9**9**9",
    "power tower, LaTeX": "\\boxed{9^{9^{9^{9}}}}",
    "10,000 nested parentheses": "(" * 10_000 + "1" + ")" * 10_000,
    "10,000 nested parentheses, boxed": "\\boxed{" + "(" * 10_000 + "1" + ")" * 10_000 + "}",
    "300 nested parentheses, boxed (slow to parse)": "\\boxed{" + "(" * 300 + "1" + ")" * 300 + "}",
    "1 MB of text": "blah " * 200_000,
    "1 MB of digits": "7" * 1_000_000,
    "1 MB inside a box": "\\boxed{" + "x" * 1_000_000 + "}",
    "a sum sympy would try to do": "\\boxed{\\sum_{n=1}^{10^{12}} n^{n}}",
    "a huge exact power": "\\boxed{10^{10^{10}}}",
    "a huge factorial": "\\boxed{(10^{10})!}",
    "NUL bytes": "#\x003\x00 \\boxed{3\x00}",
    "invalid UTF-8": b"#\xff3 \\boxed{\xfe3}".decode("utf-8", "surrogateescape"),
    "unbalanced braces": "\\boxed{" + "{" * 5000,
}
GOLD = "3"


@pytest.fixture(scope="module")
def pool():
    with VerifierPool(workers=2, preload=("math",)) as p:
        p.run([Check("math", "\\boxed{1}", "1")] * 2)  # both workers started and warm
        yield p


@pytest.mark.parametrize("verifier", ["integer", "countdown"])
def test_in_process_verifiers_are_fast_on_hostile_input(verifier):
    ref = GOLD if verifier == "integer" else json.dumps({"numbers": [1, 2], "target": 3})
    for name, response in ADVERSARIAL.items():
        start = time.perf_counter()
        out = verify(verifier, response, ref, marker="#")
        assert time.perf_counter() - start < 0.5, name
        assert out.outcome != "correct", name


def test_math_checks_return_within_the_limit(pool):
    checks = [Check("math", response, GOLD, {}, LIMIT_S) for response in ADVERSARIAL.values()]
    start = time.monotonic()
    outcomes = pool.run(checks)
    elapsed = time.monotonic() - start
    for name, out, took in zip(ADVERSARIAL, outcomes, pool.last_durations):
        assert out.outcome != "correct", name
        assert took is not None and took <= LIMIT_S + SLACK_S, (name, took)
    # hung checks are killed and their workers replaced, in parallel: far less than one limit per check
    assert elapsed < len(checks) * LIMIT_S / 2
    assert any(o.outcome == "timeout" for o in outcomes)  # some really did hang and were stopped


def test_the_limit_holds_off_the_main_thread(pool):
    got = {}

    def score():
        got["out"] = pool.run([Check("math", ADVERSARIAL["power tower, LaTeX"], GOLD, {}, 1.0)])

    thread = threading.Thread(target=score)
    thread.start()
    thread.join(timeout=20)
    assert not thread.is_alive()
    assert got["out"][0].outcome == "timeout"


def test_math_verify_parsing_works_off_the_main_thread():
    # math-verify's own timeout uses signal.alarm and refuses to run in a thread; rlvr never uses it
    got = {}
    thread = threading.Thread(target=lambda: got.setdefault("out", verify("math", "\\boxed{\\frac12}", "0.5")))
    thread.start()
    thread.join(timeout=30)
    assert got["out"].outcome == "correct"


def test_run_checks_splits_fast_path_and_pool(pool):
    checks = [
        Check("integer", "#3", "3", {"marker": "#"}),
        Check("math", "#### 3", "3"),  # plain numbers: decided in-process
        Check("math", "\\boxed{\\frac{6}{2}}", "3", {}, LIMIT_S),  # LaTeX: in the pool
    ]
    assert [o.outcome for o in run_checks(checks, pool)] == ["correct"] * 3
    assert len(pool.last_durations) == 1  # only the LaTeX check went to a worker
    with pytest.raises(ValueError):
        run_checks(checks, None)
