"""Inference-time compute, as its own account: the base model under budget forcing, forced longer
thinking and majority voting, evaluated with `rlvr eval` (no training).

    python results/inference_compute.py [MODEL] [OUT_DIR]      # default: builtin:tiny results/inference_compute

Every row samples n = 16 responses for the same 64 held-out prompts with the same seed; rows differ
only in the decoding protocol, and each record is labelled with it (budget_N, min_think_N). Each
protocol is set against plain sampling paired by prompt (the bootstrap interval and exact McNemar test
of `rlvr compare --control`, docs/statistics.md), then again with every row sampled under a sampling
seed the table does not use (UNSEEN_SEED: does each verdict hold on other draws?), and the summary
records the model's weights fingerprint and the code revision.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

PROTOCOLS = [
    ("plain sampling", []),
    ("budget forcing, 6 tokens", ["--budget", "6"]),
    ("budget forcing, 12 tokens", ["--budget", "12"]),
    ("budget forcing, 24 tokens", ["--budget", "24"]),
    ("min-think 20 tokens", ["--min-think", "20"]),
    ("min-think 30 tokens", ["--min-think", "30"]),
]
UNSEEN_SEED = 4321
"""The sampling seed of the re-check (the table's rows use rlvr eval's default, 1234)."""


def evaluate(model: str, flags: list[str], tmp: Path, seed: int | None = None) -> tuple[str, dict]:
    """One protocol's eval record (its label, the record), and the command that made it."""
    rec = tmp / "r.json"
    cmd = ["rlvr", "eval", model, "--n", "16", "--num-prompts", "64", *flags,
           *(["--seed", str(seed)] if seed is not None else []), "--out", str(rec)]
    subprocess.run(cmd, check=True, capture_output=True)
    return " ".join(cmd[:-2] + ["--out", "RECORD.json"]), json.loads(rec.read_text())


def main(model: str = "builtin:tiny", out: str = "results/inference_compute") -> None:
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = ["| protocol | label | pass@1 | pass@16 | maj@4 | maj@16 | mean length | forced |", "|---|---|---|---|---|---|---|---|"]
    commands, records, unseen = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name, flags in PROTOCOLS:
            cmd, d = evaluate(model, flags, Path(tmp))
            commands.append(cmd)
            records.append((d.get("label") or "plain", d))
            pk, mk = d["pass_at_k"], d["maj_at_k"]
            forced = d.get("forced_frac")
            rows.append(
                f"| {name} | {d.get('label') or '-'} | {pk['1']:.3f} | {pk['16']:.3f} | {mk['4']:.3f} | {mk['16']:.3f} | "
                f"{d['len_mean']:.1f} | {'-' if forced is None else f'{forced:.2f}'} |"
            )
        for name, flags in PROTOCOLS:
            cmd, d = evaluate(model, flags, Path(tmp), UNSEEN_SEED)
            commands.append(cmd)
            unseen.append((d.get("label") or "plain", d))
    text = (
        f"# Inference-time compute on `{model}` (no training)\n\n"
        "Same 64 held-out prompts, n = 16 samples each, same sampling seed; only the decoding protocol "
        "differs. Budget forcing stops the thought at N tokens and appends the answer marker `#`; "
        "min-think forbids `#` and EOS before N tokens. maj@k is the self-consistency vote over k samples.\n\n"
        + "\n".join(rows)
        + "\n\nEach protocol against plain sampling, paired by prompt (protocol - plain; 95% percentile "
        "bootstrap over the 64 prompts, 10,000 resamples, seed 0, Bonferroni-widened over the "
        f"{len(records) - 1} protocols; exact McNemar on per-prompt majority correctness, Holm-adjusted):\n\n"
        + against_plain(records)
        + f"\n\nThe same, every row sampled with seed {UNSEEN_SEED}, which the table does not use (do the "
        "verdicts hold on other draws?):\n\n"
        + against_plain(unseen)
        + "\n\n" + provenance(model)
        + "\n\nCommands:\n\n```bash\n" + "\n".join(commands) + "\n```\n"
    )
    (out_dir / "summary.md").write_text(text)
    print(text)


def against_plain(records: list[tuple[str, dict]]) -> str:
    """One line per protocol: its pass@1 against plain sampling's, paired by prompt, with a verdict."""
    from rlvr_cli.compare.paired import (
        ALPHA, arm_from_records, holm, pair_arms, paired_difference, paired_mcnemar, per_prompt_scores, legacy_verdict as verdict,  # the rule these results were judged by (docs/statistics.md)
    )

    (name0, plain), others = records[0], records[1:]
    control = arm_from_records(name0, [None], [plain])
    found = []
    for name, rec in others:
        pairing = pair_arms(control, arm_from_records(name, [None], [rec]))
        diff = paired_difference(per_prompt_scores(pairing.control), per_prompt_scores(pairing.other),
                                 confidence=1 - ALPHA / len(others))
        found.append((name, diff, paired_mcnemar(pairing)))
    adjusted = holm([t.p_value if t is not None else None for _, _, t in found])
    lines = []
    for (name, diff, test), p in zip(found, adjusted):
        mc = (f"; McNemar {test.only_control} prompts right only under plain sampling vs {test.only_other}, "
              f"Holm p = {p:.2g}") if test is not None else ""
        lines.append(f"- `{name}`: **{verdict(diff, test, p)}**, pass@1 {diff.mean:+.3f} "
                     f"[{diff.low:+.3f}, {diff.high:+.3f}]{mc}")
    return "\n".join(lines)


def provenance(model: str) -> str:
    """The model's weights fingerprint (as run.json's base_weights) and this checkout's code revision."""
    from rlvr_cli.evaluation.cache import weights_digest
    from rlvr_cli.models import load_model
    from rlvr_cli.train.run_writer import code_revision

    net, _, _ = load_model(model)
    commit = code_revision()
    return (f"Provenance: {model}, weights blake2b:{weights_digest(net)}; code revision "
            f"{commit[:12] if commit else 'not recorded'}.")


if __name__ == "__main__":
    main(*sys.argv[1:])
