"""What every training algorithm shares: the run directory, the policy, its optimiser, checkpoints and resume.

Randomness is a function of (seed, step): every step seeds its own generators from them (see
:func:`step_seed`), so a resumed run needs only the weights, the optimiser and scheduler state and a
few counters to continue exactly as the uninterrupted run would have (on the same machine).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml

from rlvr_cli.errors import UserError
from rlvr_cli.models import load_model, resolve_device, weights_and_autocast
from rlvr_cli.recipe.load import dump_recipe
from rlvr_cli.recipe.schema import Recipe
from rlvr_cli.tasks import stable_hash
from rlvr_cli.train.optim import build_optimizer, build_scheduler
from rlvr_cli.train import lock
from rlvr_cli.train.rundir import RunDir


def step_seed(seed: int, step: int, stream: str = "", round_: int = 0) -> int:
    """A 63-bit seed for one purpose (``stream``) at one step: independent across steps and streams."""
    return stable_hash(f"{seed}/{step}/{stream}/{round_}") & ((1 << 63) - 1)


def step_rng(seed: int, step: int, stream: str = "", round_: int = 0) -> random.Random:
    return random.Random(step_seed(seed, step, stream, round_))


def step_generator(seed: int, step: int, stream: str = "", round_: int = 0, device="cpu") -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(step_seed(seed, step, stream, round_))
    return g


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
        trainer_state = {
            "step": step,
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "torch_rng": torch.get_rng_state(),
            "state": dict(self.state),
        }
        if extra:
            trainer_state.update(extra)
        return self.run.save_checkpoint(
            step, self.model, self.tokenizer, trainer_state, keep_last=self.recipe.checkpoint.keep_last
        )

    def should_checkpoint(self, step: int) -> bool:
        every = self.recipe.checkpoint.every
        return step == self.recipe.steps or (every > 0 and step % every == 0)

    def should_eval(self, step: int) -> bool:
        every = self.recipe.eval.every
        return step == self.recipe.steps or (every > 0 and step % every == 0)


def open_session(
    recipe: Recipe, out: str | Path, resume: bool, updates_per_step: int, info: dict | None = None
) -> tuple[Session, dict | None]:
    """Create or resume a run directory and load the policy and optimiser.

    Returns the session and, when resuming from a checkpoint, its saved trainer state (for the
    algorithm to restore its own extras, e.g. the reference weights after a ProRL reset).
    """
    if recipe.threads:
        torch.set_num_threads(recipe.threads)
    run = RunDir(out)
    if resume and not (run.root / "recipe.yaml").is_file():
        raise UserError(f"{run.root}: no run to resume (no recipe.yaml there); drop --resume to start a new run")
    lock.acquire(run.root, owner=run)  # held until this run's RunDir is gone (see train/lock.py)
    recipe_yaml = dump_recipe(recipe)
    ckpt = None
    if (run.root / "recipe.yaml").is_file():
        if not resume:
            raise UserError(f"{run.root}: run directory already exists; pass --resume to continue it, or choose another --out")
        try:
            saved = yaml.safe_load((run.root / "recipe.yaml").read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            raise UserError(f"{run.root}/recipe.yaml: cannot read the run's saved recipe ({e}); choose another --out") from None
        if not isinstance(saved, dict):
            raise UserError(f"{run.root}/recipe.yaml: not a recipe mapping; choose another --out")
        diffs = _diff(saved, recipe.model_dump(mode="json"))
        if diffs:
            raise UserError([f"{run.root}/recipe.yaml: --resume with a different recipe: {d}" for d in diffs])
        ckpt = run.latest_checkpoint()
        run.truncate_after(ckpt[0] if ckpt else 0)
        run.write_status("running", resumed_from_step=ckpt[0] if ckpt else 0, error=None)
    else:
        run.create(recipe_yaml, {"seed": recipe.seed, "name": recipe.name, **(info or {})})

    device = resolve_device(recipe.device)
    _, autocast_dtype = weights_and_autocast(recipe.model.dtype, device)
    model_ref = str(ckpt[1]) if ckpt else recipe.model.name
    model, tokenizer, resolved = load_model(model_ref, device, recipe.model.dtype)
    model.train()  # SFT trains with the model's dropout; RL switches it off (see rl.train_rl)
    total_updates = recipe.steps * updates_per_step
    optimizer = build_optimizer(model.parameters(), recipe.optim)
    scheduler = build_scheduler(optimizer, recipe.optim, total_updates)
    session = Session(recipe, run, device, autocast_dtype, model, tokenizer, optimizer, scheduler, total_updates)
    trainer_state = None
    if ckpt:
        trainer_state = torch.load(ckpt[1] / "trainer_state.pt", map_location=device, weights_only=True)
        optimizer.load_state_dict(trainer_state["optimizer"])
        scheduler.load_state_dict(trainer_state["scheduler"])
        torch.set_rng_state(trainer_state["torch_rng"].cpu())
        session.start_step = int(trainer_state["step"])
        session.state = dict(trainer_state.get("state", {}))
    else:
        run.write_status("running", model={"ref": recipe.model.name, "path": resolved.path, "kind": resolved.kind})
    return session, trainer_state
