"""What every command shares: the console and parsing of list options."""

from __future__ import annotations

import os
import signal
import stat
import threading

from rlvr_cli.console import console  # noqa: F401 - the commands import it from here
from rlvr_cli.errors import UserError
from rlvr_cli.recipe.schema import (  # noqa: F401 - the commands' option bounds, the recipe's own
    MAX_BATCH_TOKENS, MAX_EVAL_RESPONSES, MAX_SAMPLES, MAX_STEPS, MAX_THREADS, MAX_TOKENS, TEMPERATURE_MAX,
    TEMPERATURE_MIN,
)

SEED_MIN, SEED_MAX = -(2**63), 2**64 - 1
"""The seeds torch's generators take (``manual_seed``); a --seed outside is a usage error (exit 2)."""
MAX_PROMPTS = 10_000_000
"""--num-prompts: the largest held-out set rlvr builds (as eval.num_prompts)."""


def check_sizes(responses: int, batch_tokens: int) -> None:
    """Exit 2 before any work when a command's responses (kept until written) or one sampling batch's tokens
    cannot fit in memory (the recipe's MAX_EVAL_RESPONSES and MAX_BATCH_TOKENS)."""
    if responses > MAX_EVAL_RESPONSES:
        raise UserError(f"--num-prompts x --n = {responses:.3g} responses; at most {MAX_EVAL_RESPONSES:.0e} "
                        "(each is kept until the file is written)")
    if batch_tokens > MAX_BATCH_TOKENS:
        raise UserError(f"--batch-size x --max-new-tokens = {batch_tokens:.3g} tokens in one sampling batch; at most "
                        f"2**31 (its tensors would not fit in memory)")


def parse_int_list(text: str | None, option: str) -> list[int] | None:
    """`1,2,4` -> [1, 2, 4]; a clear error naming the option otherwise."""
    if text is None or text == "":
        return None
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"{option} {text}: expected comma-separated integers, e.g. 1,2,4,8") from None
    if not values or any(v < 1 for v in values):
        raise UserError(f"{option} {text}: values must be positive integers")
    return values


def task_from_arg(arg: str):
    """--task: a built-in task name, or a recipe (shipped name or file) whose `task` section to use."""
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.tasks import BUILTIN_TASKS, build_task

    if arg in BUILTIN_TASKS:
        return build_task(arg)
    try:
        recipe = load_recipe(arg)
    except UserError as e:
        raise UserError(
            [f"--task {arg}: not a built-in task ({', '.join(BUILTIN_TASKS)}) nor a loadable recipe:"] + e.problems
        ) from None
    return build_task(recipe.task)


_SYSTEM_TREES = ("/proc", "/sys", "/dev")


def _writable_dir(d: str) -> str | None:
    """Why nothing can be created in the existing directory ``d`` (None: it can). A probe file, since
    ``os.access`` says yes to root on a read-only mount."""
    import tempfile

    try:
        fd, probe = tempfile.mkstemp(prefix=".rlvr-probe-", dir=d)
    except OSError as e:
        return f"cannot write in {d} ({e.strerror})"
    os.close(fd)
    os.unlink(probe)
    return None


def output_problem(flag: str, path: str | None, directory: bool = False) -> str | None:
    """Why ``path`` cannot be the output of ``flag`` (a file, or with ``directory`` a folder rlvr fills),
    as the one line ``FLAG PATH: reason``; None when it can. Checked before any work: a path under
    /proc, /sys or /dev; an existing symbolic link (rlvr writes in place of it, never through it) or
    special file; a file where a directory is wanted and the reverse; a missing or unwritable parent."""
    if path is None:
        return None
    p = os.path.abspath(path)
    head = f"{flag} {path}"
    parent = os.path.dirname(p)
    real_parent = os.path.realpath(parent)
    if any(t == real_parent or real_parent.startswith(t + "/") or p.startswith(t + "/") for t in _SYSTEM_TREES):
        return f"{head}: under a system tree ({', '.join(_SYSTEM_TREES)}); write elsewhere"
    try:
        st = os.lstat(p)
    except (FileNotFoundError, NotADirectoryError):  # missing, or below a file (named by the walk up)
        st = None
    except OSError as e:
        return f"{head}: cannot inspect ({e.strerror})"
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            return f"{head}: is a symbolic link; rlvr does not write through it (remove it or name the target)"
        if directory and not stat.S_ISDIR(st.st_mode):
            return f"{head}: exists and is not a directory"
        if not directory and stat.S_ISDIR(st.st_mode):
            return f"{head}: is a directory (give a file name)"
        if not directory and not stat.S_ISREG(st.st_mode):
            return f"{head}: not a regular file"
        if directory:
            why = _writable_dir(p)
            return f"{head}: {why}" if why else None
    ancestor = parent if not directory else p
    while not os.path.lexists(ancestor):
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        return f"{head}: {ancestor} is not a directory"
    why = _writable_dir(ancestor)
    return f"{head}: {why}" if why else None


def check_output(flag: str, path: str | None, directory: bool = False) -> None:
    """:func:`output_problem` as a ``UserError`` (exit 2)."""
    problem = output_problem(flag, path, directory)
    if problem:
        raise UserError(problem)


def interruptible() -> None:
    """Ctrl-C (SIGINT) raises KeyboardInterrupt in this command even when the process started with SIGINT
    ignored, as a background job of a non-interactive shell (or a Ray worker's child) does: `rlvr train`
    records the run as interrupted on it, and `rlvr sweep` stops its runs with it."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)

