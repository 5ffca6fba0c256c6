"""The sweep spec: a base recipe, arms (named variants and/or a grid), seeds, and the comparison.

    base: dr_grpo                      # a shipped recipe or a file (relative to this spec)
    needs:                             # optional: runs trained first (e.g. a warm start the arms load)
      - {recipe: base.yaml, out: runs/my_base}
    set: [model.name=builtin:tiny]     # --set overrides for every run
    steps: 100                         # optional: every run's steps
    seeds: 3                           # 0, 1, 2 (or a list: [0, 4, 7])
    variants:                          # named arms, each a list of --set overrides
      - name: control
      - name: clip_higher
        set: [loss.clip.eps_high=0.28]
      - name: dapo
        recipe: dapo                   # an arm may start from its own recipe instead of `base`
    grid:                              # and/or a grid: every combination is an arm
      optim.lr: [1.0e-5, 3.0e-5]
    compare: {control: control}

Arms are the variants crossed with the grid points (either alone when the other is absent); a grid
point's name is ``<last key component><value>`` joined by ``_`` (``lr1.0e-05``), after the variant's
name when both are given (``control_lr1.0e-05``). Each run is ``<arm>-seed<k>``, trained with the
overrides ``[*set, steps=N, *arm, name=<arm>, seed=k]`` (the arm's name is the run's recipe name, unless
``recipe_names: true`` keeps each recipe's own); the comparison labels each variant by its arm
(`--label-by dir`) unless the spec says otherwise. A run listed under ``needs:`` is trained before any
arm's run starts (once, with its recipe's own seed), and the arms fail without starting if it fails.

Expansion loads every arm's recipe exactly as `rlvr train` will, so an unknown field or value is
refused before anything runs, as ``spec.yaml:LINE: arm NAME: field: problem`` (exit 2).
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.load import (
    MAX_RECIPE_BYTES,
    find_recipe,
    load_recipe,
    read_yaml_with_lines,
    yaml_depth_problem,
)
from rlvr_cli.recipe.schema import Recipe

ARM_NAME = r"^[A-Za-z0-9][A-Za-z0-9._+=-]*$"
"""An arm's name is a directory name's start (`<arm>-seed<k>`): no spaces, slashes or leading dot."""
SET_BY_SWEEP = ("seed", "name")
"""Recipe fields the sweep sets itself (from `seeds:` and the arm's name): an arm may not set them."""
MAX_RUNS = 1000
"""Runs one spec may plan (arms x seeds): each is a process and a directory, and each recipe is loaded
and checked before anything runs; a larger study is several specs (they share one pool of slots)."""
MAX_ARM_NAME = 200
"""Characters of an arm's name: `<arm>-seed<k>` names a directory, and a file or directory name holds at
most 255 bytes (with the seed and the temporary name of a copy, 200 leaves room)."""
MAX_NPROC = 1024
"""Processes per run: torchrun starts them on one machine."""
MAX_GPUS = 1024
"""GPUs one run may ask Ray for."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)


class Variant(_Strict):
    name: str
    """The arm's name; its runs are `<name>-seed<k>`."""
    recipe: str | None = None
    """The arm's own base recipe (a shipped name or a file relative to the spec) instead of the spec's `base`."""
    set: list[str] = []
    """`--set` overrides of this arm (FIELD=VALUE), applied after the spec's own `set`."""

    @field_validator("name")
    @classmethod
    def _directory_name(cls, v: str) -> str:
        if not re.match(ARM_NAME, v):
            raise ValueError("an arm's name is letters, digits and . _ + = - (it names the run directories), "
                             "starting with a letter or digit")
        if len(v) > MAX_ARM_NAME:
            raise ValueError(f"an arm's name is at most {MAX_ARM_NAME} characters (it names the run directories); "
                             f"this one has {len(v)}")
        return v


class Comparison(_Strict):
    out: str | None = None
    """Where `rlvr compare` writes (default: <out>/compare), relative to the working directory."""
    smooth: int = Field(5, ge=0)
    """`rlvr compare --smooth`."""
    band: Literal["minmax", "std"] = "minmax"
    """`rlvr compare --band`."""
    label_by: str | None = "dir"
    """`rlvr compare --label-by` (default `dir`: each variant labelled by its arm, the run directory's name
    without `-seed<k>`)."""
    control: str | None = None
    """The control arm (default: the first arm); passed to the comparison once it takes one."""


class Need(_Strict):
    recipe: str
    """The prerequisite's recipe: a shipped name or a file relative to the spec."""
    out: str
    """Its run directory, relative to the working directory (where the arms' recipes look for it)."""


class SweepSpec(_Strict):
    base: str | None = None
    """The base recipe: a shipped recipe's name or a file (relative to the spec's directory); may be left
    out when every variant names its own `recipe`."""
    set: list[str] = []
    """`--set` overrides for every run."""
    steps: int | None = Field(None, ge=1)
    """Every run's steps (an arm may still set its own)."""
    seeds: int | list[int] = 1
    """A count N (seeds 0..N-1) or the list of seeds."""
    variants: list[Variant] = []
    """Named arms."""
    grid: dict[str, list[Any]] = {}
    """Recipe field -> values; every combination is an arm (crossed with the variants when both are given)."""
    nproc: int = Field(1, ge=1, le=MAX_NPROC)
    """Processes per run (`rlvr train --nproc`: torchrun inside the run's slot or Ray task)."""
    gpus: float = Field(0, ge=0, le=MAX_GPUS)
    """GPUs each run asks Ray for (the local backend does not place GPUs)."""
    out: str | None = None
    """Where the run directories go (default runs/<spec name>), relative to the working directory (unlike `base`); `--out` overrides it."""
    compare: Comparison | None = Comparison()
    """The comparison after the runs; null for none."""
    needs: list[Need] = []
    """Runs trained before any arm (e.g. a warm start the arms' recipes name as their model)."""
    recipe_names: bool = False
    """Keep each run's recipe `name` (default: the arm's name becomes it)."""

    @field_validator("seeds", mode="before")
    @classmethod
    def _seeds(cls, v):
        def seed(x) -> bool:
            return isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 2**63

        if isinstance(v, int) and not isinstance(v, bool):
            if v < 1:
                raise ValueError("a count of seeds must be >= 1")
            if v > MAX_RUNS:
                raise ValueError(f"at most {MAX_RUNS} seeds (a spec plans at most {MAX_RUNS} runs)")
        elif isinstance(v, list):
            if not v or not all(seed(x) for x in v):
                raise ValueError("expected a count N (seeds 0..N-1) or a non-empty list of seeds 0 <= seed < 2**63")
            if len(v) > MAX_RUNS:
                raise ValueError(f"at most {MAX_RUNS} seeds (a spec plans at most {MAX_RUNS} runs)")
            dup = sorted({x for x in v if v.count(x) > 1})
            if dup:
                raise ValueError(f"seed(s) {dup} given twice")
        else:
            raise ValueError("expected a count N (seeds 0..N-1) or a list of seeds")
        return v

    @field_validator("grid")
    @classmethod
    def _grid_values(cls, v):
        empty = [k for k, values in v.items() if not values]
        if empty:
            raise ValueError(f"{', '.join(empty)}: give at least one value")
        return v

    @model_validator(mode="after")
    def _a_base_for_every_arm(self):
        if self.base is None and (not self.variants or any(v.recipe is None for v in self.variants)):
            raise ValueError("base: required unless every variant names its own `recipe`")
        return self

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seeds)) if isinstance(self.seeds, int) else list(self.seeds)

    @property
    def planned_runs(self) -> int:
        """Arms x seeds, counted without expanding them (a grid's product can be astronomic)."""
        arms = max(1, len(self.variants))
        for values in self.grid.values():
            arms *= len(values)
        return arms * len(self.seed_list)


@dataclass
class Override:
    """One `--set` item of a run and the spec line it came from."""

    item: str
    line: int


@dataclass
class Arm:
    name: str
    overrides: list[Override]
    line: int
    """The spec line that defines the arm (its variant entry, else the grid)."""
    recipe: str | None = None
    """The variant's own recipe (None: the spec's base)."""
    recipe_line: int = 1


@dataclass
class PlannedRun:
    arm: str
    seed: int
    name: str
    """`<arm>-seed<k>`: the run directory's name under the sweep's out."""
    dir: Path
    base: str
    """The base recipe as `rlvr train` is given it: a shipped name, or an absolute file path."""
    overrides: list[str]
    """Every `--set` item of the run's `rlvr train`, in order."""
    arm_overrides: list[str]
    """The arm's own items among them (what sets this arm apart)."""
    recipe: Recipe
    """The recipe resolved exactly as the run's `rlvr train` resolves it."""
    after: list[Path] = field(default_factory=list)
    """Run directories that must finish before this run starts (the spec's `needs`, or the run it continues)."""


@dataclass
class Plan:
    spec_path: Path
    spec: SweepSpec
    out: Path
    runs: list[PlannedRun]
    arms: list[str]
    control: str
    compare_out: Path | None
    """None when the spec asks for no comparison."""
    arm_lines: dict[str, int] = field(default_factory=dict)
    needs: list[PlannedRun] = field(default_factory=list)
    """The spec's `needs`: trained before every run in ``runs``."""
    out_flag: bool = False
    """``out`` is `rlvr sweep --out`'s (else the spec's `out`, or the default)."""

    def where(self, arm: str) -> str:
        """`spec.yaml:LINE: arm NAME` for messages about an arm."""
        return f"{self.spec_path}:{self.arm_lines.get(arm, 1)}: arm {arm}"


# --- reading -------------------------------------------------------------------------------------
def _read(path: Path) -> tuple[dict, dict[tuple, str]]:
    """The spec's data and the `file:line` of every key: the recipe reader's, with the spec's own words
    for a missing, empty or non-mapping file."""
    if not path.is_file():
        raise UserError(f"{path}: no such sweep spec file")
    try:
        text = path.read_text(encoding="utf-8") if path.stat().st_size <= MAX_RECIPE_BYTES else None
        readable = text is not None and yaml_depth_problem(text) is None
        node = yaml.compose(text, Loader=yaml.SafeLoader) if readable else None
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        readable, node = False, None
    if readable and node is None:
        raise UserError(f"{path}: the sweep spec is empty; it needs at least `base:`")
    if node is not None and not isinstance(node, yaml.MappingNode):
        raise UserError(f"{path}:1: a sweep spec must be a YAML mapping of fields (base, seeds, variants, ...)")
    return read_yaml_with_lines(path)  # names every other problem (invalid YAML, a key given twice, ...)


def _line(origins: dict, key: tuple, default: int = 1) -> int:
    for n in range(len(key), 0, -1):
        if key[:n] in origins:
            return int(origins[key[:n]].rsplit(":", 1)[1])
    return default


def _validate(path: Path, data: dict, origins: dict) -> SweepSpec:
    try:
        return SweepSpec.model_validate(data)
    except ValidationError as e:
        lines = []
        for err in e.errors(include_url=False):
            loc = tuple(err["loc"])
            dotted = ".".join(str(p) for p in loc) or "(spec)"
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                msg = f"unknown field (a sweep spec has: {', '.join(SweepSpec.model_fields)})" if len(loc) == 1 \
                    else "unknown field (not in the schema; check the spelling)"
            elif "input" in err and not isinstance(err["input"], (dict, list)) and err["type"] != "missing":
                msg = f"{msg} (got {err['input']!r})"
            lines.append(f"{path}:{_line(origins, loc)}: {dotted}: {msg}")
        raise UserError(sorted(set(lines), key=lines.index)) from None


# --- expansion -----------------------------------------------------------------------------------
def set_value(value: Any) -> str:
    """A YAML value as `--set` writes it, so it reads back as the same value (`'true'` stays a string)."""
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 30, allow_unicode=True)
    return text.removesuffix("\n...\n").rstrip("\n")


def _token(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.+=-]+", "_", text).strip("_") or "_"


def _grid_points(spec: SweepSpec, origins: dict) -> list[tuple[str, list[Override]]]:
    """(name, overrides) of every combination of the grid's values, in the spec's order."""
    if not spec.grid:
        return [("", [])]
    keys = list(spec.grid)
    tails = [k.rsplit(".", 1)[-1] for k in keys]
    shown = [t if tails.count(t) == 1 else k for k, t in zip(keys, tails)]
    points = []
    for combo in itertools.product(*(list(enumerate(spec.grid[k])) for k in keys)):
        name = "_".join(_token(f"{s}{set_value(v)}") for s, (_, v) in zip(shown, combo))
        sets = [Override(f"{k}={set_value(v)}", _line(origins, ("grid", k, i))) for k, (i, v) in zip(keys, combo)]
        points.append((name, sets))
    return points


def _set_by_sweep(key: str) -> str:
    return f"set by the sweep ({'seeds:' if key == 'seed' else 'the arm name'})"


def _check_size(path: Path, spec: SweepSpec, origins: dict) -> None:
    """Refuse a spec of more than MAX_RUNS runs before expanding it."""
    n = spec.planned_runs
    if n > MAX_RUNS:
        line = _line(origins, ("grid",) if spec.grid else ("seeds",))
        raise UserError(f"{path}:{line}: the spec plans {n} runs (arms x seeds), at most {MAX_RUNS}; "
                        "split it into several specs (`rlvr sweep A.yaml B.yaml` runs them in one pool)")


def _check_command_line(sets: list[str]) -> None:
    """`rlvr sweep --set seed=5` is refused as `seed:` in the spec is: it would train seed 5 under every
    run's name `<arm>-seed<k>`."""
    bad = [f"--set {s}: {key}: {_set_by_sweep(key)}; give the spec's `seeds:` instead" if key == "seed"
           else f"--set {s}: {key}: {_set_by_sweep(key)}; remove it"
           for s in sets if (key := s.split("=", 1)[0].strip()) in SET_BY_SWEEP]
    if bad:
        raise UserError(bad)


def _arms(path: Path, spec: SweepSpec, origins: dict, base_name: str) -> list[Arm]:
    """Variants x grid points, refusing duplicate names and overrides of what the sweep sets itself."""
    variants = [(v.name, [Override(s, _line(origins, ("variants", i, "set", j))) for j, s in enumerate(v.set)],
                 _line(origins, ("variants", i)), (v.recipe, _line(origins, ("variants", i, "recipe"))))
                for i, v in enumerate(spec.variants)]
    if not variants:
        variants = [("", [], _line(origins, ("grid",), _line(origins, ("base",))), (None, 1))]
    arms, seen, problems = [], {}, []
    for (vname, vsets, vline, vrecipe), (gname, gsets) in itertools.product(variants, _grid_points(spec, origins)):
        name = "_".join(p for p in (vname, gname) if p) or base_name
        line = vline if vname else _line(origins, ("grid",), vline)
        if name in seen:
            problems.append(f"{path}:{line}: arm {name}: the name is given twice (first at line {seen[name]})")
            continue
        if len(name) > MAX_ARM_NAME:
            problems.append(f"{path}:{line}: arm {name[:40]}...: the name is {len(name)} characters, at most "
                            f"{MAX_ARM_NAME} (it names the run directories); shorten the variant's name or the grid's values")
            continue
        seen[name] = line
        arms.append(Arm(name, [*vsets, *gsets], line, *vrecipe))
    for arm in arms:
        for o in arm.overrides:
            key = o.item.split("=", 1)[0].strip()
            if key in SET_BY_SWEEP:
                problems.append(f"{path}:{o.line}: arm {arm.name}: {key}: {_set_by_sweep(key)}; remove it from the arm")
    for i, s in enumerate(spec.set):
        key = s.split("=", 1)[0].strip()
        if key in SET_BY_SWEEP:
            problems.append(f"{path}:{_line(origins, ('set', i))}: set: {key}: {_set_by_sweep(key)}; remove it")
    if problems:
        raise UserError(problems)
    return arms


def _load(base_path: Path, overrides: list[Override], path: Path, label: str, line: int) -> Recipe:
    """The recipe a run's `rlvr train` will resolve; a problem is said at the spec line of the override
    that caused it (else at ``line``), as ``spec.yaml:LINE: LABEL: field: problem``."""
    by_item = {o.item: o.line for o in overrides}
    try:
        return load_recipe(base_path, [o.item for o in overrides])
    except UserError as e:
        lines = []
        for p in e.problems:
            item = next((i for i in by_item if p.startswith(f"--set {i}: ")), None)
            if item is None:
                lines.append(f"{path}:{line}: {label}: {p}")
            elif by_item[item] == 0:  # the command line's --set: said as the command line gave it
                lines.append(p)
            else:
                lines.append(f"{path}:{by_item[item]}: {label}: {p[len(f'--set {item}: '):]}")
        raise UserError(lines) from None


def _find(ref: str, path: Path, line: int, field_name: str) -> tuple[Path, str]:
    """(the recipe file, the reference as `rlvr train` is given it: a shipped name, or the absolute file)."""
    try:
        found = find_recipe(ref, relative_to=path.parent).resolve()
    except UserError as e:
        raise UserError(f"{path}:{line}: {field_name}: {e.problems[0]}") from None
    is_file = (path.parent / ref).is_file() or Path(ref).is_file()  # else a shipped name (find_recipe)
    return found, (str(found) if is_file else ref.removesuffix(".yaml"))


def load_plan(spec_path: str | Path, out: str | Path | None = None, threads: int | None = None,
              sets: list[str] = ()) -> Plan:
    """Read, validate and expand a sweep spec into its runs (every run's recipe resolved).

    ``out`` overrides the spec's `out` (`rlvr sweep --out`), and then everything the sweep writes goes under
    it: the comparison to OUT/compare and each of `needs` to OUT/<its name>, an arm whose model is that
    need's directory loading it from there. ``threads`` sets every run's `threads` (`--threads`); ``sets``
    are `--set` overrides of every run after the spec's own (`rlvr sweep --set`), the `needs` included."""
    path = Path(spec_path)
    data, origins = _read(path)
    spec = _validate(path, data, origins)
    _check_size(path, spec, origins)
    _check_command_line(list(sets))
    base_line = _line(origins, ("base",))
    base = _find(spec.base, path, base_line, "base") if spec.base is not None else None
    out_dir = Path(out if out is not None else spec.out if spec.out is not None else Path("runs") / path.stem)
    moved = {os.path.abspath(n.out): out_dir / Path(n.out).name for n in spec.needs} if out is not None else {}
    """A need's directory -> where it goes under --out."""

    common = [Override(s, _line(origins, ("set", i))) for i, s in enumerate(spec.set)]
    if spec.steps is not None:
        common.append(Override(f"steps={spec.steps}", _line(origins, ("steps",))))
    extra = [Override(s, 0) for s in sets] + ([Override(f"threads={threads}", 0)] if threads is not None else [])
    """The command line's overrides (line 0: a problem with one is said as `--set ITEM: ...`)."""
    if base is not None:
        _load(base[0], common, path, f"base {spec.base}", base_line)

    arms = _arms(path, spec, origins, _token(base[0].stem) if base is not None else "arm")
    seeds = spec.seed_list
    seeds_line = _line(origins, ("seeds",), 1)
    runs, problems = [], []
    for arm in arms:
        try:
            arm_path, arm_ref = base if arm.recipe is None else _find(arm.recipe, path, arm.recipe_line,
                                                                     f"arm {arm.name}: recipe")
        except UserError as e:
            problems += e.problems
            continue
        named = [] if spec.recipe_names else [Override(f"name={arm.name}", arm.line)]
        head = [*common, *arm.overrides, *named]
        for k in seeds:
            items = [*head, Override(f"seed={k}", seeds_line), *extra]
            try:
                recipe = _load(arm_path, items, path, f"arm {arm.name}", arm.line)
                if os.path.abspath(recipe.model.name) in moved:  # its warm start, trained under --out
                    items.append(Override(f"model.name={moved[os.path.abspath(recipe.model.name)]}", 0))
                    recipe = _load(arm_path, items, path, f"arm {arm.name}", arm.line)
            except UserError as e:
                problems += e.problems
                break  # the arm's other seeds have the same problem
            runs.append(PlannedRun(arm.name, k, f"{arm.name}-seed{k}", out_dir / f"{arm.name}-seed{k}", arm_ref,
                                   [o.item for o in items], [o.item for o in arm.overrides], recipe))
    needs = []
    for i, need in enumerate(spec.needs):
        line = _line(origins, ("needs", i))
        try:
            need_path, need_ref = _find(need.recipe, path, _line(origins, ("needs", i, "recipe"), line), f"needs[{i}].recipe")
            items = list(extra)
            recipe = _load(need_path, items, path, f"needs[{i}]", line)
        except UserError as e:
            problems += e.problems
            continue
        needs.append(PlannedRun("needs", recipe.seed, Path(need.out).name,
                                moved.get(os.path.abspath(need.out), Path(need.out)), need_ref,
                                [o.item for o in items], [], recipe))
    if problems:
        raise UserError(sorted(set(problems), key=problems.index))  # a bad --set is said once, not per arm

    for r in runs:
        r.after = [n.dir for n in needs]
    clash = sorted({n.name for n in needs} & {r.name for r in runs})
    if clash or len({n.name for n in needs}) < len(needs):
        raise UserError(f"{path}:{_line(origins, ('needs',))}: needs: a prerequisite's directory name "
                        f"{(clash or [n.name for n in needs])[0]!r} is also another run's; give it another `out`")
    names = [a.name for a in arms]
    control, compare_out = names[0], None
    if spec.compare is not None:
        if spec.compare.control is not None:
            if spec.compare.control not in names:
                raise UserError(f"{path}:{_line(origins, ('compare', 'control'))}: compare.control: "
                                f"{spec.compare.control!r} is not an arm (arms: {', '.join(names)})")
            control = spec.compare.control
        compare_out = Path(spec.compare.out) if spec.compare.out is not None and out is None else out_dir / "compare"
    return Plan(path, spec, out_dir, runs, names, control, compare_out, {a.name: a.line for a in arms}, needs,
                out_flag=out is not None)
