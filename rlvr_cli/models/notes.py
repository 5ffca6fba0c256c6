"""Notes on a recipe that need to know about models and this machine: a learning rate far above what
a pretrained model survives, and bf16 asked for on a CPU without bf16 units. They live here, above the
recipe schema (which knows neither the built-in model cache nor the CPU); `rlvr recipes validate` and
the trainer print them after the recipe's own notes."""

from __future__ import annotations

from pathlib import Path

import yaml

from rlvr_cli import run_files
from rlvr_cli.models.builtin import is_builtin_model
from rlvr_cli.models import precision
from rlvr_cli.recipe.schema import Recipe

PRETRAINED_MAX_LR = {"full": 1e-5, "lora": 1e-3}
"""Learning rates above which a pretrained model (any `model.name` but `builtin:*` and runs from one) is likely wrecked
within a few steps: full fine-tuning at 1e-4 collapsed SmolLM2-135M-Instruct in 4 steps (ratios
0.002-11, entropy 1.09 -> 0.07); an adapter's update is scaled down by its rank, so LoRA tolerates more."""


def starts_from_builtin(ref: str, hops: int = 4) -> bool:
    """Whether MODEL is a built-in model, or an rlvr run (or one of its checkpoints) that started from one,
    following run directories back through their recipes' `model.name` (at most `hops` of them)."""
    if is_builtin_model(ref):
        return True
    path = Path(ref).expanduser()
    if run_files.STEP_DIR.match(path.name) and path.parent.name == run_files.CHECKPOINTS_DIR:
        path = path.parent.parent
    if hops <= 0 or not run_files.is_run_dir(path):
        return False
    try:
        name = (yaml.safe_load((path / run_files.RECIPE).read_text()) or {}).get("model", {}).get("name")
    except (OSError, yaml.YAMLError, AttributeError):
        return False
    return isinstance(name, str) and starts_from_builtin(name, hops - 1)


def model_notes(recipe: Recipe) -> list[str]:
    """A learning rate far above what a pretrained model survives; bf16 requested on a CPU without bf16 units."""
    out = []
    kind = "full" if recipe.model.lora is None else "lora"
    most = PRETRAINED_MAX_LR[kind]
    if recipe.optim.lr > most and not starts_from_builtin(recipe.model.name):
        what = "full fine-tuning" if kind == "full" else "a LoRA adapter"
        out.append(
            f"optim.lr {recipe.optim.lr:g} with {what} of a pretrained model ({recipe.model.name}): above {most:g} "
            "it is likely wrecked within a few steps (docs/real.md); fine for a deliberate collapse experiment."
        )
    bf16 = [f for f, v in (("rollout.sample_autocast", recipe.rollout.sample_autocast),
                           ("model.dtype", recipe.model.dtype), ("model.autocast", recipe.model.autocast)) if v == "bfloat16"]
    if bf16 and recipe.device in ("cpu", "auto") and precision.slow_bf16_on_cpu():
        out.append(
            f"{' and '.join(bf16)} bfloat16 on a CPU without avx512_bf16 / amx_bf16: bf16 matrix products "
            "are emulated there and run slower than float32 (docs/real.md)."
        )
    return out
