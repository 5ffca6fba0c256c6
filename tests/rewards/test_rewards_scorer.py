"""The Scorer: a weighted sum of terms, accuracy from the true verifier, spurious controls, speed."""

import json
import random
import time

import pytest

from rlvr_cli.recipe.schema import RewardSpec
from rlvr_cli.rewards import Score, ScoreItem, Scorer, outcome_counts
from rlvr_cli.rewards.scorer import term_keys
from rlvr_cli.tasks import Problem, build_task
from rlvr_cli.tasks.countdown import solutions


@pytest.fixture(scope="module")
def arithmetic():
    return build_task("arithmetic")


def spec(*terms, **kw) -> RewardSpec:
    return RewardSpec.model_validate({"terms": list(terms), **kw})


def item(problem, response, i=0, **kw) -> ScoreItem:
    return ScoreItem(problem=problem, response=response, sample_index=i, **kw)


def test_default_reward_is_the_true_verifier(arithmetic):
    p = arithmetic.problem(347, 285)
    with Scorer(RewardSpec(), arithmetic) as s:
        right, wrong, junk = s.score([item(p, "12,13,6#632"), item(p, "#631"), item(p, "no answer")])
    assert right == Score(reward=1.0, correct=True, outcome="correct", answer="632", terms={"task": 1.0})
    assert (wrong.reward, wrong.correct, wrong.outcome, wrong.answer) == (0.0, False, "incorrect", "631")
    assert (junk.reward, junk.outcome, junk.answer) == (0.0, "unparseable", None)


def test_weighted_sum_of_terms(arithmetic):
    p = arithmetic.problem(347, 285)
    wrong_label = arithmetic.incorrect_reference(p)
    s = spec({"type": "task", "weight": 1.0}, {"type": "format", "weight": 0.1}, {"type": "incorrect", "weight": 2.0},
             {"type": "format_only", "weight": 0.5})
    with Scorer(s, arithmetic) as scorer:
        right, wrong_label_answer, no_marker = scorer.score(
            [item(p, "#632"), item(p, f"#{wrong_label}"), item(p, "632")])
    assert right.terms == {"task": 1.0, "format": 1.0, "incorrect": 0.0, "format_only": 1.0}
    assert right.reward == pytest.approx(1.0 + 0.1 + 0.5)
    # the spurious `incorrect` reward pays for the fixed wrong label; accuracy still says incorrect
    assert wrong_label_answer.terms == {"task": 0.0, "format": 1.0, "incorrect": 1.0, "format_only": 1.0}
    assert wrong_label_answer.reward == pytest.approx(0.1 + 2.0 + 0.5)
    assert not wrong_label_answer.correct
    assert no_marker.terms == {"task": 0.0, "format": 0.0, "incorrect": 0.0, "format_only": 0.0}


def test_repeated_term_types_are_keyed_by_position():
    assert term_keys(["task", "format", "format", "random"]) == ["task", "format#1", "format#2", "random"]


def test_format_with_think(arithmetic):
    p = arithmetic.problem(347, 285)
    s = spec({"type": "format", "weight": 1.0, "think": True})
    cases = {
        "<think>add the columns</think>#632": 1.0,
        "<think>add</think>#631": 1.0,  # format, not correctness
        "#632": 0.0,  # no think block
        "<think> </think>#632": 0.0,  # an empty one
        "<think>a</think><think>b</think>#632": 0.0,
        "<think>add the columns</think>": 0.0,  # no answer after it
        "#632<think>late</think>": 0.0,
    }
    with Scorer(s, arithmetic) as scorer:
        got = scorer.score([item(p, r) for r in cases])
    assert [g.terms["format"] for g in got] == list(cases.values())
    assert [g.correct for g in got][:3] == [True, False, True]  # accuracy ignores the shaping


def test_random_reward_is_reproducible_and_has_rate_p(arithmetic):
    problems = arithmetic.train_problems(random.Random(0), 250)
    items = [item(p, "#1", i, step=3) for p in problems for i in range(8)]
    s = spec({"type": "random", "p": 0.3}, {"type": "task", "weight": 0.0})
    with Scorer(s, arithmetic, seed=5) as a, Scorer(s, arithmetic, seed=5) as b, Scorer(s, arithmetic, seed=6) as c:
        ra, rb, rc = ([x.terms["random"] for x in sc.score(items)] for sc in (a, b, c))
    assert ra == rb  # same seed, same samples: same rewards
    assert ra != rc  # another seed: other draws
    assert sum(ra) / len(ra) == pytest.approx(0.3, abs=0.03)  # 2000 draws: 3 standard deviations ~ 0.03
    # the identity includes the step and the sample index
    with Scorer(s, arithmetic, seed=5) as d:
        later = [x.terms["random"] for x in d.score([item(p, "#1", i, step=4) for p in problems for i in range(8)])]
    assert later != ra


def test_truncated_responses_are_incorrect_but_random_still_draws(arithmetic):
    p = arithmetic.problem(347, 285)
    s = spec({"type": "task"}, {"type": "format"}, {"type": "random", "p": 1.0})
    with Scorer(s, arithmetic) as scorer:
        cut, = scorer.score([item(p, "#632=632=63", truncated=True)])
    assert (cut.outcome, cut.correct, cut.answer) == ("incorrect", False, None)
    assert cut.terms == {"task": 0.0, "format": 0.0, "random": 1.0}
    with Scorer(spec({"type": "task"}, truncated_is_incorrect=False), arithmetic) as scorer:
        assert scorer.score([item(p, "#632", truncated=True)])[0].correct


def test_countdown_task_traces_score_as_the_task_says():
    task = build_task("countdown")
    rng = random.Random(0)
    problems = task.train_problems(rng, 50)
    traces = [task.trace(p, rng) for p in problems]
    with Scorer(RewardSpec(), task) as scorer:
        scores = scorer.score([item(p, t) for p, t in zip(problems, traces)])
    # a trace either solves its prompt (an equation from the task's own solver) or is a deliberate near miss
    for p, t, s in zip(problems, traces, scores):
        assert s.outcome in ("correct", "incorrect"), (p.prompt, t)
        solving = dict(solutions(tuple(p.meta["numbers"]), p.meta["target"]))
        assert s.correct == (t.rsplit("#", 1)[1] in solving)
    assert 0 < sum(s.correct for s in scores) < len(scores)


def test_arithmetic_batch_is_fast_and_needs_no_workers(arithmetic):
    problems = arithmetic.train_problems(random.Random(1), 16)
    responses = ["#{}", "12,13,6#{}={}", "#1", "junk", "7+5=12#{}"]
    items = [item(p, responses[i % 5].format(p.reference, p.reference), i % 8) for i, p in enumerate(problems * 8)]
    s = spec({"type": "task"}, {"type": "format"}, {"type": "random"}, {"type": "incorrect"}, {"type": "format_only"})
    with Scorer(s, arithmetic) as scorer:
        scorer.score(items)
        best = min(_timed(scorer.score, items) for _ in range(5))
        assert scorer._pool is None  # the integer fast path never started a worker
    assert len(items) == 128
    assert best < 0.05  # a few milliseconds on an idle machine; the bound leaves room for a loaded one


def _timed(fn, arg) -> float:
    start = time.perf_counter()
    fn(arg)
    return time.perf_counter() - start


def test_never_raises_for_hostile_responses(arithmetic):
    p = arithmetic.problem(1, 2)
    hostile = ["", "\x00", "#" * 100_000, b"#\xff3".decode("utf-8", "surrogateescape"), "#3" + "=3" * 100_000,
               "x" * 1_000_000, "#3" + "=3" * 500]
    s = spec({"type": "task"}, {"type": "format", "think": True}, {"type": "format_only"}, {"type": "incorrect"})
    with Scorer(s, arithmetic) as scorer:
        scores = scorer.score([item(p, r) for r in hostile])
    assert [x.outcome for x in scores] == ["unparseable"] * 6 + ["correct"]  # 100,000 checks are past the cap


class MathTask:
    """A dataset-like task without a marker (the real one needs `datasets` and a file)."""

    name, answer_marker, verifier = "dataset", "", "math"

    def incorrect_reference(self, problem):
        return "not " + problem.reference


def test_math_task_through_the_pool_with_a_hard_limit():
    problems = [Problem(f"q{i}", "?", gold) for i, gold in enumerate(["\\frac{1}{2}", "3", "x+1", "7"])]
    responses = ["so \\boxed{0.5}", "#### 3", "\\boxed{1+x}", "\\boxed{9^{9^{9^{9}}}}"]
    s = spec({"type": "task"}, {"type": "format_only", "weight": 0.5}, timeout_s=1.0, workers=2)
    with Scorer(s, MathTask()) as scorer:
        scores = scorer.score([item(p, r) for p, r in zip(problems, responses)])
    assert [x.outcome for x in scores] == ["correct", "correct", "correct", "timeout"]
    assert outcome_counts(scores) == {"correct": 3, "incorrect": 0, "unparseable": 0, "timeout": 1, "error": 0}
    assert [x.reward for x in scores] == [1.5, 1.5, 1.5, 0.5]
    assert scores[0].answer == "1/2"


def test_unknown_true_verifier_is_refused():
    class Weird(MathTask):
        verifier = "astrology"

    with pytest.raises(ValueError):
        Scorer(RewardSpec(), Weird())


def test_countdown_reference_json_is_read_by_the_countdown_term(arithmetic):
    # a `countdown` term on a task whose references are not countdown specs: an error outcome, no crash
    p = arithmetic.problem(1, 2)
    with Scorer(spec({"type": "countdown"}), arithmetic) as scorer:
        got, = scorer.score([item(p, "#1+2")])
    assert got.terms == {"countdown": 0.0}
    assert json.loads(json.dumps(got.terms)) == got.terms
