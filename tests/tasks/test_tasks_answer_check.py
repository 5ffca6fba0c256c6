"""The `answer_check` task (rlvr_cli/tasks/answer_check.py): trace format, verdicts, filler, scoring."""

from __future__ import annotations

import random
import re

import pytest

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.schema import AnswerCheckTaskSpec
from rlvr_cli.rewards.integer import check
from rlvr_cli.tasks import BUILTIN_TASKS, build_task
from rlvr_cli.tasks.answer_check import AnswerCheckTask

TRACE = re.compile(r"####(\d+)\n(.*)=(\d+)\?(ok|no)((?:,wait)*)")


def test_check_text_worked_examples():
    # 347 + 285: columns 7+5=12, 4+8+1=13, 3+2+1=6 -> 632
    verbose = AnswerCheckTask(AnswerCheckTaskSpec())
    assert verbose.check_text(347, 285) == "7+5=12,4+8+1=13,3+2+1=6=632"
    terse = AnswerCheckTask(AnswerCheckTaskSpec(check="terse"))
    assert terse.check_text(347, 285) == "12,13,6=632"


def test_built_in_and_registered():
    assert "answer_check" in BUILTIN_TASKS
    task = build_task("answer_check")
    assert isinstance(task, AnswerCheckTask) and task.verifier == "integer" and task.answer_marker == ""


def test_traces_are_consistent_and_scored_on_the_answer_line():
    task = AnswerCheckTask(AnswerCheckTaskSpec(answer_error_rate=0.5, ramble_given_wrong=1.0, ramble_given_right=0.0))
    rng = random.Random(0)
    seen = {"ok": 0, "no": 0}
    for p in task.train_problems(rng, 300):
        text = task.trace(p, rng)
        m = TRACE.fullmatch(text)
        assert m, text
        answer, check_sum, verdict, filler = int(m.group(1)), int(m.group(3)), m.group(4), m.group(5)
        assert check_sum == int(p.reference)  # the check is always right
        assert (verdict == "ok") == (answer == check_sum)
        assert (filler != "") == (verdict == "no")  # ramble_given_wrong 1, ramble_given_right 0
        assert task.verdict(text) == verdict and task.filler_words(text) == filler.count(",wait")
        outcome = check(text, p.reference, "", ("gsm8k",)).outcome
        assert outcome == ("correct" if verdict == "ok" else "incorrect")
        seen[verdict] += 1
    assert 100 < seen["no"] < 200  # answer_error_rate 0.5 of 300


def test_wrong_answers_differ_in_one_column():
    task = AnswerCheckTask(AnswerCheckTaskSpec(answer_error_rate=1.0))
    rng = random.Random(1)
    for p in task.train_problems(rng, 100):
        answer = int(TRACE.fullmatch(task.trace(p, rng)).group(1))
        diff = abs(answer - int(p.reference))
        assert diff in {d * 10**j for d in (1, 2, 3) for j in range(3)}


def test_filler_mean_is_ramble_mean():
    task = AnswerCheckTask(AnswerCheckTaskSpec(answer_error_rate=1.0, ramble_given_wrong=1.0, ramble_mean=4.0))
    rng = random.Random(2)
    words = [task.filler_words(task.trace(p, rng)) for p in task.train_problems(rng, 2000)]
    assert min(words) == 1 and max(words) <= 16
    assert 3.6 < sum(words) / len(words) < 4.3  # geometric mean 4, cap 16 trims a little


def test_reading_model_responses():
    task = AnswerCheckTask()
    assert task.verdict("####12\n5+7=12?no,wait,wait") == "no"
    assert task.filler_words("####12\n5+7=12?no,wait,wait") == 2
    assert task.verdict("####12\n5+7=1") is None and task.filler_words("####12,wait") == 0


def test_held_out_prompts_are_never_trained_on():
    task = AnswerCheckTask(AnswerCheckTaskSpec(digits=1, num_eval=20))
    held = {p.id for p in task.eval_problems()}
    assert len(held) == 20
    assert not held & {p.id for p in task.train_problems(random.Random(0), 200)}
    with pytest.raises(UserError, match="task.num_eval"):
        AnswerCheckTask(AnswerCheckTaskSpec(digits=1, num_eval=60))


def test_check_marks_worked_examples():
    # 347 + 285 = 632, answered 642: the tens column's digit 3 disagrees with the answer's 4
    task = AnswerCheckTask(AnswerCheckTaskSpec(check_marks=True))
    assert task.check_text(347, 285, 642) == "7+5=12,4+8+1=13!,3+2+1=6=0632"
    assert task.check_text(347, 285, 632) == "7+5=12,4+8+1=13,3+2+1=6=0632"
    # only the leading digit wrong (1632): the last column's carry-out 0 disagrees with it
    assert task.check_text(347, 285, 1632) == "7+5=12,4+8+1=13,3+2+1=6!=0632"
    terse = AnswerCheckTask(AnswerCheckTaskSpec(check="terse", check_marks=True))
    assert terse.check_text(347, 285, 642) == "12,13!,6=0632"
    assert task.answer_text(42) == "0042"


def test_check_marks_agree_with_the_verdict_and_the_verifier():
    task = AnswerCheckTask(AnswerCheckTaskSpec(check_marks=True, answer_error_rate=0.5))
    rng = random.Random(3)
    for p in task.train_problems(rng, 500):
        text = task.trace(p, rng)
        assert text.startswith("####") and len(text.split("\n")[0]) == 4 + 4  # zero-padded to digits + 1
        right = check(text, p.reference, "", ("gsm8k",)).outcome == "correct"
        assert right == ("!" not in text) == (task.verdict(text) == "ok")
