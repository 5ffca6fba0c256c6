"""results/inference_compute.py: each protocol against plain sampling, and again on a sampling seed the table
does not use."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "results"))  # the scripts are files, not a package
import inference_compute  # noqa: E402  results/inference_compute.py


def test_every_protocol_is_judged_on_the_tables_seed_and_again_on_an_unseen_one(tmp_path, monkeypatch):
    seen = []

    def fake_eval(cmd, check, capture_output):
        """A record whose 40 prompts are all right under plain sampling with the default seed, else all wrong."""
        seen.append(cmd)
        plain = "--budget" not in cmd and "--min-think" not in cmd
        c = 4 if plain and "--seed" not in cmd else 0
        flag = "--budget" if "--budget" in cmd else "--min-think"
        label = None if plain else flag.strip("-").replace("-", "_") + "_" + cmd[cmd.index(flag) + 1]
        rec = {"label": label, "n": 4, "step": 0, "pass_at_k": {"1": c / 4, "16": c / 4}, "maj_at_k": {"4": 0.0, "16": 0.0},
               "len_mean": 10.0, "forced_frac": None if plain else 0.5,
               "per_prompt": [{"id": f"p{i}", "correct": c} for i in range(40)], "per_prompt_majority": [c > 2] * 40}
        Path(cmd[cmd.index("--out") + 1]).write_text(json.dumps(rec))

    monkeypatch.setattr(inference_compute.subprocess, "run", fake_eval)
    monkeypatch.setattr(inference_compute, "provenance", lambda model: "Provenance: test.")
    inference_compute.main("builtin:tiny", str(tmp_path))
    text = (tmp_path / "summary.md").read_text()
    table_seed, unseen = text.split(f"every row sampled with seed {inference_compute.UNSEEN_SEED}")
    assert table_seed.count("**worse**") == 5  # plain all right, every protocol all wrong: McNemar 40 vs 0
    assert unseen.count("**not distinguishable at this budget**") == 5  # on the other seed nothing is right
    assert sum("--seed" in c for c in seen) == len(inference_compute.PROTOCOLS) and len(seen) == 2 * len(inference_compute.PROTOCOLS)
    assert f"--seed {inference_compute.UNSEEN_SEED} --out RECORD.json" in text
    # the records are kept, and they alone give the same summary (no model, no sampling)
    assert sorted(p.name for p in (tmp_path / "records").iterdir()) == [
        "made.json", f"seed_{inference_compute.DEFAULT_SEED}", f"seed_{inference_compute.UNSEEN_SEED}"]
    (tmp_path / "summary.md").unlink()
    inference_compute.summarise(tmp_path)
    assert (tmp_path / "summary.md").read_text() == text
