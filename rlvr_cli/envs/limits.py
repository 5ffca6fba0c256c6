"""The limits on one tool call, so that no tool can crash, hang or flood a run.

- **Time**: a call runs in a daemon thread and is waited for ``environment.tool_timeout_s``; past it the
  turn gets ``error: timeout after T s`` and the run goes on. Python cannot kill a thread: a hung call is
  *abandoned* (it keeps its thread, and whatever it holds, until it returns or the process ends). A tool
  that may hang for ever should bound itself; a worker process per call would be killable, but an
  environment is a stateful object of the trajectory, which a process boundary would copy.
- **Errors**: an exception becomes ``error: ExcType: message`` (TRL shows ``{'error': 'message'}``).
- **Output**: the return value becomes text with ``str()`` (inside the timed thread: a ``__str__`` may hang
  or raise too), then is cut to ``environment.max_output_tokens`` tokens of the model's tokenizer:
  ``right`` keeps the start, ``left`` the end, ``middle`` both ends (half each), with the cut marked by
  :data:`CUT` (verl's ``tool_response_truncate_side``; verl appends `...(truncated)`). Text the tokenizer
  cannot write is made writable: on a character tokenizer (the built-in models) it is lower-cased and an
  unknown character becomes `?`; control characters other than newline and tab become `?` everywhere, and
  a special token's text (`</s>`, `<|im_end|>`) has its first character replaced by `?`, so that a tool's
  output can never put an end-of-sequence or a role switch into the trajectory.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from dataclasses import dataclass

from rlvr_cli.user_code import describe_exception

CUT = "..."
"""Where a reply was cut (three characters of the built-in alphabet)."""
CHARS_PER_TOKEN_BOUND = 64
"""Before tokenizing a long output, keep at most this many characters per kept token on each kept side:
a token is rarely longer, and tokenizing 1 GB to keep 32 tokens would itself hang the run."""


@dataclass(frozen=True)
class Outcome:
    """What one limited call gave: the text to show, and whether the call failed (and why, in one line)."""

    text: str
    failed: bool = False
    note: str = ""


def _to_text(value) -> str:
    return value if isinstance(value, str) else str(value)


def settled(out):
    """``out``, or what it gives when awaited (an ``async def`` tool or ``get_reward``: awaited, as TRL does)."""
    return asyncio.run(_awaited(out)) if inspect.isawaitable(out) else out


async def _awaited(awaitable):
    return await awaitable


def _call(fn, args: tuple, kwargs: dict) -> str:
    return _to_text(settled(fn(*args, **kwargs)))


def run_limited(fn, timeout_s: float, name: str = "tool") -> tuple[str, object]:
    """("ok", ``fn()``), ("error", the exception it raised) or ("timeout", None) after ``timeout_s`` seconds
    (the thread is then abandoned: see the module docstring)."""
    box: dict = {}

    def run() -> None:
        try:
            box["ok"] = fn()
        except BaseException as e:  # noqa: BLE001 - the user's code may raise anything, SystemExit too
            box["error"] = e

    thread = threading.Thread(target=run, name=f"rlvr-tool-{name}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        return "timeout", None
    return ("error", box["error"]) if "error" in box else ("ok", box["ok"])


def call_limited(fn, args: tuple = (), kwargs: dict | None = None, timeout_s: float = 5.0, name: str = "tool") -> Outcome:
    """``str(fn(*args, **kwargs))`` within ``timeout_s`` seconds, or a failed :class:`Outcome` saying why."""
    kind, value = run_limited(lambda: _call(fn, args, kwargs or {}), timeout_s, name)
    if kind == "timeout":
        return Outcome(f"error: timeout after {timeout_s:g} s", True,
                       f"{name}: timeout after {timeout_s:g} s (the call's thread is abandoned)")
    if kind == "error":
        text = f"error: {describe_exception(value)}"
        return Outcome(text, True, f"{name}: {text}")
    return Outcome(value)


def character_vocab(tokenizer) -> frozenset | None:
    """The characters of a character-level tokenizer (every non-special token one character), else None."""
    cached = getattr(tokenizer, "_rlvrcharacter_vocab", 0)
    if cached != 0:
        return cached
    found = None
    try:
        vocab = tokenizer.get_vocab()
        special = set(getattr(tokenizer, "all_special_tokens", []) or [])
        chars = [t for t in vocab if t not in special]
        if chars and len(vocab) < 512 and all(len(t) == 1 for t in chars):
            found = frozenset(chars)
    except Exception:  # noqa: BLE001 - a tokenizer without a readable vocabulary: not a character one
        found = None
    try:
        tokenizer._rlvrcharacter_vocab = found
    except Exception:  # noqa: BLE001 - a tokenizer that refuses attributes: recomputed each time
        pass
    return found


def _specials(tokenizer) -> list[str]:
    try:
        return [t for t in (getattr(tokenizer, "all_special_tokens", None) or []) if isinstance(t, str) and len(t) > 1]
    except Exception:  # noqa: BLE001 - a tokenizer that cannot list them: none
        return []


def writable(text: str, tokenizer) -> str:
    """``text`` with what the tokenizer cannot write replaced (see the module docstring)."""
    text = "".join(c if c.isprintable() or c in "\n\t" else "?" for c in text)
    for special in _specials(tokenizer):  # `</s>` in a tool's output must not become an EOS token
        text = text.replace(special, "?" + special[1:])
    chars = character_vocab(tokenizer) if tokenizer is not None else None
    if chars is None:
        return text
    if any(c.isupper() for c in text) and not any(c.isupper() for c in chars):
        text = text.lower()
    return "".join(c if c in chars else "?" for c in text)


def _ids(tokenizer, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def truncate(text: str, tokenizer, max_tokens: int, side: str) -> tuple[str, str]:
    """(``text`` cut to ``max_tokens`` tokens on ``side`` with :data:`CUT` at the cut, a note), or (``text``, '')
    when it fits. Without a tokenizer a character counts as a token.

    Only the kept side's first (or last) ``max_tokens * CHARS_PER_TOKEN_BOUND`` characters are tokenized.
    """
    bound = max_tokens * CHARS_PER_TOKEN_BOUND
    if tokenizer is None:
        enc, dec = list, "".join
    else:
        enc, dec = (lambda t: _ids(tokenizer, t)), (lambda ids: tokenizer.decode(ids, skip_special_tokens=False))
    if len(text) <= bound and len(enc(text)) <= max_tokens:
        return text, ""
    if side == "right":
        out = dec(enc(text[:bound])[:max_tokens]) + CUT
    elif side == "left":
        out = CUT + dec(enc(text[-bound:])[-max_tokens:])
    else:
        head, tail = (max_tokens + 1) // 2, max_tokens // 2
        out = dec(enc(text[:bound])[:head]) + CUT + (dec(enc(text[-bound:])[-tail:]) if tail else "")
    return out, f"output cut to {max_tokens} tokens ({side})"


def fit(text: str, tokenizer, max_tokens: int, side: str) -> tuple[str, str]:
    """A tool's output as the reply's body: made writable (:func:`writable`) and cut (:func:`truncate`);
    only the part that can be kept is read, so a 1 GB output costs no more than a short one."""
    bound = max_tokens * CHARS_PER_TOKEN_BOUND + 1
    if len(text) > bound:
        text = text[:bound] if side == "right" else text[-bound:] if side == "left" else (
            text if len(text) <= 2 * bound else text[:bound] + text[-bound:])
    return truncate(writable(text, tokenizer), tokenizer, max_tokens, side)
