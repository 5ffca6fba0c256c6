"""Task `dataset`: questions with final answers from a file or a Hugging Face dataset.

`path` may be a local ``.jsonl`` file (read here, line by line, so that a bad line is named as
``file:line``), a ``.json``/``.parquet``/``.csv`` file (loaded with the matching `datasets` builder; a bad
row is named by its index, and in a CSV file also by the line it starts on) or a dataset name on the Hugging Face hub (``load_dataset(path, config)``;
needs the network, or a local cache).

Column mapping: the prompt is ``question_field`` formatted with ``prompt_template`` (or, when that
column holds a conversation, a list of {role, content} messages as in TRL's conversational datasets,
the conversation itself); the gold answer is ``answer_field`` read with ``answer_extraction``: ``gsm8k``
(the text after ``####``), ``boxed`` (the last ``\\boxed{...}``), ``none`` (the field as is) or ``regex``
(the first group of ``answer_regex``); every other column rides along in ``Problem.meta["columns"]``,
as the file has it, for the user's reward functions (:mod:`rlvr_cli.rewards.function`; TRL passes
every column); ``reward_columns`` are columns that must be there.

Held-out prompts come from ``eval_path`` (a local file) or ``eval_split`` (a hub split) when given,
otherwise from ``split`` by a hash of the prompt (``eval_fraction``), which is deterministic and keeps
a prompt on one side only. Training prompts never include a held-out prompt.

:meth:`DatasetTask.data_fingerprint` hashes the rows a run uses, after the mapping and the split, so
two runs can be shown to have trained and been evaluated on the same data (run.json records it).
"""

from __future__ import annotations

import difflib
import json
import math
import random
import re
from pathlib import Path

from rlvr_cli.errors import UserError
from rlvr_cli.fingerprints import dataset_rows_fingerprint
from rlvr_cli.recipe.schema import DatasetTaskSpec as DatasetSpec
from rlvr_cli.tasks.base import Problem, stable_hash

_BUILDERS = {".jsonl": "json", ".json": "json", ".parquet": "parquet", ".csv": "csv"}
LOCAL_FORMATS = tuple(_BUILDERS)
"""Suffixes of the local files a dataset task reads (any other `path` is a Hugging Face dataset name)."""


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


def _read_jsonl(path: Path) -> list[tuple[int, dict]]:
    """(line number, row) of every non-blank line of a JSONL file; a line that is not a JSON object, or
    not UTF-8, is a UserError naming ``file:line``."""
    rows = []
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise UserError(f"task: {path}:{number}: not UTF-8 text ({e.reason} at byte {e.start})") from None
            if not line.strip():
                continue
            try:
                row = json.loads(line.rstrip())
            except ValueError as e:
                reason = f"{e.msg} at column {e.colno}" if isinstance(e, json.JSONDecodeError) else str(e)
                raise UserError(f"task: {path}:{number}: not valid JSON ({reason})") from None
            if not isinstance(row, dict):
                raise UserError(f"task: {path}:{number}: a JSON {type(row).__name__}, not an object of fields")
            rows.append((number, row))
    return rows


def _load_rows(spec: DatasetSpec, split: str, path: str | None = None) -> list[tuple[str, dict]]:
    """(where, row) of one split: `where` is `file:line: row i` for JSONL and CSV, `file (split s) row i` otherwise."""
    path = path or spec.path
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix in _BUILDERS and not p.is_file():
        field = "eval_path" if path == spec.eval_path and path != spec.path else "path"
        looked = spec._looked_for.get(field) or [str(p.absolute())]
        raise UserError(f"task.{field}: {path}: no such file (looked for {', then '.join(looked)}; a relative path is "
                        "read from the folder of the recipe file that sets it, then from the working directory)")
    if suffix == ".jsonl":
        return [(f"{path}:{number}: row {i}", row) for i, (number, row) in enumerate(_read_jsonl(p))]
    import datasets  # imported here: it is slow to import and only these formats need it

    try:
        if suffix in _BUILDERS:
            ds = datasets.load_dataset(_BUILDERS[suffix], data_files={split: str(p)}, split=split)
        else:
            ds = datasets.load_dataset(path, spec.config, split=split)
    except Exception as e:  # datasets raises many types; the message is what the user needs
        raise UserError(f"task: cannot load {path!r} (split {split!r}): {type(e).__name__}: {e}") from None
    lines = _csv_record_lines(p) if suffix == ".csv" else None
    if lines is not None and len(lines) == len(ds):
        return [(f"{path}:{lines[i]}: row {i}", row) for i, row in enumerate(ds)]
    return [(f"{path} (split {split}) row {i}", row) for i, row in enumerate(ds)]


def _csv_record_lines(path: Path) -> list[int] | None:
    """The file line on which each data record of a CSV file starts (after the header; blank lines skipped,
    as pandas skips them; a quoted field may span lines), or None when the file cannot be read so."""
    import csv

    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            starts, line = [], 1
            for record in reader:
                if record and any(record):
                    starts.append(line)
                line = reader.line_num + 1
    except (OSError, UnicodeDecodeError, csv.Error):
        return None
    return starts[1:]  # the first record is the header


def _conversation(value, where: str, field: str) -> list[dict] | None:
    """A question that is a list of {role, content} messages (TRL's conversational format), checked; None
    for any other value."""
    if not isinstance(value, list) or not value or not all(isinstance(m, dict) for m in value):
        return None
    for j, m in enumerate(value):
        if not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise UserError(f"task: {where}: {field}[{j}] is not a message with a text `role` and `content`")
    return [{"role": m["role"], "content": m["content"]} for m in value]


class DatasetTask:
    name = "dataset"
    answer_marker = ""

    def __init__(self, spec: DatasetSpec):
        self.spec = spec
        self.verifier = spec.verifier
        self.answer_marker = spec.answer_marker
        self._located: list[tuple[str, Problem]] = []
        train_rows = self._problems(_load_rows(spec, spec.split), spec.split, spec.path)
        if spec.eval_split or spec.eval_path:
            split = spec.eval_split or "eval"
            eval_rows = self._problems(_load_rows(spec, split, spec.eval_path), split, spec.eval_path or spec.path)
            held = {_key(p.prompt, p.meta.get("messages")) for p in eval_rows}
            train_rows = [p for p in train_rows if _key(p.prompt, p.meta.get("messages")) not in held]
        else:
            cut = int(spec.eval_fraction * 2**32)
            is_eval = lambda p: stable_hash("split:" + _key(p.prompt, p.meta.get("messages"))) % 2**32 < cut  # noqa: E731
            eval_rows = [p for p in train_rows if is_eval(p)]
            train_rows = [p for p in train_rows if not is_eval(p)]
        if spec.num_eval is not None:
            eval_rows = eval_rows[: spec.num_eval]
        if not train_rows:
            raise UserError(f"task.path: {spec.path}: no training prompts left after the held-out split")
        if not eval_rows:
            raise UserError(f"task.path: {spec.path}: the held-out split is empty (raise eval_fraction or set eval_split)")
        self._train, self._eval = train_rows, eval_rows

    def _problems(self, rows: list[tuple[str, dict]], split: str, source: str) -> list[Problem]:
        s = self.spec
        if not rows:
            raise UserError(f"task: {source} (split {split}): no rows")
        seen = set().union(*(row.keys() for _, row in rows))
        missing = [f for f in (s.question_field, s.answer_field, *s.reward_columns) if f not in seen]
        if missing:
            hints = [f"{m!r} -> {c[0]!r}" for m in missing if (c := difflib.get_close_matches(m, sorted(seen), n=1, cutoff=0.6))]
            hint = f"; did you mean {', '.join(hints)}?" if hints else ""
            raise UserError(
                f"task: {source} (split {split}) has no field(s) {missing}; its fields are {sorted(seen)}{hint} "
                "(set task.question_field / task.answer_field / task.reward_columns)"
            )
        problems = [self._problem(where, i, row, split) for i, (where, row) in enumerate(rows)]
        self._located += [(where, p) for (where, _), p in zip(rows, problems)]
        return problems

    def _problem(self, where: str, i: int, row: dict, split: str) -> Problem:
        s = self.spec
        raw = row.get(s.answer_field)
        if raw is None or isinstance(raw, (bool, list, dict)):
            kind = "null" if raw is None else f"a {type(raw).__name__}"
            raise UserError(f"task: {where}: {s.answer_field} is {kind}, not a string or number "
                            "(task.answer_field names the column of gold answers)")
        question = row.get(s.question_field)
        if question is None:  # a row without it: the prompt would read "None"
            raise UserError(f"task: {where}: {s.question_field} is null or missing "
                            "(task.question_field names the column of questions)")
        if isinstance(raw, float) and not math.isfinite(raw):  # NaN in a JSON or Parquet float column
            raise UserError(f"task: {where}: {s.answer_field} is {raw} (an empty cell?), not a gold answer")
        gold = extract_gold(raw, s.answer_extraction, s.answer_regex)
        if gold is not None and not gold.strip():
            raise UserError(f"task: {where}: the gold answer is empty ({s.answer_field}={str(raw)[:80]!r} with "
                            f"answer_extraction={s.answer_extraction}); every response would be scored against nothing")
        if gold is None:
            raise UserError(f"task: {where}: cannot extract the answer from {s.answer_field}={str(raw)[:80]!r} "
                            f"with answer_extraction={s.answer_extraction}")
        meta = {"row": i, "split": split}
        messages = _conversation(question, where, s.question_field)
        if messages is not None:
            if not s.chat_template:
                raise UserError(f"task: {where}: {s.question_field} is a conversation (a list of messages); "
                                "set task.chat_template: true to feed it through the model's chat template")
            meta["messages"] = messages
            prompt = messages[-1]["content"]
        elif isinstance(question, (list, dict)):
            raise UserError(f"task: {where}: {s.question_field} is a {type(question).__name__}, neither text nor "
                            "a conversation (a list of {role, content} messages)")
        else:
            try:
                prompt = s.prompt_template.format(**row)
            except (KeyError, IndexError, ValueError, AttributeError, TypeError) as e:
                raise UserError(f"task.prompt_template: cannot format row {i} ({where.rsplit(': row', 1)[0]}): "
                                f"{type(e).__name__}: {e}") from None
        columns = {c: v for c, v in row.items() if c != s.question_field}  # TRL passes every column but the prompt
        if columns:
            meta["columns"] = columns
        return Problem(id=f"ds:{stable_hash(_key(prompt, messages)):016x}", prompt=prompt, reference=gold, meta=meta)

    @property
    def column_names(self) -> list[str]:
        """Every column of the data but the question's, in first-seen order: what a ``function`` reward
        term gets besides rlvr's keywords (a row without one of them gets None, as ``datasets`` fills it)."""
        names: dict[str, None] = {}
        for p in (*self._train, *self._eval):
            names.update(dict.fromkeys(p.meta.get("columns") or {}))
        return list(names)

    def eval_problems(self) -> list[Problem]:
        return list(self._eval)

    def train_problems(self, rng: random.Random, n: int) -> list[Problem]:
        return [self._train[rng.randrange(len(self._train))] for _ in range(n)]

    def data_fingerprint(self) -> str:
        """`blake2b:<hex>` of the rows this task uses: the training rows, then the held-out ones, each as
        (side, prompt or conversation, gold answer, the row's other columns) in the task's order (the file's), after
        the column mapping, the answer extraction and the split. Same file and settings, same value; a
        changed, added, removed or reordered row (the draws index the rows) changes it."""
        return dataset_rows_fingerprint(self._train, self._eval)

    def located_rows(self) -> list[tuple[str, Problem]]:
        """(where, problem) of every row read, training and held-out, in file order (`rlvr doctor` checks
        each): `where` is ``file:line: row i`` for JSONL and CSV, ``file (split s) row i`` otherwise."""
        return list(self._located)

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


def _key(prompt: str, messages: list[dict] | None) -> str:
    """What identifies a prompt (its id and its side of the split): the text, or a conversation as JSON."""
    return prompt if not messages else json.dumps(messages, sort_keys=True, ensure_ascii=False)
