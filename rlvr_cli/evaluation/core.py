"""Evaluate a policy on a task's held-out prompts: pass@k, maj@k, length, truncation.

n samples per prompt at a fixed sampling seed, so every checkpoint of every run is evaluated on the
same prompts with the same random stream; training calls this same function on its eval cadence, so
a run's own ``eval/step_N.json`` and a later ``rlvr eval`` of that checkpoint agree.
"""

from __future__ import annotations

import time

import torch

from rlvr_cli.algo.passk import maj_at_k, mean_pass_at_k
from rlvr_cli.sampling import generate
from rlvr_cli.tasks import encode_prompt

DEFAULT_BATCH = 512


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def evaluate_policy(
    model,
    tokenizer,
    task,
    scorer,
    *,
    n: int,
    num_prompts: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    max_new_tokens: int = 64,
    seed: int = 1234,
    pass_at_k: list[int] | None = None,
    maj_at_k_values: list[int] | None = None,
    autocast_dtype=None,
    batch_size: int = DEFAULT_BATCH,
) -> dict:
    """Sample n responses for each of the first ``num_prompts`` held-out prompts and score them.

    Returns the eval record of DESIGN.md §3 (pass_at_k, maj_at_k, n, num_prompts, len_mean, ...)
    plus ``per_prompt`` correct counts. Deterministic for a seed on a given machine.
    """
    from rlvr_cli.rewards import ScoreItem

    problems = task.eval_problems()[:num_prompts]
    pass_at_k = [k for k in (pass_at_k or [1]) if k <= n]
    maj_at_k_values = [k for k in (maj_at_k_values or pass_at_k) if k <= n]
    was_training = model.training
    model.eval()
    gen = torch.Generator(device=next(model.parameters()).device)
    gen.manual_seed(seed)
    flat = [(p, j) for p in problems for j in range(n)]
    prompt_cache = {p.id: encode_prompt(tokenizer, task, p) for p in problems}
    texts, lengths, reasons = [], [], []
    t0 = time.perf_counter()
    gen_tokens = 0
    for start in range(0, len(flat), batch_size):
        chunk = flat[start : start + batch_size]
        out = generate(
            model,
            [prompt_cache[p.id] for p, _ in chunk],
            max_new_tokens=max_new_tokens,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            temperature=temperature,
            top_p=top_p,
            generator=gen,
            return_logprobs=False,
            autocast_dtype=autocast_dtype,
        )
        gen_tokens += out.gen_tokens
        for ids, why in zip(out.response_ids, out.finish_reasons):
            texts.append(tokenizer.decode(ids, skip_special_tokens=True))
            lengths.append(len(ids))
            reasons.append(why)
    sample_s = time.perf_counter() - t0
    scores = scorer.score(
        [ScoreItem(problem=p, response=t, sample_index=j, truncated=(r == "length")) for (p, j), t, r in zip(flat, texts, reasons)]
    )
    if was_training:
        model.train()

    per_prompt, answers, flags, distinct = [], [], [], []
    for i, p in enumerate(problems):
        block = range(i * n, (i + 1) * n)
        ok = [scores[k].correct for k in block]
        per_prompt.append({"id": p.id, "correct": sum(ok)})
        answers.append([scores[k].answer for k in block])
        flags.append(ok)
        distinct.append(len({texts[k] for k in block if scores[k].correct}))
    counts = [pp["correct"] for pp in per_prompt]
    correct_len = [lengths[k] for k in range(len(flat)) if scores[k].correct]
    wrong_len = [lengths[k] for k in range(len(flat)) if not scores[k].correct]
    outcomes: dict[str, int] = {}
    for s in scores:
        outcomes[s.outcome] = outcomes.get(s.outcome, 0) + 1
    return {
        "n": n,
        "num_prompts": len(problems),
        "temperature": temperature,
        "top_p": top_p,
        "max_new_tokens": max_new_tokens,
        "seed": seed,
        "pass_at_k": {str(k): mean_pass_at_k(counts, n, k) for k in pass_at_k},
        "maj_at_k": {
            str(k): sum(maj_at_k(a, f, k) for a, f in zip(answers, flags)) / len(problems) for k in maj_at_k_values
        },
        "accuracy": sum(counts) / (n * len(problems)),
        "len_mean": _mean(lengths),
        "len_correct": _mean(correct_len),
        "len_incorrect": _mean(wrong_len),
        "truncated_frac": sum(r == "length" for r in reasons) / len(reasons),
        "distinct_correct": _mean(distinct),
        "outcomes": outcomes,
        "gen_tokens": gen_tokens,
        "sample_s": round(sample_s, 3),
        "per_prompt": per_prompt,
    }
