"""Notes on a recipe that need to know about models and this machine: a learning rate far above what
a pretrained model survives, and bf16 asked for on a CPU without bf16 units. They live here, above the
recipe schema (which knows neither the built-in model cache nor the CPU); `rlvr recipes validate` and
the trainer print them after the recipe's own notes."""

from __future__ import annotations

from rlvr_cli.models.builtin import is_builtin_model
from rlvr_cli.models import precision
from rlvr_cli.recipe.schema import Recipe

PRETRAINED_MAX_LR = {"full": 1e-5, "lora": 1e-3}
"""Learning rates above which a pretrained model (any `model.name` but `builtin:*`) is likely wrecked
within a few steps: full fine-tuning at 1e-4 collapsed SmolLM2-135M-Instruct in 4 steps (ratios
0.002-11, entropy 1.09 -> 0.07); an adapter's update is scaled down by its rank, so LoRA tolerates more."""


def model_notes(recipe: Recipe) -> list[str]:
    """A learning rate far above what a pretrained model survives; bf16 requested on a CPU without bf16 units."""
    out = []
    kind = "full" if recipe.model.lora is None else "lora"
    most = PRETRAINED_MAX_LR[kind]
    if recipe.optim.lr > most and not is_builtin_model(recipe.model.name):
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
