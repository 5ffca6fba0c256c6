"""The update with and without forwarding zero-loss rows alone, on the same batches, interleaved A/B.

    python bench/bench_quiet_rows.py                                        # remedies' control arm
    python bench/bench_quiet_rows.py --recipe recipes/experiments/spurious/format_reward.yaml
    python bench/bench_quiet_rows.py --model runs/experiments/remedies/baseline-seed0 --steps 20

A row whose token loss is zero whatever the weights (`rlvr_cli/train/rl.py` `zero_loss_rows`: A = 0
where every loss term carries A, or no loss token) adds nothing to the gradient; the trainer forwards
it without a backward, for the step's statistics. This trains --steps steps of --recipe from --model
(default: the recipe's own) and, at every step, runs the step's update twice on its batch from the
same weights and optimiser state: once as the trainer does ("quiet": those rows forward-only) and
once with every row backpropagated ("all", as before), in alternating order, then restores the state
and lets the trainer take its step. Printed: the mean fraction of quiet rows, the update's CPU seconds
both ways, and the median and range of the per-step ratios (all / quiet: above 1 is faster). How much
it saves depends on how many groups have no reward spread, which grows as a policy sharpens. Not a
test; the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def measure(recipe_path: str, model: str | None, steps: int, overrides: list[str]) -> dict:
    import rlvr_cli.train.rl as rl
    from rlvr_cli.recipe.load import load_recipe

    sets = [*([f"model.name={model}"] if model else []), f"steps={steps}", "eval.every=0", "eval.at_start=false",
            "checkpoint.every=0", *overrides]
    recipe = load_recipe(recipe_path, sets)
    real_update, real_rows = rl._update, rl.zero_loss_rows
    got: dict = {"quiet": [], "all": [], "frac": []}

    def every_row(recipe, adv, ref_logp, loss_mask):
        return torch.zeros_like(adv, dtype=torch.bool)

    def both(session, batch, old_logp, ref_logp, adv, loss_mask, *args):
        saved = [copy.deepcopy(x.state_dict()) for x in (session.model, session.optimizer, session.scheduler)]
        got["frac"].append(float(real_rows(session.recipe, adv, ref_logp, loss_mask).float().mean()))
        for name in ("quiet", "all") if len(got["all"]) % 2 == 0 else ("all", "quiet"):
            rl.zero_loss_rows = real_rows if name == "quiet" else every_row
            c0 = time.process_time()
            real_update(session, batch, old_logp, ref_logp, adv, loss_mask, *args)
            got[name].append(time.process_time() - c0)
            for x, state in zip((session.model, session.optimizer, session.scheduler), saved):
                x.load_state_dict(state)
        rl.zero_loss_rows = real_rows
        return real_update(session, batch, old_logp, ref_logp, adv, loss_mask, *args)

    rl._update = both
    try:
        with tempfile.TemporaryDirectory(prefix="bench_quiet_rows_") as tmp, contextlib.redirect_stdout(io.StringIO()):
            rl.train_rl(recipe, Path(tmp) / "run")
    finally:
        rl._update, rl.zero_loss_rows = real_update, real_rows
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipe", default=str(ROOT / "recipes/experiments/remedies/baseline.yaml"))
    ap.add_argument("--model", help="the policy to start from (a run directory, checkpoint or model); default the recipe's")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    args = ap.parse_args()
    if args.steps < 1:
        ap.error(f"--steps {args.steps}: at least 1")
    torch.set_num_threads(1)
    from rlvr_cli.errors import UserError

    try:
        got = measure(args.recipe, args.model, args.steps, args.set)
    except UserError as e:  # a recipe or model that does not load: its message names the field or file
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    if not got["all"]:  # every step's update was skipped (no batch reached it)
        sys.exit(f"error: {args.recipe}: no update ran in {args.steps} steps, nothing to time")
    ratios = [a / q for a, q in zip(got["all"], got["quiet"])]
    print(f"{args.recipe} from {args.model or 'its model'}, {len(ratios)} steps: quiet rows {statistics.mean(got['frac']):.0%} "
          f"of the batch on average; update CPU s all rows {sum(got['all']):.2f}, quiet rows forward-only "
          f"{sum(got['quiet']):.2f}: {sum(got['all']) / sum(got['quiet']):.2f}x; per step median "
          f"{statistics.median(ratios):.2f}x, range {min(ratios):.2f}-{max(ratios):.2f}x")


if __name__ == "__main__":
    main()
