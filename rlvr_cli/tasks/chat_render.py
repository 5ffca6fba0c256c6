"""Rendering a model's chat template with a time and a memory limit (issue 44).

A chat template is a program shipped with the model (``tokenizer_config.json``, ``chat_template.jinja``,
a GGUF's ``tokenizer.chat_template``). Rendered in this process, a hostile one loops forever or
takes gigabytes, and any error it raises reaches the user as an internal error. So templates are
rendered in one long-lived worker process (:mod:`rlvr_cli.tasks.chat_worker`, started on first use),
with transformers' own renderer, so the text is what ``apply_chat_template`` gives:

- a render that takes longer than :data:`TIMEOUT_S` seconds has the worker killed (a fresh one starts
  for the next render) and is a UserError;
- the worker's address space is limited to :data:`MEMORY_MB` MiB above its imports; a render that
  needs more fails there, not here;
- a rendered prompt longer than :data:`MAX_CHARS` characters is refused (no model reads it);
- a Jinja error (a syntax error, ``raise_exception``, a sandbox refusal) is a UserError;

each naming where the template came from. A render costs one pipe round trip (well under a
millisecond); identical renders are answered from a small cache.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import OrderedDict

from rlvr_cli.errors import UserError
from rlvr_cli.processes import kill_worker

TIMEOUT_S = 10.0
"""Wall-clock limit of one render (a real template renders in well under a millisecond)."""
START_TIMEOUT_S = 120.0
"""How long the worker may take to import transformers' renderer on a loaded machine."""
MEMORY_MB = 512
"""Address space a render may take in the worker beyond what its imports mapped."""
MAX_CHARS = 1 << 20
"""Characters of one rendered prompt (about 250k tokens: more than any model's context)."""
CACHE_SIZE = 4096


class _Worker:
    def __init__(self):
        self.owner = os.getpid()
        self.proc = subprocess.Popen([sys.executable, "-m", "rlvr_cli.tasks.chat_worker", "--memory-mb", str(MEMORY_MB)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True, close_fds=True)
        self.buffer = b""
        if self.read(START_TIMEOUT_S) != {"ready": True}:
            self.kill()
            raise RuntimeError("the chat-template renderer process did not start")

    def read(self, timeout_s: float) -> dict | None:
        """The next message, or None when the worker ended or ``timeout_s`` passed."""
        deadline = time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        try:
            msg = json.loads(line)
        except ValueError:
            return None
        return msg if isinstance(msg, dict) else None

    def send(self, request: str) -> None:
        self.proc.stdin.write(request.encode() + b"\n")
        self.proc.stdin.flush()

    def kill(self) -> None:
        kill_worker(self.proc)


_lock = threading.Lock()
_worker: _Worker | None = None
_cache: OrderedDict[str, str] = OrderedDict()


@atexit.register
def close() -> None:
    """Stop the worker (it also dies with this process)."""
    global _worker
    with _lock:
        if _worker is not None and _worker.owner == os.getpid():
            _worker.kill()
        _worker = None


def template_source(tokenizer) -> str:
    """Where a tokenizer's chat template came from, for messages: the model directory it was loaded from."""
    where = getattr(tokenizer, "name_or_path", "") or "the model"
    return f"{where} (its tokenizer's chat_template)"


def _exit(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def _render(request: str, source: str) -> str:
    global _worker
    if _worker is not None and _worker.owner != os.getpid():
        _worker = None  # a forked child: the parent's pipes are not ours to use
    if _worker is None:
        _worker = _Worker()
    try:
        _worker.send(request)
    except OSError:  # the worker died since the last render: one fresh try
        _worker.kill()
        _worker = _Worker()
        _worker.send(request)
    reply = _worker.read(TIMEOUT_S)
    if reply is None:
        timed_out = _worker.proc.poll() is None
        _worker.kill()
        code = _worker.proc.returncode
        _worker = None
        if timed_out:
            raise UserError(f"{source}: rendering the chat template took more than {TIMEOUT_S:g} s "
                            "(a loop that does not end?); fix or replace the template")
        raise UserError(f"{source}: the chat-template renderer died ({_exit(code)}) while rendering, most "
                        f"likely past its {MEMORY_MB} MiB memory limit; fix or replace the template")
    if "error" in reply:
        raise UserError(f"{source}: the chat template cannot be rendered: {reply['error']}")
    return reply["text"]


def render_chat(tokenizer, messages: list[dict[str, str]]) -> str:
    """``tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)``, rendered
    in the limited worker; UserError naming the template's source for anything that goes wrong."""
    source = template_source(tokenizer)
    try:
        template = tokenizer.get_chat_template()
    except ValueError as e:  # several named templates and no default
        raise UserError(f"{source}: {' '.join(str(e).split())[:300]}") from None
    request = json.dumps({"template": template, "messages": messages, "kwargs": dict(tokenizer.special_tokens_map),
                          "max_chars": MAX_CHARS}, sort_keys=True, default=str, ensure_ascii=True)  # one line
    with _lock:
        if request in _cache:
            _cache.move_to_end(request)
            return _cache[request]
        text = _render(request, source)
        _cache[request] = text
        if len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)
    return text
