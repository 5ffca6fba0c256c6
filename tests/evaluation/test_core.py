"""evaluate_policy and its decoding controls (rlvr_cli/evaluation): determinism, budget forcing,
minimum thinking, greedy accuracy, the record's own consistency, and the protocol settings.

On the untrained tiny model (instant) with a stub scorer, so correctness is not always 0.
"""

from __future__ import annotations

import pytest
import torch

from rlvr_cli.algo.passk import mean_pass_at_k, mean_pass_hat_k
from rlvr_cli.errors import UserError
from rlvr_cli.evaluation.core import VERBOSITY_KEYS, evaluate_policy
from rlvr_cli.evaluation.decoding import Decoding, draw, itc_label
from rlvr_cli.evaluation.settings import (
    EvalSettings,
    powers_of_two,
    protocol_label,
    with_overrides,
)
from rlvr_cli.models.tiny import build_tiny_model
from rlvr_cli.models.tokenizer import build_char_tokenizer
from rlvr_cli.rewards import Score
from rlvr_cli.tasks import build_task

TIMING = {"sample_s", "gen_tokens"}


class StubScorer:
    """Correct iff the response has an even number of characters; the answer is its last character."""

    def score(self, items, functions=True):
        assert not functions  # an evaluation reads correctness only: it never calls a user's reward function
        out = []
        for it in items:
            ok = len(it.response) % 2 == 0 and not it.truncated
            out.append(Score(float(ok), ok, "correct" if ok else "incorrect", it.response[-1:] or None))
        return out


@pytest.fixture(scope="module")
def tiny():
    tok = build_char_tokenizer()
    return build_tiny_model(tok, seed=0).eval(), tok


@pytest.fixture(scope="module")
def task():
    return build_task("arithmetic")


def run(tiny, task, batch_size=None, **kw):
    """``evaluate_policy`` with the settings ``kw`` over small ones (temperature 1, maj@k = the pass@k values)."""
    model, tok = tiny
    args = {"n": 8, "num_prompts": 3, "temperature": 1.0, "top_p": 1.0, "max_new_tokens": 12, "seed": 1234,
            "pass_at_k": [1, 2, 4, 8], "maj_at_k": None, **kw}
    batch = {"batch_size": batch_size} if batch_size is not None else {}
    return evaluate_policy(model, tok, task, StubScorer(), EvalSettings(**args), **batch)


def strip(record, extra=()):
    return {k: v for k, v in record.items() if k not in TIMING | set(extra)}


def test_eval_is_deterministic_for_a_seed_and_restores_train_mode(tiny, task):
    model, _ = tiny
    model.train()
    try:
        a = run(tiny, task, seed=5)
        assert model.training  # evaluation switched to eval mode and back
    finally:
        model.eval()
    b = run(tiny, task, seed=5)
    c = run(tiny, task, seed=6)
    assert strip(a) == strip(b)
    assert a["samples_digest"] != c["samples_digest"]
    # nor does the batch size: every draw is keyed by (seed; prompt, sample), so 24 samples in one batch,
    # in batches of 5 (the last one short) or one at a time give the same record
    for batch_size in (24, 5, 1):
        assert strip(run(tiny, task, seed=5, batch_size=batch_size)) == strip(a), batch_size


def test_record_is_consistent_with_its_per_prompt_counts(tiny, task):
    r = run(tiny, task, seed=1)
    counts = [p["correct"] for p in r["per_prompt"]]
    assert 0 < sum(counts) < 24  # the stub makes some right, some wrong
    for k in ("1", "2", "4", "8"):
        assert r["pass_at_k"][k] == pytest.approx(mean_pass_at_k(counts, 8, int(k)))
    assert r["pass_at_k"]["1"] == pytest.approx(r["accuracy"])
    c = sum(counts)
    mixed = (r["len_correct"] * c + r["len_incorrect"] * (24 - c)) / 24
    assert mixed == pytest.approx(r["len_mean"])
    assert set(r["maj_at_k"]) == {"1", "2", "4", "8"}
    assert r["budget"] is None and r["min_think"] is None and r["greedy"] is False and r["label"] is None
    assert r["forced_frac"] is None and r["greedy_accuracy"] is None
    assert list(r)[-1] == "per_prompt"
    # pass^k from the same counts; pass^1 = pass@1, and pass^k <= pass@k
    assert set(r["pass_hat_k"]) == set(r["pass_at_k"])
    for k in ("1", "2", "4", "8"):
        assert r["pass_hat_k"][k] == pytest.approx(mean_pass_hat_k(counts, 8, int(k)))
        assert r["pass_hat_k"][k] <= r["pass_at_k"][k] + 1e-12
    assert r["pass_hat_k"]["1"] == pytest.approx(r["pass_at_k"]["1"])
    # one majority verdict per prompt, in per_prompt's order: their mean is maj@n
    assert len(r["per_prompt_majority"]) == 3 and all(isinstance(x, bool) for x in r["per_prompt_majority"])
    assert sum(r["per_prompt_majority"]) / 3 == pytest.approx(r["maj_at_k"]["8"])
    assert r["per_prompt_greedy"] is None


def test_budget_forcing_only_appends_the_marker_and_an_answer(tiny, task):
    model, tok = tiny
    mark = tok("#", add_special_tokens=False)["input_ids"]
    prompts = [tok(p.prompt)["input_ids"] for p in task.eval_problems()[:4]] * 4
    budget, answer = 6, 5
    plain, _ = draw(model, tok, "#", prompts, Decoding(max_new_tokens=budget), torch.Generator().manual_seed(0))
    forced, _ = draw(
        model, tok, "#", prompts, Decoding(budget=budget, answer_tokens=answer), torch.Generator().manual_seed(0)
    )
    assert any(r.forced for r in forced) and any(not r.truncated for r in plain)
    for p, f in zip(plain, forced):
        assert f.ids[: len(p.ids)] == p.ids  # thinking is the same sample; forcing only appends
        if not p.truncated:
            assert f.ids == p.ids and not f.forced  # finished within the budget: untouched
        elif f.forced:
            assert f.ids[budget : budget + len(mark)] == mark
            assert len(f.ids) <= budget + len(mark) + answer
        else:  # it had written the marker itself: it only continues
            assert "#" in tok.decode(p.ids) and len(f.ids) <= budget + answer


def test_budget_record_is_labelled(tiny, task):
    r = run(tiny, task, seed=2, budget=4, answer_tokens=3)
    assert r["budget"] == 4 and r["max_new_tokens"] == 4 and r["answer_tokens"] == 3
    assert r["label"] == "budget_4-answer_tokens_3"
    assert 0 < r["forced_frac"] <= 1 and r["len_mean"] <= 4 + 1 + 3


def test_min_think_forbids_marker_and_eos_before_n_tokens(tiny, task):
    model, tok = tiny
    banned = {tok.eos_token_id, *tok("#", add_special_tokens=False)["input_ids"]}
    prompts = [tok(p.prompt)["input_ids"] for p in task.eval_problems()[:4]] * 8
    early = lambda rs, m: sum(any(t in banned for t in r.ids[:m]) for r in rs)
    free, _ = draw(model, tok, "#", prompts, Decoding(max_new_tokens=30), torch.Generator().manual_seed(0))
    held, _ = draw(
        model, tok, "#", prompts, Decoding(max_new_tokens=30, min_think=10), torch.Generator().manual_seed(0)
    )
    assert early(free, 10) > 0  # the check below is not vacuous
    assert early(held, 10) == 0
    r = run(tiny, task, min_think=4)
    assert r["min_think"] == 4 and r["label"] == "min_think_4"


def test_greedy_adds_greedy_accuracy_and_leaves_the_samples_alone(tiny, task):
    plain = run(tiny, task, seed=3)
    g3 = run(tiny, task, seed=3, greedy=True)
    g4 = run(tiny, task, seed=4, greedy=True)
    greedy_keys = ("greedy", "label", "greedy_accuracy", "greedy_len_mean", "per_prompt_greedy")
    assert strip(g3, greedy_keys) == strip(plain, greedy_keys)
    assert g3["greedy"] is True and g3["label"] == "greedy"
    assert 0 <= g3["greedy_accuracy"] <= 1
    # the greedy verdict per prompt, in per_prompt's order, averages to greedy_accuracy
    assert len(g3["per_prompt_greedy"]) == len(g3["per_prompt"]) == 3
    assert sum(g3["per_prompt_greedy"]) / 3 == pytest.approx(g3["greedy_accuracy"])
    # the greedy response does not depend on the sampling seed
    assert (g3["greedy_accuracy"], g3["greedy_len_mean"]) == (g4["greedy_accuracy"], g4["greedy_len_mean"])


def test_settings_overrides_and_defaults():
    base = EvalSettings(n=16, pass_at_k=[1, 4, 16], maj_at_k=[16])
    assert with_overrides(base, "#") == with_overrides(base, "#", n=16) == base
    s = with_overrides(base, "#", n=4)
    assert s.pass_at_k == powers_of_two(4) == [1, 2, 4] and s.maj_at_k == [1, 2, 4]
    s = with_overrides(base, "#", pass_at_k=[2, 8])
    assert s.maj_at_k == [2, 8]
    with pytest.raises(UserError, match="--pass-at-k 32"):
        with_overrides(base, "#", pass_at_k=[1, 32])
    with pytest.raises(UserError, match="--maj-at-k 8"):
        with_overrides(base, "#", n=4, maj_at_k=[8])
    with pytest.raises(UserError, match="--min-think 10: must be <= --budget"):
        with_overrides(base, "#", budget=8, min_think=10)
    with pytest.raises(UserError, match="--min-think 64: must be below --max-new-tokens"):
        with_overrides(base, "#", min_think=64)
    with pytest.raises(UserError) as e:
        with_overrides(base, "", budget=8, min_think=2)
    assert [p.split(":")[0] for p in e.value.problems] == ["--budget", "--min-think"]


def test_protocol_labels():
    base = EvalSettings()
    assert protocol_label(base, base) is None
    assert protocol_label(base, with_overrides(base, "#", budget=32)) == "budget_32"
    s = with_overrides(base, "#", n=4, temperature=0.6, greedy=True)
    assert protocol_label(base, s) == "n_4-temperature_0.6-pass_at_k_1,2,4-maj_at_k_1,2,4-greedy"
    assert protocol_label(base, base, "countdown") == "task_countdown"
    assert itc_label(None, None, False) is None
    assert itc_label(8, 2, True) == "budget_8-min_think_2-greedy"


class _FillerTask:
    """The arithmetic task with a stand-in filler count (the untrained model never writes `wait,`)."""

    def __init__(self, task, count):
        self._task, self.filler_words = task, count

    def __getattr__(self, name):
        return getattr(self._task, name)


def test_conditional_verbosity_in_the_record(tiny, task):
    plain = run(tiny, task, seed=1)
    every = run(tiny, _FillerTask(task, lambda r: 2), seed=1)
    never = run(tiny, _FillerTask(task, lambda r: 0), seed=1)
    assert plain["filler_given_incorrect"] == 0.0  # the arithmetic task counts `wait,`: none in random text
    assert 0 < plain["accuracy"] < 1  # both cases present
    assert every["filler_given_incorrect"] == every["filler_given_correct"] == 1.0
    assert every["filler_words_incorrect"] == every["filler_words_correct"] == 2.0
    assert never["filler_given_correct"] == 0.0 and never["filler_words_correct"] is None
    assert strip(every, VERBOSITY_KEYS) == strip(plain, VERBOSITY_KEYS)  # the samples are the same


def test_task_without_filler_words_gives_none(tiny):
    r = run(tiny, build_task("countdown"))
    assert all(r[k] is None for k in VERBOSITY_KEYS)
