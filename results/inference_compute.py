"""Inference-time compute, as its own account: the base model under budget forcing, forced longer
thinking and majority voting, evaluated with `rlvr eval` (no training).

    python results/inference_compute.py [MODEL] [OUT_DIR]      # default: builtin:tiny results/inference_compute

Every row samples n = 16 responses for the same 64 held-out prompts with the same seed; rows differ
only in the decoding protocol, and each record is labelled with it (budget_N, min_think_N).
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


def main(model: str = "builtin:tiny", out: str = "results/inference_compute") -> None:
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = ["| protocol | label | pass@1 | pass@16 | maj@4 | maj@16 | mean length | forced |", "|---|---|---|---|---|---|---|---|"]
    commands = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, flags in PROTOCOLS:
            rec = Path(tmp) / "r.json"
            cmd = ["rlvr", "eval", model, "--n", "16", "--num-prompts", "64", *flags, "--out", str(rec)]
            commands.append(" ".join(cmd[:-2] + ["--out", "RECORD.json"]))
            subprocess.run(cmd, check=True, capture_output=True)
            d = json.loads(rec.read_text())
            pk, mk = d["pass_at_k"], d["maj_at_k"]
            forced = d.get("forced_frac")
            rows.append(
                f"| {name} | {d.get('label') or '-'} | {pk['1']:.3f} | {pk['16']:.3f} | {mk['4']:.3f} | {mk['16']:.3f} | "
                f"{d['len_mean']:.1f} | {'-' if forced is None else f'{forced:.2f}'} |"
            )
    text = (
        f"# Inference-time compute on `{model}` (no training)\n\n"
        "Same 64 held-out prompts, n = 16 samples each, same sampling seed; only the decoding protocol "
        "differs. Budget forcing stops the thought at N tokens and appends the answer marker `#`; "
        "min-think forbids `#` and EOS before N tokens. maj@k is the self-consistency vote over k samples.\n\n"
        + "\n".join(rows)
        + "\n\nCommands:\n\n```bash\n" + "\n".join(commands) + "\n```\n"
    )
    (out_dir / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main(*sys.argv[1:])
