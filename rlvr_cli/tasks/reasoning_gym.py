"""Task family `reasoning_gym`: prompts from one of reasoning-gym's procedural generators.

reasoning-gym (https://github.com/open-thought/reasoning-gym; extra `reasoning-gym`) generates
reasoning problems offline, each generator with its own scorer. The held-out set is items 0..num_eval-1
of the generator seeded with ``split_seed``; training items are drawn from a second generator seeded
from ``split_seed + 1`` with the step's rng picking indices, so they never repeat a held-out question
(a question that appears in both is skipped). Responses are scored by the `reasoning_gym` verifier
(rlvr_cli/rewards/reasoning_gym.py) in the verifier worker pool.
"""

from __future__ import annotations

import json
import random
from functools import cached_property

from rlvr_cli.errors import UserError
from rlvr_cli.tasks.base import Problem, stable_hash


def _require():
    try:
        import reasoning_gym
    except ImportError:
        raise UserError("task.name reasoning_gym: the `reasoning-gym` package is not installed; install it with: pip install 'rlvr-cli[reasoning-gym]'") from None
    return reasoning_gym


class ReasoningGymTask:
    verifier = "reasoning_gym"
    answer_marker = ""

    def __init__(self, spec):
        self.spec = spec
        self.name = f"reasoning_gym:{spec.dataset}"
        try:
            spec.prompt_template.format(question="")
        except (KeyError, IndexError, ValueError) as e:
            raise UserError(f"task.prompt_template {spec.prompt_template!r}: only {{question}} can be filled in ({type(e).__name__}: {e}); write a literal brace as {{{{ or }}}}") from None
        rg = _require()
        try:
            self._eval_ds = rg.create_dataset(spec.dataset, size=spec.num_eval, seed=spec.split_seed, **spec.config)
            self._train_ds = rg.create_dataset(spec.dataset, size=spec.num_train, seed=spec.split_seed + 1, **spec.config)
        except Exception as e:  # noqa: BLE001 - unknown generator or bad configuration
            raise UserError(f"task.dataset {spec.dataset} / task.config {spec.config}: reasoning-gym refused it: {type(e).__name__}: {e}") from None

    def _problem(self, entry: dict, split: str, index: int) -> Problem:
        reference = json.dumps(
            {"dataset": self.spec.dataset, "config": self.spec.config, "entry": entry, "threshold": self.spec.correct_threshold},
            default=str,
        )
        prompt = self.spec.prompt_template.format(question=entry["question"])
        return Problem(id=f"rg:{self.spec.dataset}:{split}:{index}", prompt=prompt, reference=reference, meta={"answer": str(entry["answer"])})

    @cached_property
    def _eval_questions(self) -> set[int]:
        return {stable_hash(self._eval_ds[i]["question"]) for i in range(len(self._eval_ds))}

    def eval_problems(self) -> list[Problem]:
        return [self._problem(self._eval_ds[i], "eval", i) for i in range(len(self._eval_ds))]

    def train_problems(self, rng: random.Random, n: int) -> list[Problem]:
        out, tries = [], 0
        while len(out) < n:
            tries += 1
            if tries > 20 * n + 100:
                raise UserError(f"task.num_train {self.spec.num_train}: too few training items differ from the held-out ones")
            i = rng.randrange(len(self._train_ds))
            entry = self._train_ds[i]
            if stable_hash(entry["question"]) in self._eval_questions:
                continue
            out.append(self._problem(entry, "train", i))
        return out

    def incorrect_reference(self, problem: Problem) -> str:
        """reasoning-gym scorers judge from the item's metadata, so no fixed wrong label exists: the
        spurious `incorrect` term scores 0 on this task (the scorer's rule for a task without one)."""
        raise NotImplementedError("reasoning-gym items have no fixed wrong label")
