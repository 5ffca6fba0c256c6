"""Inference-time compute, as its own account: the base model under budget forcing, forced longer
thinking and majority voting, evaluated with `rlvr eval` (no training).

    python results/inference_compute.py [MODEL] [OUT_DIR]      # default: builtin:tiny results/inference_compute
    python results/inference_compute.py --from-records [OUT_DIR]   # re-derive from OUT_DIR/records alone

Every row samples n = 16 responses for the same 64 held-out prompts with the same seed; rows differ
only in the decoding protocol, and each record is labelled with it (budget_N, min_think_N). The eval
records are kept (OUT_DIR/records/seed_S/LABEL.json, with the commands and the provenance line) and the
summary is made from them, so anyone can re-test it with a future rule. Each protocol is set against plain
sampling paired by prompt with rlvr's primary test (compare/crossed.py; one model, so the prompt-clustered
paired test: its variance is the prompts' and the samples'), Holm over the protocols, with its MDE and
secondary lines; then again with every row sampled under a sampling seed the table does not use
(UNSEEN_SEED: does each verdict hold on other draws?); and the model's weights fingerprint and code revision.
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
    records = out_dir / "records"
    commands = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in (None, UNSEEN_SEED):
            folder = records / f"seed_{seed or DEFAULT_SEED}"
            folder.mkdir(parents=True, exist_ok=True)
            for _, flags in PROTOCOLS:
                cmd, d = evaluate(model, flags, Path(tmp), seed)
                commands.append(cmd)
                if isinstance(d.get("weights"), str) and Path(d["weights"]).is_absolute():
                    d["weights"] = Path(d["weights"]).name  # a cache folder of this machine: its name says which
                (folder / f"{d.get('label') or 'plain'}.json").write_text(json.dumps(d) + "\n")
    (records / "made.json").write_text(json.dumps({"model": model, "provenance": provenance(model),
                                                   "commands": commands}, indent=1) + "\n")
    summarise(out_dir)


DEFAULT_SEED = 1234
"""rlvr eval's default sampling seed: the table's rows."""


def load(folder: Path) -> list[tuple[str, dict]]:
    """The protocols' records of one sampling seed, in PROTOCOLS order: (label, record)."""
    from rlvr_cli.evaluation.decoding import itc_label

    out = []
    for _, flags in PROTOCOLS:
        opt = dict(zip(flags[::2], map(int, flags[1::2])))
        label = itc_label(opt.get("--budget"), opt.get("--min-think"), False) or "plain"  # rlvr eval's own label
        out.append((label, json.loads((folder / f"{label}.json").read_text())))
    return out


def summarise(out_dir: Path) -> None:
    """summary.md from OUT_DIR/records (what main wrote, or what is committed)."""
    records = out_dir / "records"
    made = json.loads((records / "made.json").read_text())
    table = load(records / f"seed_{DEFAULT_SEED}")
    unseen = load(records / f"seed_{UNSEEN_SEED}")
    rows = ["| protocol | label | pass@1 | pass@16 | maj@4 | maj@16 | mean length | forced |", "|---|---|---|---|---|---|---|---|"]
    for (name, _), (_, d) in zip(PROTOCOLS, table):
        pk, mk = d["pass_at_k"], d["maj_at_k"]
        forced = d.get("forced_frac")
        rows.append(
            f"| {name} | {d.get('label') or '-'} | {pk['1']:.3f} | {pk['16']:.3f} | {mk['4']:.3f} | {mk['16']:.3f} | "
            f"{d['len_mean']:.1f} | {'-' if forced is None else f'{forced:.2f}'} |"
        )
    text = (
        f"# Inference-time compute on `{made['model']}` (no training)\n\n"
        "Same 64 held-out prompts, n = 16 samples each, same sampling seed; only the decoding protocol "
        "differs. Budget forcing stops the thought at N tokens and appends the answer marker `#`; "
        "min-think forbids `#` and EOS before N tokens. maj@k is the self-consistency vote over k samples.\n\n"
        + "\n".join(rows)
        + "\n\nEach protocol against plain sampling, paired by prompt (protocol - plain; rlvr's primary test on "
        f"per-prompt pass@1, Holm over the {len(table) - 1} protocols, intervals simultaneous over them, MDE at 80% "
        "power; one model, so the variance is the prompts' and the samples'; docs/statistics.md):\n\n"
        + against_plain(table)
        + f"\n\nThe same, every row sampled with seed {UNSEEN_SEED}, which the table does not use (do the "
        "verdicts hold on other draws?):\n\n"
        + against_plain(unseen)
        + "\n\n" + made["provenance"]
        + "\n\nRecords: `records/` (re-derive with `python results/inference_compute.py --from-records`). Commands:\n\n"
        "```bash\n" + "\n".join(made["commands"]) + "\n```\n"
    )
    (out_dir / "summary.md").write_text(text)
    print(text)


def against_plain(records: list[tuple[str, dict]]) -> str:
    """One line per protocol against plain sampling (`rlvr compare`'s sentence: verdict, MDE, secondary)."""
    from rlvr_cli.compare.against import compare_records
    from rlvr_cli.compare.summary import arm_sentence

    (name0, plain), others = records[0], records[1:]
    found = compare_records((name0, [plain]), [(name, [rec]) for name, rec in others])
    return "\n".join("- " + arm_sentence(f"`{name}`", found["arms"][name], "plain sampling", None, None,
                                          curve_line=False) for name, _ in others)


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
    if sys.argv[1:2] == ["--from-records"]:
        try:
            summarise(Path(sys.argv[2] if len(sys.argv) > 2 else "results/inference_compute"))
        except FileNotFoundError as e:
            print(f"error: {e.filename}: no such record (make them with: python results/inference_compute.py)",
                  file=sys.stderr)
            sys.exit(2)
    else:
        main(*sys.argv[1:])
