"""rlvr's reward and prompts for TRL's ``GRPOTrainer``.

Usage (the YAML written by ``rlvr export RECIPE --to trl``)::

    import yaml
    from trl import GRPOConfig, GRPOTrainer
    from rlvr_cli.bridges.trl_reward import trainer_inputs

    exported = yaml.safe_load(open("grpo.trl.yaml"))
    trainer = GRPOTrainer(args=GRPOConfig(**exported["grpo_config"]), **trainer_inputs(exported["rlvr_recipe"]))
    trainer.train()

:class:`RlvrReward` is a TRL reward function (``prompts, completions, completion_ids, **columns ->
list[float]``): the recipe's weighted terms scored by rlvr's :class:`~rlvr_cli.rewards.scorer.Scorer`
(the same verifiers, worker pool and time limit), plus DAPO's soft overlong punishment when the recipe
has it (TRL has none of its own). It logs the true verifier's accuracy as ``rlvr/accuracy``. The
dataset carries each prompt's gold answer in the ``rlvr_reference`` column, which TRL passes back.

A recipe's ``function`` reward terms (the user's own TRL-signature functions) are called by the same
scorer with the same keyword arguments as in ``rlvr train``. The dataset also has the columns such a
function reads, ``answer`` and the data's other columns, so the function itself can be passed to
``GRPOTrainer(reward_funcs=[...])`` instead, with TRL's ``reward_weights``.
"""

from __future__ import annotations

import json
import random

from rlvr_cli.algo.overlong import soft_overlong_penalty
from rlvr_cli.rewards.scorer import Scorer, ScoreItem
from rlvr_cli.tasks import build_task, chat_messages
from rlvr_cli.tasks.base import Problem


def _recipe(recipe):
    from rlvr_cli.recipe.load import load_recipe, validate_recipe_data

    if isinstance(recipe, dict):
        return validate_recipe_data(recipe, source="rlvr_recipe")
    if isinstance(recipe, str):
        return load_recipe(recipe)
    return recipe


class RlvrReward:
    """A TRL reward function computing an rlvr recipe's reward (see the module docstring)."""

    def __init__(self, recipe, eos_token_id: int | None = None):
        self.recipe = _recipe(recipe)
        self.task = build_task(self.recipe.task)
        self.scorer = Scorer(self.recipe.reward, self.task, seed=self.recipe.seed)
        self.eos_token_id = eos_token_id
        self.__name__ = "rlvr"  # TRL names the logged reward column after it: rewards/rlvr/mean

    def _truncated(self, ids) -> bool:
        limit = self.recipe.rollout.max_new_tokens
        if ids is None or len(ids) < limit:
            return False
        return self.eos_token_id is None or ids[-1] != self.eos_token_id

    def __call__(self, prompts, completions, completion_ids=None, rlvr_id=None, rlvr_reference=None, rlvr_meta=None, **kwargs) -> list[float]:
        n = len(completions)
        step = getattr(kwargs.get("trainer_state"), "global_step", 0) or 0
        ids_list = completion_ids if completion_ids is not None else [None] * n
        seen: dict[str, int] = {}
        items = []
        for i in range(n):
            pid = rlvr_id[i] if rlvr_id is not None else str(i)
            meta = json.loads(rlvr_meta[i]) if rlvr_meta is not None else {}
            problem = Problem(pid, _text(prompts[i]), rlvr_reference[i], meta)
            seen[pid] = seen.get(pid, -1) + 1
            items.append(ScoreItem(problem, _text(completions[i]), seen[pid], step, self._truncated(ids_list[i]),
                                   completion_ids=ids_list[i], trl_global_step=step))
        scores = self.scorer.score(items)
        rewards = [s.reward for s in scores]
        sp = self.recipe.overlong.soft_punish
        if sp is not None and completion_ids is not None:
            import torch

            lengths = torch.tensor([len(x) for x in completion_ids], dtype=torch.float32)
            pen = soft_overlong_penalty(lengths, self.recipe.rollout.max_new_tokens, sp.buffer, sp.factor)
            rewards = [r + float(p) for r, p in zip(rewards, pen)]
        log = kwargs.get("log_metric")
        if callable(log) and scores:
            log("rlvr/accuracy", sum(s.correct for s in scores) / len(scores))
        return rewards

    def close(self) -> None:
        self.scorer.close()


def _text(x) -> str:
    """A TRL prompt or completion: a string, or a conversation (list of messages) -> its last content."""
    if isinstance(x, str):
        return x
    if isinstance(x, list) and x and isinstance(x[-1], dict):
        return str(x[-1].get("content", ""))
    return str(x)


def train_dataset(recipe, num_prompts: int | None = None):
    """A ``datasets.Dataset`` of training prompts: ``prompt`` (text, or a conversation when the task uses
    the chat template), ``rlvr_id``, ``rlvr_reference``, ``rlvr_meta``, and what a ``function`` reward term
    reads: ``answer`` (= ``rlvr_reference``) and the data's other columns (as TRL passes them). Defaults to steps * P prompts."""
    from datasets import Dataset

    r = _recipe(recipe)
    task = build_task(r.task)
    n = num_prompts or r.steps * r.rollout.prompts_per_step
    problems = task.train_problems(random.Random(r.seed), n)
    chat = getattr(getattr(task, "spec", None), "chat_template", False)
    columns = [c for c in getattr(task, "column_names", None) or [] if c not in ("prompt", "answer") and not c.startswith("rlvr_")]
    return Dataset.from_dict(
        {
            "prompt": [chat_messages(task.spec, p) if chat else p.prompt for p in problems],
            "rlvr_id": [p.id for p in problems],
            "rlvr_reference": [p.reference for p in problems],
            "rlvr_meta": [json.dumps(p.meta, default=str) for p in problems],
            "answer": [p.reference for p in problems],
            **{c: [(p.meta.get("columns") or {}).get(c) for p in problems] for c in columns},
        }
    )


def trainer_inputs(recipe, num_prompts: int | None = None) -> dict:
    """Keyword arguments of ``GRPOTrainer`` besides ``args``: the model (a local directory for
    ``builtin:*``), its tokenizer, the dataset, :class:`RlvrReward` and, with ``model.lora``, the
    ``peft_config``."""
    from rlvr_cli.models import load_tokenizer, resolve_model_ref

    r = _recipe(recipe)
    from rlvr_cli.warm_start import ensure_built

    ensure_built(r.model.name)  # a built-in model is warm-started once, as `rlvr train` would
    path = resolve_model_ref(r.model.name).path
    tok = load_tokenizer(path)
    out = {
        "model": path,
        "processing_class": tok,
        "reward_funcs": [RlvrReward(r, eos_token_id=tok.eos_token_id)],
        "train_dataset": train_dataset(r, num_prompts),
    }
    lora = r.model.lora
    if lora is not None:  # TRL then keeps no reference model: the adapter disabled is pi_ref, as in rlvr
        from peft import LoraConfig

        out["peft_config"] = LoraConfig(r=lora.rank, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                                        target_modules=lora.target_modules, bias="none", task_type="CAUSAL_LM")
    return out
