"""Which reasoning-gym scorers evaluate text: ``python tests/rewards/rg/trace_scorers.py OUT.json`` writes
``{dataset: ["eval reasoning_gym/x.py:12", ...]}`` (a file: some generators print to stdout).

Every registered dataset's ``score_answer`` is called on harmless probe answers (and its own answer)
with a profiler that records calls of ``eval``/``exec``/``compile`` and of sympy's ``parse_expr``/
``sympify``/``literal_eval`` made directly from reasoning-gym's code. Run in a fresh interpreter, before
rlvr's safe readers are installed, so that the scorers' own calls are what is seen.
"""

import builtins
import json
import sys
import warnings

warnings.filterwarnings("ignore")

import reasoning_gym  # noqa: E402
from reasoning_gym.factory import DATASETS  # noqa: E402

PROBES = ["[1, 2]", "1+1", "[[0, 1], [1, 0]]", "x**2 + C", "0x1", "['a', 'b']", "{'a': 1}", "a b c"]
WATCHED_C = {builtins.eval: "eval", builtins.exec: "exec", builtins.compile: "compile"}
WATCHED_PY = {"parse_expr", "sympify", "literal_eval", "eval_expr"}


def _site(frame) -> str | None:
    name = frame.f_code.co_filename
    if "/reasoning_gym/" not in name:
        return None
    return f"{name[name.rindex('/reasoning_gym/') + 1:]}:{frame.f_lineno}"


def main(out_path: str) -> None:
    hits: dict[str, set[str]] = {}
    current = [None]

    def profile(frame, event, arg):
        if current[0] is None:
            return
        if event == "c_call" and arg in WATCHED_C:
            site = _site(frame)
            if site:
                hits.setdefault(current[0], set()).add(f"{WATCHED_C[arg]} {site}")
        elif event == "call" and frame.f_code.co_name in WATCHED_PY and frame.f_back is not None:
            site = _site(frame.f_back)
            if site and "/reasoning_gym/" not in frame.f_code.co_filename:
                hits.setdefault(current[0], set()).add(f"{frame.f_code.co_name} {site}")

    for name in sorted(DATASETS):
        try:
            ds = reasoning_gym.create_dataset(name, size=1, seed=0)
            entry = json.loads(json.dumps(ds[0], default=str))
        except Exception:  # noqa: BLE001 - a dataset that needs a configuration (composite)
            continue
        for answer in PROBES + [str(entry["answer"])]:
            current[0] = name
            sys.setprofile(profile)
            try:
                ds.score_answer(answer, entry)
            except Exception:  # noqa: BLE001
                pass
            finally:
                sys.setprofile(None)
                current[0] = None
    with open(out_path, "w") as f:
        json.dump({k: sorted(v) for k, v in sorted(hits.items())}, f)


if __name__ == "__main__":
    main(sys.argv[1])
