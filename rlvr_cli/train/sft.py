"""Supervised fine-tuning (`algorithm: sft`): the warm start and the R1-style SFT stages.

Loss: mean negative log-likelihood over response tokens (EOS included), prompt tokens masked,

    L = - sum_{i,t} m_it log pi(y_it | q_i, y_i,<t) / sum_{i,t} m_it

Data: fresh traces of a built-in task every step (``sft.data: null``; deterministic by seed and step)
or a JSONL of prompt/response pairs (``sft.data``; e.g. the output of `rlvr verify --keep correct`),
visited in a seeded shuffled order, epoch after epoch. Same run directory, logs and checkpoints as RL.
"""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path


from rlvr_cli.algo.aggregation import aggregate, aggregation_normalizer
from rlvr_cli.errors import RunFailed, UserError
from rlvr_cli.recipe.schema import Recipe, RewardSpec
from rlvr_cli.tasks import Problem, build_task, encode_prompt
from rlvr_cli.train.batch import length_sorted_chunks, pack, response_logprobs
from rlvr_cli.train.evalhook import eval_and_record
from rlvr_cli.train.optim import grad_norm_and_clip
from rlvr_cli.train.progress import fmt, step_progress
from rlvr_cli.train.session import open_session, step_rng


def load_sft_rows(path: str, prompt_field: str, response_field: str) -> list[tuple[str, str]]:
    """(prompt, response) pairs from a JSONL file; every malformed line is an error naming its line."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"sft.data: {path}: no such file")
    rows, problems = [], []
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
            rows.append((obj[prompt_field], obj[response_field]))
    if problems:
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise UserError(problems[:10] + ([f"{path}: {len(problems)} malformed lines{more}"] if more else []))
    if not rows:
        raise UserError(f"sft.data: {path}: no examples")
    return rows


def _file_batch(rows: list[tuple[str, str]], seed: int, step: int, batch_size: int) -> list[tuple[str, str]]:
    """Examples of ``step`` (1-based) in a per-epoch seeded shuffle: each epoch visits every row once."""
    out = []
    for k in range((step - 1) * batch_size, step * batch_size):
        epoch, pos = divmod(k, len(rows))
        order = list(range(len(rows)))
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
        out.append(rows[order[pos]])
    return out


def train_sft(recipe: Recipe, out: str | Path, resume: bool = False, quiet: bool = False) -> Path:
    """Run an SFT recipe into ``out``; returns the run directory."""
    session, _ = open_session(recipe, out, resume, updates_per_step=1)
    run, model, tok = session.run, session.model, session.tokenizer
    task = build_task(recipe.task)
    spec = recipe.sft
    rows = load_sft_rows(spec.data, spec.prompt_field, spec.response_field) if spec.data else None
    if rows is None and not hasattr(task, "trace"):
        raise UserError(f"sft.data: task {task.name!r} writes no supervised traces; give a JSONL of prompt/response pairs")
    from rlvr_cli.rewards import Scorer

    scorer = Scorer(RewardSpec(), task, seed=recipe.seed)
    eos = tok.eos_token_id
    skips = int(session.state.get("skipped_in_row", 0))
    try:
        if session.start_step == 0 and recipe.eval.at_start:
            eval_and_record(session, task, scorer, 0)
        progress = step_progress("sft")
        with progress:
            bar = progress.add_task("sft", total=recipe.steps, completed=session.start_step, status="")
            for step in range(session.start_step + 1, recipe.steps + 1):
                t0 = time.perf_counter()
                if rows is None:
                    rng = step_rng(recipe.seed, step, "sft")
                    problems = task.train_problems(rng, spec.batch_size)
                    pairs = [(encode_prompt(tok, task, p), task.trace(p, rng)) for p in problems]
                else:
                    pairs = [
                        (encode_prompt(tok, task, Problem(id="", prompt=q, reference="")), r)
                        for q, r in _file_batch(rows, recipe.seed, step, spec.batch_size)
                    ]
                prompt_ids = [q for q, _ in pairs]
                response_ids = [tok(r, add_special_tokens=False)["input_ids"] + [eos] for _, r in pairs]
                full = pack(prompt_ids, response_ids, tok.pad_token_id)
                z = aggregation_normalizer(full.response_mask, "token_mean")
                session.optimizer.zero_grad(set_to_none=True)
                total_loss = 0.0
                lengths = [len(q) + len(a) for q, a in zip(prompt_ids, response_ids)]
                for idx in length_sorted_chunks(range(len(pairs)), lengths, recipe.optim.micro_batches):
                    mb = pack([prompt_ids[i] for i in idx], [response_ids[i] for i in idx], tok.pad_token_id, session.device)
                    with session.amp():
                        logp, _ = response_logprobs(model, mb)
                    loss = aggregate(-logp, mb.response_mask, "token_mean", normalizer=z)
                    loss.backward()
                    total_loss += float(loss.detach())
                gnorm = grad_norm_and_clip(model.parameters(), recipe.optim.grad_clip)
                lr = session.scheduler.get_last_lr()[0]
                finite = math.isfinite(total_loss) and math.isfinite(gnorm)
                if finite:
                    session.optimizer.step()
                    skips = 0
                else:
                    skips += 1
                    if skips >= recipe.optim.max_skipped_in_row:
                        raise RunFailed(f"{skips} non-finite updates in a row at step {step} (loss {total_loss}, grad norm {gnorm})")
                session.scheduler.step()
                session.state["skipped_in_row"] = skips
                row = {
                    "step": step,
                    "loss": total_loss,
                    "lr": lr,
                    "grad_norm": gnorm,
                    "tokens": int(z),
                    "update_skipped": not finite,
                    "step_time_s": round(time.perf_counter() - t0, 4),
                }
                run.append_metrics(row)
                if session.should_eval(step):
                    eval_and_record(session, task, scorer, step)
                if session.should_checkpoint(step):
                    session.save(step)
                progress.update(bar, completed=step, status=f"loss {fmt(total_loss)} lr {fmt(lr, '.1e')}")
        run.write_status("finished", error=None)
    except RunFailed as e:
        run.write_status("failed", error=str(e))
        raise
    except KeyboardInterrupt:
        run.write_status("interrupted", error="interrupted by the user; continue with --resume")
        raise
    except BaseException as e:
        run.write_status("failed", error=f"{type(e).__name__}: {e}")
        raise
    finally:
        scorer.close()
    return run.root
