"""Bridges to other RL frameworks: carry a recipe to TRL or verl, and score their rollouts with rlvr's
verifiers (``trl_reward``, ``verl_reward``). Their logs come back through ``rlvr compare``
(:mod:`rlvr_cli.compare.foreign`).

``export_recipe(recipe, "trl" | "verl")`` returns an :class:`Export`: the target's settings plus one
warning line per rlvr knob the target cannot carry exactly (naming the rlvr field and what the target
does instead). Names and defaults on the target side were read from TRL 1.16.0
(``trl/trainer/grpo_config.py``, ``grpo_trainer.py``) and verl 0.9.1
(``verl/trainer/config/_generated_ppo_trainer.yaml``, ``verl/trainer/ppo/core_algos.py``,
``verl/trainer/ppo/rollout_corr_helper.py``).
"""

from __future__ import annotations

from rlvr_cli.bridges.base import Export, Warnings  # noqa: F401 - the package's names for them

TARGETS = ("trl", "verl")


def export_recipe(recipe, target: str) -> Export:
    """Translate a resolved RL recipe to ``target`` (``trl`` or ``verl``)."""
    if target == "trl":
        from rlvr_cli.bridges.export_trl import export_trl

        return export_trl(recipe)
    if target == "verl":
        from rlvr_cli.bridges.export_verl import export_verl

        return export_verl(recipe)
    from rlvr_cli.errors import UserError

    raise UserError(f"--to {target}: unknown target (choose from {', '.join(TARGETS)})")
