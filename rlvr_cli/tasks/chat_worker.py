"""The chat-template renderer process: ``python -m rlvr_cli.tasks.chat_worker``, driven by
:mod:`rlvr_cli.tasks.chat_render` over pipes.

A chat template is a Jinja program that comes with a model. transformers renders it in Jinja's
sandbox, which stops attribute tricks but not a loop of 10^10 iterations or ``'x' * 2**31``; here
either is the worst it can do. This process renders with transformers' own function (the same text
``apply_chat_template`` gives) under an address-space limit (``--memory-mb`` above what the imports
took), dies with its parent (``PR_SET_PDEATHSIG``), and is killed by its parent when a render passes
the wall-clock limit.

Protocol: JSON lines. The process says ``{"ready": true}`` once imported; then, per request
``{"template", "messages", "kwargs", "max_chars"}`` (``kwargs``: the special tokens the template may
name), it answers ``{"text"}`` or ``{"error"}`` (the exception's type and message, or that the output
passed ``max_chars``). It exits on end of input. The protocol uses a private copy of stdout; the real
stdout is pointed at stderr so that stray prints cannot corrupt it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from rlvr_cli.processes import die_with_parent, limit_address_space


def _mapped_bytes() -> int:
    """What this process has mapped now (the imports): the base the memory limit is added to."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 1 << 30


def _renderer():
    """transformers' renderer (what ``apply_chat_template`` calls); an older transformers has only the
    compiled template."""
    try:
        from transformers.utils.chat_template_utils import render_jinja_template
    except ImportError:
        from transformers.utils.chat_template_utils import _compile_jinja_template

        def render_jinja_template(conversations, chat_template, add_generation_prompt, **kwargs):
            compiled = _compile_jinja_template(chat_template)
            return [compiled.render(messages=conversations[0], add_generation_prompt=add_generation_prompt, **kwargs)], []

    def render(template: str, messages: list, kwargs: dict) -> str:
        rendered, _ = render_jinja_template(conversations=[messages], chat_template=template, add_generation_prompt=True,
                                            **kwargs)
        return rendered[0]

    return render


def _answer(render, req: dict) -> dict:
    try:
        text = render(req["template"], req["messages"], req.get("kwargs") or {})
    except MemoryError:
        return {"error": "it needed more memory than the renderer's limit"}
    except RecursionError:
        return {"error": "it recursed too deeply"}
    except Exception as e:  # noqa: BLE001 - every template failure goes back to the caller as a message
        return {"error": f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"}
    if not isinstance(text, str):
        return {"error": f"it rendered a {type(text).__name__}, not text"}
    limit = int(req.get("max_chars") or 0)
    if limit and len(text) > limit:
        return {"error": f"it rendered {len(text):,} characters for one prompt (more than {limit:,})"}
    return {"text": text}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--memory-mb", type=int, default=0)
    args = parser.parse_args(argv)
    die_with_parent()
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)

    def send(msg: dict) -> None:
        proto.write(json.dumps(msg, ensure_ascii=True) + "\n")
        proto.flush()

    render = _renderer()
    if args.memory_mb:
        limit_address_space(_mapped_bytes() + (args.memory_mb << 20))
    send({"ready": True})
    for line in sys.stdin:
        if line.strip():
            send(_answer(render, json.loads(line)))


if __name__ == "__main__":
    main()
