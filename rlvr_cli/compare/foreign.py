"""TRL and verl logs as runs of `rlvr compare`.

- TRL: an output directory with ``trainer_state.json`` (or only ``checkpoint-N/trainer_state.json``);
  its ``log_history`` rows are the steps. The variant comes from the file ``rlvr export --to trl``
  wrote, when it lies in the directory (any ``*.yaml`` with a ``grpo_config`` key).
- verl: a file-logger JSONL (``trainer.logger=['console','file']``), one ``{"step": N, "data":
  {metric: value}}`` object per line (verl 0.9.1, ``verl/utils/tracking.py`` ``FileLogger``). The
  variant comes from Hydra's ``.hydra/config.yaml`` beside the file or one directory up.

Metric names are mapped to rlvr's (:data:`TRL_METRICS`, :data:`VERL_METRICS`); any other metric is
kept under its own name. The recipe of a foreign run is rlvr's default recipe overlaid with what the
foreign config says (plus ``framework``), so the variant label names the knobs that differ. A file that
cannot be read becomes a skipped run with the reason; one bad line is a warning kept with the run.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import yaml

from rlvr_cli import run_files
from rlvr_cli.compare.run import Run, RunUnreadable, Skipped, to_frames, unreadable
from rlvr_cli.compare.variants import nested_value

TRL_METRICS = {
    "reward": "reward_mean",
    "reward_std": "reward_std",
    "rlvr/accuracy": "accuracy",
    "kl": "kl_mean",
    "entropy": "entropy",
    "completions/mean_length": "len_mean",
    "completions/clipped_ratio": "truncated_frac",
    "clip_ratio/low_mean": "clip_low_frac",
    "clip_ratio/high_mean": "clip_high_frac",
    "frac_reward_zero_std": "zero_std_frac",
    "loss": "loss",
    "grad_norm": "grad_norm",
    "learning_rate": "lr",
}
"""TRL 1.16 GRPOTrainer log names -> rlvr's (``rlvr/accuracy`` is logged by rlvr's TRL reward function)."""

VERL_METRICS = {
    "critic/score/mean": "reward_mean",
    "critic/rewards/mean": "reward_shaped_mean",
    "actor/kl_loss": "kl_mean",
    "critic/kl": "kl_mean",
    "actor/entropy": "entropy",
    "response_length/mean": "len_mean",
    "response_length/clip_ratio": "truncated_frac",
    "actor/pg_clipfrac": "clip_frac",
    "actor/pg_clipfrac_lower": "dual_clip_frac",
    "actor/pg_loss": "loss",
    "actor/grad_norm": "grad_norm",
    "actor/lr": "lr",
}
"""verl 0.9.1 metric names -> rlvr's. verl's ``pg_clipfrac`` counts both clip sides together;
``pg_clipfrac_lower`` is its dual-clip fraction."""

TRL_SUMMARY_KEYS = {"train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos", "train_loss"}

MAX_STEP = 2**53
"""The largest step or count read from a foreign log or config: every one a float holds exactly (a real run
logs far fewer); a larger one (``10**400`` as a JSON integer) is a skipped line or an ignored field, never an
overflow in the arithmetic that maps it to rlvr's steps."""


def _step(value) -> int | None:
    """``value`` when it is a step rlvr can index by (an integer, not a bool, in 0..MAX_STEP), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_STEP else None


COUNTS = ("num_generations", "max_completion_length", "per_device_train_batch_size", "steps_per_generation",
          "gradient_accumulation_steps", "num_iterations")
"""The GRPOConfig counts rlvr reads (:func:`_count`); another value in one is a warning, and the field ignored."""


def _short(number: int) -> str:
    text = str(number)
    return text if len(text) <= 20 else f"{text[:8]}... ({len(text)} digits)"


def _count(config: dict, key: str) -> int | None:
    """``config[key]`` when it is a positive integer of at most MAX_STEP, else None: a string, a list or a
    huge number in a hand-edited config is ignored, never multiplied (``"abc" * 10**14`` is a MemoryError)."""
    value = _step(config.get(key))
    return value if value else None


def foreign_kind(path: Path) -> str | None:
    """``trl`` or ``verl`` when ``path`` is a TRL output directory or a verl JSONL log, else None."""
    if path.is_dir():
        if run_files.is_run_dir(path):
            return None
        if (path / "trainer_state.json").is_file() or any(path.glob("checkpoint-*/trainer_state.json")):
            return "trl"
        return None
    if path.is_file() and path.name == "trainer_state.json":
        return "trl"
    if path.is_file() and path.suffix == ".jsonl":
        return "verl"
    return None


def split_foreign(paths: list[str]) -> tuple[list[str], list[Run], list[Skipped]]:
    """Take the TRL/verl logs out of ``paths``: (the rest, the foreign runs, the unreadable ones)."""
    rest, runs, skipped = [], [], []
    for arg in paths:
        p = Path(arg)
        kind = None
        try:
            kind = foreign_kind(p)
            if kind == "verl" and p.name == run_files.METRICS and any((p.parent / m).exists() for m in run_files.RUN_MARKERS
                                                                   if m != run_files.METRICS):
                rest.append(str(p.parent))  # an rlvr run's own log, named instead of its directory
                continue
            if kind is None:
                rest.append(arg)
                continue
            runs.append(load_trl(p) if kind == "trl" else load_verl(p))
        except RunUnreadable as e:
            skipped.append(Skipped(arg, f"{kind} log: {e}"))
        except OSError as e:  # a directory or file the operating system will not let us read
            skipped.append(Skipped(arg, (f"{kind} log: " if kind else "") + unreadable(e, arg)))
    return rest, runs, skipped


# --- bounded reading ------------------------------------------------------------------------------
MAX_BYTES = 256 << 20
"""A foreign log or config larger than this is not read (a link to /dev/zero, a runaway file)."""
MAX_DEPTH = 64
"""Deeper nesting in a foreign JSON/YAML document is refused (a real log nests a few levels)."""


def read_bounded(path: Path, limit: int = MAX_BYTES) -> str:
    """The text of a regular file of at most ``limit`` bytes; ``OSError`` naming why otherwise. Opened
    non-blocking and checked on the descriptor, so a FIFO, a device or a directory is never read."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path}: not a regular file")
        if st.st_size > limit:
            raise OSError(f"{path}: larger than {limit >> 20} MiB")
        chunks, left = [], limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:
            raise OSError(f"{path}: larger than {limit >> 20} MiB")
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace")


class _BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses aliases (an alias bomb never expands) and nesting deeper than
    :data:`MAX_DEPTH` (no recursion error)."""

    _depth = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not read", self.peek_event().start_mark)
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(None, None, f"nested deeper than {MAX_DEPTH}", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


YAML_ERRORS = (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError, RecursionError)
"""What reading a foreign YAML may raise: ValueError covers an integer of more digits than Python converts."""


def load_yaml(path: Path):
    """A foreign YAML file, bounded (:func:`read_bounded`, :class:`_BoundedLoader`)."""
    return yaml.load(read_bounded(path), Loader=_BoundedLoader)  # noqa: S506 - a SafeLoader subclass


def _too_deep(obj) -> bool:
    """Whether a parsed JSON value nests deeper than :data:`MAX_DEPTH` (walked without recursion)."""
    todo = [(obj, 1)]
    while todo:
        value, depth = todo.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                return True
            todo.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return False


def load_json(text: str):
    """``json.loads`` bounded: ``ValueError`` for too deep nesting or an integer of too many digits."""
    try:
        obj = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH}") from None
    if _too_deep(obj):
        raise ValueError(f"nested deeper than {MAX_DEPTH}")
    return obj


# --- TRL -------------------------------------------------------------------------------------------
def _trl_state_file(path: Path) -> Path:
    if path.is_file():
        return path
    if (path / "trainer_state.json").is_file():
        return path / "trainer_state.json"

    def step_of(p: Path) -> int:
        tail = p.parent.name.rsplit("-", 1)[-1]
        return int(tail) if tail.isdigit() else -1

    return max(path.glob("checkpoint-*/trainer_state.json"), key=step_of)


def _trl_export(root: Path, warnings: list[str]) -> dict | None:
    try:
        found = sorted(root.glob("*.yaml"))
    except OSError as e:
        warnings.append(f"{root}: {unreadable(e)}; no rlvr export YAML read")
        return None
    for f in found:
        try:
            doc = load_yaml(f)
        except YAML_ERRORS as e:
            warnings.append(f"{f.name}: unreadable ({' '.join(str(e).split())[:120]}); ignored")
            continue
        if isinstance(doc, dict) and isinstance(doc.get("grpo_config"), dict):
            return doc
    return None


def trl_recipe(grpo_config: dict) -> dict:
    """rlvr's view of a GRPOConfig: the fields rlvr has a name for (see export_trl for the forward map)."""
    c = grpo_config
    agg = {"grpo": "seq_mean_token_mean", "dapo": "token_mean", "bnpo": "token_mean", "dr_grpo": "seq_mean_token_sum_norm"}
    scale = {"group": "group_std", "batch": "batch_std", "none": "none", True: "group_std", False: "none"}
    beta = float(c.get("beta", 0.0) or 0.0)
    loss_type = c.get("loss_type", "dapo")
    out = {
        "seed": c.get("seed", 42),
        "advantage": {"scale": scale.get(c.get("scale_rewards", "group"), str(c.get("scale_rewards")))},
        "loss": {
            "ratio": c.get("importance_sampling_level", "token"),
            "aggregation": agg.get(loss_type, f"trl:{loss_type}"),
            "clip": {"eps_low": c.get("epsilon", 0.2), "eps_high": c.get("epsilon_high") or c.get("epsilon", 0.2), "dual_clip": c.get("delta")},
            "entropy_coef": c.get("entropy_coef", 0.0),
        },
        "kl": {"placement": "loss" if beta > 0 else "none", "beta": beta},
        "optim": {"mu": c.get("num_iterations", 1), "lr": c.get("learning_rate", 1e-6)},
        "overlong": {"mask_truncated": bool(c.get("mask_truncated_completions", False))},
    }
    group = _count(c, "num_generations")
    if group:
        out["rollout"] = {"group_size": group}
        if _count(c, "max_completion_length"):
            out["rollout"]["max_new_tokens"] = _count(c, "max_completion_length")
        batch, gen = _count(c, "per_device_train_batch_size"), _count(c, "steps_per_generation")
        if batch and gen:
            out["rollout"]["prompts_per_step"] = batch * gen // group
    return out


def load_trl(path: Path) -> Run:
    warnings: list[str] = []
    root = path.parent if path.is_file() else path
    try:
        f = _trl_state_file(path)
        state = load_json(read_bounded(f))
    except (OSError, ValueError) as e:
        raise RunUnreadable(f"trainer_state.json unreadable: {' '.join(str(e).split())[:200]}") from None
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise RunUnreadable(f"{f.name}: no log_history list")
    export = _trl_export(root, warnings)
    updates, recipe = 1, None
    if export is not None:
        c = export["grpo_config"]
        warnings += [f"rlvr export YAML: grpo_config unreadable field {k} ({str(c[k])[:40]!r}: not an integer in "
                     "1..2**53); ignored" for k in COUNTS if c.get(k) is not None and _count(c, k) is None]
        try:
            per_gen = max(1, (_count(c, "steps_per_generation") or 1) // (_count(c, "gradient_accumulation_steps") or 1))
            updates = min(per_gen * (_count(c, "num_iterations") or 1), MAX_STEP)
            recipe = export.get("rlvr_recipe")
            if recipe is not None and not isinstance(recipe, dict):
                warnings.append("rlvr export YAML: rlvr_recipe is not a mapping; variant read from grpo_config")
            recipe = (_overlay(recipe, warnings, "rlvr export YAML: rlvr_recipe", nulls=True) if isinstance(recipe, dict)
                      else _overlay(trl_recipe(c), warnings, "rlvr export YAML: grpo_config, read as rlvr's"))
        except (TypeError, ValueError, OverflowError) as e:  # a hand-edited export: a field of the wrong type
            updates, recipe = 1, None
            warnings.append(f"rlvr export YAML: grpo_config unreadable ({type(e).__name__}: {' '.join(str(e).split())[:120]}); "
                            "variant unknown, steps are TRL optimiser updates")
    else:
        warnings.append("no rlvr export YAML in the directory: variant unknown, steps are TRL optimiser updates")
    if recipe is None:
        recipe = _overlay({})
    recipe["framework"] = "trl"
    rows: dict[int, dict] = {}
    for i, entry in enumerate(history):
        if not isinstance(entry, dict) or _step(entry.get("step")) is None:
            warnings.append(f"{f.name}: log_history[{i}] has no integer step in 0..2**53; skipped")
            continue
        if TRL_SUMMARY_KEYS & entry.keys():
            continue
        step = -(-entry["step"] // updates)  # ceil, in integers
        row = rows.setdefault(step, {"step": step})
        for k, v in entry.items():
            if k not in ("step", "epoch"):
                row[TRL_METRICS.get(k, k)] = v
    return _run(root if path.is_file() else path, recipe, rows, warnings, f.name)


# --- verl ------------------------------------------------------------------------------------------
def _verl_config(path: Path, warnings: list[str]) -> dict | None:
    for d in (path.parent, path.parent.parent):
        f = d / ".hydra" / "config.yaml"
        try:
            if not f.is_file():
                continue
            doc = load_yaml(f)
        except YAML_ERRORS as e:
            warnings.append(f"{f}: unreadable ({' '.join(str(e).split())[:120]}); variant unknown")
            return None
        return doc if isinstance(doc, dict) else None
    return None


def verl_recipe(cfg: dict) -> dict:
    """rlvr's view of a verl trainer config (the fields rlvr has a name for)."""

    def get(dotted: str, default=None):
        value = nested_value(cfg, dotted)
        return default if value is None else value

    agg = {"seq-mean-token-mean": "seq_mean_token_mean", "token-mean": "token_mean", "seq-mean-token-sum-norm": "seq_mean_token_sum_norm"}
    kl_types = {"kl": "k1", "k1": "k1", "mse": "k2", "k2": "k2", "low_var_kl": "k3", "k3": "k3"}
    est = get("algorithm.adv_estimator", "gae")
    baseline = {"grpo": "group_mean", "rloo": "leave_one_out"}.get(est, f"verl:{est}")
    actor = "actor_rollout_ref.actor."
    mode = get(actor + "loss_agg_mode", "token-mean")
    dual = get(actor + "clip_ratio_c", 3.0)
    if get(actor + "use_kl_loss", False):
        kl = {"placement": "loss", "beta": get(actor + "kl_loss_coef", 0.001), "estimator": kl_types.get(get(actor + "kl_loss_type"), "k3")}
    elif get("algorithm.use_kl_in_reward", False):
        kl = {"placement": "reward", "beta": get("algorithm.kl_ctrl.kl_coef", 0.001)}
    else:
        kl = {"placement": "none", "beta": 0.0}
    return {
        "advantage": {"baseline": baseline, "scale": "group_std" if get("algorithm.norm_adv_by_std_in_grpo", True) and est == "grpo" else "none"},
        "loss": {
            "ratio": "sequence" if get(actor + "policy_loss.loss_mode") == "gspo" else "token",
            "aggregation": agg.get(mode, f"verl:{mode}"),
            "length_constant": get(actor + "loss_scale_factor"),
            "clip": {"eps_low": get(actor + "clip_ratio_low", 0.2), "eps_high": get(actor + "clip_ratio_high", 0.2), "dual_clip": dual if dual is not None and dual < 1e8 else None},
            "entropy_coef": get(actor + "entropy_coeff", 0.0),
        },
        "kl": kl,
        "rollout": {
            "group_size": get("actor_rollout_ref.rollout.n", 1),
            "prompts_per_step": get("data.train_batch_size"),
            "max_new_tokens": get("actor_rollout_ref.rollout.response_length"),
            "temperature": get("actor_rollout_ref.rollout.temperature", 1.0),
        },
        "dynamic_sampling": {"enabled": bool(get("algorithm.filter_groups.enable", False))},
        "optim": {"mu": get(actor + "ppo_epochs", 1), "lr": get(actor + "optim.lr")},
    }


def _verl_line(line: str) -> dict | str:
    """One file-logger line as ``{"step": int, "data": dict}``, or what is wrong with it."""
    try:
        obj = load_json(line)
    except json.JSONDecodeError as e:
        return f"not valid JSON ({e.msg})"
    except ValueError as e:
        return f"not read ({' '.join(str(e).split())[:120]})"
    if isinstance(obj, dict) and isinstance(obj.get("step"), int) and isinstance(obj.get("data"), dict):
        return obj if _step(obj["step"]) is not None else f"step {_short(obj['step'])} is not in 0..2**53"
    return 'not a verl file-logger line {"step": N, "data": {...}}'


def load_verl(path: Path) -> Run:
    warnings: list[str] = []
    try:
        text = read_bounded(path)
    except OSError as e:
        raise RunUnreadable(f"{path.name} unreadable: {' '.join(str(e).split())[:200]}") from None
    rows: dict[int, dict] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        obj = _verl_line(line) if line.strip() else None
        if isinstance(obj, str):
            warnings.append(f"{path.name} line {lineno}: {obj}; skipped")
        elif obj is not None:
            row = rows.setdefault(obj["step"], {"step": obj["step"]})
            data = obj["data"]
            # two names map to kl_mean: the loss's KL wins where a line has both; the other keeps its name
            both = "actor/kl_loss" in data and "critic/kl" in data
            row.update({(k if both and k == "critic/kl" else VERL_METRICS.get(k, k)): v for k, v in data.items()})
    cfg = _verl_config(path, warnings)
    if cfg is None:
        warnings.append("no .hydra/config.yaml beside the log: variant unknown")
        recipe = _overlay({})
    else:
        try:
            recipe = _overlay(verl_recipe(cfg), warnings, ".hydra/config.yaml, read as rlvr's")
        except (TypeError, ValueError, OverflowError) as e:  # a config field of the wrong type (hand-edited)
            warnings.append(f".hydra/config.yaml: unreadable field ({type(e).__name__}: {e}); variant unknown")
            recipe = _overlay({})
    recipe["framework"] = "verl"
    recipe["name"] = path.stem
    return _run(path, recipe, rows, warnings, path.name)


# --- shared ----------------------------------------------------------------------------------------
def _shape(value) -> str:
    return "mapping" if isinstance(value, dict) else "list" if isinstance(value, list) else "value"


def _overlay(mapped: dict, warnings: list[str] | None = None, where: str = "", nulls: bool = False) -> dict:
    """rlvr's default recipe with ``mapped`` written over it (None values leave the default; with ``nulls``,
    a recipe rlvr wrote, they are the recipe's own null and kept).

    With ``warnings`` (a recipe embedded in a foreign log, written by hand or by another version), a field
    whose shape is not the default's (a list or a value where rlvr has a mapping, a mapping or a list where it
    has a value) keeps the default, with a warning naming it; so does a seed that is not an integer. What
    rlvr does not know is kept as given, as plain JSON values (text for anything else YAML can make)."""
    from rlvr_cli.recipe.schema import Recipe

    base = Recipe().model_dump(mode="json")

    def merge(a: dict, b: dict, prefix: str) -> dict:
        for k, v in b.items():
            key = f"{prefix}{k}"
            if isinstance(v, dict) and isinstance(a.get(k), dict):
                merge(a[k], v, key + ".")
            elif v is None:
                if nulls:
                    a[str(k)] = None
                continue
            elif warnings is not None and a.get(k) is not None and _shape(v) != _shape(a[k]):
                warnings.append(f"{where}: {key} is a {_shape(v)} where rlvr has a {_shape(a[k])}; the default kept")
            else:
                a[str(k)] = _plain(v)
        return a

    merged = merge(base, mapped, "")
    seed = merged.get("seed")
    if warnings is not None and seed is not None and _step(seed) is None:
        warnings.append(f"{where}: seed {str(seed)[:40]!r} is not an integer in 0..2**53; seed unknown")
        merged["seed"] = None
    return merged


def _plain(value):
    """``value`` as JSON holds it: mappings with text keys, lists, text, numbers, booleans, None (a YAML
    date, set or binary becomes its text), so a summary written from it cannot fail."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return str(value)


def _run(path: Path, recipe: dict, rows: dict[int, dict], warnings: list[str], what: str) -> Run:
    if not rows:
        first = next((w for w in warnings if " line " in w), None)
        raise RunUnreadable(f"{what}: no metric rows" + (f" ({first})" if first else ""))
    metrics, nonfinite = to_frames(rows)
    warnings.append("foreign log: no eval/step_N.json files, pass@k not available")
    return Run(path=path, recipe=recipe, status="foreign", seed=recipe.get("seed"), metrics=metrics, nonfinite=nonfinite, warnings=warnings)
