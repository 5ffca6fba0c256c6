"""The sampler of this checkout against the sampler of a git revision, on the bench batch, interleaved A/B.

    python bench/bench_sampler_ab.py HEAD~1          # did my change keep the samples, and is it faster?
    python bench/bench_sampler_ab.py 18ca1e9 --reps 8

The revision's `rlvr_cli/sampling.py` and `rlvr_cli/keyed_random.py` are read with `git show` and
imported as their own modules (the rest of the package is this checkout's). Both sample the bench
config's batch (bench/bench_config.py: a 1.06M-parameter Llama from a config, 8 prompts x 8
responses, 32 new tokens) with keyed draws, as the trainer does, with EOS ("default") and with
`ignore_eos` ("fixed"). Printed: tokens per CPU second of each, the median of the per-repetition
ratios, and whether both drew the same tokens and log-probabilities bit for bit. Not a test; the
figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import bench_config as bc  # noqa: E402

P, G, NEW = 8, 8, 32  # the bench batch of bench/bench_vs_trl.py


def sampler_at(rev: str, work: Path):
    """`rlvr_cli.sampling` as it was at ``rev``, importing that revision's keyed_random."""
    def show(path: str) -> str:
        got = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True, text=True)
        if got.returncode != 0:
            print(f"error: revision {rev!r}: no {path} there ({got.stderr.strip()})", file=sys.stderr)
            sys.exit(2)
        return got.stdout

    (work / "keyed_random_at_rev.py").write_text(show("rlvr_cli/keyed_random.py"))
    (work / "sampling_at_rev.py").write_text(show("rlvr_cli/sampling.py").replace(
        "from rlvr_cli.keyed_random import", "from keyed_random_at_rev import"))
    sys.path.insert(0, str(work))
    spec = importlib.util.spec_from_file_location("sampling_at_rev", work / "sampling_at_rev.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rev", help="the git revision to compare against (e.g. HEAD~1)")
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--calls", type=int, default=5, help="sampling calls per side per repetition")
    args = ap.parse_args()
    torch.set_num_threads(1)
    import rlvr_cli.sampling as ours
    from rlvr_cli.keyed_random import row_keys, stream_key

    tok, model = bc.tokenizer(), bc.model(0).eval()
    ids = [tok(r["prompt"])["input_ids"] for r in bc.rows(P, 0) for _ in range(G)]
    with tempfile.TemporaryDirectory() as tmp:
        theirs = sampler_at(args.rev, Path(tmp))

        def draw(mod, s: int, fixed: bool):
            keys = row_keys(stream_key(s, "ab"), [(i, 0) for i in range(len(ids))])
            return mod.generate(model, ids, max_new_tokens=NEW, eos_token_id=bc.EOS, pad_token_id=bc.PAD,
                                row_keys=keys, ignore_eos=fixed)

        for fixed in (False, True):
            rate: dict[str, list[float]] = {"this": [], args.rev: []}
            for rep in range(args.reps):
                sides = [("this", ours), (args.rev, theirs)]
                for name, mod in sides if rep % 2 == 0 else sides[::-1]:
                    c0, n = time.process_time(), 0
                    for s in range(args.calls):
                        n += draw(mod, s, fixed).gen_tokens
                    rate[name].append(n / (time.process_time() - c0))
            ratios = [a / b for a, b in zip(rate["this"], rate[args.rev])]
            same = all(
                (a := draw(ours, s, fixed)).response_ids == (b := draw(theirs, s, fixed)).response_ids
                and a.logprobs == b.logprobs for s in range(3))
            print(f"{'fixed' if fixed else 'default':7s}: this {statistics.median(rate['this']):.0f} tokens/CPU s, "
                  f"{args.rev} {statistics.median(rate[args.rev]):.0f}; this / {args.rev} median "
                  f"{statistics.median(ratios):.3f}x (range {min(ratios):.3f}-{max(ratios):.3f}, n={args.reps}); "
                  f"the same samples bit for bit: {same}")


if __name__ == "__main__":
    main()
