"""The reference policy pi_ref of the KL term, and the LoRA adapter that makes it free.

With full fine-tuning the reference is a second, frozen copy of the model (``model.reference`` or
``model.name``). With ``model.lora`` the policy is base weights W plus an adapter (B A); the reference
is the same module with the adapter switched off, so pi_ref = pi_W exactly and no second copy of the
model is held in memory (verl does the same for LoRA actors: ``ref_in_actor``; TRL keeps no
reference model when a ``peft_config`` is given and disables the adapter for the reference forward).
"""

from __future__ import annotations

import torch

from rlvr_cli.errors import UserError


def add_lora(model, spec):
    """``model`` wrapped by peft with a fresh LoRA adapter of ``spec`` (a ``LoraSpec``); only the adapter
    trains. Raises UserError when peft is missing or no module matches ``spec.target_modules``."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise UserError('model.lora needs the package peft: pip install -e ".[real]" (or pip install peft)') from None
    from rlvr_cli.models.quiet import quiet_peft

    config = LoraConfig(r=spec.rank, lora_alpha=spec.alpha, lora_dropout=spec.dropout, bias="none",
                        target_modules=spec.target_modules, task_type="CAUSAL_LM", fan_in_fan_out=_conv1d(model))
    try:
        with quiet_peft():
            return get_peft_model(model, config)
    except ValueError as e:  # peft: "Target modules {...} not found in the base model"
        raise UserError(f"model.lora.target_modules {spec.target_modules!r}: {e}") from None


def _conv1d(model) -> bool:
    """Whether the model's linear layers are GPT-2's Conv1D (weights stored transposed: peft's
    ``fan_in_fan_out``, which it would otherwise set itself with a warning)."""
    from transformers.pytorch_utils import Conv1D

    return any(isinstance(m, Conv1D) for m in model.modules())


def is_lora(model) -> bool:
    """Whether ``model`` is a peft model (the policy of a ``model.lora`` run)."""
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


class AdapterDisabled:
    """pi_ref of a LoRA policy: calling it runs the policy's forward with the adapter off and no gradient.

    Has what the trainer asks of a reference model: it is called like the model
    (:func:`rlvr_cli.train.packing.response_logits`) and exposes its ``forward`` signature.
    """

    def __init__(self, policy):
        self.policy = policy

    @property
    def forward(self):
        return self.policy.forward

    def __call__(self, *args, **kwargs):
        with self.policy.disable_adapter(), torch.no_grad():
            return self.policy(*args, **kwargs)


def with_adapter(model, recipe, checkpoint=None):
    """The policy of a ``model.lora`` run: ``model`` with an adapter initialised from the recipe's seed
    (the same adapter on every run of that seed; the global random state is left as it was), holding
    the weights saved in ``checkpoint`` when resuming."""
    from rlvr_cli.models.adapter import load_adapter_state

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(recipe.seed)
        peft_model = add_lora(model, recipe.model.lora)
    if checkpoint is not None:
        load_adapter_state(peft_model, checkpoint)
    return peft_model
