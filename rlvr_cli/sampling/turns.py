"""Multi-turn sampling, token in and token out: model turns and environment replies on one KV cache.

A trajectory is one response sequence whose tokens are either written by the model (sampled, with a
log-prob) or appended by its environment (a tool's reply; origin *environment*, log-prob 0.0, never
used). For each row:

  1. ``episode.reset(row)``: text to put before the first model turn (usually none); its tokens are the
     response's first tokens, of origin environment (the group's prompt stays one prompt);
  2. a model turn: tokens sampled until EOS, the token budget, or the turn's decoded tail ending with one
     of ``episode.stop_strings`` (the end of a tool call);
  3. ``episode.step(turn_text)`` on every turn that ends (its counters see every turn); when the turn
     ended on a stop string, fewer than ``max_turns`` model turns were sampled and the budget has room,
     the reply's tokens (``tokenizer(text, add_special_tokens=False)``, cut to the budget left) are
     appended, origin environment, and the next model turn follows; otherwise the trajectory ends.

Decoding stays batched: every live row advances one position per decode step, either sampling a token
or feeding the next token of its pending environment text (teacher forcing through the same decoder,
so the KV cache is extended, never rebuilt from the text). An environment token therefore costs one
batched decode step, as a model token does, and the history is never re-encoded.

The token budget ``options.max_new_tokens`` counts the whole response, environment tokens included
(verl's convention: the response length the trainer pads to), so the trainer's memory is bounded by it.

Randomness is keyed as in :func:`rlvr_cli.sampling.generate`: position t of row i draws with
``uniforms(row_keys[i], t)``, a function of the row's key alone, so a trajectory (given a deterministic
environment) is the same whatever batch it is sampled in. Finish reasons: `eos` (the model wrote EOS),
`length` (the budget ran out, in a model turn or in a reply), `stop` (a turn ended on a stop string and
got no reply: no call, or the last allowed turn).

Re-tokenisation drift: the sampler never re-tokenises (token in, token out), so a drift cannot shift
the origins. It still counts, per trajectory, the environment replies where the text of the model turn
plus the reply would tokenise differently from the ids the trajectory holds (``tokenizer(turn_text +
reply_text)`` vs the turn's ids + the reply's ids): what a text-based pipeline (an exported TRL / verl
run, a chat template) would see differently (``prefix_mismatches``). With the built-in character
tokenizer it is always 0.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import torch

from rlvr_cli.envs.protocol import ENVIRONMENT, MODEL
from rlvr_cli.keyed_random import sample_inverse_cdf, uniforms
from rlvr_cli.sampling import DROP_FINISHED_AT, Samples, SamplingOptions, filter_logits, prefill
from rlvr_cli.sampling.decode_step import static_decode_supported



@dataclass
class Trajectories(Samples):
    """:class:`Samples` of multi-turn rows: each response token's origin and each row's episode."""

    origins: list[list[int]] = field(default_factory=list)
    """Per response token: 1 written by the model, 0 appended by the environment."""
    episodes: list = field(default_factory=list)
    """Each row's episode after the trajectory (its ``stats``, its ``reward()``)."""
    prefix_mismatches: list[int] = field(default_factory=list)
    """Per row: environment replies whose text re-tokenises differently in context (module docstring)."""
    turns: list[int] = field(default_factory=list)
    """Per row: model turns sampled."""


class _Row:
    """One trajectory's state between decode steps."""

    def __init__(self, episode, budget: int):
        self.episode, self.budget = episode, budget
        self.ids: list[int] = []
        self.logps: list[float] = []
        self.origins: list[int] = []
        self.turn: list[int] = []  # the current model turn's ids
        self.pending: deque[int] = deque()  # environment ids still to feed
        self.turns = 0
        self.mismatches = 0
        self.finish: str | None = None

    def queue(self, ids: list[int]) -> bool:
        """Queue environment ids (cut to the budget left); False when none fits."""
        room = self.budget - len(self.ids)
        self.pending.extend(ids[:room])
        return room > 0


def _tail_ends_with(tokenizer, ids: list[int], stops: tuple[str, ...], longest: int) -> bool:
    """Whether the text of ``ids`` ends with a stop string, decoding only the last ``longest`` tokens (a
    token is at least one character, so a stop string of n characters lies in the last n tokens)."""
    if not stops:
        return False
    tail = tokenizer.decode(ids[-longest:], skip_special_tokens=True)
    return tail.endswith(stops)


def _encode(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else []


def seam_mismatch(tokenizer, turn_text: str, reply_text: str, reply_ids: list[int]) -> bool:
    """Whether the turn's text followed by the reply tokenises otherwise than the two apart: a BPE merge
    across the seam (TRL #5224), or a template's rewrite, that a text pipeline re-tokenising the history
    would see as a shifted stream. The trajectory keeps its own ids either way (token in, token out)."""
    return _encode(tokenizer, turn_text + reply_text) != _encode(tokenizer, turn_text) + reply_ids


def _end_turn(row: _Row, tokenizer, max_turns: int, by: str) -> None:
    """The model turn of ``row`` ended (``by``: `eos`, `stop` or `length`): ask the episode, then queue its
    reply or finish the trajectory."""
    text = tokenizer.decode(row.turn, skip_special_tokens=True)
    reply = row.episode.step(text)
    row.turn = []
    if by != "stop":
        row.finish = by
        return
    if reply is None or row.turns >= max_turns:
        row.finish = "stop"
        return
    reply_ids = _encode(tokenizer, reply.text)
    row.mismatches += seam_mismatch(tokenizer, text, reply.text, reply_ids)
    if not reply_ids:  # an empty reply: the next model turn follows at once
        return
    if not row.queue(reply_ids):
        row.finish = "length"


@torch.inference_mode()
def generate_turns(model, tokenizer, prompt_ids: list[list[int]], episodes: list, rows: list[dict],
                   options: SamplingOptions, max_turns: int, row_keys: torch.Tensor) -> Trajectories:
    """Sample one multi-turn trajectory per prompt with its episode (``episodes[i]``, started on
    ``rows[i]``), at most ``max_turns`` model turns each, keyed by ``row_keys`` (module docstring).

    ``options`` as for :func:`rlvr_cli.sampling.generate`, but top-k / top-p supports are not recorded
    (a multi-turn recipe samples untruncated: the schema's check) and EOS is never ignored.
    """
    device = next(model.parameters()).device
    b = len(prompt_ids)
    if b == 0:
        return Trajectories([], [], [], [], 0)
    if len(episodes) != b or len(rows) != b or len(row_keys) != b:
        raise ValueError("generate_turns: one episode, row and key per prompt")
    eos = {options.eos_token_id} if isinstance(options.eos_token_id, int) else set(options.eos_token_id)
    budget = options.max_new_tokens
    state = [_Row(ep, budget) for ep in episodes]
    for st, row in zip(state, rows):
        st.queue(_encode(tokenizer, st.episode.reset(row) or ""))
    longest = [max((len(s) for s in st.episode.stop_strings), default=0) for st in state]
    keys = torch.as_tensor(row_keys, dtype=torch.long).to(device)
    table = uniforms(keys[:, None], torch.arange(budget, device=device))
    # a group repeats its prompt: each distinct prompt prefilled once, its cache copied to its rows (as generate)
    pre = prefill(model, prompt_ids, options, static_decode_supported(model) and options.decoder != "generic")
    dec, logits, full_mask, next_pos, width = pre.decoder, pre.logits, pre.full_mask, pre.next_pos, pre.width
    order = list(range(b))  # original row of each row of the decoded batch
    gen_tokens = 0
    for t in range(budget):
        z = logits / options.temperature if options.temperature != 1.0 else logits
        if options.greedy:
            drawn = z.argmax(dim=-1)
        else:
            z = filter_logits(z, options.top_p, options.top_k)
            drawn = sample_inverse_cdf(torch.softmax(z, dim=-1), table[torch.tensor(order, device=device), t])
        logp = torch.log_softmax(z, dim=-1).gather(-1, drawn.unsqueeze(-1)).squeeze(-1).tolist()
        fed = drawn.tolist()
        for k, i in enumerate(order):
            st = state[i]
            if st.finish is not None:
                continue  # kept in the decoded batch until the next drop; its token is ignored
            if st.pending:  # the environment's next token, fed in place of a draw
                fed[k] = st.pending.popleft()
                st.ids.append(fed[k])
                st.logps.append(0.0)
                st.origins.append(ENVIRONMENT)
            else:
                if not st.turn:
                    st.turns += 1
                tok = fed[k]
                st.ids.append(tok)
                st.logps.append(logp[k])
                st.origins.append(MODEL)
                st.turn.append(tok)
                gen_tokens += 1
                if tok in eos:
                    _end_turn(st, tokenizer, max_turns, "eos")
                elif _tail_ends_with(tokenizer, st.turn, st.episode.stop_strings, longest[i]):
                    _end_turn(st, tokenizer, max_turns, "stop")
            if st.finish is None and len(st.ids) >= budget:
                if st.turn:
                    _end_turn(st, tokenizer, max_turns, "length")
                st.finish = "length"
        live = [k for k, i in enumerate(order) if state[i].finish is None]
        if not live or t == budget - 1:
            break
        if len(live) <= (1 - DROP_FINISHED_AT) * len(order):
            idx = torch.tensor(live, device=device)
            dec.select(idx)
            order = [order[k] for k in live]
            fed = [fed[k] for k in live]
            next_pos, full_mask = next_pos[idx], full_mask[idx]
        logits = dec.step(torch.tensor(fed, device=device), next_pos, full_mask[:, : width + t + 1])
        next_pos = next_pos + 1
    for st in state:
        if st.finish is None:  # budget reached at the last position while a reply was pending
            st.finish = "length"
    return Trajectories(
        prompt_ids=[list(p) for p in prompt_ids],
        response_ids=[st.ids for st in state],
        finish_reasons=[st.finish for st in state],
        logprobs=[st.logps for st in state] if options.return_logprobs else [],
        gen_tokens=gen_tokens,
        origins=[st.origins for st in state],
        episodes=episodes,
        prefix_mismatches=[st.mismatches for st in state],
        turns=[st.turns for st in state],
    )
