"""`rlvr sample`: draw responses from a model on a task's prompts into a JSONL file."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from rlvr_cli.cli.common import (
    MAX_PROMPTS, MAX_SAMPLES, MAX_THREADS, MAX_TOKENS, SEED_MAX, SEED_MIN, TEMPERATURE_MAX, TEMPERATURE_MIN, check_output,
    check_sizes, console, task_from_arg,
)
from rlvr_cli.errors import UserError


def sample(
    model: str = typer.Argument(..., help="MODEL: builtin:tiny, a run or checkpoint directory, or a HF id/path."),
    task: str | None = typer.Option(None, "--task", help="Built-in task (arithmetic, countdown) or a recipe whose task to use (default: a run's own, arithmetic for a built-in model)."),
    out: str = typer.Option(..., "--out", help="Output JSONL (one line per response)."),
    n: int = typer.Option(4, "--n", min=1, max=MAX_SAMPLES, help="Responses per prompt."),
    num_prompts: int = typer.Option(64, "--num-prompts", min=1, max=MAX_PROMPTS, help="Number of prompts."),
    split: str = typer.Option("eval", "--split", help="`eval`: the held-out prompts in order; `train`: seeded draws of training prompts."),
    temperature: float = typer.Option(1.0, "--temperature", min=TEMPERATURE_MIN, max=TEMPERATURE_MAX, help="Sampling temperature."),
    top_p: float = typer.Option(1.0, "--top-p", min=1e-6, max=1.0, help="Nucleus sampling mass."),
    top_k: int = typer.Option(0, "--top-k", min=0, max=2**31 - 1, help="Top-k sampling (0 = off)."),
    max_new_tokens: int = typer.Option(64, "--max-new-tokens", min=1, max=MAX_TOKENS, help="Response length limit."),
    seed: int = typer.Option(0, "--seed", min=SEED_MIN, max=SEED_MAX, help="Sampling seed (and the training-prompt draw)."),
    batch_size: int = typer.Option(256, "--batch-size", min=1, max=MAX_PROMPTS, help="Sequences sampled together."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda."),
    threads: int | None = typer.Option(None, "--threads", min=1, max=MAX_THREADS, help="torch CPU threads (default: torch's)."),
) -> None:
    """Sample responses (batched, KV cache) and write prompt id, prompt, reference, response, token
    count, finish reason (eos/length) and the sampling settings per line.

    Example: rlvr sample builtin:tiny --task arithmetic --n 8 --num-prompts 32 --out samples.jsonl
    """
    import random

    import torch

    from rlvr_cli.io import atomic_write_jsonl
    from rlvr_cli.models import load_model, resolve_device, weights_and_autocast
    from rlvr_cli.sampling import SamplingOptions, generate
    from rlvr_cli.tasks import encode_prompt

    if split not in ("eval", "train"):
        raise UserError(f"--split {split}: choose eval or train")
    check_sizes(num_prompts * n, min(batch_size, num_prompts * n) * max_new_tokens)
    check_output("--out", out)
    if threads:
        torch.set_num_threads(threads)
    if task is None:
        from rlvr_cli.evaluation.runs import load_run_recipe, run_root
        from rlvr_cli.tasks import build_task, default_task

        root = run_root(Path(model).expanduser())
        t = build_task(load_run_recipe(root).task) if root is not None else build_task(default_task(model))
    else:
        t = task_from_arg(task)
    dev = resolve_device(device, "--device")
    from rlvr_cli.warm_start import ensure_built

    ensure_built(model)
    m, tok, resolved = load_model(model, dev)
    _, autocast = weights_and_autocast("auto", dev)
    if split == "eval":
        problems = t.eval_problems()[:num_prompts]
    else:
        problems = t.train_problems(random.Random(seed), num_prompts)
    flat = [(p, j) for p in problems for j in range(n)]
    gen = torch.Generator(device=dev)
    gen.manual_seed(seed)
    settings = {"temperature": temperature, "top_p": top_p, "top_k": top_k, "max_new_tokens": max_new_tokens,
                "seed": seed, "n": n, "split": split}
    options = SamplingOptions(max_new_tokens, tok.eos_token_id, tok.pad_token_id, temperature, top_p, top_k,
                              return_logprobs=False, autocast_dtype=autocast)
    records, tokens, t0 = [], 0, time.perf_counter()
    progress = Progress(TextColumn("sampling"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console)
    with progress:
        bar = progress.add_task("sampling", total=len(flat))
        for start in range(0, len(flat), batch_size):
            chunk = flat[start : start + batch_size]
            res = generate(m, [encode_prompt(tok, t, p) for p, _ in chunk], options, generator=gen)
            tokens += res.gen_tokens
            for (p, j), ids, why in zip(chunk, res.response_ids, res.finish_reasons):
                records.append({
                    "prompt_id": p.id, "prompt": p.prompt, "reference": p.reference,
                    "response": tok.decode(ids, skip_special_tokens=True), "num_tokens": len(ids),
                    "finish_reason": why, "sample_index": j, "task": t.name, "verifier": t.verifier,
                    "model": model, "sampling": settings,
                })
            progress.update(bar, advance=len(chunk))
    seconds = time.perf_counter() - t0
    atomic_write_jsonl(out, records)
    table = Table(title=f"rlvr sample -> {out}")
    for col in ("responses", "prompts", "tokens", "tokens/s", "truncated", "mean length"):
        table.add_column(col, justify="right")
    trunc = sum(r["finish_reason"] == "length" for r in records)
    table.add_row(str(len(records)), str(len(problems)), str(tokens), f"{tokens / max(seconds, 1e-9):.0f}",
                  f"{trunc}", f"{sum(r['num_tokens'] for r in records) / max(1, len(records)):.1f}")
    console.print(table)
