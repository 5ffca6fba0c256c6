"""`rlvr eval`: pass@k, pass^k, maj@k and length of a model, or of a run's base model and checkpoints.

pass^k (all k of k samples right, :func:`rlvr_cli.algo.passk.pass_hat_k`) is shown beside pass@k for
each shown k > 1 (pass^1 = pass@1); the written records carry both tables for every k."""

from __future__ import annotations

from pathlib import Path

import typer

from rlvr_cli.cli.common import (
    MAX_PROMPTS, MAX_SAMPLES, MAX_THREADS, MAX_TOKENS, SEED_MAX, SEED_MIN, TEMPERATURE_MAX, TEMPERATURE_MIN, check_output,
    console,
)
from rlvr_cli.errors import UserError


def evaluate(
    model: str = typer.Argument(
        ..., metavar="MODEL|RUN_DIR", help="builtin:tiny, a checkpoint directory or a HF id/path; or a run directory."
    ),
    task: str | None = typer.Option(
        None,
        "--task",
        help="Task: arithmetic, countdown, or a recipe whose task to use (default: the run's, else arithmetic).",
    ),
    n: int | None = typer.Option(None, "--n", min=1, max=MAX_SAMPLES, help="Samples per prompt. (default: the run's eval.n, else 16)"),
    num_prompts: int | None = typer.Option(
        None, "--num-prompts", min=1, max=MAX_PROMPTS, help="First P held-out prompts. (default: the run's, else 64)"
    ),
    pass_at_k: str | None = typer.Option(
        None, "--pass-at-k", help="k values, e.g. 1,2,4,8 (each <= n). (default: the run's, else powers of two up to n)"
    ),
    maj_at_k: str | None = typer.Option(
        None, "--maj-at-k", help="k values of maj@k (each <= n). (default: as --pass-at-k)"
    ),
    temperature: float | None = typer.Option(None, "--temperature", min=TEMPERATURE_MIN, max=TEMPERATURE_MAX, help="(default: the run's, else 1.0)"),
    top_p: float | None = typer.Option(None, "--top-p", min=1e-6, max=1.0, help="(default: the run's, else 1.0)"),
    max_new_tokens: int | None = typer.Option(
        None, "--max-new-tokens", min=1, max=MAX_TOKENS, help="Response length limit. (default: the run's, else 64)"
    ),
    seed: int | None = typer.Option(
        None,
        "--seed",
        min=SEED_MIN,
        max=SEED_MAX,
        help="Sampling seed, the same for every step evaluated. (default: the run's eval.seed, else 1234)",
    ),
    steps: str | None = typer.Option(
        None,
        "--steps",
        help="Run directory: checkpoints besides the base (step 0): last, all, or N,M; 0 = base only (default: last).",
    ),
    greedy: bool = typer.Option(False, "--greedy", help="Also one greedy response per prompt: adds greedy_accuracy."),
    budget: int | None = typer.Option(
        None,
        "--budget",
        min=1,
        max=MAX_TOKENS,
        help="Budget forcing: stop thinking at N tokens, append the answer marker, let the model answer.",
    ),
    min_think: int | None = typer.Option(
        None,
        "--min-think",
        min=1,
        max=MAX_TOKENS,
        help="Forbid the answer marker and EOS before N response tokens: the model thinks on instead.",
    ),
    answer_tokens: int | None = typer.Option(
        None, "--answer-tokens", min=1, max=MAX_TOKENS, help="With --budget: tokens allowed after the forced marker. (default: 16)"
    ),
    plot: bool = typer.Option(
        False, "--plot", help="Draw pass@k vs k (log2 axis) of the base and every checkpoint (.png, .svg)."
    ),
    out: str | None = typer.Option(None, "--out", help="Also write the record (a run: all records) to this JSON file."),
    device: str | None = typer.Option(None, "--device", help="auto, cpu, cuda. (default: the run's, else auto)"),
    threads: int | None = typer.Option(None, "--threads", min=1, max=MAX_THREADS, help="torch CPU threads (default: the run's recipe.threads, else torch's)."),
) -> None:
    """Evaluate on the task's held-out prompts: unbiased pass@k, maj@k, response length, truncation.

    RUN_DIR: its base model (step 0) and the --steps checkpoints, with the run's own task and eval settings.

    Records go to RUN/eval/step_N.json (the trainer's files, reproduced); with other settings to RUN/eval/LABEL/.

    Records carry budget, min_think, greedy and label (e.g. budget_32), never mistaken for plain sampling.

    Thinking (the built-in tasks have no <think> block) is everything before the answer marker `#`.

    --budget N: a response still going at N tokens gets `#` appended and --answer-tokens more to answer.

    --min-think N: `#` and EOS are forbidden before N response tokens, so the model continues its thought.

    Example: rlvr eval runs/dr_grpo --steps all --plot
    """
    from rlvr_cli.cli.common import parse_int_list, task_from_arg
    from rlvr_cli.evaluation.runs import (
        Target,
        eval_dir,
        load_run_recipe,
        run_root,
        select_steps,
    )
    from rlvr_cli.evaluation.settings import (
        EvalSettings,
        protocol_label,
        with_overrides,
    )
    from rlvr_cli.models import resolve_device
    from rlvr_cli.tasks import build_task, default_task

    if device is not None:
        resolve_device(device, "--device")  # an unknown or absent device: exit 2 before loading anything
    check_output("--out", out)
    root = run_root(Path(model).expanduser())
    recipe = load_run_recipe(root) if root is not None else None
    is_run = root is not None and root == Path(model).expanduser()
    t = task_from_arg(task) if task else build_task(recipe.task if recipe else default_task(model))
    run_default = EvalSettings.from_recipe(recipe) if recipe else EvalSettings()
    settings = with_overrides(
        run_default,
        t.answer_marker,
        n=n,
        num_prompts=num_prompts,
        temperature=temperature,
        top_p=top_p,
        max_new_tokens=max_new_tokens,
        seed=seed,
        pass_at_k=parse_int_list(pass_at_k, "--pass-at-k"),
        maj_at_k=parse_int_list(maj_at_k, "--maj-at-k"),
        greedy=greedy or None,
        budget=budget,
        min_think=min_think,
        answer_tokens=answer_tokens,
    )
    if steps is not None and not is_run:
        raise UserError(f"--steps {steps}: {model} is not a run directory")
    if plot and not is_run and out is None:
        raise UserError("--plot: for a single MODEL also give --out FILE.json (the figure goes beside it)")
    if is_run:
        targets = select_steps(root, recipe.model.name, steps)
        task_changed = task is not None and getattr(t, "spec", None) != recipe.task
        out_dir = eval_dir(root, protocol_label(run_default, settings, t.name if task_changed else None))
        if out_dir == eval_dir(root, None):  # the trainer writes these very files: not while one holds the run
            from rlvr_cli import run_files

            run_files.acquire(root, doing="evaluating it with the run's own protocol (or pass other settings, "
                                       "which write to eval/LABEL/)")
    else:
        targets, out_dir = [Target(model, None)], None
    if recipe is not None:
        console.print(f"settings from {root / 'recipe.yaml'} (flags override)", style="dim", highlight=False)
    from rlvr_cli.warm_start import ensure_built

    ensure_built(*(tg.ref for tg in targets))
    records = _run(targets, t, settings, recipe, is_run, device, out_dir, threads)
    console.print(_table(records, model, t.name, settings, out_dir))
    _write_extras(records, model, out_dir, plot, out)


def _run(targets, task, settings, recipe, is_run: bool, device: str | None, out_dir: Path | None,
         threads: int | None = None) -> list[dict]:
    """Evaluate every target under a progress bar; a run's records are written as each finishes."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from rlvr_cli.evaluation.runs import (
        AsEvaluated,
        evaluate_targets,
        responses_per_target,
        reward_spec_for,
    )
    from rlvr_cli.io import atomic_write_json
    from rlvr_cli.recipe.schema import RewardSpec

    n_threads = threads or (recipe.threads if recipe is not None else None)
    if n_threads:
        import torch

        torch.set_num_threads(n_threads)  # a run's own count by default, as the trainer did: CPU reductions depend on it

    def write(record: dict) -> None:
        if out_dir is not None:
            atomic_write_json(out_dir / f"step_{record['step']}.json", record)

    total = len(targets) * responses_per_target(task, settings)
    progress = Progress(TextColumn("eval"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console)
    with progress:
        bar = progress.add_task("eval", total=total)
        how = AsEvaluated(
            reward_spec=reward_spec_for(recipe) if recipe is not None else RewardSpec(),
            scorer_seed=recipe.seed if recipe is not None else 0,
            model_name=recipe.model.name if is_run else None,
            device=device or (recipe.device if recipe is not None else "auto"),
            dtype=recipe.model.dtype if recipe is not None else "auto",
            environment=recipe.environment if recipe is not None and is_run else None,
        )
        return evaluate_targets(targets, task, settings, how, on_progress=lambda k: progress.update(bar, advance=k),
                                on_record=write)


def _fmt(v, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.0f}"


def _shown_ks(ks: list[int]) -> list[int]:
    """At most three k columns (smallest, middle, largest): the table fits 80 columns; files have all."""
    return sorted({ks[0], ks[len(ks) // 2], ks[-1]}) if ks else []


def _table(records: list[dict], model: str, task: str, s, out_dir: Path | None):
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    first = records[0]
    label = f" [{first['label']}]" if first["label"] else ""
    title = f"rlvr eval {model} on {task}: n={s.n}, {first['num_prompts']} prompts, T={s.temperature}, seed {s.seed}"
    caption = f"written to {out_dir}" if out_dir else None
    table = Table(
        title=escape(title + label), caption=caption, box=box.SIMPLE_HEAD, collapse_padding=True, show_edge=False
    )
    verbosity = any(r.get("filler_given_incorrect") is not None or r.get("filler_given_correct") is not None for r in records)
    ks = _shown_ks(sorted(int(k) for k in first["pass_at_k"]))
    ks = [ks[0], ks[-1]] if verbosity and len(ks) > 2 else ks  # room for the filler columns in 80
    mk = max((int(k) for k in first["maj_at_k"]), default=None)
    cols = [(f"pass@{k}", lambda r, k=k: _fmt(r["pass_at_k"].get(str(k)))) for k in ks]
    hat = [k for k in ks if k > 1 and any(str(k) in (r.get("pass_hat_k") or {}) for r in records)]
    cols += [(f"pass^{k}", lambda r, k=k: _fmt((r.get("pass_hat_k") or {}).get(str(k)))) for k in hat]
    cols += [(f"maj@{mk}", lambda r: _fmt(r["maj_at_k"].get(str(mk))))] if mk is not None else []
    cols += [("greedy", lambda r: _fmt(r["greedy_accuracy"]))] if s.greedy else []
    cols += [
        ("len", lambda r: _fmt(r["len_mean"], ".1f")),
        ("len ok/err", lambda r: f"{_fmt(r['len_correct'], '.1f')}/{_fmt(r['len_incorrect'], '.1f')}"),
        ("trunc", lambda r: _fmt(r["truncated_frac"], ".2f")),
    ]
    cols += [("forced", lambda r: _fmt(r["forced_frac"], ".2f"))] if s.budget else []
    if verbosity:  # conditional verbosity: P(filler | right/wrong) in %, filler words when rambling
        cols += [
            ("fill% ok/err", lambda r: f"{_pct(r['filler_given_correct'])}/{_pct(r['filler_given_incorrect'])}"),
            ("words", lambda r: f"{_fmt(r['filler_words_correct'], '.1f')}/{_fmt(r['filler_words_incorrect'], '.1f')}"),
        ]
    table.add_column("step", justify="right")
    for name, _ in cols:
        table.add_column(name, justify="right")
    for r in records:
        table.add_row("-" if r["step"] is None else str(r["step"]), *[cell(r) for _, cell in cols])
    return table


def _write_extras(records: list[dict], model: str, out_dir: Path | None, plot: bool, out: str | None) -> None:
    """--out (the record, or a run's records) and --plot (beside the run's files or beside --out)."""
    from rlvr_cli.io import atomic_write_json

    if out is not None:
        atomic_write_json(out, records[0] if out_dir is None else {"run": model, "records": records})
        console.print(f"wrote {out}", highlight=False)
    if plot:
        from rlvr_cli.evaluation.plot import save_pass_at_k

        where, stem = (out_dir, "pass_at_k") if out_dir is not None else (Path(out).parent, Path(out).stem)
        label = records[0]["label"]
        title = f"{model}: pass@k, n={records[0]['n']}" + (f" [{label}]" if label else "")
        for p in save_pass_at_k(records, where, title, stem):
            console.print(f"wrote {p}", highlight=False)
