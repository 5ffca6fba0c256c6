"""The built-in models a sweep builds before its runs start: one job per warm-started built-in model
that runs to be trained load and that is neither shipped nor cached yet. Without it the first run would
build the model and each run started meanwhile would hold a slot waiting on the build's lock."""

from __future__ import annotations

import shlex
import sys

from rlvr_cli.sweep.commands import Script
from rlvr_cli.sweep.spec import Plan


def model_builds(plans: list[Plan], states: list[dict[str, str]]) -> dict[str, Script]:
    """Model reference (``builtin:NAME``) -> the script that builds it, logged in its plan's logs/."""
    from rlvr_cli.models.builtin import needs_training

    out = {}
    for plan, st in zip(plans, states):
        for r in [*plan.needs, *plan.runs]:
            ref = r.recipe.model.name
            if st[r.name] == "finished" or ref in out or not needs_training(ref):
                continue
            code = f"from rlvr_cli.warm_start import ensure_built; ensure_built({ref!r})"
            out[ref] = Script(f"build-{ref.split(':', 1)[1]}", f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}",
                              plan.out / "logs" / f"build-{ref.split(':', 1)[1]}.log")
    return out
