"""Supervised fine-tuning (`algorithm: sft`): the warm start and the R1-style SFT stages.

Loss: mean negative log-likelihood over response tokens (EOS included), prompt tokens masked,

    L = - sum_{i,t} m_it log pi(y_it | q_i, y_i,<t) / sum_{i,t} m_it

Data: fresh traces of a built-in task every step (``sft.data: null``; deterministic by seed and step)
or a JSONL of prompt/response pairs (``sft.data``; e.g. the output of `rlvr verify --keep correct`),
visited in a seeded shuffled order, epoch after epoch. Same run directory, logs and checkpoints as RL.
"""

from __future__ import annotations

import json
import random
import time
from pathlib import Path

from rlvr_cli.algo.aggregation import aggregate, aggregation_normalizer
from rlvr_cli.errors import UserError
from rlvr_cli.keyed_random import stream_key
from rlvr_cli.metrics import step_row
from rlvr_cli.recipe.schema import Recipe, RewardSpec
from rlvr_cli.tasks import Problem, build_task, encode_prompt
from rlvr_cli.train.packing import length_sorted_chunks, pack, response_logprobs
from rlvr_cli.train.loop import apply_update, run_steps
from rlvr_cli.train.progress import fmt
from rlvr_cli.train.session import open_session


def load_sft_pairs(path: str, prompt_field: str, response_field: str) -> list[tuple[str, str]]:
    """(prompt, response) pairs from a JSONL file; every malformed line is an error naming its line."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"sft.data: {path}: no such file")
    pairs, problems = [], []
    with open(p, encoding="utf-8", errors="replace") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                problems.append(f"{path}:{lineno}: not JSON ({e.msg})")
                continue
            if not isinstance(obj, dict) or not isinstance(obj.get(prompt_field), str) or not isinstance(
                obj.get(response_field), str
            ):
                problems.append(f"{path}:{lineno}: needs string fields {prompt_field!r} and {response_field!r}")
                continue
            pairs.append((obj[prompt_field], obj[response_field]))
    if problems:
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise UserError(problems[:10] + ([f"{path}: {len(problems)} malformed lines{more}"] if more else []))
    if not pairs:
        raise UserError(f"sft.data: {path}: no examples")
    return pairs


def _file_batch(pairs: list[tuple[str, str]], seed: int, step: int, batch_size: int) -> list[tuple[str, str]]:
    """Examples of ``step`` (1-based) in a per-epoch seeded shuffle: each epoch visits every row once."""
    out = []
    for k in range((step - 1) * batch_size, step * batch_size):
        epoch, pos = divmod(k, len(pairs))
        order = list(range(len(pairs)))
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
        out.append(pairs[order[pos]])
    return out


def train_sft(recipe: Recipe, out: str | Path, resume: bool = False, quiet: bool = False) -> Path:
    """Run an SFT recipe into ``out``; returns the run directory. The model trains with its own dropout."""
    session, _ = open_session(recipe, out, resume, updates_per_step=1)
    task = build_task(recipe.task)
    spec = recipe.sft
    pairs = load_sft_pairs(spec.data, spec.prompt_field, spec.response_field) if spec.data else None
    if pairs is None and not hasattr(task, "trace"):
        raise UserError(f"sft.data: task {task.name!r} writes no supervised traces; give a JSONL of prompt/response pairs")
    from rlvr_cli.rewards import Scorer

    scorer = Scorer(RewardSpec(), task, seed=recipe.seed)
    return run_steps(
        session, task, scorer, "sft", lambda step: _sft_step(session, task, pairs, step),
        status=lambda row: f"loss {fmt(row['loss'])} lr {fmt(row['lr'], '.1e')}",
    )


def _sft_batch(session, task, pairs, step: int) -> tuple[list[list[int]], list[list[int]]]:
    """Prompt and response ids (EOS appended) of step ``step``: fresh task traces, or the file's pairs."""
    recipe, tok = session.recipe, session.tokenizer
    if pairs is None:
        rng = stream_key(recipe.seed, step, "sft", 0).rng()
        problems = task.train_problems(rng, recipe.sft.batch_size)
        pairs = [(encode_prompt(tok, task, p), task.trace(p, rng)) for p in problems]
    else:
        pairs = [
            (encode_prompt(tok, task, Problem(id="", prompt=q, reference="")), r)
            for q, r in _file_batch(pairs, recipe.seed, step, recipe.sft.batch_size)
        ]
    return [q for q, _ in pairs], [tok(r, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for _, r in pairs]


def _sft_step(session, task, pairs, step: int) -> dict:
    """One update on the token-mean NLL of a batch, accumulated over micro-batches."""
    t0 = time.perf_counter()
    model, pad = session.model, session.tokenizer.pad_token_id
    prompt_ids, response_ids = _sft_batch(session, task, pairs, step)
    z = aggregation_normalizer(pack(prompt_ids, response_ids, pad).response_mask, "token_mean")
    session.optimizer.zero_grad(set_to_none=True)
    total_loss = 0.0
    lengths = [len(q) + len(a) for q, a in zip(prompt_ids, response_ids)]
    for idx in length_sorted_chunks(range(len(prompt_ids)), lengths, session.recipe.optim.micro_batches):
        mb = pack([prompt_ids[i] for i in idx], [response_ids[i] for i in idx], pad, session.device)
        with session.amp():
            logp, _ = response_logprobs(model, mb)
        loss = aggregate(-logp, mb.response_mask, "token_mean", normalizer=z)
        loss.backward()
        total_loss += float(loss.detach())
    lr = session.scheduler.get_last_lr()[0]
    gnorm, applied = apply_update(session, total_loss, step)
    return step_row("sft", {
        "step": step,
        "loss": total_loss,
        "lr": lr,
        "grad_norm": gnorm,
        "tokens": int(z),
        "updates_skipped": int(not applied),
        "step_time_s": round(time.perf_counter() - t0, 4),
    })
