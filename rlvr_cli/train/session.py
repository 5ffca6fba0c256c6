"""What every training algorithm shares: the run directory, the policy, its optimiser, checkpoints and resume.

Randomness is a function of (seed, step): every step draws from streams named by them
(:func:`rlvr_cli.keyed_random.stream_key`), so a resumed run needs only the weights, the optimiser and
scheduler state and a few counters to continue exactly as the uninterrupted run would have (on the
same machine).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml

from rlvr_cli import dist
from rlvr_cli.errors import UserError
from rlvr_cli.fingerprints import weights_fingerprint
from rlvr_cli.models import load_model, resolve_device, trainer_autocast
from rlvr_cli.recipe.load import dump_recipe
from rlvr_cli.recipe.schema import Recipe
from rlvr_cli.tasks import build_task
from rlvr_cli.train.optim import build_optimizer, build_scheduler
from rlvr_cli.train.preflight import check_rows_fit
from rlvr_cli.run_files import acquire as acquire_lock, RECIPE
from rlvr_cli.train import parallel
from rlvr_cli.models.adapter import AdapterCheckpoint
from rlvr_cli.train.reference import is_lora, with_adapter
from rlvr_cli.train.run_writer import RunDir


def default_run_dir(recipe: Recipe, seed_override: int | None = None) -> Path:
    """output_dir/name, or output_dir/name-seedN when the seed was given on the command line."""
    name = recipe.name or "run"
    if seed_override is not None:
        name = f"{name}-seed{seed_override}"
    return Path(recipe.output_dir) / name


def _diff(a, b, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += _diff(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    return [] if a == b else [f"{prefix[:-1]}: {a!r} -> {b!r}"]


COSMETIC = ("name", "description")
"""Recipe fields that change no computed number: a resumed or continued run may rename itself."""


def _continuation(root: Path, saved: dict, recipe: Recipe, done: int) -> tuple[int | None, dict | None]:
    """Check that ``recipe`` may resume the run saved with recipe ``saved`` (``done`` steps trained).

    Allowed besides the same recipe: a different ``name``/``description``; a different ``steps``
    where the longer (or shorter) run computes exactly what the run so far computed, so that continuing
    a finished 100-step run to 150 steps gives the metrics a 150-step run gives from the start. That
    holds when the lr schedule does not depend on the total (``optim.schedule: constant``; the warm-up
    counts absolute updates). A ProRL reset the run skipped at its old last step (a run does not reset
    on its final step) is made on resuming (``rl.train_rl``), as the longer run made it. And a
    ``kl.ref_reset_every`` of N where the run had none, when at most N steps are trained: no reset fell
    inside them, so they are the first steps of the run with resets (the reset at step N, if it is the
    last step trained, is made on resuming). ``rollout.staleness.overlap`` may change at a fixed lag (it
    changes where the batches are sampled, not what). One difference stays: the evaluation at the old last step
    is kept even when ``eval.every`` does not fall on it. Returns (the saved step count when ``steps``
    changes, else None; the reset change {"from", "to", "at_step"} or None); raises UserError naming
    every other difference.
    """
    saved = _with_new_defaults(saved)
    ignore = {"distributed": None, **{k: None for k in COSMETIC}}
    # how the work is split is not part of what the run computes: a run resumes on any number of processes
    new = {**recipe.model_dump(mode="json"), **ignore}
    before = {**saved, **ignore, "steps": recipe.steps}
    new, before = _where_sampled_ignored(new), _where_sampled_ignored(before)
    saved_kl = saved.get("kl") if isinstance(saved.get("kl"), dict) else {}
    every = recipe.kl.ref_reset_every
    reset = None
    if saved_kl.get("ref_reset_every") is None and every is not None:
        if done > every:
            raise UserError(f"{root}/recipe.yaml: --resume with kl.ref_reset_every None -> {every}: the run has "
                            f"trained {done} steps without a reset, and a run with resets would have reset at step "
                            f"{every}; a run without resets takes them on only up to step {every}")
        reset = {"from": None, "to": every, "at_step": done}
        before["kl"] = {**saved_kl, "ref_reset_every": every}
    diffs = _diff(before, new)
    where = f"{root}/recipe.yaml"
    if diffs:
        raise UserError([f"{where}: --resume with a different recipe: {d}" for d in diffs])
    old = saved.get("steps")
    if old == recipe.steps:
        return None, reset
    change = f"{where}: --resume with steps {old!r} -> {recipe.steps}"
    if not isinstance(old, int) or isinstance(old, bool):
        raise UserError(f"{change}: the saved steps is not an integer (a hand-edited recipe.yaml?); choose another --out")
    if recipe.steps < done:
        raise UserError(f"{change}: the run has already trained {done} steps; a run cannot be shortened "
                        "below what it has trained (its checkpoints at later steps would not belong to it)")
    if recipe.optim.schedule != "constant":
        raise UserError(f"{change}: optim.schedule {recipe.optim.schedule!r} is a function of the total steps, "
                        "so the steps already trained would not be the longer run's; start a new run")
    return old, reset


def _where_sampled_ignored(recipe: dict) -> dict:
    """``recipe`` (a dumped recipe) without ``rollout.staleness.overlap`` when its lag is fixed: the sampler
    process and the in-process lag sample the same batches (docs/async.md), so a run resumes in either."""
    rollout = recipe.get("rollout")
    st = rollout.get("staleness") if isinstance(rollout, dict) else None
    if not isinstance(st, dict) or st.get("mode", "fixed") != "fixed":
        return recipe
    return {**recipe, "rollout": {**rollout, "staleness": {**st, "overlap": None}}}


def _with_new_defaults(saved: dict) -> dict:
    """A run's saved recipe with the fields added to the schema since it was written, at their defaults (a
    new field's default keeps what the old code computed, e.g. ``rollout.staleness``), so a run of an older
    version resumes. Only absent keys are filled (from the same recipe, validated): a saved value is
    never changed, and a saved recipe the schema no longer accepts is compared as it is."""
    try:
        full = Recipe.model_validate(saved).model_dump(mode="json")
    except ValueError:
        return saved

    def fill(have, default):
        if not (isinstance(have, dict) and isinstance(default, dict)):
            return have
        added = {k: v for k, v in default.items() if k not in have}
        return {**added, **{k: fill(v, default.get(k)) for k, v in have.items()}}

    return fill(saved, full)


@dataclass
class Session:
    recipe: Recipe
    run: RunDir
    device: torch.device
    autocast_dtype: torch.dtype | None
    model: torch.nn.Module
    tokenizer: object
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    total_updates: int
    start_step: int = 0
    """Last completed step (0 for a fresh run)."""
    state: dict = field(default_factory=dict)
    """Algorithm-specific counters saved with each checkpoint (e.g. skipped updates in a row)."""
    train_model: torch.nn.Module | None = None
    """What the update's forwards go through: the DDP wrapper under N processes, else ``model``."""

    def __post_init__(self):
        if self.train_model is None:
            self.train_model = self.model

    @property
    def sharded(self) -> bool:
        """FSDP2: every forward of the model all-gathers, so ranks must run the same number of them."""
        return parallel.is_fsdp(self.model)

    def full_params(self):
        """Whole parameters for the forwards that ranks run different numbers of (sampling, eval)."""
        return parallel.full_params(self.model)

    @property
    def grad_scale(self) -> float:
        """DDP averages gradients over ranks: a rank's loss times the world size makes the average the sum."""
        return float(dist.world()[1]) if self.train_model is not self.model or self.sharded else 1.0

    def sync_grads(self, last: bool):
        """The context of one micro-batch's forward and backward: DDP reduces gradients only on the last."""
        from contextlib import nullcontext

        if last or self.train_model is self.model:  # FSDP2 reduce-scatters every backward (sums the same)
            return nullcontext()
        return self.train_model.no_sync()

    def amp(self):
        from contextlib import nullcontext

        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def reset_optimizer(self) -> None:
        """Fresh AdamW moments (ProRL reference reset); the schedule keeps its place."""
        sched_state = self.scheduler.state_dict()
        self.optimizer = build_optimizer(self.model.parameters(), self.recipe.optim)
        self.scheduler = build_scheduler(self.optimizer, self.recipe.optim, self.total_updates)
        self.scheduler.load_state_dict(sched_state)
        for group, lr in zip(self.optimizer.param_groups, self.scheduler.get_last_lr()):
            group["lr"] = lr

    def save(self, step: int, extra: dict | None = None) -> Path:
        weights = None
        if self.sharded:  # gathered from the shards: every rank takes part, rank 0 writes
            weights = parallel.without_tied_aliases(self.model, parallel.full_state_dict(self.model))
        trainer_state = {
            "step": step,
            "optimizer": parallel.optimizer_state(self.model, self.optimizer),
            "scheduler": self.scheduler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "state": dict(self.state),
        }
        if extra:
            trainer_state.update(extra)
        path = self.run.save_checkpoint(
            step, AdapterCheckpoint(self.model, self.recipe.model.name) if is_lora(self.model) else self.model,
            self.tokenizer, trainer_state, keep_last=self.recipe.checkpoint.keep_last,
            state_dict=weights,
        )
        dist.barrier()  # no rank runs ahead of a checkpoint rank 0 is still writing
        return path

    def should_checkpoint(self, step: int) -> bool:
        every = self.recipe.checkpoint.every
        return step == self.recipe.steps or (every > 0 and step % every == 0)

    def should_eval(self, step: int) -> bool:
        every = self.recipe.eval.every
        return step == self.recipe.steps or (every > 0 and step % every == 0)


@dataclass
class _Resumed:
    """What resuming a run directory found: its last complete checkpoint and what the recipe changes."""

    ckpt: tuple[int, Path] | None
    extended_from: int | None
    reset_change: dict | None
    rewrite: bool
    """Whether recipe.yaml is rewritten (steps, name, description or reset cadence changed)."""

    @property
    def step(self) -> int:
        return self.ckpt[0] if self.ckpt else 0


def _resumed(run: RunDir, recipe: Recipe, resume: bool) -> _Resumed | None:
    """None for a new run; for an existing one (``--resume`` required) its checkpoint and the checked changes."""
    if not (run.root / RECIPE).is_file():
        return None
    if not resume:
        raise UserError(f"{run.root}: run directory already exists; pass --resume to continue it, or choose another --out")
    try:
        saved = yaml.safe_load((run.root / RECIPE).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise UserError(f"{run.root}/recipe.yaml: cannot read the run's saved recipe ({e}); choose another --out") from None
    if not isinstance(saved, dict):
        raise UserError(f"{run.root}/recipe.yaml: not a recipe mapping; choose another --out")
    ckpt = run.latest_checkpoint()
    extended_from, reset_change = _continuation(run.root, saved, recipe, ckpt[0] if ckpt else 0)
    rewrite = (extended_from is not None or reset_change is not None
               or any(saved.get(k) != getattr(recipe, k) for k in COSMETIC))
    return _Resumed(ckpt, extended_from, reset_change, rewrite)


def _record_resume(run: RunDir, recipe: Recipe, resumed: _Resumed, recipe_yaml: str) -> None:
    """Drop what came after the checkpoint and record the resume (and any recipe change) in the run."""
    run.truncate_after(resumed.step)
    changed = {}
    if resumed.rewrite:  # the run's recipe is now the new one (its steps, name, description, reset cadence)
        run.write_recipe(recipe_yaml)
        changed["name"] = recipe.name
    if resumed.extended_from is not None:
        before = run.read_status().get("extended")  # a hand-edited run.json may hold anything there
        changed["extended"] = [*(before if isinstance(before, list) else []),
                               {"from_steps": resumed.extended_from, "to_steps": recipe.steps, "at_step": resumed.step}]
    if resumed.reset_change is not None:
        before = run.read_status().get("ref_reset_changed")
        changed["ref_reset_changed"] = [*(before if isinstance(before, list) else []), resumed.reset_change]
    run.write_status("running", resumed_from_step=resumed.step, error=None, **changed, **parallel.run_info(recipe))


def open_session(
    recipe: Recipe, out: str | Path, resume: bool, updates_per_step: int, info: dict | None = None
) -> tuple[Session, dict | None]:
    """Create or resume a run directory and load the policy and optimiser.

    Returns the session and, when resuming from a checkpoint, its saved trainer state (for the
    algorithm to restore its own extras, e.g. the reference weights after a ProRL reset).
    """
    if recipe.threads:
        torch.set_num_threads(recipe.threads)
    parallel.check_settings(recipe)
    device_name = dist.init_from_env(recipe.distributed, recipe.device)
    run = RunDir(out, writer=dist.is_main())
    if resume and not (run.root / RECIPE).is_file():
        raise UserError(f"{run.root}: no run to resume (no recipe.yaml there); drop --resume to start a new run")
    if dist.is_main():  # one lock per run: the rank that writes holds it (see rlvr_cli/run_files.py)
        acquire_lock(run.root, owner=run, record_pid=not resume)
    recipe_yaml = dump_recipe(recipe)
    resumed = _resumed(run, recipe, resume)
    ckpt = resumed.ckpt if resumed else None

    device = resolve_device(device_name)
    autocast_dtype = trainer_autocast(recipe.model.dtype, recipe.model.autocast, device)
    lora = recipe.model.lora
    model_ref = str(ckpt[1]) if ckpt and lora is None else recipe.model.name
    model, tokenizer, resolved = load_model(model_ref, device, recipe.model.dtype)
    # the fingerprint of the weights a new run starts from (before any adapter): `rlvr compare` reports it
    base_weights = weights_fingerprint(model) if not ckpt and dist.is_main() else None
    if lora is not None:
        model = with_adapter(model, recipe, ckpt[1] if ckpt else None)
    if recipe.algorithm == "rl":  # a row too long for the context: named now, not at the step that draws it
        check_rows_fit(recipe, build_task(recipe.task), tokenizer, model)
    model.train()  # SFT trains with the model's dropout; RL switches it off (see rl.train_rl)
    train_model = parallel.wrap_model(model, recipe.distributed, device)  # a bad setting fails before any write

    dist.barrier()  # every rank has looked and loaded before rank 0 writes
    if resumed:  # recorded at the run's first write: a start refused before it leaves the run as it was
        run.defer(lambda: _record_resume(run, recipe, resumed, recipe_yaml))
    else:
        run.create(recipe_yaml, {"seed": recipe.seed, "name": recipe.name, **(info or {}), **parallel.run_info(recipe)})
    dist.barrier()
    total_updates = recipe.steps * updates_per_step
    optimizer = build_optimizer(model.parameters(), recipe.optim)
    scheduler = build_scheduler(optimizer, recipe.optim, total_updates)
    session = Session(recipe, run, device, autocast_dtype, model, tokenizer, optimizer, scheduler, total_updates,
                      train_model=train_model)
    if not ckpt:
        start = {"model": {"ref": recipe.model.name, "path": resolved.path, "kind": resolved.kind}, "base_weights": base_weights}
        if resumed:  # recorded with the resume, at the first write
            run.defer(lambda: run.write_status("running", **start))
        else:
            run.write_status("running", **start)
        return session, None
    return session, _restore(session, ckpt[1])


def _restore(session: Session, checkpoint: Path) -> dict:
    """Put a checkpoint's optimiser, scheduler, RNG and counters into ``session``; its trainer state.
    UserError naming the file when it cannot be read or does not fit (written nothing yet)."""
    trainer_state = _trainer_state(checkpoint, session.device)
    try:
        parallel.load_optimizer_state(session.model, session.optimizer, trainer_state["optimizer"])
        session.scheduler.load_state_dict(trainer_state["scheduler"])
        torch.set_rng_state(trainer_state["torch_rng"].cpu())
        session.start_step = int(trainer_state["step"])
        session.state = dict(trainer_state.get("state", {}))
    except (KeyError, ValueError, TypeError, RuntimeError, IndexError) as e:
        raise UserError(f"{checkpoint}/trainer_state.pt: does not fit this run ({type(e).__name__}: {e}); "
                        f"remove {checkpoint} to resume from the checkpoint before it") from None
    return trainer_state


def _trainer_state(checkpoint: Path, device) -> dict:
    """A checkpoint's trainer_state.pt; UserError naming it when it cannot be read (a damaged checkpoint)."""
    f = checkpoint / "trainer_state.pt"
    try:
        state = torch.load(f, map_location=device, weights_only=True)
    except Exception as e:  # noqa: BLE001 - torch's unpickler raises many kinds for a damaged file
        raise UserError(f"{f}: cannot read the checkpoint's trainer state ({type(e).__name__}: "
                        f"{' '.join(str(e).split())[:200]}); remove {checkpoint} to resume from the checkpoint before it") from None
    if not isinstance(state, dict):
        raise UserError(f"{f}: not a trainer state (a {type(state).__name__}); remove {checkpoint} to resume from the checkpoint before it")
    return state
