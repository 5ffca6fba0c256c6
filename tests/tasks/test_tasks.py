"""Built-in tasks and dataset tasks: determinism, disjoint splits, trace correctness, the tokenizer round trip."""

from __future__ import annotations

import json
import random

import pytest

from rlvr_cli.algo.length_bias import conditional_verbosity
from rlvr_cli.errors import UserError
from rlvr_cli.models.tokenizer import build_char_tokenizer
from rlvr_cli.recipe.schema import ArithmeticTaskSpec as ArithmeticSpec
from rlvr_cli.recipe.schema import CountdownTaskSpec as CountdownSpec
from rlvr_cli.recipe.schema import DatasetTaskSpec as DatasetSpec
from rlvr_cli.tasks import build_task
from rlvr_cli.tasks.arithmetic import ArithmeticTask, column_totals
from rlvr_cli.tasks.countdown import CountdownTask, solutions
from rlvr_cli.tasks.dataset import extract_gold, last_boxed


def answer_after_marker(text: str) -> str:
    tail = text.rsplit("#", 1)[1]
    digits = ""
    for ch in tail:
        if not ch.isdigit():
            break
        digits += ch
    return digits


def test_column_totals_by_hand():
    # 347 + 285: 7+5=12 (carry 1), 4+8+1=13 (carry 1), 3+2+1=6 -> 632
    assert column_totals(347, 285, 3) == ([12, 13, 6], 632)
    # a final carry becomes a leading digit: 947 + 285 -> 12, 13, 12 -> 1232
    assert column_totals(947, 285, 3) == ([12, 13, 12], 1232)
    # an error in column 0 of +2 propagates: 7+5=14 -> digit 4 carry 1 -> 634
    assert column_totals(347, 285, 3, error_col=0, delta=2) == ([14, 13, 6], 634)
    # an error that removes a carry: column 1 total 13 -> 9 -> 592
    assert column_totals(347, 285, 3, error_col=1, delta=-4) == ([12, 9, 5], 592)


@pytest.mark.parametrize("make", [lambda: ArithmeticTask(), lambda: CountdownTask()])
def test_tasks_are_deterministic_and_splits_disjoint(make):
    a, b = make(), make()
    assert [p.prompt for p in a.eval_problems()] == [p.prompt for p in b.eval_problems()]
    draw_a = a.train_problems(random.Random(7), 300)
    draw_b = b.train_problems(random.Random(7), 300)
    assert [p.prompt for p in draw_a] == [p.prompt for p in draw_b]
    assert [p.prompt for p in a.train_problems(random.Random(8), 300)] != [p.prompt for p in draw_a]
    held = {p.prompt for p in a.eval_problems()}
    assert len(held) == len(a.eval_problems())
    for seed in range(5):
        assert not held & {p.prompt for p in a.train_problems(random.Random(seed), 2000)}


def test_countdown_split_is_disjoint_by_multiset():
    t = CountdownTask()
    held = {(tuple(sorted(p.meta["numbers"])), p.meta["target"]) for p in t.eval_problems()}
    for p in t.train_problems(random.Random(1), 3000):
        assert (tuple(sorted(p.meta["numbers"])), p.meta["target"]) not in held


def test_arithmetic_traces_without_errors_are_all_correct():
    t = ArithmeticTask(ArithmeticSpec(error_rate=0.0, check_position="both"))
    rng = random.Random(0)
    styles = set()
    for p in t.train_problems(rng, 400):
        tr = t.trace(p, rng)
        assert answer_after_marker(tr) == p.reference, tr
        styles.add("direct" if tr.startswith("#") or tr.startswith("=") else ("verbose" if "+" in tr.split("#")[0] else "terse"))
    assert styles == {"direct", "terse", "verbose"}


def test_arithmetic_error_rate_and_ramble_correlation():
    spec = ArithmeticSpec(error_rate=0.25, ramble_prob=0.5, ramble_error_rate=0.8)
    t = ArithmeticTask(spec)
    rng = random.Random(1)
    wrong = {True: [], False: []}
    for p in t.train_problems(rng, 4000):
        tr = t.trace(p, rng)
        wrong[tr.startswith("wait,")].append(answer_after_marker(tr) != p.reference)
    rambling, plain = sum(wrong[True]) / len(wrong[True]), sum(wrong[False]) / len(wrong[False])
    # an injected column error changes the answer unless clamping to 0..19 absorbs it (rare)
    assert 0.70 < rambling < 0.85 and 0.18 < plain < 0.30, (rambling, plain)


def test_arithmetic_filler_before_answer_is_counted_and_conditional_on_errors():
    # ramble 30%, errors 80% when rambling else 15%: P(filler | wrong) = .24/.345 = .70, P(filler | right) = .06/.655 = .09
    spec = ArithmeticSpec(
        styles={"direct": 0.0}, ramble_position="before_answer", ramble_prob=0.3, ramble_max=8,
        ramble_error_rate=0.8, error_rate=0.15,
    )
    t = ArithmeticTask(spec)
    rng = random.Random(2)
    fillers, correct = [], []
    for p in t.train_problems(rng, 4000):
        tr = t.trace(p, rng)
        k = t.filler_words(tr)
        work, _, _ = tr.partition("#")
        if k:
            assert work.endswith("," + "wait," * k) and "wait" not in work[: -5 * k], tr  # after the work, before `#`
        assert 0 <= k <= 8
        fillers.append(k)
        correct.append(answer_after_marker(tr) == p.reference)
    cv = conditional_verbosity(fillers, correct)
    assert 0.64 < cv["filler_given_incorrect"] < 0.76 and 0.06 < cv["filler_given_correct"] < 0.12, cv
    assert 4.0 < cv["filler_words_incorrect"] < 5.0 and 4.0 < cv["filler_words_correct"] < 5.0  # uniform 1..8


def test_arithmetic_filler_after_error_follows_the_wrong_column():
    spec = ArithmeticSpec(
        styles={"direct": 0.0, "verbose": 0.0}, ramble_position="after_error", ramble_prob=0.5, ramble_max=3,
        ramble_error_rate=1.0, error_rate=0.0,
    )
    t = ArithmeticTask(spec)
    rng = random.Random(4)
    for p in t.train_problems(rng, 300):
        tr = t.trace(p, rng)
        work = tr.split("#")[0].split("=")[0]
        items = work.split(",")
        true, _ = column_totals(p.meta["a"], p.meta["b"], 3)
        totals = [int(x) for x in items if x and x != "wait"]
        wrong = [j for j, (x, y) in enumerate(zip(totals, true)) if x != y]
        if t.filler_words(tr) == 0:
            assert not wrong, tr
            continue
        first_wait = items.index("wait")
        assert wrong and first_wait == wrong[0] + 1, tr  # the filler follows the (first) wrong total
    assert t.filler_words("12,wait,wait,14,6#642") == 2


def test_arithmetic_error_mark_and_last_column_errors():
    t = ArithmeticTask(ArithmeticSpec(error_rate=1.0, error_column="last", error_mark="?", styles={"direct": 0.0}))
    rng = random.Random(5)
    for p in t.train_problems(rng, 200):
        tr = t.trace(p, rng)
        work = tr.split("#")[0].split(",")
        assert [i for i, x in enumerate(work) if "?" in x] == [2], tr  # only the last (third) total, marked
        true, _ = column_totals(p.meta["a"], p.meta["b"], 3)
        assert int(work[2].split("?")[1]) != true[2], tr
    clean = ArithmeticTask(ArithmeticSpec(error_rate=0.0, error_mark="?"))
    assert all("?" not in clean.trace(p, rng) for p in clean.train_problems(rng, 100))
    with pytest.raises(ValueError):
        ArithmeticSpec(error_mark="#")  # would be read as the answer marker


def test_geometric_filler_length_has_the_uniform_mean_and_a_constant_hazard():
    # ramble_max 8: mean (1 + 8)/2 = 4.5; P(1 word) = 1 - q = 2/9; P(k+1 | >= k) = q = 7/9 at every k
    t = ArithmeticTask(ArithmeticSpec(ramble_prob=1.0, ramble_max=8, ramble_length="geometric", styles={"direct": 0.0}))
    rng = random.Random(6)
    ks = [t.filler_words(t.trace(p, rng)) for p in t.train_problems(rng, 6000)]
    assert sum(ks) / len(ks) == pytest.approx(4.5, abs=0.15)
    assert sum(k == 1 for k in ks) / len(ks) == pytest.approx(2 / 9, abs=0.02)
    at_least = [sum(k >= j for k in ks) for j in (8, 9)]
    assert at_least[1] / at_least[0] == pytest.approx(7 / 9, abs=0.06)  # no hard stop at ramble_max
    assert max(ks) <= 32


def test_filler_words_counts_only_before_the_marker():
    t = ArithmeticTask()
    assert t.filler_words("wait,wait,12,13,6#632") == 2
    assert t.filler_words("12,13,6,wait,#632wait,") == 1
    assert t.filler_words("wait,wait,wait,") == 3  # no marker: the whole response
    assert t.filler_words("12,13,6#632") == 0


def test_conditional_verbosity_hand_computed():
    cv = conditional_verbosity([0, 2, 4, 0, 3, 0], [True, False, False, True, True, False])
    # wrong: fillers 2, 4, 0 -> P = 2/3, mean of the rambling ones 3; right: 0, 0, 3 -> 1/3, 3
    assert cv == pytest.approx(
        {"filler_given_incorrect": 2 / 3, "filler_words_incorrect": 3.0, "filler_given_correct": 1 / 3, "filler_words_correct": 3.0}
    )
    none = conditional_verbosity([0, 1], [False, False])
    assert none["filler_given_correct"] is None and none["filler_words_correct"] is None
    assert none["filler_given_incorrect"] == 0.5 and none["filler_words_incorrect"] == 1.0


def test_arithmetic_many_distinct_correct_traces_per_prompt():
    t = ArithmeticTask(ArithmeticSpec(error_rate=0.0))
    p = t.problem(347, 285)
    rng = random.Random(0)
    traces = {t.trace(p, rng) for _ in range(300)}
    assert len(traces) >= 10  # 3 styles x 4 check counts
    assert "#632" in traces and "12,13,6#632" in traces and "7+5=12,4+8+1=13,3+2+1=6#632" in traces


def test_incorrect_reference_is_fixed_and_wrong():
    for t in (ArithmeticTask(), CountdownTask()):
        for p in t.eval_problems()[:50]:
            wrong = t.incorrect_reference(p)
            assert wrong == t.incorrect_reference(p) and wrong != p.reference


def test_countdown_solutions_reach_the_target_using_each_number_at_most_once():
    sols = solutions((3, 5, 7), 22)
    exprs = [e for e, _ in sols]
    assert "(5*3)+7" in exprs or "7+(5*3)" in exprs or "(3*5)+7" in exprs
    for e, _ in sols:
        used = [int(x) for x in "".join(c if c.isdigit() else " " for c in e).split()]
        pool = [3, 5, 7]
        for u in used:
            pool.remove(u)  # raises if a number is reused or invented
    t = CountdownTask()
    counts = [len(solutions(tuple(p.meta["numbers"]), p.meta["target"])) for p in t.eval_problems()[:100]]
    assert sum(c >= 2 for c in counts) >= 70  # several correct equations for most prompts


def test_countdown_traces_and_mistakes():
    t = CountdownTask(CountdownSpec(error_rate=0.0))
    rng = random.Random(3)
    from fractions import Fraction

    def value(expr: str) -> Fraction:  # test-only evaluator over the generator's own output
        return eval(expr, {"__builtins__": {}}, {})  # noqa: S307 - trusted strings built by the task

    for p in t.train_problems(rng, 100):
        tr = t.trace(p, rng)
        assert value(tr.rsplit("#", 1)[1]) == p.meta["target"], tr
    t = CountdownTask(CountdownSpec(error_rate=1.0))
    misses = sum(value(t.trace(p, rng).rsplit("#", 1)[1]) != p.meta["target"] for p in t.train_problems(rng, 100))
    assert misses >= 90


def test_tokenizer_round_trips_every_task_string(tmp_path):
    from transformers import AutoTokenizer

    tok = build_char_tokenizer()
    tok.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    rng = random.Random(0)
    spec = ArithmeticSpec(ramble_prob=0.5, check_position="both")
    for t in (ArithmeticTask(spec), CountdownTask()):
        for p in t.train_problems(rng, 200) + t.eval_problems()[:50]:
            for text in (p.prompt, t.trace(p, rng)):
                for k in (tok, loaded):
                    ids = k(text, add_special_tokens=False)["input_ids"]
                    assert len(ids) == len(text) and k.unk_token_id not in ids
                    assert k.decode(ids) == text
    ids = tok("a\n\nb", add_special_tokens=False)["input_ids"]
    assert len(ids) == 4  # newlines are characters like any other
    assert tok.decode(ids + [tok.eos_token_id], skip_special_tokens=True) == "a\n\nb"


def test_build_task_by_name_and_unknown(cli):
    assert build_task("countdown").name == "countdown"
    with pytest.raises(UserError, match="unknown built-in task"):
        build_task("chess")


def test_too_many_held_out_prompts_is_a_user_error():
    with pytest.raises(UserError, match="num_eval"):
        ArithmeticTask(ArithmeticSpec(digits=1, num_eval=80))


# --- dataset tasks (local files only) -------------------------------------------------------------
def test_gold_extraction():
    assert extract_gold("Janet has ... #### 1,234", "gsm8k") == "1234"
    assert extract_gold("no marker", "gsm8k") is None
    assert extract_gold("so \\boxed{\\frac{1}{2}} and \\boxed{3}", "boxed") == "3"
    assert last_boxed("\\boxed{\\frac{a}{b}}") == "\\frac{a}{b}"
    assert extract_gold("answer: 42.", "regex", r"answer: (\d+)") == "42"
    assert extract_gold(" 7 ", "none") == "7"


def _rows(n: int) -> list[dict]:
    return [{"question": f"What is {i} + {i}?", "answer": f"{i} plus {i} is {2 * i}. #### {2 * i}"} for i in range(n)]


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_dataset_task_from_local_files(tmp_path, fmt):
    import pandas as pd

    path = tmp_path / f"data.{fmt}"
    df = pd.DataFrame(_rows(200))
    if fmt == "jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in _rows(200)))
    elif fmt == "csv":
        df.to_csv(path, index=False)
    else:
        df.to_parquet(path)
    spec = DatasetSpec(path=str(path), answer_extraction="gsm8k", prompt_template="Q: {question}\nA:", eval_fraction=0.2)
    t = build_task(spec)
    ev = t.eval_problems()
    assert 20 <= len(ev) <= 60  # ~20% held out by hash
    tr = t.train_problems(random.Random(0), 500)
    assert not {p.prompt for p in ev} & {p.prompt for p in tr}
    p = ev[0]
    i = int(p.prompt.split()[3])
    assert p.reference == str(2 * i) and p.prompt.startswith("Q: What is")
    assert build_task(spec).eval_problems() == ev  # deterministic


def test_dataset_task_with_its_own_eval_split(tmp_path):
    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    train.write_text("".join(json.dumps(r) + "\n" for r in _rows(50)))
    test.write_text("".join(json.dumps(r) + "\n" for r in _rows(60)[50:]))
    spec = DatasetSpec(path=str(train), eval_path=str(test), answer_extraction="gsm8k", num_eval=5)
    t = build_task(spec)
    assert [p.reference for p in t.eval_problems()] == [str(2 * i) for i in range(50, 55)]
    assert all(int(p.reference) < 100 for p in t.train_problems(random.Random(0), 200))


@pytest.mark.parametrize(
    "spec_kwargs,rows,match",
    [
        ({"question_field": "prompt"}, _rows(5), "no field"),
        ({"answer_extraction": "gsm8k"}, [{"question": "q", "answer": "no marker"}], "row 0"),
        ({"prompt_template": "{nope}"}, _rows(5), "prompt_template"),
    ],
)
def test_dataset_task_errors_name_the_problem(tmp_path, spec_kwargs, rows, match):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UserError, match=match):
        build_task(DatasetSpec(path=str(path), **spec_kwargs))


def test_dataset_missing_file(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        build_task(DatasetSpec(path=str(tmp_path / "missing.jsonl")))


@pytest.mark.parametrize(
    "answers, match",
    [
        ([None], r"row 0: answer is null"),
        ([[1, 2]], r"row 0: answer is a list"),
        ([{"a": 1}], r"row 0: answer is a"),
    ],
)
def test_null_or_list_gold_answers_are_errors_naming_the_row(tmp_path, answers, match):
    path = tmp_path / "d.jsonl"
    rows = [{"question": f"q{i}", "answer": answers[0]} for i in range(5)]  # one type per column, as Arrow needs
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UserError, match=match):
        build_task(DatasetSpec(path=str(path)))


@pytest.mark.parametrize("answer, extraction, match", [
    ("", "none", r"row 2: the gold answer is empty"),
    ("   ", "none", r"row 2: the gold answer is empty"),
    ("work ####  ", "gsm8k", r"row 2: the gold answer is empty"),
    ("\\boxed{}", "boxed", r"row 2: the gold answer is empty"),
])
def test_an_empty_gold_answer_is_an_error_naming_the_row(tmp_path, answer, extraction, match):
    path = tmp_path / "d.jsonl"
    rows = [{"question": f"q{i}", "answer": answer if i == 2 else "#### 7" if extraction == "gsm8k" else "\\boxed{7}"
             if extraction == "boxed" else "7"} for i in range(5)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UserError, match=match):
        build_task(DatasetSpec(path=str(path), answer_extraction=extraction))


def test_a_nan_or_empty_cell_as_gold_is_an_error_naming_the_row(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text('{"question": "q0", "answer": 1.5}\n{"question": "q1", "answer": NaN}\n{"question": "q2", "answer": 3.0}\n')
    with pytest.raises(UserError, match=r"row 1: answer is nan \(an empty cell\?\)"):
        build_task(DatasetSpec(path=str(path)))
    path = tmp_path / "d.csv"
    path.write_text("question,answer\nq0,1.5\nq1,\nq2,3\n")  # a CSV's empty cell reads as null
    with pytest.raises(UserError, match=r"row 1: answer is null"):
        build_task(DatasetSpec(path=str(path)))


def test_a_template_touching_a_missing_attribute_is_an_error_naming_the_field_and_row(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows(5)))
    for template in ("{question.nope}\n", "{question[0][1]}\n", "{question!z}\n"):
        with pytest.raises(UserError, match=r"task.prompt_template: .*row 0"):
            build_task(DatasetSpec(path=str(path), prompt_template=template))


@pytest.mark.parametrize("regex, match", [("(unclosed", "not a valid regular expression"), (r"\d+", "group")])
def test_a_bad_answer_regex_is_refused_by_the_schema(tmp_path, cli, regex, match):
    with pytest.raises(ValueError, match=match):
        DatasetSpec(path="d.jsonl", answer_extraction="regex", answer_regex=regex)
    res = cli("recipes", "validate", "grpo", "--set", "task.name=dataset", "--set", "task.path=d.jsonl",
              "--set", "task.answer_extraction=regex", "--set", f"task.answer_regex={regex}")
    assert res.code == 2 and "answer_regex" in res.stderr and "internal error" not in res.stderr, res.stderr


def test_a_row_without_its_question_is_an_error_naming_the_row(tmp_path):
    """A JSONL row that lacks the question (or has it null) reads as None: without the check its
    prompt would be the text 'None', trained on silently."""
    path = tmp_path / "d.jsonl"
    rows = [{"question": f"q{i}", "answer": str(i)} for i in range(5)]
    rows[2] = {"answer": "2"}
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(UserError, match=r"row 2: question is null or missing"):
        build_task(DatasetSpec(path=str(path)))
