"""Task `dataset`: questions with final answers from a file or a Hugging Face dataset, via `datasets`.

`path` may be a local ``.jsonl``/``.json``/``.parquet``/``.csv`` file (loaded with the matching
`datasets` builder) or a dataset name on the Hugging Face hub (loaded with ``load_dataset(path,
config)``; needs the network, or a local cache). The gold answer is taken from ``answer_field`` with
``answer_extraction``: ``gsm8k`` (the text after ``####``), ``boxed`` (the last ``\\boxed{...}``), ``none``
(the field as is) or ``regex`` (the first group of ``answer_regex``).

Held-out prompts come from ``eval_path`` (a local file) or ``eval_split`` (a hub split) when given,
otherwise from ``split`` by a hash of the prompt (``eval_fraction``), which is deterministic and keeps
a prompt on one side only. Training prompts never include a held-out prompt.
"""

from __future__ import annotations

import math
import random
import re
from pathlib import Path

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.schema import DatasetTaskSpec as DatasetSpec
from rlvr_cli.tasks.base import Problem, stable_hash

_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (balanced braces), or None."""
    start = text.rfind("\\boxed")
    if start < 0:
        return None
    i = text.find("{", start)
    if i < 0:
        return None
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j].strip()
    return None


def extract_gold(raw: str, how: str, regex: str | None = None) -> str | None:
    """The gold answer from a dataset's answer field. GSM8K: `... #### 1,234` -> `1234`."""
    raw = str(raw)
    if how == "none":
        return raw.strip()
    if how == "gsm8k":
        if "####" not in raw:
            return None
        return raw.split("####")[-1].strip().replace(",", "")
    if how == "boxed":
        return last_boxed(raw)
    m = re.search(regex or "", raw)
    return m.group(1).strip() if m and m.groups() else None


def _load_split(spec: DatasetSpec, split: str, path: str | None = None):
    import datasets  # imported here: it is slow to import and only this task needs it

    path = path or spec.path
    p = Path(path)
    try:
        if p.suffix.lower() in _BUILDERS:
            if not p.is_file():
                raise UserError(f"task: {path}: no such file")
            ds = datasets.load_dataset(_BUILDERS[p.suffix.lower()], data_files={split: str(p)}, split=split)
        else:
            ds = datasets.load_dataset(path, spec.config, split=split)
    except UserError:
        raise
    except Exception as e:  # datasets raises many types; the message is what the user needs
        raise UserError(f"task: cannot load {path!r} (split {split!r}): {type(e).__name__}: {e}") from None
    return ds


class DatasetTask:
    name = "dataset"
    answer_marker = ""

    def __init__(self, spec: DatasetSpec):
        self.spec = spec
        self.verifier = spec.verifier
        train_rows = self._problems(_load_split(spec, spec.split), spec.split)
        if spec.eval_split or spec.eval_path:
            split = spec.eval_split or "eval"
            eval_rows = self._problems(_load_split(spec, split, spec.eval_path), split)
            held = {p.prompt for p in eval_rows}
            train_rows = [p for p in train_rows if p.prompt not in held]
        else:
            cut = int(spec.eval_fraction * 2**32)
            is_eval = lambda p: stable_hash("split:" + p.prompt) % 2**32 < cut  # noqa: E731
            eval_rows = [p for p in train_rows if is_eval(p)]
            train_rows = [p for p in train_rows if not is_eval(p)]
        if spec.num_eval is not None:
            eval_rows = eval_rows[: spec.num_eval]
        if not train_rows:
            raise UserError(f"task.path: {spec.path}: no training prompts left after the held-out split")
        if not eval_rows:
            raise UserError(f"task.path: {spec.path}: the held-out split is empty (raise eval_fraction or set eval_split)")
        self._train, self._eval = train_rows, eval_rows

    def _problems(self, ds, split: str) -> list[Problem]:
        s = self.spec
        missing = [f for f in (s.question_field, s.answer_field) if f not in ds.column_names]
        if missing:
            raise UserError(
                f"task: {s.path} (split {split}) has no field(s) {missing}; its fields are {ds.column_names} "
                "(set task.question_field / task.answer_field)"
            )
        out = []
        for i, row in enumerate(ds):
            raw = row[s.answer_field]
            if raw is None or isinstance(raw, (bool, list, dict)):
                kind = "null" if raw is None else f"a {type(raw).__name__}"
                raise UserError(
                    f"task: {s.path} (split {split}) row {i}: {s.answer_field} is {kind}, not a string or number "
                    f"(task.answer_field names the column of gold answers)"
                )
            if row[s.question_field] is None:  # a row without it: the prompt would read "None"
                raise UserError(
                    f"task: {s.path} (split {split}) row {i}: {s.question_field} is null or missing "
                    f"(task.question_field names the column of questions)"
                )
            if isinstance(raw, float) and not math.isfinite(raw):  # NaN in a JSON or Parquet float column
                raise UserError(
                    f"task: {s.path} (split {split}) row {i}: {s.answer_field} is {raw} (an empty cell?), not a gold answer"
                )
            gold = extract_gold(raw, s.answer_extraction, s.answer_regex)
            if gold is not None and not gold.strip():
                raise UserError(
                    f"task: {s.path} (split {split}) row {i}: the gold answer is empty "
                    f"({s.answer_field}={str(raw)[:80]!r} with answer_extraction={s.answer_extraction}); "
                    "every response would be scored against nothing"
                )
            if gold is None:
                raise UserError(
                    f"task: {s.path} (split {split}) row {i}: cannot extract the answer from "
                    f"{s.answer_field}={str(row[s.answer_field])[:80]!r} with answer_extraction={s.answer_extraction}"
                )
            try:
                prompt = s.prompt_template.format(**row)
            except (KeyError, IndexError, ValueError, AttributeError, TypeError) as e:
                raise UserError(f"task.prompt_template: cannot format row {i} of {s.path}: {type(e).__name__}: {e}") from None
            pid = f"ds:{stable_hash(prompt):016x}"
            out.append(Problem(id=pid, prompt=prompt, reference=gold, meta={"row": i, "split": split}))
        return out

    def eval_problems(self) -> list[Problem]:
        return list(self._eval)

    def train_problems(self, rng: random.Random, n: int) -> list[Problem]:
        return [self._train[rng.randrange(len(self._train))] for _ in range(n)]

    def incorrect_reference(self, problem: Problem) -> str:
        """A fixed wrong label: a numeric gold shifted by a hash-chosen nonzero amount, else a marker string."""
        h = stable_hash("incorrect:" + problem.id)
        try:
            return str(int(problem.reference) + 1 + h % 9)
        except ValueError:
            try:
                return repr(float(problem.reference) + 1 + h % 9)
            except ValueError:
                return f"not {problem.reference}"
