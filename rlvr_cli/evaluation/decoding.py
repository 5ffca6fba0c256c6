"""How evaluation draws responses: sampling or greedy, with optional budget forcing and minimum thinking.

For the built-in tasks there is no ``<think>`` block: the *thinking* is everything before the task's
answer marker (``#``), the *answer* is what follows it. Both controls spend inference-time compute,
so a record made with either is labelled (:func:`itc_label`) and never mistaken for plain sampling.

- ``min_think = M``: the marker's first token and EOS are forbidden while the response has fewer
  than M tokens, so where the model would end its thought it continues it instead (it draws the
  next token from the rest of its distribution).
- ``budget = B`` (budget forcing, Muennighoff et al. 2025, "s1"): thinking stops at B tokens. A
  response that reached B tokens without EOS gets the marker appended (unless it already wrote the
  marker: then it is answering and only continues) and continues for at most ``answer_tokens``
  tokens from prompt + partial response (+ marker). The response is then at most
  B + |marker| + answer_tokens tokens; ``max_new_tokens`` is not used.

Without either control this is exactly one :func:`rlvr_cli.sampling.generate` call per batch, so
the training loop's evaluations are unchanged by them.

A multi-turn run (``environment:``) is evaluated multi-turn (:func:`draw_turns`, the trainer's sampler:
the same episodes, turns and limits), or its evaluation numbers would be another policy's, the model
without its tool; budget forcing and minimum thinking are single-turn controls and refused there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rlvr_cli.envs import episode_factory
from rlvr_cli.errors import UserError
from rlvr_cli.rewards.extract import extract_answer
from rlvr_cli.sampling import SamplingOptions, generate
from rlvr_cli.sampling.rounds import Turns
from rlvr_cli.sampling.turns import generate_turns

ANSWER_TOKENS = 16
"""Default tokens allowed after a forced answer marker (an arithmetic answer is at most 10 plus EOS)."""


@dataclass(frozen=True)
class Decoding:
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64
    greedy: bool = False
    budget: int | None = None
    """Thinking tokens before the answer marker is forced (None = no forcing)."""
    min_think: int | None = None
    """Response tokens before the marker or EOS may be drawn (None = no minimum)."""
    answer_tokens: int = ANSWER_TOKENS


@dataclass
class Response:
    ids: list[int]
    """Response token ids, the forced marker included, EOS included when it finished."""
    truncated: bool
    """No EOS within the limit (for a forced response: within ``answer_tokens`` after the marker)."""
    forced: bool = False
    """The budget appended the answer marker."""


def itc_label(
    budget: int | None, min_think: int | None, greedy: bool, answer_tokens: int = ANSWER_TOKENS
) -> str | None:
    """`budget_32-min_think_8-greedy` for the inference-time settings in use; None for plain sampling.

    ``answer_tokens`` appears (`budget_32-answer_tokens_8`) only with a budget and when not the default.
    """
    parts = [f"budget_{budget}"] if budget is not None else []
    parts += [f"answer_tokens_{answer_tokens}"] if budget is not None and answer_tokens != ANSWER_TOKENS else []
    parts += [f"min_think_{min_think}"] if min_think is not None else []
    parts += ["greedy"] if greedy else []
    return "-".join(parts) or None


def marker_ids(tokenizer, marker: str) -> list[int]:
    """Token ids of the answer marker written on its own (no special tokens)."""
    return list(tokenizer(marker, add_special_tokens=False)["input_ids"]) if marker else []


def draw(model, tokenizer, marker: str, prompts: list[list[int]], dec: Decoding, generator=None, autocast_dtype=None,
         row_keys=None):
    """One response per prompt under ``dec``; returns (responses, tokens generated).

    ``row_keys`` (one int64 key per prompt) replaces ``generator``; a forced answer then draws with
    keys derived from its row's (:func:`answer_keys`), so a row's response depends on its key alone.
    """
    mark = marker_ids(tokenizer, marker)
    if (dec.budget is not None or dec.min_think is not None) and not mark:
        raise ValueError("budget forcing and min_think need a task with an answer marker")
    generator = generator if row_keys is None else None
    suppress = {}
    if dec.min_think is not None:
        eos = tokenizer.eos_token_id
        banned = [mark[0], *([eos] if isinstance(eos, int) else eos)]
        suppress = {"suppress_ids": banned, "suppress_until": dec.min_think}
    options = SamplingOptions(
        max_new_tokens=dec.budget if dec.budget is not None else dec.max_new_tokens,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        temperature=dec.temperature,
        top_p=dec.top_p,
        greedy=dec.greedy,
        return_logprobs=False,
        autocast_dtype=autocast_dtype,
        **suppress,
    )
    first = generate(model, prompts, options, generator=generator, row_keys=row_keys)
    responses = [Response(list(ids), why == "length") for ids, why in zip(first.response_ids, first.finish_reasons)]
    if dec.budget is None:
        return responses, first.gen_tokens
    answer = replace(options, max_new_tokens=dec.answer_tokens, suppress_ids=None, suppress_until=0)
    forced = _force_answers(model, tokenizer, marker, prompts, responses, answer, generator, row_keys)
    return responses, first.gen_tokens + forced


def answer_keys(keys):
    """Keys of the forced-answer continuations, distinct from (and a function of) their rows' keys."""
    from rlvr_cli.keyed_random import mix64, stream_key

    return mix64(keys ^ stream_key("forced answer"))


def _force_answers(model, tokenizer, marker, prompts, responses, answer: SamplingOptions, generator=None,
                   row_keys=None) -> int:
    """Budget forcing on the responses that hit the budget (in place); returns the tokens generated.

    ``answer``: the sampling options of the forced answers (at most ``answer_tokens`` new tokens, the
    sampling settings of the responses)."""
    rows = [i for i, r in enumerate(responses) if r.truncated]
    if not rows:
        return 0  # nothing to force: the random stream is left exactly where plain sampling leaves it
    mark = marker_ids(tokenizer, marker)
    forced = {i: marker not in tokenizer.decode(responses[i].ids, skip_special_tokens=True) for i in rows}
    heads = [responses[i].ids + (mark if forced[i] else []) for i in rows]
    keys = answer_keys(row_keys[rows]) if row_keys is not None else None
    tail = generate(model, [prompts[i] + h for i, h in zip(rows, heads)], answer, generator=generator, row_keys=keys)
    for i, head, ids, why in zip(rows, heads, tail.response_ids, tail.finish_reasons):
        responses[i] = Response(head + list(ids), why == "length", forced[i])
    return tail.gen_tokens


def environment_turns(spec, model_name: str, tokenizer, task, extract: list[str]) -> Turns | None:
    """How a multi-turn recipe's trajectories are sampled, in training and in evaluation alike: a fresh
    episode per trajectory from ``spec`` (the recipe's ``environment:``; None: single-turn) through
    :func:`rlvr_cli.envs.episode_factory`, a turn holding an answer when the task's answer extraction
    (its marker, else the ``extract`` methods) finds one (a turn with neither a call nor an answer is void)."""
    if spec is None:
        return None
    key = (spec, model_name, tokenizer, task, tuple(extract))
    if _LAST_TURNS and all(a is b or a == b for a, b in zip(_LAST_TURNS[0], key)):
        return _LAST_TURNS[1]  # every step of a run: the user's module imported and probed once
    marker = task.answer_marker

    def has_answer(text: str) -> bool:
        return extract_answer(text, marker, extract)[0] is not None

    turns = Turns(episode_factory(spec, tokenizer, model_name, has_answer), spec.max_turns)
    _LAST_TURNS[:] = [key, turns]
    return turns


_LAST_TURNS: list = []
"""The last (arguments, Turns) of :func:`environment_turns`: a run asks for the same every step and at every
evaluation. It holds its arguments, so an object compared by identity here cannot be another one reusing a
freed object's id; a Turns builds a fresh episode per trajectory, so sharing it shares no state."""


def draw_turns(model, tokenizer, prompts: list[list[int]], rows: list[dict], dec: Decoding, turns: Turns,
               autocast_dtype=None, row_keys=None) -> tuple[list[Response], int]:
    """One multi-turn trajectory per prompt (its task row ``rows[i]``) under ``dec``, keyed by ``row_keys``;
    returns (responses, model tokens generated). The response is the whole trajectory, tool replies included."""
    if dec.budget is not None or dec.min_think is not None:
        raise UserError("--budget / --min-think: budget forcing and minimum thinking are single-turn; a "
                        "multi-turn run (environment:) is evaluated without them")
    options = SamplingOptions(max_new_tokens=dec.max_new_tokens, eos_token_id=tokenizer.eos_token_id,
                              pad_token_id=tokenizer.pad_token_id, temperature=dec.temperature, top_p=dec.top_p,
                              greedy=dec.greedy, return_logprobs=False, autocast_dtype=autocast_dtype)
    out = generate_turns(model, tokenizer, prompts, [turns.make_episode(r) for r in rows], rows, options,
                         turns.max_turns, row_keys)
    return [Response(list(ids), why == "length") for ids, why in zip(out.response_ids, out.finish_reasons)], out.gen_tokens
