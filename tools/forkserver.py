"""Many `rlvr` commands in a row without paying Python's imports for each one.

A fresh `python -m rlvr_cli train ...` spends seconds importing torch and transformers before it does
anything, which over the many short runs of `results/reproduce.py` adds up (docs/speed.md has the
figures). :class:`Launcher` imports them once, in a server process (``python tools/forkserver.py``),
and forks every command from it: each command is still its own process, with its own log file, exit
status and crash, and computes exactly what a fresh process computes (nothing of rlvr is imported in
the server, and torch starts no threads on import, so the child sets its thread count as a fresh
process does; tests/tools/test_forkserver.py checks that a run's metrics are equal both ways). It is a tool
of the regeneration script, not of the package: nothing in ``rlvr_cli`` imports it.

The protocol is one JSON line each way per command: ``{"argv", "log", "cwd"}`` to the server's stdin,
``{"rc"}`` back on its stdout once the command's process has exited. A server runs one command at a
time; :class:`Launcher` starts one per calling thread. POSIX only (``os.fork``): :func:`available`.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

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
"""Third-party modules a training run imports (the built-in GPT-2 model, or a Llama from the hub), the
slowest first; rlvr's own modules are left out, so that each command builds its console and settings
in its own process, against its own log file."""


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


def _child(argv: list[str], log: str, cwd: str) -> None:
    """In the forked process: stdin from /dev/null, stdout and stderr to ``log``, `rlvr argv` in ``cwd``;
    exits with its status and never returns."""
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.close(null)
        os.chdir(cwd)
        sys.argv = ["rlvr", *argv]
        from rlvr_cli.cli import main

        main(argv)
        code = 0
    except SystemExit as e:
        code = _exit_code(e)
    except BaseException:  # noqa: BLE001 - main() maps every error itself; this is the last resort
        import traceback

        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()  # os._exit below skips them (the reward pools' shutdown)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(preload: tuple[str, ...] = PRELOAD) -> None:
    """The server: import ``preload``, then fork one child per request line and answer with its status."""
    import importlib

    for name in preload:
        try:
            importlib.import_module(name)
        except ImportError:  # an optional model family missing: the child imports what it needs
            pass
    out = sys.stdout
    pid = 0
    try:
        for line in sys.stdin:
            req = json.loads(line)
            out.flush()
            pid = os.fork()
            if pid == 0:
                _child(req["argv"], req["log"], req["cwd"])
            _, status = os.waitpid(pid, 0)
            pid = 0
            out.write(json.dumps({"rc": os.waitstatus_to_exitcode(status)}) + "\n")
            out.flush()
    except KeyboardInterrupt:  # Ctrl-C reached the command too: let it end as interrupted, then stop quietly
        if pid:
            os.waitpid(pid, 0)
        sys.exit(130)


class Launcher:
    """Runs `rlvr` commands forked from servers that have the heavy modules imported.

    Thread-safe: each calling thread gets its own server, so several commands can run at once.
    ``close()`` (or the end of the ``with`` block) stops the servers; commands already finished are
    unaffected.
    """

    def __init__(self, env: dict | None = None):
        self._env = env
        self._local = threading.local()
        self._servers: list[subprocess.Popen] = []
        self._lock = threading.Lock()

    def _server(self) -> subprocess.Popen:
        proc = getattr(self._local, "proc", None)
        if proc is None or proc.poll() is not None:
            root = str(Path(__file__).resolve().parents[1])  # this checkout's rlvr_cli, in every command
            env = dict(self._env if self._env is not None else os.environ)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
            proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve())], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, text=True, env=env)
            self._local.proc = proc
            with self._lock:
                self._servers.append(proc)
        return proc

    def run(self, argv: list[str], log: str | Path, cwd: str | Path = ".") -> int:
        """`rlvr *argv` in ``cwd``, its stdout and stderr in ``log``; returns its exit status (negative:
        the signal that killed it, as :mod:`subprocess` reports it)."""
        proc = self._server()
        req = {"argv": [str(a) for a in argv], "log": str(Path(log).resolve()), "cwd": str(Path(cwd).resolve())}
        try:
            proc.stdin.write(json.dumps(req) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        if not line:
            raise RuntimeError(f"the fork server exited (status {proc.wait()}) while running rlvr {' '.join(req['argv'])}")
        return int(json.loads(line)["rc"])

    def close(self) -> None:
        with self._lock:
            servers, self._servers = self._servers, []
        for proc in servers:
            try:
                proc.stdin.close()
            except OSError:  # it died already
                pass
            proc.wait()

    def __enter__(self) -> "Launcher":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


if __name__ == "__main__":
    serve()
