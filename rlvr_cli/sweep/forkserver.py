"""Start a sweep's runs forked from a process that has torch and transformers imported already.

A fresh `python -m rlvr_cli train ...` spends seconds importing torch and transformers before it does
anything; over the many short runs of a sweep on a laptop that adds up (docs/speed.md has the figures).
A server (``python -m rlvr_cli.sweep.forkserver``) imports them once and forks each run from itself:
each run is still its own process, in its own session, with its own log file, exit status and crash,
and computes what a fresh process computes (nothing of rlvr is imported in the server, torch starts no
threads on import, and the trainer sets its thread count itself; tests/sweep/test_forkserver.py checks
a run's metrics are equal both ways). The local backend uses it by default (`rlvr sweep
--no-fork-server` starts fresh processes); POSIX only (``os.fork``).

The protocol is JSON lines: ``{"argv", "log", "cwd", "env"}`` to the server's stdin; back on its stdout
``{"pid"}`` as soon as the run's process exists, then ``{"rc"}`` once it has exited. A server runs one
run at a time; the backend keeps one per slot.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

PRELOAD = (
    "torch",
    "transformers",
    "transformers.modeling_utils",
    "transformers.models.gpt2.modeling_gpt2",
    "transformers.models.llama.modeling_llama",
    "safetensors.torch",
    "pydantic",
    "yaml",
)
"""Third-party modules a training run imports (the built-in GPT-2 model, or a Llama), the slowest first;
rlvr's own modules are left out, so that each run builds its console and settings in its own process,
against its own log file."""


def available() -> bool:
    return hasattr(os, "fork")


def _exit_code(e: SystemExit) -> int:
    """The status Python itself would exit with: 0 for None, the int, or 1 for any other value (which
    Python prints to stderr first: so does this)."""
    if e.code is None:
        return 0
    if isinstance(e.code, int):
        return e.code
    print(e.code, file=sys.stderr)
    return 1


def _child(req: dict) -> None:
    """In the forked process: a session of its own (the sweep stops it as it stops a spawned run), stdin
    from /dev/null, stdout and stderr appended to the log, `rlvr ARGV` in its directory; exits with its
    status and never returns."""
    code = 1
    try:
        os.setsid()
        if hasattr(signal, "pthread_sigmask"):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
        signal.signal(signal.SIGINT, signal.default_int_handler)
        null = os.open(os.devnull, os.O_RDONLY)
        fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.close(null)
        os.chdir(req["cwd"])
        os.environ.update(req.get("env") or {})
        sys.argv = ["rlvr", *req["argv"]]
        import runpy

        runpy.run_module("rlvr_cli", run_name="__main__", alter_sys=True)  # what `python -m rlvr_cli` runs
        code = 0
    except SystemExit as e:
        code = _exit_code(e)
    except BaseException:  # noqa: BLE001 - main() maps every error itself; this is the last resort
        import traceback

        traceback.print_exc()
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()  # os._exit below skips them (the reward pools' shutdown)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(preload: tuple[str, ...] = PRELOAD) -> None:
    """The server: import ``preload``, then fork one child per request line and answer with its pid, then
    its exit status."""
    import importlib

    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional model family missing: the child imports what it needs
            pass
    out = sys.stdout
    for line in sys.stdin:  # ends when the sweep closes the pipe, or dies
        req = json.loads(line)
        out.flush()
        pid = os.fork()
        if pid == 0:
            _child(req)
        try:
            out.write(json.dumps({"pid": pid}) + "\n")
            out.flush()
        except BrokenPipeError:  # the sweep is gone: its watcher stops the run; wait for it, then leave
            pass
        _, status = os.waitpid(pid, 0)
        try:
            out.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
            out.flush()
        except BrokenPipeError:
            os._exit(0)  # without Python's exit, which would flush into the broken pipe once more


class Server:
    """One server process (in a session of its own: the terminal's Ctrl-C reaches only the sweep)."""

    def __init__(self, env: dict[str, str] | None = None):
        self.proc = subprocess.Popen([sys.executable, "-m", "rlvr_cli.sweep.forkserver"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, bufsize=0, env=env, start_new_session=True)
        self._buf = b""

    def _line(self, wait: bool) -> dict | None:
        """The server's next reply; None when ``wait`` is false and none is there yet. RuntimeError if the
        server is gone."""
        import select

        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buf:
            if not wait and not select.select([fd], [], [], 0)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                raise RuntimeError(f"the fork server exited (status {self.proc.wait()})")
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def start(self, argv: list[str], log: str, cwd: str, env: dict[str, str]) -> int:
        """Fork `rlvr ARGV` (output appended to ``log``); returns its pid. RuntimeError if the server is gone."""
        try:
            self.proc.stdin.write((json.dumps({"argv": argv, "log": log, "cwd": cwd, "env": env}) + "\n").encode())
        except OSError:
            raise RuntimeError(f"the fork server exited (status {self.proc.wait()})") from None
        return int(self._line(wait=True)["pid"])

    def ended(self) -> int | None:
        """The run's exit status once it has ended (negative: the signal that killed it), else None."""
        reply = self._line(wait=False)
        return None if reply is None else int(reply["rc"])

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


if __name__ == "__main__":
    serve()
