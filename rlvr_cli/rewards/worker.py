"""A verifier worker process: ``python -m rlvr_cli.rewards.worker``, driven by the pool over pipes.

Protocol: JSON lines. The worker warms up (imports the verifiers it was told to preload and runs one
check of each, so that no timed check pays for sympy's import; a user's reward functions are imported
too) and says ``{"ready": true}``. Then it answers each request by its kind
(:class:`rlvr_cli.rewards.pool.Check` and :class:`~rlvr_cli.rewards.pool.FunctionCall` define both):
``check`` ``{"id", "kind", "verifier", "response", "reference", "options"}`` with ``{"id", "outcome",
"reward", "answer", "detail"}``; ``function`` ``{"id", "kind", "function", "call"}`` (a call of a
user's reward function, :mod:`rlvr_cli.rewards.function`) with ``{"id", "values"}`` or ``{"id",
"failure"}``. A code check first announces its sandbox ``{"id", "sandbox": [pgid, uid]}`` so that the pool can kill it too if it has to kill this worker. The protocol uses a private
copy of stdout; the real stdout is pointed at stderr so that stray prints cannot corrupt it.

The worker limits its own address space (``--memory-mb``; a sympy blow-up becomes a MemoryError,
reported as `error`) and asks the kernel to kill it when its parent dies (``PR_SET_PDEATHSIG``), so a
check hung in C code never outlives the trainer. It exits on end of input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from rlvr_cli.processes import die_with_parent, limit_address_space


def _answer(req: dict, send) -> dict:
    from rlvr_cli.rewards.registry import get_verifier

    if req.get("kind") == "function":  # a call of a user's reward function (rlvr_cli/rewards/function.py)
        from rlvr_cli.rewards.function import answer

        return answer(req)
    verifier = get_verifier(req["verifier"])
    options = dict(req.get("options") or {})
    if "extract" in options:
        options["extract"] = tuple(options["extract"])
    if req["verifier"] == "code":
        options["on_start"] = lambda pgid, uid: send({"id": req["id"], "sandbox": [pgid, uid]})
    try:
        out = verifier.check(req["response"], req["reference"], **options)
        return {"id": req["id"], "outcome": out.outcome, "reward": out.reward, "answer": out.answer, "detail": out.detail}
    except MemoryError:
        detail = "out of memory (worker memory limit)"
    except RecursionError:
        detail = "recursion too deep"
    except Exception as e:  # noqa: BLE001 - a checker bug must come back as `error`, not kill the worker
        detail = f"{type(e).__name__}: {str(e)[:200]}"
    return {"id": req["id"], "outcome": "error", "reward": 0.0, "answer": None, "detail": detail}


def check_functions(refs: list[str], names: set[str] | None, send) -> None:
    """``--check-functions``: import each user reward function and check its signature (only import its
    module when ``names`` is None), one message before and one after each
    (:mod:`rlvr_cli.checked_import` reads them), then exit."""
    from rlvr_cli.errors import UserError
    from rlvr_cli.rewards.function import check_signature, load_function

    from rlvr_cli.user_code import import_where

    for ref in refs:
        send({"importing": ref})
        try:
            if names is None:  # --import-only (an environment's module): import it, no signature to check
                import_where(ref)
            else:
                check_signature(load_function(ref), ref, names)
            problem = None
        except UserError as e:
            problem = e.problems[0]
        except BaseException as e:  # noqa: BLE001 - a signature that raises when read, say
            problem = f"{ref}: {type(e).__name__}: {str(e)[:300]}"
        send({"ref": ref, "problem": problem})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preload", default="")
    parser.add_argument("--memory-mb", type=int, default=0)
    parser.add_argument("--code-options", default="{}")
    parser.add_argument("--functions", default="[]", help="JSON list of user reward functions to import at start")
    parser.add_argument("--check-functions", help="JSON list of user reward functions to import, check and exit")
    parser.add_argument("--names", default="[]", help="with --check-functions: the keywords rlvr passes")
    parser.add_argument("--import-only", action="store_true", help="with --check-functions: import, check no signature")
    args = parser.parse_args(argv)
    die_with_parent()
    proto = os.fdopen(os.dup(1), "w", encoding="ascii", buffering=1)
    os.dup2(2, 1)

    def send(msg: dict) -> None:
        proto.write(json.dumps(msg) + "\n")
        proto.flush()

    if args.memory_mb:
        limit_address_space(args.memory_mb << 20)  # a sandboxed program sets its own, possibly higher
    if args.check_functions is not None:
        check_functions(json.loads(args.check_functions), None if args.import_only else set(json.loads(args.names)), send)
        return
    for name in filter(None, args.preload.split(",")):
        if name == "math":
            from rlvr_cli.rewards import math_answer

            math_answer.warm_up()
        elif name == "code":
            from rlvr_cli.rewards import code_tests

            code_tests.warm_up(**json.loads(args.code_options))
        elif name == "reasoning_gym":
            from rlvr_cli.rewards import reasoning_gym

            reasoning_gym.warm_up()
    for ref in json.loads(args.functions):
        from rlvr_cli.errors import UserError
        from rlvr_cli.rewards.function import load_function

        try:
            load_function(ref)  # imported before the first timed call; a failure is reported by each call
        except UserError:
            pass
    send({"ready": True})
    for line in sys.stdin:
        if not line.strip():
            continue
        send(_answer(json.loads(line), send))


if __name__ == "__main__":
    main()
