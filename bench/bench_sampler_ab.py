"""The sampler of this checkout against the sampler of a git revision, on the bench batch, interleaved A/B.

    python bench/bench_sampler_ab.py HEAD~1          # did my change keep the samples, and is it faster?
    python bench/bench_sampler_ab.py 18ca1e9 --reps 8

The revision's whole `rlvr_cli` package is extracted with `git archive` and imported under another
name, so a revision from before or after a reorganisation compares the same way. Both sample the bench
config's batch (bench/bench_config.py: a 1.06M-parameter Llama from a config, 8 prompts x 8
responses, 32 new tokens) with keyed draws, as the trainer does, with EOS ("default") and with
`ignore_eos` ("fixed"). Printed: tokens per CPU second of each, the median of the per-repetition
ratios, and whether both drew the same tokens and log-probabilities bit for bit. Not a test; the
figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import importlib
import io
import statistics
import subprocess
import sys
import tarfile
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
    """`rlvr_cli.sampling` as it was at ``rev``: that revision's whole package, extracted with
    `git archive` and imported under the name `rlvr_at_rev`, so its own layout is used as it was."""
    got = subprocess.run(["git", "archive", rev, "rlvr_cli"], cwd=ROOT, capture_output=True)
    if got.returncode != 0:
        print(f"error: revision {rev!r}: {got.stderr.decode().strip()}", file=sys.stderr)
        sys.exit(2)
    tarfile.open(fileobj=io.BytesIO(got.stdout)).extractall(work, filter="data")
    pkg = (work / "rlvr_cli").rename(work / "rlvr_at_rev")
    for f in pkg.rglob("*.py"):
        f.write_text(f.read_text().replace("rlvr_cli", "rlvr_at_rev"))
    sys.path.insert(0, str(work))
    return importlib.import_module("rlvr_at_rev.sampling")


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
            if hasattr(mod, "SamplingOptions"):
                return mod.generate(model, ids, mod.SamplingOptions(NEW, bc.EOS, bc.PAD, ignore_eos=fixed), row_keys=keys)
            # a revision before SamplingOptions took the settings as keyword arguments
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
