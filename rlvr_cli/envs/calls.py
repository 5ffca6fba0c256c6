"""How a model writes a tool call and reads its reply: the two call protocols of ``environment.protocol``.

``tags`` (the built-in models' protocol, every character in the built-in tokenizer's alphabet)::

    <calc>347*28</calc><r>9716</r>#9716

The model writes ``<NAME>ARGS</NAME>``; the turn stops at ``</NAME>`` (one stop string per tool); ARGS
are the tool's positional arguments: the whole text for a tool of one parameter, else split at the first
k-1 commas for a tool of k parameters; an argument annotated ``int``/``float``/``bool`` is converted. The
reply is ``<r>RESULT</r>``.

``hermes`` (Qwen2.5/Qwen3, Hermes and SmolLM2-style chat models; what transformers' chat templates
render for ``tool_calls`` and TRL parses back)::

    <tool_call>
    {"name": "calc", "arguments": {"expression": "347*28"}}
    </tool_call>

The turn stops at ``</tool_call>``; the tool is called with ``**arguments``. The reply is
``<tool_response>\\nRESULT\\n</tool_response>``; on a ChatML tokenizer (one with ``<|im_start|>``) it is
wrapped in the role switch a chat template renders, ``<|im_end|>\\n<|im_start|>user\\n<tool_response>...
</tool_response><|im_end|>\\n<|im_start|>assistant\\n``, so that the trajectory stays the text the chat
template would write for the conversation (token in, token out: the sampler never re-renders it).

A turn is a call only when its text ends (trailing whitespace aside) in a protocol's closing marker; a
closing marker without its opening, malformed JSON, an unknown tool or arguments that do not fit is a
*failed* call (:class:`Malformed`), whose error the model reads in the reply.
"""

from __future__ import annotations

import inspect
import json
import re
from dataclasses import dataclass, field

TAG_REPLY = ("<r>", "</r>")
"""The ``tags`` protocol's reply markers (in the built-in tokenizer's alphabet)."""
HERMES_CALL = ("<tool_call>", "</tool_call>")
HERMES_REPLY = ("<tool_response>\n", "\n</tool_response>")
CHATML_REPLY = ("<|im_end|>\n<|im_start|>user\n", "<|im_end|>\n<|im_start|>assistant\n")
"""Around a hermes reply on a ChatML tokenizer: the end of the assistant's turn, a user turn, and the
assistant's next turn, as Qwen's and SmolLM2's chat templates render a tool message."""
TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Call:
    """A parsed call: the tool's name and its arguments (positional for ``tags``, keywords for ``hermes``)."""

    name: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Malformed:
    """A turn that ends as a call but cannot be made: ``error`` is shown to the model."""

    name: str
    error: str


def stop_strings(protocol: str, names) -> tuple[str, ...]:
    """The strings that end a model turn as a call: ``</NAME>`` per tool (``tags``), or ``</tool_call>``."""
    if protocol == "tags":
        return tuple(f"</{n}>" for n in names)
    return (HERMES_CALL[1],)


def parse(protocol: str, text: str, tools: dict) -> Call | Malformed | None:
    """The call ``text`` (one model turn) ends with, a :class:`Malformed` one, or None when it makes no call.

    ``tools`` maps each tool's name to its callable (for the ``tags`` protocol's argument count and types).
    """
    body = text.rstrip()
    if protocol == "tags":
        return _parse_tags(body, tools)
    return _parse_hermes(body, tools)


def _parse_tags(body: str, tools: dict) -> Call | Malformed | None:
    m = re.search(r"</([A-Za-z_][A-Za-z0-9_]*)>\Z", body)
    if m is None or m.group(1) == TAG_REPLY[1][2:-1]:  # no closing tag, or the model wrote a reply itself
        return None
    name = m.group(1)
    if name not in tools:
        return Malformed(name, f"error: unknown tool {name!r} (tools: {', '.join(sorted(tools))})")
    opening = body.rfind(f"<{name}>", 0, m.start())
    if opening < 0:
        return Malformed(name, f"error: </{name}> without <{name}>")
    raw = body[opening + len(name) + 2:m.start()]
    return _positional(name, raw, tools[name])


def _parameters(fn) -> list[inspect.Parameter] | None:
    try:
        return [p for p in inspect.signature(fn).parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return None


def _positional(name: str, raw: str, fn) -> Call | Malformed:
    params = _parameters(fn)
    if params is None:  # no readable signature: the whole text as the one argument
        return Call(name, (raw,))
    required = [p for p in params if p.default is p.empty]
    if not params:
        return Call(name) if not raw.strip() else Malformed(name, f"error: {name} takes no arguments")
    parts = [raw] if len(params) == 1 else raw.split(",", len(params) - 1)
    if len(parts) < len(required):
        return Malformed(name, f"error: {name} takes {len(required)} arguments, got {len(parts)}")
    values = []
    for p, part in zip(params, parts):
        ok, value = _convert(part, p.annotation)
        if not ok:
            return Malformed(name, f"error: {name}: argument {p.name} is not {value}: {part.strip()[:40]!r}")
        values.append(value)
    return Call(name, tuple(values))


_TYPES = {int: int, float: float, "int": int, "float": float, bool: bool, "bool": bool}


def _convert(text: str, annotation) -> tuple[bool, object]:
    """(True, the argument) with ``int``/``float``/``bool`` annotations honoured, else (False, the type's name)."""
    kind = _TYPES.get(annotation)
    if kind is None:
        return True, text
    s = text.strip()
    if kind is bool:
        if s.lower() in ("true", "1", "yes"):
            return True, True
        return (True, False) if s.lower() in ("false", "0", "no") else (False, "a bool")
    try:
        return True, kind(s)
    except (ValueError, OverflowError):
        return False, f"an {kind.__name__}" if kind is int else f"a {kind.__name__}"


def _parse_hermes(body: str, tools: dict) -> Call | Malformed | None:
    if not body.endswith(HERMES_CALL[1]):
        return None
    opening = body.rfind(HERMES_CALL[0])
    if opening < 0:
        return Malformed("?", f"error: {HERMES_CALL[1]} without {HERMES_CALL[0]}")
    raw = body[opening + len(HERMES_CALL[0]):-len(HERMES_CALL[1])].strip()
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError) as e:  # RecursionError: JSON nested deeper than Python's stack
        return Malformed("?", f"error: the tool call is not JSON ({str(e)[:80]})")
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return Malformed("?", 'error: a tool call is {"name": ..., "arguments": {...}}')
    name, arguments = obj["name"], obj.get("arguments", {})
    if isinstance(arguments, str):  # some models write the arguments as a JSON string, as OpenAI's API does
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except (ValueError, RecursionError):
            return Malformed(name, "error: the arguments are not a JSON object")
    if not isinstance(arguments, dict):
        return Malformed(name, "error: the arguments are not a JSON object")
    if name not in tools:
        return Malformed(name, f"error: unknown tool {name[:40]!r} (tools: {', '.join(sorted(tools))})")
    return Call(name, (), arguments)


def wrap(protocol: str, body: str, chatml: bool = False) -> str:
    """The reply text the model reads: ``body`` in the protocol's reply markers."""
    if protocol == "tags":
        return TAG_REPLY[0] + body + TAG_REPLY[1]
    inner = HERMES_REPLY[0] + body + HERMES_REPLY[1]
    return CHATML_REPLY[0] + inner + CHATML_REPLY[1] if chatml else inner


def render_call(protocol: str, name: str, *args, **kwargs) -> str:
    """The text of a call as a model writes it (for supervised traces and tests)."""
    if protocol == "tags":
        return f"<{name}>{','.join(str(a) for a in args)}</{name}>"
    return f'{HERMES_CALL[0]}\n{json.dumps({"name": name, "arguments": kwargs})}\n{HERMES_CALL[1]}'
