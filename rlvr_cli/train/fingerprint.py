"""A run's fingerprint: everything that decides its numbers, in run.json (`fingerprint`). Each digest is
computed in :mod:`rlvr_cli.fingerprints`; this module assembles them and records them for a run.

- ``base_weights``: blake2b over the state dict the run started from (before any adapter);
- ``task_data``: the rows the task serves (:func:`rlvr_cli.fingerprints.data_fingerprint`);
- ``recipe``: the fully resolved recipe, its ``name`` aside (a label, not a knob);
- ``code``: every .py file of the package, and ``code_revision``: the git commit (None outside git);
- ``reward_code``: the user's reward functions' source (None without ``function`` terms), each one's
  digest in ``reward_functions`` (:func:`rlvr_cli.rewards.function.reward_code_fingerprint`);
  ``environment_code`` / ``environment_functions`` the same for a user's environment (``environment.factory``
  and ``environment.tools``; None with a built-in factory or none);
- ``torch``, ``numerics`` (:func:`rlvr_cli.numerics.numerics_kind`: the CPU kernels' kind), ``threads``
  and ``device``: two runs alike in all of these compute the same bits; in all but these, the same up to
  the last bits of the arithmetic (which a long run can grow into other samples).

A new run writes it once. A resumed run that continues under other conditions (another torch, another
CPU kind, changed code or recipe) keeps its original and appends what changed, with the step, to
``fingerprint_changes``: its later steps were not made under the first conditions. `rlvr compare`
reads these (:mod:`rlvr_cli.compare.provenance`) and says when its arms were not made alike.
"""

from __future__ import annotations

import torch

from rlvr_cli.fingerprints import blake2b_text, code_revision, data_fingerprint, package_source_digest, reward_code_digest
from rlvr_cli.numerics import numerics_kind
from rlvr_cli.recipe.load import dump_recipe
from rlvr_cli.rewards.function import reward_code_fingerprint, source_digests

CONDITIONS = ("task_data", "recipe", "code", "reward_code", "environment_code", "torch", "numerics", "threads", "device")
"""The fields a resumed run compares with its original (the base weights are the start's, fixed)."""


def run_fingerprint(session, task) -> dict:
    recipe = session.recipe.model_copy(update={"name": None})
    reward_code, reward_functions = reward_code_fingerprint(recipe.reward.terms)
    environment_code, environment_functions = environment_code_fingerprint(recipe.environment)
    return {
        "base_weights": session.run.read_status().get("base_weights"),
        "task_data": data_fingerprint(task),
        "recipe": blake2b_text(dump_recipe(recipe)),
        "code": "blake2b:" + package_source_digest(),
        "code_revision": code_revision(),
        "reward_code": reward_code,
        "reward_functions": reward_functions,
        "environment_code": environment_code,
        "environment_functions": environment_functions,
        "torch": torch.__version__,
        "numerics": numerics_kind() if session.device.type == "cpu" else f"{session.device.type} (not pinned)",
        "threads": torch.get_num_threads(),
        "device": session.device.type,
    }


def environment_code_fingerprint(spec) -> tuple[str | None, dict[str, str | None]]:
    """(one digest over the user's environment code, or None without it; per reference): the factory's
    module file and each plain tool's, as reward functions' (a built-in factory is the package's code)."""
    if spec is None:
        return None, {}
    refs = [spec.factory] if spec.factory and not spec.factory.startswith("builtin:") else []
    digests = source_digests(sorted(set(refs) | set(spec.tools)))
    return (reward_code_digest(digests), digests) if digests else (None, {})


def record_fingerprint(session, task) -> None:
    """Write the run's fingerprint (a new run), or append what changed since it (a resumed run)."""
    run = session.run
    if not run.writer:
        return
    now = run_fingerprint(session, task)
    before = run.read_status().get("fingerprint")
    if not isinstance(before, dict):
        run.write_status("running", fingerprint=now)
        return
    changed = {k: now[k] for k in CONDITIONS if before.get(k) != now[k]}
    if changed:
        history = run.read_status().get("fingerprint_changes")
        history = history if isinstance(history, list) else []
        run.write_status("running", fingerprint_changes=[*history, {"from_step": session.start_step + 1, **changed}])
