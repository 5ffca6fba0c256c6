"""A reasoning-gym answer never runs as code (issue 28).

Eleven reasoning-gym scorers read text with ``eval`` or sympy's ``parse_expr``. rlvr replaces those
calls with readers that evaluate nothing (rlvr_cli/rewards/safe_eval.py). Checked here:

- the list of such scorers is complete: every registered scorer is traced for ``eval``/``exec``/
  ``compile``/``parse_expr``/``sympify`` called from reasoning-gym's code (tests/rewards/rg/trace_scorers.py);
- hostile answers, through the verifier pool as training runs them, for every such scorer: writing a
  file outside the scratch directory, reading a secret from the environment, opening a socket, leaving a
  process running, killing the parent, and patching the scorer so that a later wrong answer scores 1.
  None has an effect (and the same kind of payload, given to reasoning-gym's own scorers, does);
- honest answers (the generators' own answers, other items' answers, the Python-list and spacing
  variants the scorers give partial credit for) score exactly what reasoning-gym's own scorer gives.
"""

from __future__ import annotations

import ast
import json
import os
import random
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytest.importorskip("reasoning_gym", reason="the `reasoning-gym` extra is not installed")

from rlvr_cli.rewards import reasoning_gym as rg_verifier  # noqa: E402
from rlvr_cli.rewards import safe_eval  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HELPERS = Path(__file__).resolve().parent / "rg"


def _entries(dataset: str, n: int, seed: int = 0) -> list[dict]:
    import reasoning_gym

    ds = reasoning_gym.create_dataset(dataset, size=n, seed=seed)
    # as the task sends them: through JSON
    return [json.loads(json.dumps(ds[i], default=str)) for i in range(n)]


def _reference(dataset: str, entry: dict) -> str:
    return json.dumps({"dataset": dataset, "config": {}, "entry": entry, "threshold": 1.0}, default=str)


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


# --- the list of evaluating scorers is complete -------------------------------------------------------
def test_every_scorer_that_evaluates_text_gets_a_safe_reader(tmp_path):
    out = tmp_path / "trace.json"
    subprocess.run([sys.executable, str(HELPERS / "trace_scorers.py"), str(out)], check=True, env=_env(),
                   stdout=subprocess.DEVNULL, timeout=600)
    traced = json.loads(out.read_text())
    assert set(traced) == set(rg_verifier.EVALUATING), traced
    for dataset, sites in traced.items():
        name = rg_verifier.EVALUATING[dataset][0]
        called = {s.split()[0] for s in sites}
        # eval is replaced by name; parse_expr by name or through the module's sympy (sp.parse_expr)
        assert called == ({"eval"} if name == "eval" else {"parse_expr"}), (dataset, sites)


def test_install_refuses_a_scorer_module_it_does_not_recognise(monkeypatch):
    import reasoning_gym.games.countdown as countdown

    monkeypatch.setattr(rg_verifier, "_installed", False)
    monkeypatch.setattr(countdown, "parse_expr", lambda s: 0)  # a reasoning-gym that changed its reader
    with pytest.raises(RuntimeError, match="countdown.*will not score it unguarded"):
        rg_verifier.install_safe_readers()


# --- the readers ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["__import__('os').system('true')", "[open('/etc/passwd').read()]", "[1+1]",
                                  "(lambda: 1)()", "().__class__", "x", "[0]*3"])
def test_literal_refuses_anything_that_computes(text):
    with pytest.raises((ValueError, SyntaxError)):
        safe_eval.literal(text)


def test_literal_reads_literals():
    assert safe_eval.literal(" [['Q', '_'], ['_', 'Q']] ") == [["Q", "_"], ["_", "Q"]]
    assert safe_eval.literal("(1, -2.5, 'a', None, True)") == (1, -2.5, "a", None, True)


def test_int_arithmetic():
    assert safe_eval.int_arithmetic("((0x9658 * 0xe543) - (0x24a7 >> 0x1)) << 0x3") == ((0x9658 * 0xE543) - (0x24A7 >> 1)) << 3
    for text in ["1 << (1 << 40)", "(1 << 60000) * (1 << 60000)", "1 >> -1", "2 ** 3", "1.5 + 1", "f(1)", "'a'"]:
        with pytest.raises(ValueError):
            safe_eval.int_arithmetic(text)


@pytest.mark.parametrize("text", [
    "__import__('os').system('true')", "open('/tmp/x', 'w')", "exec('1')", "x.func", "x[0]", "'x'",
    "lambda x: x", "sympify('x')", "lambdify(x, x)", "var(x)", "preview(x)", "expand(x)", "x if x else x",
    "x == 1", "getattr(x, 'y')", "sin(x, evaluate=False)", "f(*x)", "_x", "S", "[x]", "f'{x}'",
])
def test_sympy_gate_refuses(text):
    with pytest.raises((ValueError, SyntaxError)):
        safe_eval.check_sympy_text(text, ("x",))


@pytest.mark.parametrize("text", [
    "6*(98 - 54) - 34 - 66", "-5*X**9 - 2*X**6/3 + 4*X**3 + C", "-exp(x)*sin(x) + exp(x)*cos(x) + C",
    "sqrt(x) + log(Abs(x)) + atan(x)/2 + pi + E + I*oo", "x^2", "f(x) + abs(x) + Rational(1, 3) + max(x, 1)", "1e-3 + 2j",
])
def test_sympy_gate_lets_arithmetic_through(text):
    assert safe_eval.check_sympy_text(text, ("x", "X", "C")) == text


# --- hostile answers through the verifier pool -------------------------------------------------------------
# The text each scorer evaluates. For number_sorting and bitwise_arithmetic the scorer evaluates the
# reference (the answer is read by json.loads / int()), so the payload goes into the reference there.
IN_REFERENCE = {"number_sorting": ("answer",), "bitwise_arithmetic": ("metadata", "problem")}


def _payloads(scratch: Path, port: int, token: str) -> dict[str, str]:
    """Python statements, each observable from outside if it runs; wrapped as ``exec(...)``, which the
    original ``eval`` and ``parse_expr`` both run."""
    return {
        "write a file outside scratch": f"open({str(scratch / 'written')!r}, 'w').write('x')",
        "read a secret from the environment": (
            f"import os\nopen({str(scratch / 'secret')!r}, 'w').write(os.environ.get('RLVR_TEST_SECRET', 'none'))"),
        "open a socket": f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2).sendall(b'x')",
        "leave a process running": (
            "import subprocess, sys\n"
            f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)  # {token}'], start_new_session=True)"),
        "kill the parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)",
        "patch the scorer so that later answers score 1": (
            "import reasoning_gym.factory as f\n"
            "for cls, _cfg in [v[:2] for v in f.DATASETS.values()]:\n"
            "    cls.score_answer = lambda self, answer, entry: 1.0"),
    }


def _hostile(statement: str) -> str:
    return f"exec({statement!r})"


def _with_payload(dataset: str, entry: dict, text: str) -> tuple[str, dict]:
    """(answer, entry) with ``text`` where ``dataset``'s scorer evaluates it."""
    if dataset not in IN_REFERENCE:
        return text, entry
    entry = json.loads(json.dumps(entry))
    *path, last = IN_REFERENCE[dataset]
    node = entry
    for key in path:
        node = node[key]
    node[last] = text
    if dataset == "number_sorting":
        return json.dumps(entry["metadata"]["sorted_numbers"]), entry
    return "0x0", entry


def _processes_with(token: str) -> list[int]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if token.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def _run_in_pool(cases: list[tuple[str, str]], tmp_path: Path, secret: str) -> tuple[int, list[dict], str]:
    """Outcomes of (response, reference) pairs checked by one verifier worker in a child process (so
    that a payload that kills its parent kills the child, not pytest)."""
    cases_path, out_path = tmp_path / "cases.json", tmp_path / "outcomes.json"
    cases_path.write_text(json.dumps(cases))
    driver = (
        "import json, sys\n"
        "from rlvr_cli.rewards.pool import Check, VerifierPool\n"
        "cases = json.load(open(sys.argv[1]))\n"
        "with VerifierPool(workers=1, preload=('reasoning_gym',)) as pool:\n"
        "    out = pool.run([Check('reasoning_gym', r, ref, timeout_s=20.0) for r, ref in cases])\n"
        "json.dump([o.__dict__ for o in out], open(sys.argv[2], 'w'))\n"
    )
    env = {**_env(), "RLVR_TEST_SECRET": secret}
    proc = subprocess.run([sys.executable, "-c", driver, str(cases_path), str(out_path)], env=env,
                          capture_output=True, text=True, timeout=600)
    outcomes = json.loads(out_path.read_text()) if out_path.exists() else []
    return proc.returncode, outcomes, proc.stderr


def test_hostile_answers_have_no_effect(tmp_path):
    scratch = tmp_path / "outside"
    scratch.mkdir()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    token, secret = uuid.uuid4().hex, uuid.uuid4().hex
    payloads = _payloads(scratch, port, token)
    cases, labels = [], []
    for dataset in rg_verifier.EVALUATING:
        right, other = _entries(dataset, 2)
        for label, statement in payloads.items():
            answer, entry = _with_payload(dataset, right, _hostile(statement))
            cases.append((f"<answer>{answer}</answer>", _reference(dataset, entry)))
            labels.append((dataset, label))
        # a wrong answer after every attack: still wrong (the scorer was not patched)
        wrong = "1 + 2 + 3 + 4" if dataset == "puzzle24" else other["answer"]  # every puzzle24 answer makes 24
        cases.append((f"<answer>{wrong}</answer>", _reference(dataset, right)))
        labels.append((dataset, "wrong answer after the attacks"))
    try:
        code, outcomes, stderr = _run_in_pool(cases, tmp_path, secret)
        try:
            conn, _ = listener.accept()
            conn.close()
            connected = True
        except (TimeoutError, socket.timeout):
            connected = False
    finally:
        listener.close()
    survivors = _processes_with(token)
    for pid in survivors:
        os.kill(pid, 9)
    assert code == 0, stderr[-2000:]
    assert len(outcomes) == len(cases)
    assert not list(scratch.iterdir())
    assert not connected
    assert not survivors
    for (dataset, label), out in zip(labels, outcomes):
        assert out["outcome"] in ("incorrect", "error"), (dataset, label, out)
        assert out["reward"] == 0.0
        assert secret not in json.dumps(out)
    assert not any(secret in line for line in stderr.splitlines())


def _raw_scores(cases: list[tuple[str, dict, str]], tmp_path: Path) -> list[float | None]:
    cases_path, out_path = tmp_path / "raw_cases.json", tmp_path / "raw_scores.json"
    cases_path.write_text(json.dumps(cases))
    subprocess.run([sys.executable, str(HELPERS / "raw_scores.py"), str(cases_path), str(out_path)],
                   check=True, env=_env(), stdout=subprocess.DEVNULL, timeout=600)
    return json.loads(out_path.read_text())


# --- honest answers score as before -------------------------------------------------------------------------
def _honest_variants(dataset: str, entry: dict, other: dict) -> list[str]:
    """The generator's answer, another item's answer, and the written forms the scorer reads with
    eval/parse_expr (Python lists, spacing, ``^``, a missing constant), all harmless."""
    a, meta = str(entry["answer"]), entry["metadata"]
    out = [a, str(other["answer"]), "", "  ", a + "\n", " " + a, "abc", "1/0", "[1, 2]", "2x", "x!", "((1))"]
    if dataset in ("binary_matrix", "spiral_matrix"):
        solution = meta["solution"] if isinstance(meta["solution"], list) else ast.literal_eval(meta["solution"])
        out += [str(solution), json.dumps(solution), str(solution).replace("1", "2", 1), str(tuple(solution)), "[1+1, 2]"]
        if dataset == "spiral_matrix":
            out += [str([int(x) for x in a.split()]), str([int(x) for x in a.split()][::-1])]
    elif dataset == "string_insertion":
        out += [str(list(a)), repr(a), str(list(a[::-1])), str(tuple(a))]
    elif dataset == "n_queens":
        for board in meta["valid_answers"][:2]:
            out += [str([row.split(" ") for row in board.split("\n")]), str([row.split(" ") for row in board.split("\n")][::-1])]
    elif dataset == "number_sorting":
        nums = [float(x) for x in meta["sorted_numbers"]]
        out += [json.dumps(meta["sorted_numbers"]), json.dumps(nums), json.dumps(nums[::-1]), str(meta["sorted_numbers"])]
    elif dataset == "bitwise_arithmetic":
        value = int(a, 16)
        out += [str(value), hex(value + 1), bin(value), "-" + a]
    elif dataset in ("countdown", "puzzle24"):
        out += [a.replace(" ", ""), "(" + a + ")", a + " = 24", a.replace("*", "x"), a.replace("1", "2", 1), a + " + 0"]
        if dataset == "countdown":
            out += [str(meta["expression"]), a.replace("*", "**", 1)]
    elif dataset == "polynomial_multiplication":
        out += [a.replace("**", "^"), str(meta["polynomial_expr"]), a.replace(" ", ""), "(" + a + ")*1"]
    elif dataset in ("simple_integration", "intermediate_integration"):
        out = [a, str(other["answer"]), "", "x!", a.replace(" + C", ""), a.replace("C", "D"), a.replace("**", "^"),
               str(meta["integrand"]), "log(abs(" + meta["variable"] + "))"]
    return out


SLOW = {"simple_integration", "intermediate_integration"}  # sympy.simplify per answer: fewer items


def test_honest_answers_score_as_reasoning_gyms_own_scorer(tmp_path):
    """The same verdicts as reasoning-gym's own scorers, on generated items and the variants above."""
    cases = []
    for dataset in rg_verifier.EVALUATING:
        entries = _entries(dataset, 2 if dataset in SLOW else 6, seed=3)
        for i, entry in enumerate(entries):
            for answer in _honest_variants(dataset, entry, entries[(i + 1) % len(entries)]):
                cases.append((dataset, entry, answer))
    # the one kind of answer whose score changes, on purpose: Python code that computes the list
    entry = _entries("string_insertion", 1)[0]
    code_answer = ("string_insertion", entry, f"list({entry['answer']!r})")
    # and the proof that the hostile test above can fail: a file-writing payload, given to reasoning-gym's
    # own scorers (eval and parse_expr), writes its file
    written = tmp_path / "written-by-the-original-scorers"
    written.mkdir()
    payloads = [(d, _entries(d, 1)[0], _hostile(f"open({str(written / d)!r}, 'w').write('x')"))
                for d in ("string_insertion", "countdown", "simple_integration")]
    raw = _raw_scores(cases + [code_answer] + payloads, tmp_path)
    before, code_before = raw[:len(cases)], raw[len(cases)]
    assert code_before == 0.1
    assert sorted(p.name for p in written.iterdir()) == ["countdown", "simple_integration", "string_insertion"]
    rg_verifier.install_safe_readers()
    after = []
    for dataset, entry, answer in cases:
        ds = rg_verifier.scoring_dataset(dataset, "{}")
        try:
            after.append(float(ds.score_answer(answer, entry)))
        except Exception:  # noqa: BLE001
            after.append(None)
    changed = [(d, a, b, c) for (d, _e, a), b, c in zip(cases, before, after) if b != c]
    assert not changed, changed[:40]
    assert rg_verifier.scoring_dataset("string_insertion", "{}").score_answer(code_answer[2], entry) == 0.0
    # the variants reach the readers: full and partial credit both occur for every dataset
    by_dataset: dict[str, set] = {}
    for (dataset, _e, _a), score in zip(cases, after):
        by_dataset.setdefault(dataset, set()).add(score)
    for dataset, scores in by_dataset.items():
        assert 1.0 in scores and len(scores) >= 2, (dataset, scores)
    partial = {"binary_matrix": 0.1, "spiral_matrix": 0.1, "string_insertion": 0.1, "n_queens": 0.5, "countdown": 0.05}
    for dataset, score in partial.items():
        assert score in by_dataset[dataset], (dataset, by_dataset[dataset])


def test_composite_dataset_scorers_are_guarded(tmp_path):
    """A composite dataset scores each item with its source dataset's scorer: guarded the same way
    (rlvr cannot build one from a recipe, whose configuration is JSON, but reasoning-gym can)."""
    import reasoning_gym
    from reasoning_gym.composite import DatasetSpec

    rg_verifier.install_safe_readers()
    spec = [DatasetSpec("string_insertion", 1, {}), DatasetSpec("countdown", 1, {})]
    ds = reasoning_gym.create_dataset("composite", size=4, seed=0, datasets=spec)
    target = tmp_path / "written"
    for entry in (ds[i] for i in range(4)):
        assert ds.score_answer(_hostile(f"open({str(target)!r}, 'w').write('x')"), entry) < 1.0
        assert ds.score_answer(str(entry["answer"]), entry) == 1.0
    assert not target.exists()


def test_random_garbage_never_raises_out_of_the_readers():
    rng = random.Random(0)
    alphabet = "()[]{},.'\"+-*/^!=<>_ abcxyzQ0123456789\\\n\t@#$%&|~`:;"
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        for reader in (safe_eval.literal, safe_eval.int_arithmetic, lambda t: safe_eval.check_sympy_text(t, ("x",))):
            try:
                reader(text)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                pass
