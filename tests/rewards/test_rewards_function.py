"""A reward term from the user's own code (TRL's signature), run in the verifier worker pool: the values it
returns are the term's, and every way it can go wrong is an error naming the function and the prompt."""

from __future__ import annotations

import math
import textwrap

import numpy as np
import pytest

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.schema import RewardSpec
from rlvr_cli.rewards import ScoreItem, Scorer
from rlvr_cli.rewards.function import Call, FunctionFailed, check_signature, checked_values, invoke
from rlvr_cli.tasks import build_task

USER_CODE = '''
import time

def digit_credit(completions, answer, **kwargs):
    """Share of the gold answer's digits found, right-aligned, in the text after the last `#`."""
    out = []
    for text, gold in zip(completions, answer):
        got = text.rsplit("#", 1)[-1] if "#" in text else ""
        out.append(sum(a == b for a, b in zip(reversed(got), reversed(gold))) / len(gold))
    return out

def raises(completions, **kwargs):
    return [1 / 0 for _ in completions]

def short(completions, **kwargs):
    return [1.0] * (len(completions) - 1)

def nan(completions, **kwargs):
    return [float("nan")] * len(completions)

def text(completions, **kwargs):
    return ["1.0"] * len(completions)

def none(completions, **kwargs):
    return [None] * len(completions)

def scalar(completions, **kwargs):
    return 1.0

def slow(completions, **kwargs):
    time.sleep(30)
    return [0.0] * len(completions)

def no_kwargs(completions, answer):
    return [0.0] * len(completions)

def wants_column(completions, difficulty, **kwargs):
    return [0.0] * len(completions)

not_a_function = 3
'''


@pytest.fixture(scope="module")
def user_module(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "user_rewards.py"
    path.write_text(textwrap.dedent(USER_CODE))
    return path


@pytest.fixture(scope="module")
def arithmetic():
    return build_task("arithmetic")


def reward_spec(ref: str, **kw) -> RewardSpec:
    return RewardSpec.model_validate({"terms": [{"type": "task"}, {"type": "function", "function": ref, "weight": 0.5}],
                                      "workers": 1, **kw})


def items(problem, responses, step=3):
    return [ScoreItem(problem, r, i, step, completion_ids=[7] * (i + 1)) for i, r in enumerate(responses)]


# --- the return, checked without a worker ---------------------------------------------------------------
def test_checked_values_accepts_any_sequence_of_real_numbers():
    assert checked_values([1, 0.5, True], 3) == [1.0, 0.5, 1.0]
    assert checked_values(np.array([0.25, 1.0], dtype=np.float32), 2) == [0.25, 1.0]
    assert checked_values((np.float64(2.0),), 1) == [2.0]


@pytest.mark.parametrize("out, n, reason", [
    ([1.0], 2, "returned 1 values for 2 completions"),
    ([1.0, math.nan], 2, "returned nan for completion 1"),
    ([math.inf], 1, "returned inf for completion 0"),
    (["1.0"], 1, "returned a str ('1.0') for completion 0, not a number"),
    ([None, 1.0], 2, "returned None for completion 0"),
    (1.0, 1, "returned a float, not a list of 1 floats"),
    ("10", 2, "returned a str ('10'), not a list of 2 floats"),
    (None, 1, "returned None, not a list of 1 floats"),
    ([[1.0]], 1, "returned a list for completion 0, not a number"),
])
def test_checked_values_says_what_is_wrong(out, n, reason):
    with pytest.raises(FunctionFailed) as e:
        checked_values(out, n)
    assert str(e.value).startswith(reason), str(e.value)


def test_invoke_reports_the_exception_and_where_it_was_raised(user_module):
    from rlvr_cli.rewards.function import load_function

    fn = load_function(f"{user_module}:raises")
    with pytest.raises(FunctionFailed, match=r"raised ZeroDivisionError: division by zero \(at .*user_rewards.py:\d+\)"):
        invoke(fn, Call(["p"], ["c"], [[1]], {"answer": ["1"]}))


def test_signature_must_take_kwargs_and_only_passed_names(user_module):
    from rlvr_cli.rewards.function import PASSED, load_function

    with pytest.raises(UserError, match=r"takes no \*\*kwargs"):
        check_signature(load_function(f"{user_module}:no_kwargs"), "no_kwargs", set(PASSED))
    with pytest.raises(UserError, match=r"\['difficulty'\] are never passed .*the data's columns"):
        check_signature(load_function(f"{user_module}:wants_column"), "wants_column", set(PASSED))
    check_signature(load_function(f"{user_module}:wants_column"), "wants_column", set(PASSED) | {"difficulty"})


# --- through the scorer and its worker pool ----------------------------------------------------------------
def test_function_term_values_are_what_the_function_returns(user_module, arithmetic):
    p = arithmetic.problem(347, 285)
    with Scorer(reward_spec(f"{user_module}:digit_credit"), arithmetic) as s:
        right, two_digits, none = s.score(items(p, ["12,13,6#632", "#642", "no answer"]))
    assert right.terms == {"task": 1.0, "function": 1.0} and right.reward == pytest.approx(1.5)
    assert two_digits.terms == {"task": 0.0, "function": pytest.approx(2 / 3)}
    assert two_digits.reward == pytest.approx(1 / 3) and not two_digits.correct
    assert none.terms == {"task": 0.0, "function": 0.0}


def test_function_gets_trl_keywords_once_per_prompt(user_module, arithmetic, tmp_path):
    """Each prompt's group is one call with TRL's keywords; the call happens in a worker, so the module is
    asked (by a second function) what the worker saw."""
    report = tmp_path / "seen.json"
    code = user_module.read_text() + textwrap.dedent(f'''
    import json
    def spy(prompts, completions, completion_ids, trainer_state, **kwargs):
        calls = json.load(open({str(report)!r})) if __import__("os").path.exists({str(report)!r}) else []
        calls.append({{"prompts": prompts, "completions": completions, "ids": completion_ids,
                       "step": trainer_state.global_step, "keys": sorted(kwargs), "answer": kwargs["answer"]}})
        json.dump(calls, open({str(report)!r}, "w"))
        kwargs["log_metric"]("x", 1.0)
        return [float(len(c)) for c in completions]
    ''')
    module = tmp_path / "spy_rewards.py"
    module.write_text(code)
    a, b = arithmetic.problem(1, 2), arithmetic.problem(3, 4)
    batch = items(a, ["#3", "#4"]) + items(b, ["#7"])
    with Scorer(reward_spec(f"{module}:spy"), arithmetic) as s:
        scores = s.score(batch)
    assert [sc.terms["function"] for sc in scores] == [2.0, 2.0, 2.0]
    import json

    calls = json.loads(report.read_text())
    assert len(calls) == 2
    assert calls[0] == {"prompts": [a.prompt] * 2, "completions": ["#3", "#4"], "ids": [[7], [7, 7]], "step": 2,
                        "keys": ["answer", "log_extra", "log_metric"], "answer": ["3", "3"]}
    assert calls[1]["prompts"] == [b.prompt] and calls[1]["answer"] == ["7"]


@pytest.mark.parametrize("name, reason", [
    ("raises", r"raised ZeroDivisionError: division by zero \(at .*user_rewards.py:\d+\)"),
    ("short", "returned 1 values for 2 completions"),
    ("nan", "returned nan for completion 0"),
    ("text", r"returned a str \('1.0'\) for completion 0, not a number"),
    ("none", "returned None for completion 0"),
    ("scalar", "returned a float, not a list of 2 floats"),
])
def test_a_broken_function_is_an_error_naming_function_and_prompt(user_module, arithmetic, name, reason):
    p = arithmetic.problem(347, 285)
    ref = f"{user_module}:{name}"
    with Scorer(reward_spec(ref), arithmetic) as s, pytest.raises(UserError) as e:
        s.score(items(p, ["#632", "#1"]))
    line = e.value.problems[0]
    assert line.startswith(f"reward.terms[1].function {ref}: "), line
    assert "on the prompt '347+285='" in line and "step 3" in line, line
    import re

    assert re.search(reason, line), line


def test_a_function_over_the_time_limit_is_stopped_and_named(user_module, arithmetic):
    p = arithmetic.problem(1, 1)
    with Scorer(reward_spec(f"{user_module}:slow", timeout_s=1.0), arithmetic) as s, pytest.raises(UserError) as e:
        s.score(items(p, ["#2"]))
    assert "took longer than reward.timeout_s (1 s) and was stopped" in e.value.problems[0]
    assert f"{user_module}:slow" in e.value.problems[0] and "on the prompt '001+001='" in e.value.problems[0]


@pytest.mark.parametrize("ref, match", [
    ("no_such_module_xyz:f", "cannot import no_such_module_xyz: ModuleNotFoundError"),
    ("missing/file.py:f", "missing/file.py: no such file"),
    ("{module}:nope", "has no 'nope'"),
    ("{module}:not_a_function", "not_a_function is a int, not a function"),
    ("{module}:no_kwargs", r"takes no \*\*kwargs"),
])
def test_a_function_that_cannot_be_loaded_is_refused_before_scoring(user_module, arithmetic, ref, match):
    ref = ref.format(module=user_module)
    with pytest.raises(UserError, match=rf"^reward.terms\[1\].function: .*{match}"):
        Scorer(reward_spec(ref), arithmetic)


def test_a_module_on_the_import_path_by_name(user_module, arithmetic, monkeypatch):
    monkeypatch.chdir(user_module.parent)
    p = arithmetic.problem(347, 285)
    with Scorer(reward_spec("user_rewards:digit_credit"), arithmetic) as s:
        (score,) = s.score(items(p, ["#632"]))
    assert score.terms["function"] == 1.0


@pytest.mark.parametrize("ref", ["f", "mod:", ":f", "a b:f", "mod:not-an-identifier", "pkg..mod:f"])
def test_schema_refuses_a_malformed_reference(ref):
    with pytest.raises(ValueError, match="function"):
        reward_spec(ref)


def test_function_terms_combine_like_any_term(user_module):
    """Weights and GDPO's decoupled combination take a function term as any other."""
    from rlvr_cli.recipe.load import load_recipe

    r = load_recipe("grpo", ["reward.combination=decoupled", "reward.terms=[{type: task}, {type: function, "
                             f"function: '{user_module}:digit_credit', weight: 0.3}}]"])
    assert [t.type for t in r.reward.terms] == ["task", "function"] and r.reward.terms[1].weight == 0.3


def test_an_evaluation_does_not_call_the_function(user_module, arithmetic):
    """Evaluation reads correctness only: a function that would fail is not called there."""
    p = arithmetic.problem(347, 285)
    with Scorer(reward_spec(f"{user_module}:raises"), arithmetic) as s:
        (score,) = s.score(items(p, ["#632"]), functions=False)
    assert score.correct and score.terms == {"task": 1.0} and score.reward == 1.0


def test_a_chat_task_gives_the_function_trl_s_conversational_form(tmp_path):
    """With a chat template the prompts are the conversations and each completion one assistant message;
    a dataset's reward columns come under their own names."""
    import json

    from rlvr_cli.recipe.schema import DatasetTaskSpec

    data = tmp_path / "c.jsonl"
    data.write_text("".join(json.dumps({"prompt": [{"role": "user", "content": f"{i}+{i}?"}], "answer": str(2 * i),
                                        "level": i % 3}) + "\n" for i in range(20)))
    task = build_task(DatasetTaskSpec(path=str(data), question_field="prompt", chat_template=True,
                                      system_prompt="Be brief.", reward_columns=["level"], verifier="integer"))
    report = tmp_path / "seen.json"
    module = tmp_path / "chat_rewards.py"
    module.write_text(textwrap.dedent(f'''
    import json
    def spy(prompts, completions, level, answer, **kwargs):
        json.dump({{"prompts": prompts, "completions": completions, "level": level, "answer": answer}}, open({str(report)!r}, "w"))
        return [1.0] * len(completions)
    '''))
    p = task.eval_problems()[0]
    with Scorer(reward_spec(f"{module}:spy"), task) as s:
        s.score(items(p, ["4", "5"]))
    seen = json.loads(report.read_text())
    i = int(p.prompt.split("+")[0])
    convo = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"{i}+{i}?"}]
    assert seen == {"prompts": [convo, convo], "completions": [[{"role": "assistant", "content": "4"}],
                                                                [{"role": "assistant", "content": "5"}]],
                    "level": [i % 3, i % 3], "answer": [str(2 * i)] * 2}


# --- hostile user code (issue 50): every misbehaviour is one line naming the function, never a traceback ---------
HOSTILE_CODE = '''
import fractions

def huge_int(completions, **kwargs):
    return [10 ** 400] * len(completions)

def huge_fraction(completions, **kwargs):
    return [fractions.Fraction(10 ** 400, 3)] * len(completions)

class Weird:
    def __float__(self):
        raise RuntimeError("no float for you")

def weird_number(completions, **kwargs):
    return [Weird() for _ in completions]

class BadList(list):
    def __iter__(self):
        raise RuntimeError("cannot iterate")

def bad_sequence(completions, **kwargs):
    return BadList([0.0] * len(completions))

def huge_finite(completions, **kwargs):
    return [1e308, -1e308][:len(completions)]

def interrupt(completions, **kwargs):
    raise KeyboardInterrupt

def exits(completions, **kwargs):
    raise SystemExit(3)
'''


@pytest.fixture(scope="module")
def hostile_module(tmp_path_factory):
    path = tmp_path_factory.mktemp("hostile") / "hostile_rewards.py"
    path.write_text(textwrap.dedent(HOSTILE_CODE))
    return path


@pytest.mark.parametrize("out, reason", [
    ([10 ** 400], r"returned a int too large for a float \(about 401 digits\) for completion 0; a reward must be within \+-1e\+09"),
    ([1e308], r"returned 1e\+308 for completion 0, beyond \+-1e\+09 .*standard deviation"),
    ([-2e9], r"returned -2e\+09 for completion 0, beyond \+-1e\+09"),
    (range(10 ** 12), r"returned 1000000000000 values for 1 completions"),
])
def test_checked_values_refuses_values_beyond_the_bound(out, reason):
    with pytest.raises(FunctionFailed, match=reason):
        checked_values(out, 1)
    assert checked_values([1e9, -1e9], 2) == [1e9, -1e9]  # the bound itself is allowed


@pytest.mark.parametrize("name, reason", [
    ("huge_int", r"returned a int too large for a float \(about 401 digits\) for completion 0"),
    ("huge_fraction", r"returned a Fraction too large for a float for completion 0"),
    ("weird_number", r"returned a Weird for completion 0, which is not a number \(float\(\) raised RuntimeError: no float"),
    ("bad_sequence", r"returned a BadList that raised RuntimeError when read: cannot iterate"),
    ("huge_finite", r"returned 1e\+308 for completion 0, beyond \+-1e\+09"),
    ("interrupt", r"raised KeyboardInterrupt \(at .*hostile_rewards.py:\d+\)"),
    ("exits", r"raised SystemExit: 3 \(at .*hostile_rewards.py:\d+\)"),
])
def test_hostile_returns_are_the_function_s_error_not_the_worker_s(hostile_module, arithmetic, name, reason, capfd):
    """Through the real worker: the reason names what the function did, and the worker prints no traceback
    (it used to die on float(10**400) and on KeyboardInterrupt, 'killed by SIGINT')."""
    import re

    p = arithmetic.problem(347, 285)
    ref = f"{hostile_module}:{name}"
    with Scorer(reward_spec(ref), arithmetic) as s, pytest.raises(UserError) as e:
        s.score(items(p, ["#632", "#1"]))
    line = e.value.problems[0]
    assert line.startswith(f"reward.terms[1].function {ref}: ") and "on the prompt '347+285='" in line, line
    assert re.search(reason, line), line
    assert "verifier worker" not in line and "Traceback" not in capfd.readouterr().err


IMPORT_HOSTILE = {
    "sleeps.py": "import time\ntime.sleep(60)\ndef f(completions, **kwargs):\n    return [0.0] * len(completions)\n",
    "exits.py": "import os\nos._exit(0)\n",
    "interrupts.py": "raise KeyboardInterrupt\n",
    "raises.py": "x = 1 / 0\n",
    "kills.py": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n",
}


@pytest.mark.parametrize("file, match", [
    ("sleeps.py", r"importing .*sleeps.py did not finish within 2 s .*it was stopped"),
    ("exits.py", r"importing .*exits.py ended the process \(exit status 0\)"),
    ("interrupts.py", r"cannot import .*interrupts.py: KeyboardInterrupt"),
    ("raises.py", r"cannot import .*raises.py: ZeroDivisionError: division by zero \(at .*raises.py:1\)"),
    ("kills.py", r"importing .*kills.py ended the process \(killed by SIGKILL\)"),
])
def test_a_module_that_misbehaves_at_import_is_refused_in_a_child(tmp_path, arithmetic, monkeypatch, file, match):
    """The user's module is first imported in a child process with a time limit: a hang, os._exit, a kill or
    Ctrl-C at import is a UserError (exit 2) naming the function, and rlvr's own process never imports it."""
    import sys

    from rlvr_cli import checked_import as function_import

    monkeypatch.setattr(function_import, "IMPORT_TIMEOUT_S", 2.0)
    path = tmp_path / file
    path.write_text(IMPORT_HOSTILE[file])
    with pytest.raises(UserError, match=rf"^reward.terms\[1\].function: {path}:f: .*{match}"):
        Scorer(reward_spec(f"{path}:f"), arithmetic)
    assert not any(getattr(m, "__file__", None) == str(path) for m in list(sys.modules.values()))


@pytest.mark.parametrize("command", ["doctor", "train"])
def test_the_cli_exits_2_when_the_module_exits_at_import(tmp_path, monkeypatch, cli, command):
    """`rlvr doctor` and `rlvr train` on a recipe whose reward module calls os._exit(0) at import: exit 2 and
    one line, not exit 0 with no output (doctor) or with run.json left `running` (train)."""
    import json

    from conftest import tiny_run

    monkeypatch.chdir(tmp_path)
    (tmp_path / "bye.py").write_text("import os\nos._exit(0)\n")
    recipe = tmp_path / "r.yaml"
    recipe.write_text("extends: grpo\nreward:\n  terms:\n    - {type: task}\n    - {type: function, function: 'bye.py:f'}\n")
    sets = [x for s in tiny_run() if command == "train" or s.startswith("rollout.") for x in ("--set", s)]
    args = [command, str(recipe), *sets] + (["--out", str(tmp_path / "run")] if command == "train" else ["--prompts", "1"])
    done = cli(*args)
    assert done.code == 2, (done.stdout, done.stderr)
    assert "bye.py:f: importing bye.py ended the process (exit status 0)" in done.stderr
    assert "Traceback" not in done.stderr
    if command == "train":
        run_json = next((tmp_path / "run").rglob("run.json"), None)
        assert run_json is None or json.loads(run_json.read_text())["status"] != "running"


# --- the reward code's fingerprint (issue 49) ------------------------------------------------------------------
def test_source_digest_follows_the_file_and_the_function_name_without_importing(tmp_path, monkeypatch):
    """A digest of the module file's bytes and the function's name; a `module:function` is found as the
    import would find it, without running the module or its package's __init__ (which here would raise)."""
    from rlvr_cli.rewards.function import reward_code_fingerprint, source_digests

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("raise RuntimeError('must not run')\n")
    (tmp_path / "pkg" / "scores.py").write_text("def f(completions, **kw):\n    return [0.0]\n")
    (tmp_path / "top.py").write_text("def f(completions, **kw):\n    return [0.0]\n")
    d = source_digests(["pkg.scores:f", "pkg.scores:g", "top.py:f", "top:f", "missing_mod_xyz:f"])
    assert d["pkg.scores:f"].startswith("blake2b:") and d["pkg.scores:f"] != d["pkg.scores:g"]
    assert d["top.py:f"] == d["top:f"]  # the same file and name, by path or by module name
    assert d["missing_mod_xyz:f"] is None
    (tmp_path / "top.py").write_text("def f(completions, **kw):\n    return [1.0]\n")
    assert source_digests(["top.py:f"])["top.py:f"] != d["top.py:f"]

    from rlvr_cli.recipe.reward_terms import FunctionTerm, VerifierTerm

    def fn(ref):
        return FunctionTerm(type="function", function=ref)
    assert reward_code_fingerprint([VerifierTerm()]) == (None, {})
    one, per = reward_code_fingerprint([VerifierTerm(), fn("top.py:f")])
    assert one.startswith("blake2b:") and per == {"top.py:f": source_digests(["top.py:f"])["top.py:f"]}
    assert reward_code_fingerprint([fn("top.py:f"), fn("pkg.scores:f")])[0] != one


# --- TRL parity (issue 49) ----------------------------------------------------------------------------------------
ASYNC_CODE = '''
import asyncio

async def credit(completions, trainer_state, **kwargs):
    await asyncio.sleep(0)
    return [float(trainer_state.global_step) + len(c) for c in completions]

async def slow(completions, **kwargs):
    await asyncio.sleep(30)
    return [0.0] * len(completions)

async def raises(completions, **kwargs):
    await asyncio.sleep(0)
    raise ValueError("async trouble")
'''


@pytest.fixture(scope="module")
def async_module(tmp_path_factory):
    path = tmp_path_factory.mktemp("async") / "async_rewards.py"
    path.write_text(ASYNC_CODE)
    return path


def test_an_async_function_is_awaited_and_global_step_counts_as_trl(async_module, arithmetic):
    """TRL awaits `async def` reward functions, and its trainer_state.global_step is 0 on the first step:
    rlvr's step 1 gives 0, step 3 gives 2; under TRL (the bridge) TRL's own count is passed as is."""
    p = arithmetic.problem(1, 2)
    with Scorer(reward_spec(f"{async_module}:credit"), arithmetic) as s:
        first = s.score(items(p, ["#3", "#33"], step=1))
        third = s.score(items(p, ["#3"], step=3))
        under_trl = s.score([ScoreItem(p, "#3", 0, 7, trl_global_step=5)])
    assert [x.terms["function"] for x in first] == [2.0, 3.0]
    assert third[0].terms["function"] == 4.0 and under_trl[0].terms["function"] == 7.0


@pytest.mark.parametrize("name, reason", [("slow", "took longer than reward.timeout_s"),
                                          ("raises", r"raised ValueError: async trouble \(at .*async_rewards.py")])
def test_an_async_function_that_fails_is_named(async_module, arithmetic, name, reason):
    p = arithmetic.problem(1, 2)
    with Scorer(reward_spec(f"{async_module}:{name}", timeout_s=1.0), arithmetic) as s, pytest.raises(UserError, match=reason):
        s.score(items(p, ["#3"]))


def test_every_dataset_column_reaches_the_function(tmp_path):
    """TRL passes every dataset column but the prompt; so does rlvr, without reward_columns, as the file has
    it (the answer column's raw value under its own name; `answer` stays the extracted gold answer)."""
    import json

    from rlvr_cli.recipe.schema import DatasetTaskSpec

    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"q": f"{i}+{i}=", "sum": f"#### {2 * i}", "level": i % 3, "tag": "t"})
                            + "\n" for i in range(20)))
    task = build_task(DatasetTaskSpec(path=str(data), question_field="q", answer_field="sum",
                                      answer_extraction="gsm8k", prompt_template="{q}", verifier="integer"))
    assert task.column_names == ["sum", "level", "tag"]
    report = tmp_path / "seen.json"
    module = tmp_path / "cols.py"
    module.write_text(f'''
import json
def spy(completions, level, answer, **kwargs):
    json.dump({{"level": level, "answer": answer, "sum": kwargs["sum"], "tag": kwargs["tag"],
                "keys": sorted(kwargs)}}, open({str(report)!r}, "w"))
    return [0.0] * len(completions)
''')
    p = task.eval_problems()[0]
    i = int(p.prompt.split("+")[0])
    with Scorer(reward_spec(f"{module}:spy"), task) as s:
        s.score(items(p, ["4", "5"]))
    seen = json.loads(report.read_text())
    assert seen == {"level": [i % 3] * 2, "answer": [str(2 * i)] * 2, "sum": [f"#### {2 * i}"] * 2, "tag": ["t"] * 2,
                    "keys": ["completion_ids", "log_extra", "log_metric", "prompts", "sum", "tag", "trainer_state"]}
    with pytest.raises(UserError, match=r"\['difficulty'\] are never passed"):
        module.write_text("def f(completions, difficulty, **kw):\n    return [0.0]\n")
        Scorer(reward_spec(f"{module}:f"), task)


def test_a_function_call_is_its_own_message_kind(user_module):
    """Issue 51: a call travels as `{kind: function, function, call}` and comes back as values (or a failure),
    not dressed as a verifier check (a pickle in `response`, values in `answer`, outcome `correct`)."""
    from rlvr_cli.rewards import worker
    from rlvr_cli.rewards.function import to_call
    from rlvr_cli.rewards.pool import CallResult, VerifierPool

    ref = f"{user_module}:digit_credit"
    job = to_call(ref, Call(["p"], ["#632", "#1"], [[1], [2]], {"answer": ["632", "632"]}), 5.0)
    req = job.request(3)
    assert req["kind"] == "function" and set(req) == {"id", "kind", "function", "call"}
    assert worker._answer(req, print) == {"id": 3, "values": [1.0, 0.0]}
    bad = to_call(f"{user_module}:short", Call(["p"], ["#632", "#1"], [[1], [2]], {"answer": ["632", "632"]}), 5.0)
    assert worker._answer(bad.request(4), print) == {"id": 4, "failure": "returned 1 values for 2 completions"}
    with VerifierPool(1, functions=(ref,)) as pool:
        assert pool.run([job]) == [CallResult([1.0, 0.0])]


def test_recipes_validate_checks_the_reward_functions(tmp_path, monkeypatch, cli):
    """Issue 49: `rlvr recipes validate` said `ok` for a missing reward file or a misspelled function. It now
    imports them (in a child process, no model) and checks their signature."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.py").write_text("def credit(completions, **kwargs):\n    return [0.0] * len(completions)\n")
    for ref, want in [("mine.py:credit", None), ("mine.py:credti", "mine.py has no 'credti'"),
                      ("gone.py:credit", "gone.py: no such file")]:
        recipe = tmp_path / "r.yaml"
        recipe.write_text(f"extends: grpo\nreward:\n  terms:\n    - {{type: task}}\n    - {{type: function, function: '{ref}'}}\n")
        res = cli("recipes", "validate", str(recipe))
        if want is None:
            assert res.code == 0 and "ok" in res.stdout + res.stderr, res.stderr
        else:
            assert res.code == 2 and want in res.stderr and str(recipe) in res.stderr, res.stderr


def test_a_sleeping_function_is_reported_after_one_time_limit_not_one_per_call(user_module, arithmetic):
    """Issue 49: a reward that sleeps took 8 x reward.timeout_s before the first report (every call of the
    step ran to its limit). The first failure now stops the step's other calls."""
    import time

    batch = [it for a in range(6) for it in items(arithmetic.problem(a, 1), ["#1"])]
    spec = RewardSpec.model_validate({"terms": [{"type": "task"}, {"type": "function", "function": f"{user_module}:slow"}],
                                      "workers": 1, "timeout_s": 1.0})
    with Scorer(spec, arithmetic) as s:
        s._get_pool().run([])  # nothing to do: measure the calls, not the worker's start
        t0 = time.monotonic()
        with pytest.raises(UserError) as e:
            s.score(batch)
        took = time.monotonic() - t0
    assert "took longer than reward.timeout_s (1 s)" in e.value.problems[0]
    assert e.value.problems[-1] == "(5 more calls of this step were not made)"
    assert took < 4.0, took  # one limit (1 s) and the worker's start, not six limits
