"""The reward-term registry: one entry per ``reward.terms[].type``, read by everything that names a term.

An entry is the term's recipe section (a Pydantic class chosen by its ``type``, as the objective registry
in :mod:`rlvr_cli.recipe.objectives` chooses a loss) and carries, in one place: its parameters (the
fields), what it needs from a verifier (:attr:`RewardTermSpec.needs`), how its value is computed from
that (:meth:`RewardTermSpec.value`), whether a truncated response zeroes it, its TRL and verl export notes
and its doctor label. The schema's discriminated union (:data:`RewardTerm`), the scorer
(:mod:`rlvr_cli.rewards.scorer`), both exporters, the doctor and the per-term metrics read
:data:`REWARD_TERMS`; a new term type is one ``@register``-ed class here plus what computes it and its
row in ``tests/recipe/test_reward_terms.py`` (which runs every registered type on a right and a wrong
answer and fails for a type without a row).

A term's value is computed from what the scorer hands it (:class:`TermInputs`, a protocol: the scorer
owns the verifiers, the worker pool and the seed; this module imports none of them).
"""

from __future__ import annotations

import typing
from typing import Annotated, ClassVar, Literal, Protocol, Union

from pydantic import Field, model_validator

from rlvr_cli.recipe.strict import Strict

VerifierName = Literal["task", "integer", "math", "countdown", "code", "reasoning_gym"]
"""A correctness verifier's term type; `task` is the task's own (the names of rlvr_cli.rewards.registry
plus `task`; a test checks)."""

MAX_WEIGHT = 1e4
"""|w_k| bound, as every reward coefficient (rlvr_cli.recipe.schema.MAX_COEF; a test checks they agree)."""

Needs = Literal["verdict", "wrong_label"] | None
"""What a term needs checked: `verdict`: the response against the gold answer by its verifier;
`wrong_label`: the response against the task's fixed wrong label by the task's verifier; None: nothing."""


class TermInputs(Protocol):
    """What the scorer hands a term for one response."""

    verdict: typing.Any
    """The outcome (``rlvr_cli.rewards.outcome.Outcome``) of the check the term ``needs``, or None."""
    function_value: float | None
    """A ``function`` term's value for this response (the user's function is called per group)."""

    def format(self, think: bool) -> float: ...
    def format_only(self) -> float: ...
    def random(self, p: float) -> float: ...


class RewardTermSpec(Strict):
    """One reward term: its docstring is its docs line, the fields its parameters, the class variables
    how the rest of rlvr treats it."""

    needs: ClassVar[Needs] = None
    """What it needs from a verifier (see :data:`Needs`)."""
    answer_based: ClassVar[bool] = True
    """0 for a response cut at the length limit under ``reward.truncated_is_incorrect`` (it has no answer)."""
    user_code: ClassVar[bool] = False
    """The user's own code, called once per prompt's group in the worker pool (rlvr_cli/rewards/function.py)."""
    trl_export: ClassVar[str | None] = None
    """What `rlvr export --to trl` warns about it (None: carried as is by trl_reward.RlvrReward)."""
    verl_export: ClassVar[str | None] = None
    """What `rlvr export --to verl` warns about it, besides that verl's reward is the task's verifier alone."""

    def verifier(self, task_verifier: str) -> str:
        """The verifier its ``needs`` check runs (the task's own unless the term names one)."""
        return task_verifier

    def value(self, inputs: TermInputs) -> float:  # pragma: no cover - every entry defines it
        raise NotImplementedError

    def name(self) -> str:
        """Its name in metrics (``rewards/<name>/mean``, TRL's) and in the doctor's table."""
        return self.type

    def doctor_label(self, key: str) -> str:
        """Its row label in `rlvr doctor`'s table of terms (``key``: its key in ``Score.terms``)."""
        return key

    def trl_note(self) -> str | None:
        """A line for the TRL export's notes on how to use this term there (None: nothing to say)."""
        return None


REWARD_TERMS: dict[str, type[RewardTermSpec]] = {}
"""Every term type -> its entry (a verifier entry serves each name of :data:`VerifierName`)."""


def register(cls: type[RewardTermSpec]) -> type[RewardTermSpec]:
    for name in typing.get_args(cls.model_fields["type"].annotation):
        REWARD_TERMS[name] = cls
    return cls


@register
class VerifierTerm(RewardTermSpec):
    type: VerifierName = "task"
    """A correctness verifier; `task` means the task's own (integer for arithmetic, countdown, math for datasets)."""
    weight: float = Field(1.0, ge=-MAX_WEIGHT, le=MAX_WEIGHT)
    """w_k: this term's weight in r = sum_k w_k * term_k (within +-1e4, as every reward coefficient)."""

    needs: ClassVar[Needs] = "verdict"

    def verifier(self, task_verifier: str) -> str:
        return task_verifier if self.type == "task" else self.type

    def value(self, inputs: TermInputs) -> float:
        return 1.0 if inputs.verdict is not None and inputs.verdict.outcome == "correct" else 0.0


@register
class FormatTerm(RewardTermSpec):
    type: Literal["format"]
    """Shaped reward: 1 when the response follows the task's format (its answer marker followed by a readable answer; without a marker, an answer found by one of `reward.extract`'s methods other than `last_number`, by default a `\\boxed{}` or `####` answer), optionally after a <think> block."""
    weight: float = Field(0.1, ge=-MAX_WEIGHT, le=MAX_WEIGHT)
    """w_k: this term's weight in r = sum_k w_k * term_k (within +-1e4, as every reward coefficient)."""
    think: bool = False
    """Require `<think>...</think>` (exactly one, non-empty, at the start) before the answer."""

    def value(self, inputs: TermInputs) -> float:
        return inputs.format(self.think)


@register
class RandomTerm(RewardTermSpec):
    type: Literal["random"]
    """Spurious control: Bernoulli(p), reproducible from the seed and the sample's identity (step, prompt id, sample index)."""
    p: float = Field(0.5, ge=0, le=1)
    """P(reward 1) of the random reward."""
    weight: float = Field(1.0, ge=-MAX_WEIGHT, le=MAX_WEIGHT)
    """w_k: this term's weight in r = sum_k w_k * term_k (within +-1e4, as every reward coefficient)."""

    answer_based: ClassVar[bool] = False
    trl_export: ClassVar[str | None] = ("the random reward draws from TRL's global step (optimiser updates), so its "
                                       "values differ from rlvr's run")
    verl_export: ClassVar[str | None] = ("the random reward is drawn per (step, prompt, sample) in rlvr; verl's reward "
                                         "function does not see the sample index")

    def value(self, inputs: TermInputs) -> float:
        return inputs.random(self.p)


@register
class IncorrectTerm(RewardTermSpec):
    type: Literal["incorrect"]
    """Spurious control: 1 only when the answer equals a fixed wrong label of the prompt."""
    weight: float = Field(1.0, ge=-MAX_WEIGHT, le=MAX_WEIGHT)
    """w_k: this term's weight in r = sum_k w_k * term_k (within +-1e4, as every reward coefficient)."""

    needs: ClassVar[Needs] = "wrong_label"

    def value(self, inputs: TermInputs) -> float:  # 0 without a wrong label (no verdict)
        return 1.0 if inputs.verdict is not None and inputs.verdict.outcome == "correct" else 0.0


@register
class FormatOnlyTerm(RewardTermSpec):
    type: Literal["format_only"]
    """Spurious control: 1 whenever an answer can be extracted at all (by the task's verifier, with `reward.extract`)."""
    weight: float = Field(1.0, ge=-MAX_WEIGHT, le=MAX_WEIGHT)
    """w_k: this term's weight in r = sum_k w_k * term_k (within +-1e4, as every reward coefficient)."""

    def value(self, inputs: TermInputs) -> float:
        return inputs.format_only()


@register
class FunctionTerm(RewardTermSpec):
    """Your own reward function with TRL's signature, `f(completions, **kwargs) -> list[float]`, called once per prompt's group with TRL's keyword arguments (prompts, completions, completion_ids, answer, every column of the dataset, trainer_state; `async def` is awaited) in the verifier worker pool under `reward.timeout_s`. It is your code and is NOT sandboxed (unlike the `code` verifier). A raise, a timeout or a wrong return (wrong length, None, NaN, a string, a value beyond +-1e9) stops the run with exit 2 naming the function and the prompt (docs/own_task.md)."""

    type: Literal["function"]
    function: str = Field(..., min_length=3)
    """`module:function` (imported from the current directory or PYTHONPATH) or `path/to/file.py:function` (relative to the current directory)."""
    weight: float = Field(1.0, ge=-MAX_WEIGHT, le=MAX_WEIGHT)
    """w_k: this term's weight in r = sum_k w_k * term_k (within +-1e4, as every reward coefficient)."""

    answer_based: ClassVar[bool] = False  # it sees a truncated response, as under TRL
    user_code: ClassVar[bool] = True

    @model_validator(mode="after")
    def _reference_form(self):
        where, _, name = self.function.rpartition(":")
        if not where or not name.isidentifier():
            raise ValueError(f"function {self.function!r}: expected `module:function` or `path/to/file.py:function`")
        if not where.endswith(".py") and not all(part.isidentifier() for part in where.split(".")):
            raise ValueError(f"function {self.function!r}: {where!r} is neither a module name (a.b.c) nor a .py file")
        return self

    def value(self, inputs: TermInputs) -> float:
        return 0.0 if inputs.function_value is None else inputs.function_value

    def name(self) -> str:
        return self.function.rpartition(":")[2]  # TRL names the metric after the function

    def doctor_label(self, key: str) -> str:
        return f"{key} {self.name()}"

    def trl_note(self) -> str | None:
        return (f"reward.terms function {self.function}: trl_reward.RlvrReward calls it with TRL's keywords, as rlvr "
                f"does; or pass it to GRPOTrainer(reward_funcs=[...]) itself (weight {self.weight:g} in reward_weights): "
                "the dataset has its columns")


RewardTerm = Annotated[Union[tuple(dict.fromkeys(REWARD_TERMS.values()))], Field(discriminator="type")]
"""The schema's ``reward.terms`` item: the union of the registered entries, chosen by ``type``."""
