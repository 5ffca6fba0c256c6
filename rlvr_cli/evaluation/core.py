"""Evaluate a policy on a task's held-out prompts: pass@k, maj@k, length, truncation.

n samples per prompt at a fixed sampling seed, so every checkpoint of every run is evaluated on the
same prompts with the same random stream: sample j of prompt i draws with the keyed uniforms of
(seed; i, j) (:mod:`rlvr_cli.keyed_random`), whatever the batch size or the number of processes. Under
N processes (a run under torchrun) each rank samples a contiguous share of the (prompt, sample) pairs
and the responses are gathered in order, so every rank computes the one-process record; training calls this same function on its eval cadence, so
a run's own ``eval/step_N.json`` and a later ``rlvr eval`` of that checkpoint agree.

The record (docs/design.md §4; every key is always present, ``None`` where it does not apply):

- settings: ``n``, ``num_prompts``, ``temperature``, ``top_p``, ``max_new_tokens`` (the thinking
  budget when ``budget`` is set), ``seed``, ``greedy``, ``budget``, ``min_think``, ``answer_tokens``
  (with a budget), ``label`` (``budget_32-min_think_8-greedy``; None for plain sampling);
- ``pass_at_k`` {"k": mean over prompts of 1 - C(n-c, k)/C(n, k)}, ``pass_hat_k`` {"k": mean over
  prompts of C(c, k)/C(n, k), all k right} and ``maj_at_k`` {"k": mean over prompts of the
  majority-vote accuracy over disjoint blocks of k} (:mod:`rlvr_cli.algo.passk`);
- ``accuracy`` (= pass@1, over all n samples), ``greedy_accuracy`` and ``greedy_len_mean`` (one
  greedy response per prompt, with ``greedy``);
- ``len_mean``, ``len_correct``, ``len_incorrect``: mean response tokens (EOS and a forced marker
  included) over all / correct / incorrect samples; ``truncated_frac``: share without EOS within
  the limit; ``forced_frac``: share whose answer marker the budget forced;
- ``distinct_correct``: distinct correct response texts per prompt (diversity of correct reasoning);
- conditional verbosity, for a task that knows its filler words (``task.filler_words(response)``;
  None otherwise): ``filler_given_incorrect`` / ``filler_given_correct`` = P(any filler | own answer
  wrong / right), ``filler_words_incorrect`` / ``filler_words_correct`` = mean filler words of the
  responses that ramble, in each case (:func:`rlvr_cli.algo.length_bias.conditional_verbosity`);
- ``outcomes`` {outcome: count} of the true verifier; ``gen_tokens``, ``sample_s``;
- ``samples_digest``: a hash of every sampled response in order (equal digests = the same samples);
- ``per_prompt_majority``: [bool] per prompt, in ``per_prompt``'s order: the majority vote over all n
  samples is right (maj@n of that prompt); ``per_prompt_greedy``: [bool] likewise for the greedy
  response (None without ``greedy``). The binary outcomes a paired test between two runs compares.
- ``per_prompt``: [{"id", "correct"}] (c per prompt, from which any pass@k can be recomputed).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from rlvr_cli.algo.length_bias import conditional_verbosity
from rlvr_cli.algo.passk import maj_at_k, mean_pass_at_k, mean_pass_hat_k
from rlvr_cli.envs import problem_row
from rlvr_cli.evaluation.decoding import Decoding, Response, draw, draw_turns, itc_label
from rlvr_cli.evaluation.settings import EvalSettings
from rlvr_cli.keyed_random import row_keys, stream_key
from rlvr_cli.tasks import encode_prompt

DEFAULT_BATCH = 256
"""Sequences sampled together: memory and speed, not results (every sample's draws are keyed by its
identity, so any batch size gives the same samples). A batch this size keeps the KV cache, read for
every token drawn, small; docs/speed.md has the measurement that chose it."""


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


@contextmanager
def _eval_mode(model):
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        if was_training:
            model.train()


def evaluate_policy(
    model,
    tokenizer,
    task,
    scorer,
    settings: EvalSettings,
    *,
    autocast_dtype=None,
    batch_size: int = DEFAULT_BATCH,
    on_progress: Callable[[int], None] | None = None,
) -> dict:
    """Sample ``settings.n`` responses for each of the first ``settings.num_prompts`` held-out prompts and
    score them (``pass_at_k`` None means [1]; ``maj_at_k`` None means the pass@k values).

    Returns the eval record (module docstring). k values above n are dropped. ``greedy`` adds one
    greedy response per prompt; ``budget``/``min_think`` (see :mod:`.decoding`) apply to both.
    ``on_progress(responses_done)`` is called after every batch. Deterministic for a seed on a
    given machine, whatever the batch size.
    """
    s = settings
    problems = task.eval_problems()[:s.num_prompts]
    ks = [k for k in (s.pass_at_k or [1]) if k <= s.n]
    maj_ks = [k for k in (s.maj_at_k or ks) if k <= s.n]
    dec = Decoding(
        temperature=s.temperature,
        top_p=s.top_p,
        max_new_tokens=s.max_new_tokens,
        budget=s.budget,
        min_think=s.min_think,
        answer_tokens=s.answer_tokens,
    )
    prompts = {p.id: encode_prompt(tokenizer, task, p) for p in problems}
    draw_for = _Drawer(model, tokenizer, task.answer_marker, prompts, s.seed, autocast_dtype, batch_size, on_progress,
                       s.turns)
    flat = [(i, p, j) for i, p in enumerate(problems) for j in range(s.n)]
    t0 = time.perf_counter()
    with _eval_mode(model):
        sampled, gen_tokens = draw_for(flat, dec)
        sample_s = time.perf_counter() - t0
        firsts = [(i, p, 0) for i, p in enumerate(problems)]
        by_argmax = draw_for(firsts, replace(dec, greedy=True))[0] if s.greedy else None
    flat = [(p, j) for _, p, j in flat]
    texts = [tokenizer.decode(r.ids, skip_special_tokens=True) for r in sampled]
    scores = _score(scorer, flat, texts, sampled)
    metrics = _sampled_metrics(problems, s.n, ks, maj_ks, sampled, texts, scores, s.budget is not None)
    g_acc, g_len, g_right = _greedy_metrics(scorer, tokenizer, problems, by_argmax)
    per_prompt = metrics.pop("per_prompt")  # last in the file: the long list
    majority = metrics.pop("per_prompt_majority")
    return {
        "n": s.n,
        "num_prompts": len(problems),
        "temperature": s.temperature,
        "top_p": s.top_p,
        "max_new_tokens": s.budget if s.budget is not None else s.max_new_tokens,
        "seed": s.seed,
        "greedy": s.greedy,
        "budget": s.budget,
        "min_think": s.min_think,
        "answer_tokens": s.answer_tokens if s.budget is not None else None,
        "label": itc_label(s.budget, s.min_think, s.greedy, s.answer_tokens),
        "pass_at_k": metrics.pop("pass_at_k"),
        "pass_hat_k": metrics.pop("pass_hat_k"),
        "maj_at_k": metrics.pop("maj_at_k"),
        "accuracy": metrics.pop("accuracy"),
        "greedy_accuracy": g_acc,
        "greedy_len_mean": g_len,
        **metrics,
        **_verbosity(task, texts, scores),
        "gen_tokens": gen_tokens,
        "sample_s": round(sample_s, 3),
        "samples_digest": hashlib.blake2b("\x1e".join(texts).encode("utf-8"), digest_size=8).hexdigest(),
        "per_prompt_majority": majority,
        "per_prompt_greedy": g_right,
        "per_prompt": per_prompt,
    }


@dataclass(frozen=True)
class _Drawer:
    """Draws an evaluation's responses: what stays fixed across its plain and its greedy draw."""

    model: Any
    tokenizer: Any
    marker: str | None
    prompts: dict
    """Problem id -> prompt token ids."""
    seed: int
    autocast_dtype: Any
    batch_size: int
    on_progress: Callable[[int], None] | None
    turns: Any = None
    """A multi-turn run's trajectories (:func:`.decoding.draw_turns`); None: single-turn."""

    def __call__(self, flat: list, dec: Decoding) -> tuple[list[Response], int]:
        """Responses for (prompt index, problem, sample index) triples in batches, keyed by (seed; i, j).

        Each rank draws its contiguous share of ``flat``; the shares are gathered in order.
        """
        from rlvr_cli import dist

        stream = stream_key(self.seed, "eval")
        mine = [flat[k] for k in dist.share(len(flat))]
        out: list[Response] = []
        tokens = 0
        for start in range(0, len(mine), self.batch_size):
            chunk = mine[start : start + self.batch_size]
            keys = row_keys(stream, [(i, j) for i, _, j in chunk])
            prompts = [self.prompts[p.id] for _, p, _ in chunk]
            if self.turns is not None:
                got, used = draw_turns(self.model, self.tokenizer, prompts, [problem_row(p) for _, p, _ in chunk], dec,
                                       self.turns, self.autocast_dtype, keys)
            else:
                got, used = draw(self.model, self.tokenizer, self.marker, prompts, dec,
                                 autocast_dtype=self.autocast_dtype, row_keys=keys)
            out += got
            tokens += used
            if self.on_progress is not None:
                self.on_progress(len(chunk))
        return dist.gather_concat(out), int(dist.all_reduce_sum(tokens))


def _greedy_metrics(scorer, tokenizer, problems, responses) -> tuple[float | None, float | None, list[bool] | None]:
    """(accuracy, mean length, correct per prompt) of one greedy response per prompt; all None without them."""
    if responses is None:
        return None, None, None
    texts = [tokenizer.decode(r.ids, skip_special_tokens=True) for r in responses]
    right = [bool(s.correct) for s in _score(scorer, [(p, 0) for p in problems], texts, responses)]
    return sum(right) / len(right), _mean([len(r.ids) for r in responses]), right


VERBOSITY_KEYS = ("filler_given_incorrect", "filler_given_correct", "filler_words_incorrect", "filler_words_correct")


def _verbosity(task, texts, scores) -> dict:
    """Conditional verbosity of the samples (None for a task without ``filler_words``)."""
    count = getattr(task, "filler_words", None)
    if count is None:
        return dict.fromkeys(VERBOSITY_KEYS)
    return conditional_verbosity([count(t) for t in texts], [s.correct for s in scores])


def _score(scorer, flat, texts, responses):
    from rlvr_cli.rewards import ScoreItem

    items = [
        ScoreItem(problem=p, response=t, sample_index=j, truncated=r.truncated, completion_ids=r.ids)
        for (p, j), t, r in zip(flat, texts, responses)
    ]
    return scorer.score(items, functions=False)  # correctness only: the user's reward functions are not called


def _sampled_metrics(problems, n, ks, maj_ks, responses, texts, scores, budgeted: bool) -> dict:
    """pass@k, maj@k, accuracy, lengths, truncation, diversity and outcomes of n samples per prompt."""
    per_prompt, answers, flags, distinct = [], [], [], []
    for i, p in enumerate(problems):
        block = range(i * n, (i + 1) * n)
        ok = [scores[k].correct for k in block]
        per_prompt.append({"id": p.id, "correct": sum(ok)})
        answers.append([scores[k].answer for k in block])
        flags.append(ok)
        distinct.append(len({texts[k] for k in block if scores[k].correct}))
    counts = [pp["correct"] for pp in per_prompt]
    lengths = [len(r.ids) for r in responses]
    outcomes: dict[str, int] = {}
    for s in scores:
        outcomes[s.outcome] = outcomes.get(s.outcome, 0) + 1
    return {
        "pass_at_k": {str(k): mean_pass_at_k(counts, n, k) for k in ks},
        "pass_hat_k": {str(k): mean_pass_hat_k(counts, n, k) for k in ks},
        "maj_at_k": {str(k): sum(maj_at_k(a, f, k) for a, f in zip(answers, flags)) / len(problems) for k in maj_ks},
        "accuracy": sum(counts) / (n * len(problems)),
        "len_mean": _mean(lengths),
        "len_correct": _mean([x for x, s in zip(lengths, scores) if s.correct]),
        "len_incorrect": _mean([x for x, s in zip(lengths, scores) if not s.correct]),
        "truncated_frac": sum(r.truncated for r in responses) / len(responses),
        "forced_frac": sum(r.forced for r in responses) / len(responses) if budgeted else None,
        "distinct_correct": _mean(distinct),
        "outcomes": outcomes,
        "per_prompt_majority": [bool(maj_at_k(a, f, n)) for a, f in zip(answers, flags)],
        "per_prompt": per_prompt,
    }
