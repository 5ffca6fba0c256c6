"""The `code` verifier's sandbox: run an untrusted Python program against tests, with limits.

- :mod:`.runner`: the API (:func:`run_program`, :class:`Limits`, :class:`RunResult`, the isolation
  probe and the kill of a run's processes);
- ``harness.py``, ``server.py``, ``codec.py``: the programs the runner starts by path in a fresh
  interpreter (the tests' process, the program's process, the data they exchange).

docs/sandbox.md says what the isolation protects against and what it does not.
"""

from rlvr_cli.rewards.sandbox.runner import (
    BASIC,
    ISOLATED,
    STARTUP_ALLOWANCE_S,
    Limits,
    RunResult,
    isolation_level,
    kill_sandbox,
    run_program,
)

__all__ = ["BASIC", "ISOLATED", "STARTUP_ALLOWANCE_S", "Limits", "RunResult", "isolation_level", "kill_sandbox",
           "run_program"]
