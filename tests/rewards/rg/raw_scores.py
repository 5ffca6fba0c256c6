"""reasoning-gym's own scores, without rlvr's safe readers: ``python tests/rewards/rg/raw_scores.py CASES.json OUT.json``
writes a JSON list of ``score_answer(answer, entry)`` for ``[[dataset, entry, answer], ...]`` (a
scorer that raises gives null). Only for harmless answers: here the scorers' ``eval`` is live."""

import json
import sys
import warnings

warnings.filterwarnings("ignore")

import reasoning_gym  # noqa: E402


def main(path: str, out_path: str) -> None:
    datasets, out = {}, []
    for name, entry, answer in json.load(open(path)):
        if name not in datasets:
            datasets[name] = reasoning_gym.create_dataset(name, size=1, seed=0)
        try:
            out.append(float(datasets[name].score_answer(answer, entry)))
        except Exception:  # noqa: BLE001
            out.append(None)
    with open(out_path, "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
