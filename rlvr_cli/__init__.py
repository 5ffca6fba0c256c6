"""rlvr: ablate GRPO-family reinforcement learning with verifiable rewards.

The math lives in :mod:`rlvr_cli.algo` (pure tensor functions, one per formula); the recipe schema in
:mod:`rlvr_cli.recipe`; tasks, rewards, the sampler, the trainer, evaluation and comparison each in
their own subpackage; :mod:`rlvr_cli.cli` is a thin Typer front end over them.
"""

__version__ = "0.1.0"

from rlvr_cli.numerics import pin_portable_numerics

pin_portable_numerics()  # before anything imports torch: the same bits on every x86-64 CPU (docs/reproducibility.md)
