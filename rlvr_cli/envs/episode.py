"""One trajectory's environment, as the multi-turn sampler sees it (:class:`rlvr_cli.envs.protocol.Episode`).

:func:`episode_factory` is the one entry point of the trainer: it loads and checks the recipe's environment
once (a bad reference is a ``UserError`` before anything is sampled), and returns a function that builds a
:class:`ToolEpisode` per trajectory from the task row. An episode parses each model turn in the call
protocol, runs the tool under the limits (:mod:`rlvr_cli.envs.limits`), and counts calls, failures and
void turns in its :class:`~rlvr_cli.envs.protocol.EpisodeStats`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from rlvr_cli.envs import calls
from rlvr_cli.envs.limits import call_limited, character_vocab, fit, run_limited, settled, writable
from rlvr_cli.envs.loading import Loaded, check_names, load_environment, methods_of
from rlvr_cli.envs.protocol import EpisodeStats, ToolReply
from rlvr_cli.errors import UserError
from rlvr_cli.user_code import describe_exception, raised_at

MAX_NOTES = 16
"""Notes an episode keeps (the first ones; the counters count them all)."""


def resolve_protocol(protocol: str, model_name: str) -> str:
    """`auto` is `tags` on the built-in models (their character alphabet has no braces or quotes), else `hermes`."""
    if protocol != "auto":
        return protocol
    return "tags" if str(model_name).startswith("builtin:") else "hermes"


def is_chatml(tokenizer) -> bool:
    """Whether the tokenizer has ChatML's `<|im_start|>` token (Qwen, SmolLM2): hermes replies then switch roles."""
    if tokenizer is None:
        return False
    try:
        vocab = tokenizer.get_vocab()
    except Exception:  # noqa: BLE001 - no readable vocabulary: plain replies
        return False
    return "<|im_start|>" in vocab and "<|im_end|>" in vocab


def problem_row(problem) -> dict:
    """The row ``reset(**row)`` gets for a task's ``Problem``: its columns (``meta``), then ``prompt``,
    ``answer`` (the gold answer) and ``id``, as TRL passes a dataset's row."""
    return {**dict(getattr(problem, "meta", {}) or {}), "prompt": problem.prompt, "answer": problem.reference, "id": problem.id}


class ToolEpisode:
    """One trajectory: a fresh environment object, its tools, the protocol, the limits and the counters."""

    def __init__(self, loaded: Loaded, spec, protocol: str, tokenizer=None, has_answer: Callable[[str], bool] | None = None,
                 chatml: bool = False):
        self.loaded, self.spec, self.protocol, self.tokenizer = loaded, spec, protocol, tokenizer
        self.has_answer, self.chatml = has_answer, chatml
        self.env = _built(loaded, spec.tool_timeout_s)
        try:
            methods = methods_of(self.env) if self.env is not None else {}
        except Exception as e:  # noqa: BLE001 - inspect.getmembers reads every property, which may raise
            raise UserError(f"environment.factory: {loaded.label}: reading its methods raised {describe_exception(e)}") from None
        self.tools: dict[str, Callable] = {**methods, **loaded.functions}
        self.stop_strings: tuple[str, ...] = calls.stop_strings(protocol, self.tools)
        self.stats = EpisodeStats()

    def _note(self, note: str) -> None:
        if note and len(self.stats.notes) < MAX_NOTES:
            self.stats.notes.append(note)

    def reset(self, row: dict) -> str | None:
        """``env.reset(**row)``: its text (made writable by the tokenizer) or None. A reset that raises or
        hangs is the recipe's environment failing, not the model: ``UserError`` (exit 2)."""
        if self.env is None:
            return None
        value = self._user_call(lambda: self.env.reset(**row), "reset",
                                f"reset(**row) of row {str(row.get('id', '?'))[:60]!r}")
        if value is None:
            return None
        return writable(value if isinstance(value, str) else str(value), self.tokenizer)

    def step(self, turn_text: str) -> ToolReply | None:
        """The reply to one model turn, or None when the turn makes no call (or makes it in the last turn)."""
        self.stats.turns += 1
        parsed = calls.parse(self.protocol, turn_text, self.tools)
        answered = self.has_answer(turn_text) if self.has_answer is not None else None
        if parsed is None:
            if answered is False:
                self.stats.void_turns += 1
            return None
        if self.stats.turns >= self.spec.max_turns:  # verl's max_assistant_turns: a call in the last turn gets no reply
            if not answered:
                self.stats.void_turns += 1
            self._note(f"a call in turn {self.stats.turns} of environment.max_turns {self.spec.max_turns}: no reply")
            return None
        self.stats.calls += 1
        if isinstance(parsed, calls.Malformed):
            text, failed, note = parsed.error, True, f"{parsed.name}: {parsed.error}"
        else:
            out = call_limited(self.tools[parsed.name], parsed.args, parsed.kwargs, self.spec.tool_timeout_s, parsed.name)
            text, failed, note = out.text, out.failed, out.note
        body, cut = fit(text, self.tokenizer, self.spec.max_output_tokens, self.spec.truncate_side)
        if failed:
            self.stats.failures += 1
        note = "; ".join(n for n in (note, cut) if n)
        self._note(note)
        return ToolReply(calls.wrap(self.protocol, body, self.chatml), failed, note)

    def _user_call(self, fn, name: str, what: str):
        """``fn()`` under environment.tool_timeout_s; a hang or an exception in the recipe's own environment
        (not in a tool the model called) is a ``UserError`` naming ``what``."""
        kind, value = run_limited(fn, self.spec.tool_timeout_s, name)
        where = f"environment.factory: {self.loaded.label}: {what}"
        if kind == "timeout":
            raise UserError(f"{where} took longer than environment.tool_timeout_s ({self.spec.tool_timeout_s:g} s)")
        if kind == "error":
            raise UserError(f"{where} raised {describe_exception(value)}{raised_at(value)}")
        return value

    def reward(self) -> float | None:
        """``env.get_reward()`` (TRL), None when the environment has none or returns None; a failing or
        non-finite one is a ``UserError`` (as a failing reward function is)."""
        fn = getattr(self.env, "get_reward", None)
        if not callable(fn):
            return None

        where = f"environment.factory: {self.loaded.label}: get_reward()"
        value = self._user_call(lambda: settled(fn()), "get_reward", "get_reward()")
        if value is None:
            return None
        try:
            if isinstance(value, (str, bytes)):
                raise TypeError
            number = float(value)
        except Exception:  # noqa: BLE001 - the user's value may raise anything from __float__
            raise UserError(f"{where} returned a {type(value).__name__}, not a number") from None
        if not math.isfinite(number):
            raise UserError(f"{where} returned {number}")
        return number


def _built(loaded: Loaded, timeout_s: float):
    """A fresh environment object; a factory that raises or hangs now (its probe did not) is a ``UserError``."""
    if loaded.factory is None:
        return None
    kind, value = run_limited(loaded.build, timeout_s, "factory")
    if kind == "ok":
        return value
    why = f"took longer than {timeout_s:g} s" if kind == "timeout" else f"raised {describe_exception(value)}{raised_at(value)}"
    raise UserError(f"environment.factory: {loaded.label}: building an environment {why}")


def episode_factory(spec, tokenizer, model_name: str, has_answer: Callable[[str], bool] | None = None
                    ) -> Callable[[dict], ToolEpisode]:
    """A function building one reset :class:`ToolEpisode` per trajectory from its task row (see
    :func:`problem_row`), after loading and checking ``spec`` (``UserError`` naming the field when it is bad).

    ``tokenizer`` cuts replies to ``spec.max_output_tokens`` of its tokens and keeps them writable;
    ``model_name`` resolves ``protocol: auto``; ``has_answer(turn_text)`` (optional: e.g. the task's answer
    extraction) tells a void turn, one with neither a call nor an answer; without it, only a call in the last
    turn (which gets no reply) counts as void.
    The sampler then calls the episode's ``reset(row)`` itself (the protocol's order).
    """
    loaded = load_environment(spec)
    protocol = resolve_protocol(spec.protocol, model_name)
    check_names(loaded, protocol, character_vocab(tokenizer) if tokenizer is not None else None)
    chatml = protocol == "hermes" and is_chatml(tokenizer)

    def build(row: dict) -> ToolEpisode:
        return ToolEpisode(loaded, spec, protocol, tokenizer, has_answer, chatml)

    return build
