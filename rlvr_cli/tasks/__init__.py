"""Tasks: prompt sources with held-out splits and gold answers (built-in `arithmetic`, `countdown`,
`answer_check` and `calc` (for the calculator environment), and `dataset` for any file or Hugging Face dataset)."""

from __future__ import annotations

from rlvr_cli.errors import UserError
from rlvr_cli.fingerprints import data_fingerprint  # noqa: F401 - also this package's name for it
from rlvr_cli.tasks.base import Problem, Task, TraceTask, stable_hash
from rlvr_cli.tasks.chat_render import render_chat

BUILTIN_TASKS = ("arithmetic", "countdown", "answer_check", "calc")
"""Tasks that need no data file: `--task NAME` and a recipe's `task: {name: NAME}` both accept them."""


def build_task(spec) -> Task:
    """Build the task a recipe's ``task`` section describes. A string is a built-in task name."""
    from rlvr_cli.recipe import schema

    if isinstance(spec, str):
        if spec not in BUILTIN_TASKS:
            raise UserError(f"--task {spec}: unknown built-in task (choose from {', '.join(BUILTIN_TASKS)}, or pass a recipe)")
        spec = {
            "arithmetic": schema.ArithmeticTaskSpec,
            "countdown": schema.CountdownTaskSpec,
            "answer_check": schema.AnswerCheckTaskSpec,
            "calc": schema.CalcTaskSpec,
        }[spec]()
    if spec.name == "arithmetic":
        from rlvr_cli.tasks.arithmetic import ArithmeticTask

        return ArithmeticTask(spec)
    if spec.name == "countdown":
        from rlvr_cli.tasks.countdown import CountdownTask

        return CountdownTask(spec)
    if spec.name == "answer_check":
        from rlvr_cli.tasks.answer_check import AnswerCheckTask

        return AnswerCheckTask(spec)
    if spec.name == "calc":
        from rlvr_cli.tasks.calc import CalcTask

        return CalcTask(spec)
    if spec.name == "reasoning_gym":
        from rlvr_cli.tasks.reasoning_gym import ReasoningGymTask

        return ReasoningGymTask(spec)
    from rlvr_cli.tasks.dataset import DatasetTask

    return DatasetTask(spec)


def default_task(model: str) -> str:
    """The task `rlvr sample` / `rlvr eval` use when no ``--task`` (and no run recipe) says one:
    `arithmetic` for a built-in model; for any other model its raw `347+285=` form is meaningless,
    so the user must choose (UserError)."""
    if model.startswith("builtin:"):
        return "arithmetic"
    raise UserError(f"--task: give a task (arithmetic, countdown, or a recipe whose task to use) for {model}: "
                    "the default arithmetic prompts are the built-in models' raw format")


def chat_messages(spec, problem: Problem) -> list[dict[str, str]]:
    """The conversation a chat-form prompt is: an optional system message (``task.system_prompt``), then the
    question; or a dataset's own conversation (``problem.meta["messages"]``), after the system message
    when the conversation has none of its own."""
    system = getattr(spec, "system_prompt", None)
    head = [{"role": "system", "content": system}] if system else []
    own = problem.meta.get("messages")
    if own:
        return (head if own[0]["role"] != "system" else []) + [dict(m) for m in own]
    return head + [{"role": "user", "content": problem.prompt}]


def encode_prompt(tokenizer, task: Task, problem: Problem) -> list[int]:
    """Token ids of a prompt, through the tokenizer's chat template when the task asks for it.

    A chat prompt is rendered to text by the template (in a worker with a time and a memory limit:
    :mod:`rlvr_cli.tasks.chat_render`) and then tokenized without adding special tokens (the template
    writes the ones the model expects).
    """
    spec = getattr(task, "spec", None)
    if getattr(spec, "chat_template", False):
        if not getattr(tokenizer, "chat_template", None):
            raise UserError("task.chat_template: true, but the model's tokenizer has no chat template "
                            "(set chat_template: false and write the whole prompt in prompt_template)")
        text = render_chat(tokenizer, chat_messages(spec, problem))  # a time- and memory-limited process
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return list(tokenizer(problem.prompt, add_special_tokens=True)["input_ids"])


__all__ = ["BUILTIN_TASKS", "Problem", "Task", "TraceTask", "build_task", "chat_messages", "data_fingerprint", "encode_prompt",
           "stable_hash"]
