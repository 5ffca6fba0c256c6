"""Checks per second of the integer, math and code verifiers: in-process, one worker, and a pool.

    python bench/bench_verify.py                 # 5000 integer, 2000 math, 1000 code samples
    python bench/bench_verify.py --scale 0.2     # a quicker look

Samples are made up to look like what the trainer sees: arithmetic responses (right, wrong, junk),
math answers in LaTeX that need sympy (fractions, roots, sets, intervals, polynomials) and plain-number
GSM8K answers (decided in-process, without sympy), and short Python programs with assert tests (half
right). Worker start-up is excluded (each pool is warmed first); everything else is included: the
pipes, the JSON, and for code a fresh sandboxed interpreter per check. Not a test: numbers depend on
the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from rlvr_cli.rewards import (
    Check,
    VerifierPool,
    run_checks,
    sandbox,
)


def integer_checks(n: int, rng: random.Random) -> list[Check]:
    out = []
    for _ in range(n):
        a, b = rng.randrange(1000), rng.randrange(1000)
        answer = a + b + rng.choice((0, 0, 0, 1, -1))
        response = rng.choice(("#{}", "{}{}{}#{}", "#{}={}", "junk{}")).format(answer, answer, answer, answer)
        out.append(Check("integer", response, str(a + b), {"marker": "#"}))
    return out


LATEX = [  # (prediction, gold) templates over k
    ("\\frac{{{k}}}{{{d}}}", "{r}"),
    ("\\sqrt{{{s}}}", "{q}\\sqrt{{{k}}}"),
    ("\\{{{k}, {k1}\\}}", "\\{{{k1}, {k}\\}}"),
    ("[{k}, {k1})", "[{k},{k1})"),
    ("x^2 + {t}x + {k2}", "(x+{k})^2"),
    ("{k}\\pi", "\\pi \\cdot {k}"),
]


def math_checks(n: int, rng: random.Random) -> list[Check]:
    out = []
    for _ in range(n):
        k = rng.randrange(1, 50)
        d = rng.choice((2, 4, 5, 8))
        pred, gold = rng.choice(LATEX)
        values = {"k": k, "k1": k + 1, "d": d, "r": k / d, "s": k * 4, "q": 2, "t": 2 * k, "k2": k * k}
        if rng.random() < 0.3:
            values["k1"] = k + 2  # some wrong answers
        out.append(Check("math", "... so \\boxed{" + pred.format(**values) + "}", gold.format(**values), {}, 10.0))
    return out


def gsm8k_checks(n: int, rng: random.Random) -> list[Check]:
    return [Check("math", f"... #### {x + rng.choice((0, 0, 1))}", str(x), {}, 10.0) for x in (rng.randrange(10**5) for _ in range(n))]


def code_checks(n: int, rng: random.Random, limit_s: float) -> list[Check]:
    tests = "assert f(2) == 4\nassert f(3) == 9\nassert f(-1) == 1\n"
    out = []
    for i in range(n):
        body = rng.choice(("return x * x", "return x ** 2", "return x + x", "return abs(x) * abs(x)"))
        response = f"```python\n# sample {i}\ndef f(x):\n    {body}\n```"
        out.append(Check("code", response, tests, {"timeout_s": limit_s}, limit_s + 3))
    return out


def rate(fn, checks) -> float:
    start = time.perf_counter()
    outcomes = fn(checks)
    elapsed = time.perf_counter() - start
    assert len(outcomes) == len(checks)
    return len(checks) / elapsed


def through_pool(checks, workers: int, preload: tuple[str, ...]) -> float:
    with VerifierPool(workers=workers, preload=preload) as pool:
        pool.run(checks[: 2 * workers])  # start and warm every worker
        return rate(pool.run, checks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the sample counts")
    parser.add_argument("--workers", type=int, default=0, help="pool size (0: one per core, at most 4)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    from rlvr_cli.rewards.pool import default_workers

    pool_size = default_workers(args.workers)
    n = lambda base: max(20, int(base * args.scale))

    print(f"machine: {os.cpu_count()} CPUs; pool: {pool_size} workers; code sandbox: {sandbox.isolation_level()[0]}")
    rows = []
    ints = integer_checks(n(5000), rng)
    rows.append(("integer (arithmetic, marker)", len(ints), rate(lambda c: run_checks(c, None), ints),
                 through_pool(ints, 1, ()), through_pool(ints, pool_size, ())))
    plain = gsm8k_checks(n(5000), rng)
    rows.append(("math, plain numbers (fast path)", len(plain), rate(lambda c: run_checks(c, None), plain),
                 through_pool(plain, 1, ("math",)), through_pool(plain, pool_size, ("math",))))
    latex = math_checks(n(2000), rng)
    rows.append(("math, LaTeX (sympy)", len(latex), None,
                 through_pool(latex, 1, ("math",)), through_pool(latex, pool_size, ("math",))))
    code = code_checks(n(1000), rng, 3.0)
    rows.append(("code (sandboxed python)", len(code), None,
                 through_pool(code, 1, ("code",)), through_pool(code, pool_size, ("code",))))

    fmt = lambda x: "-" if x is None else f"{x:,.0f}"
    print(f"{'verifier':34} {'samples':>8} {'in-process/s':>13} {'1 worker/s':>11} {f'{pool_size} workers/s':>12}")
    for name, count, here, one, many in rows:
        print(f"{name:34} {count:>8} {fmt(here):>13} {fmt(one):>11} {fmt(many):>12}")
    print("in-process: what the scorer does for integer/countdown and plain-number math (no pool round trip);"
          " the pool columns send every check to a worker (the pool is what math and code use).")


if __name__ == "__main__":
    main()
