"""Load a recipe: YAML -> `extends:` chain -> `--set` overrides -> Pydantic validation.

Every key remembers where it came from (file and line, or the `--set` flag that wrote it), so a bad
recipe prints one line per problem such as::

    recipes/my.yaml:12: loss.clip.eps_high: eps_high (0.1) must be >= eps_low (0.2)

and the CLI exits with status 2 (docs/design.md §1). Nothing here raises a traceback for bad input: all
problems surface as :class:`rlvr_cli.errors.UserError`.
"""

from __future__ import annotations

import copy
import importlib.resources
import os
import sys
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.schema import Recipe

Origin = str  # "path:line" or "--set a.b=v"


def shipped_recipes_dir() -> Path:
    """The directory of the shipped recipes (installed as the package data ``rlvr_cli.recipes``)."""
    env = os.environ.get("RLVR_RECIPES")
    if env:
        return Path(env)
    try:
        return Path(str(importlib.resources.files("rlvr_cli.recipes")))
    except (ModuleNotFoundError, TypeError):  # pragma: no cover - broken install
        return Path(__file__).resolve().parents[2] / "recipes"


def list_shipped() -> list[tuple[str, Path]]:
    """(name, path) of every shipped recipe; names of recipes in sub-folders are `folder/name`."""
    root = shipped_recipes_dir()
    found = []
    for path in sorted(root.rglob("*.yaml")):
        rel = path.relative_to(root).with_suffix("")
        found.append((rel.as_posix(), path))
    return found


def find_recipe(ref: str, relative_to: Path | None = None) -> Path:
    """Resolve a recipe reference: an existing file path, or the name of a shipped recipe."""
    candidates = []
    p = Path(ref)
    if relative_to is not None and not p.is_absolute():
        candidates.append(relative_to / p)
    candidates.append(p)
    root = shipped_recipes_dir()
    name = ref[:-5] if ref.endswith(".yaml") else ref
    candidates.append(root / f"{name}.yaml")
    for c in candidates:
        if c.is_file():
            return c
    names = ", ".join(n for n, _ in list_shipped())
    raise UserError(f"{ref}: no such recipe file or shipped recipe (shipped: {names})")


# --- YAML with line numbers ----------------------------------------------------------------------
MAX_RECIPE_BYTES = 1_000_000
"""A recipe is a few hundred lines; a file beyond this is not one (and would only cost memory)."""
MAX_DEPTH = 32
"""Nesting of mappings and lists: the schema needs 4; 20,000 would overflow the parser's recursion."""
MAX_ALIASES = 64
"""Alias uses (``*name``) per file: enough for sharing a few values, far too few for an alias bomb."""
MAX_NODES = 100_000
"""Nodes of the document with every alias expanded (9 aliases of 9 aliases ... is exponential)."""


def yaml_depth_problem(text: str) -> str | None:
    """Nesting deeper than MAX_DEPTH, found from the token stream (which is read without recursion,
    unlike the composer), or None."""
    depth = 0
    opening = (yaml.BlockMappingStartToken, yaml.BlockSequenceStartToken, yaml.FlowMappingStartToken, yaml.FlowSequenceStartToken)
    closing = (yaml.BlockEndToken, yaml.FlowMappingEndToken, yaml.FlowSequenceEndToken)
    for token in yaml.scan(text, Loader=yaml.SafeLoader):
        if isinstance(token, opening):
            depth += 1
            if depth > MAX_DEPTH:
                return f"{token.start_mark.line + 1}: nested more than {MAX_DEPTH} levels deep"
        elif isinstance(token, closing):
            depth -= 1
    return None


def _check_nodes(path: Path, root) -> list[tuple]:
    """Refuse aliases beyond the budget, a document that expands beyond MAX_NODES, and a key given
    twice in one mapping (YAML would silently keep the last): returns (duplicate key node, first one)."""
    aliases, expanded, seen = 0, {}, set()
    problems = []
    stack = [(root, False)]
    while stack:  # post-order without recursion: children's expanded sizes first
        node, done = stack.pop()
        children = [c for kv in node.value for c in kv] if isinstance(node, yaml.MappingNode) else (
            node.value if isinstance(node, yaml.SequenceNode) else [])
        if done:
            if any(id(c) not in expanded for c in children):  # a child still open is an ancestor: a cycle
                raise UserError(f"{path}:{node.start_mark.line + 1}: an alias (*name) refers to the value that "
                                "contains it, so the value would contain itself; write the values out")
            expanded[id(node)] = 1 + sum(expanded[id(c)] for c in children)
            if expanded[id(node)] > MAX_NODES:
                raise UserError(f"{path}: the recipe expands to more than {MAX_NODES} values through its aliases; write the values out")
            continue
        if id(node) in seen:
            aliases += 1
            if aliases > MAX_ALIASES:
                raise UserError(f"{path}:{node.start_mark.line + 1}: more than {MAX_ALIASES} alias uses (*name); a recipe does not need that many")
            continue
        seen.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children if id(c) not in expanded)
        if isinstance(node, yaml.MappingNode):
            first: dict = {}
            for k, _ in node.value:
                if isinstance(k, yaml.ScalarNode) and k.value != "<<":
                    if k.value in first:
                        problems.append((k, first[k.value]))
                    else:
                        first[k.value] = k
    return problems  # reported with their dotted keys once the keys' paths are known


def _long_integer_line(node) -> int | None:
    """The line of the first integer scalar under ``node`` too long for Python to convert, or None."""
    todo = [node] if node is not None else []
    limit = sys.get_int_max_str_digits()
    while todo:
        n = todo.pop()
        if isinstance(n, yaml.ScalarNode):
            if n.tag == "tag:yaml.org,2002:int" and len(n.value) > limit:
                return n.start_mark.line + 1
        elif isinstance(n, yaml.MappingNode):
            todo.extend(x for pair in reversed(n.value) for x in reversed(pair))
        elif isinstance(n, yaml.SequenceNode):
            todo.extend(reversed(n.value))
    return None


def read_yaml_with_lines(path: Path) -> tuple[dict, dict[tuple, Origin]]:
    """Parse a YAML mapping and record the line of every key as a dotted-path tuple -> 'file:line'."""
    try:
        size = path.stat().st_size
        if size > MAX_RECIPE_BYTES:
            raise UserError(f"{path}: too large for a recipe ({size} bytes; at most {MAX_RECIPE_BYTES})")
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read recipe: {e}") from None
    try:
        deep = yaml_depth_problem(text)
        if deep:
            raise UserError(f"{path}:{deep}")
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        duplicates = _check_nodes(path, node) if node is not None else []
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e)
        raise UserError(f"{where}: invalid YAML: {problem}") from None
    except RecursionError:
        raise UserError(f"{path}: invalid YAML: nested too deeply") from None
    except ValueError:  # an integer of more digits than Python converts (sys.get_int_max_str_digits)
        line = _long_integer_line(node)
        raise UserError(f"{path}:{line}: invalid YAML: an integer of more than {sys.get_int_max_str_digits()} digits"
                        if line else f"{path}: invalid YAML: a value that cannot be converted") from None
    if data is None:
        raise UserError(f"{path}: the recipe is empty (no fields, only comments or blank lines); "
                        "write the fields that differ from the defaults, or `extends: NAME`")
    if not isinstance(data, dict):
        raise UserError(f"{path}:1: a recipe must be a YAML mapping of fields, got {type(data).__name__}")
    origins: dict[tuple, Origin] = {}
    dotted: dict[int, tuple] = {}

    def walk(n, prefix: tuple):
        if isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                key = k.value
                origins[prefix + (key,)] = f"{path}:{k.start_mark.line + 1}"
                dotted.setdefault(id(k), prefix + (key,))
                walk(v, prefix + (key,))
        elif isinstance(n, yaml.SequenceNode):
            for i, v in enumerate(n.value):
                origins[prefix + (i,)] = f"{path}:{v.start_mark.line + 1}"
                walk(v, prefix + (i,))

    if node is not None:
        walk(node, ())
    if duplicates:
        raise UserError([
            f"{path}:{dup.start_mark.line + 1}: {'.'.join(map(str, dotted.get(id(dup), (dup.value,))))}: "
            f"given twice (first at line {orig.start_mark.line + 1})"
            for dup, orig in sorted(duplicates, key=lambda d: d[0].start_mark.line)
        ])
    return data, origins


def _deep_merge(base: dict, over: dict) -> dict:
    """Child values override parent values; mappings merge key by key, lists are replaced whole."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _load_chain(path: Path, seen: tuple[Path, ...] = ()) -> tuple[dict, dict[tuple, Origin]]:
    """Load ``path`` and everything it extends, parent first, returning merged data and key origins."""
    path = path.resolve()
    if path in seen:
        chain = " -> ".join(str(p) for p in seen + (path,))
        raise UserError(f"{path}: `extends` forms a cycle: {chain}")
    data, origins = read_yaml_with_lines(path)
    parent_ref = data.pop("extends", None)
    if parent_ref is None:
        return data, origins
    if not isinstance(parent_ref, str):
        raise UserError(f"{origins.get(('extends',), path)}: extends: must be a recipe name or path")
    parent_path = find_recipe(parent_ref, relative_to=path.parent)
    parent_data, parent_origins = _load_chain(parent_path, seen + (path,))
    merged = _deep_merge(parent_data, data)
    parent_origins.update({k: v for k, v in origins.items() if k != ("extends",)})
    return merged, parent_origins


# --- --set overrides -----------------------------------------------------------------------------
def apply_overrides(data: dict, origins: dict, overrides: list[str]) -> dict:
    """Apply ``a.b=v`` overrides; ``v`` is parsed as YAML (numbers, booleans, null, lists)."""
    data = copy.deepcopy(data)
    problems = []
    for item in overrides:
        if "=" not in item:
            problems.append(f"--set {item}: expected KEY=VALUE with a dotted key, e.g. loss.clip.eps_high=0.28")
            continue
        key, raw = item.split("=", 1)
        parts = key.strip().split(".")
        if not all(parts):
            problems.append(f"--set {item}: empty component in key {key!r}")
            continue
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        except ValueError:  # an integer of more digits than Python converts
            problems.append(f"--set {item[:60]}{'...' if len(item) > 60 else ''}: a number of more than "
                            f"{sys.get_int_max_str_digits()} digits")
            continue
        cur = data
        for i, part in enumerate(parts[:-1]):
            nxt = cur.get(part)
            if nxt is None:
                nxt = cur[part] = {}
            if not isinstance(nxt, dict):
                problems.append(f"--set {item}: {'.'.join(parts[: i + 1])} is not a section")
                break
            cur = nxt
        else:
            # Switching a discriminated section (e.g. task.name) starts that section afresh.
            if parts[-1] == "name" and len(parts) == 2 and parts[0] == "task" and cur.get("name") != value:
                cur.clear()
            cur[parts[-1]] = value
            for j in range(1, len(parts) + 1):
                origins[tuple(parts[:j])] = f"--set {item}"
    if problems:
        raise UserError(problems)
    return data


# --- validation with readable errors -------------------------------------------------------------
def _dotted(loc: tuple, data: Any) -> tuple[tuple, str]:
    """Map a Pydantic error location onto the user's keys, dropping union tags (`arithmetic`, `random`)."""
    real: list = []
    cur = data
    for part in loc:
        if isinstance(cur, dict) and part not in cur and part in (cur.get("name"), cur.get("type")):
            continue  # the discriminated union's tag, not a key the user wrote
        real.append(part)
        if isinstance(cur, dict):
            cur = cur.get(part)
        elif isinstance(cur, list) and isinstance(part, int) and part < len(cur):
            cur = cur[part]
        else:
            cur = None
    return tuple(real), ".".join(str(p) for p in real) or "(recipe)"


def _where(path_key: tuple, origins: dict, default: str) -> str:
    for n in range(len(path_key), 0, -1):
        if path_key[:n] in origins:
            return origins[path_key[:n]]
    return default


def validate_recipe_data(data: dict, origins: dict | None = None, source: str = "(recipe)") -> Recipe:
    """Validate merged recipe data, raising UserError with one `where: field: problem` line per error."""
    origins = origins or {}
    try:
        return Recipe.model_validate(data)
    except ValidationError as e:
        lines = []
        for err in e.errors(include_url=False):
            key, dotted = _dotted(tuple(err["loc"]), data)
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown field (not in the schema; check the spelling)"
            elif msg.startswith("Value error, "):
                msg = msg[len("Value error, ") :]
            if "input" in err and err["type"] not in ("extra_forbidden", "missing") and not isinstance(
                err["input"], (dict, list)
            ):
                msg = f"{msg} (got {err['input']!r})"
            lines.append(f"{_where(key, origins, source)}: {dotted}: {msg}")
        raise UserError(lines) from None


# --- relative paths ------------------------------------------------------------------------------
def _recipe_folder(origin: str | None) -> Path | None:
    """The folder of the recipe file an origin (`file:line`) names; None for a `--set` or no origin."""
    if not origin or origin.startswith("--set"):
        return None
    file, _, line = origin.rpartition(":")
    return Path(file).parent if file and line.isdigit() else None


def resolve_relative(value: str, origin: str | None) -> tuple[str, list[Path]]:
    """(the path to use, the places looked) for a relative file path a recipe names: the folder of the
    recipe file that wrote it first, then the working directory, as for ``extends:``. The first that
    exists wins; it is written absolute when it is the recipe folder's and the working directory's
    reading is another file (or none), so the resolved recipe reads the same file from anywhere. An
    absolute path, a path given with ``--set``, and one found nowhere are kept as written."""
    p = Path(value).expanduser()
    folder = _recipe_folder(origin)
    if p.is_absolute() or folder is None:
        return value, [p.absolute()]
    here, there = p.absolute(), folder / p
    looked = [there, here] if there != here else [here]
    if there.exists() and not (here.exists() and here.resolve() == there.resolve()):
        return os.path.normpath(there), looked
    return value, looked


def resolve_paths(data: dict, origins: dict) -> dict[str, list[Path]]:
    """Resolve ``task.path``, ``task.eval_path``, each ``file.py:name`` reward ``function`` and environment
    ``factory`` / ``tools`` entry (in place) by
    :func:`resolve_relative`; returns the places looked for each of those found nowhere, by dotted field."""
    missing: dict[str, list[Path]] = {}
    task = data.get("task")
    if isinstance(task, dict) and task.get("name") == "dataset":
        for key in ("path", "eval_path"):
            if isinstance(task.get(key), str) and task[key]:
                task[key], looked = resolve_relative(task[key], origins.get(("task", key)))
                if not Path(task[key]).expanduser().exists():
                    missing[f"task.{key}"] = looked
    terms = (data.get("reward") or {}).get("terms") if isinstance(data.get("reward"), dict) else None
    for i, term in enumerate(terms if isinstance(terms, list) else []):
        ref = term.get("function") if isinstance(term, dict) else None
        if isinstance(ref, str) and ref.rpartition(":")[0].endswith(".py"):
            where, _, name = ref.rpartition(":")
            where, looked = resolve_relative(where, origins.get(("reward", "terms", i, "function")))
            term["function"] = f"{where}:{name}"
            if not Path(where).expanduser().is_file():
                missing[f"reward.terms[{i}].function"] = looked
    env = data.get("environment")
    if isinstance(env, dict):  # environment.factory and environment.tools[i]: `file.py:Name` as a reward function
        tools = env.get("tools") if isinstance(env.get("tools"), list) else []
        refs = [("factory", env.get("factory")), *enumerate(tools)]
        for key, ref in refs:
            if isinstance(ref, str) and ref.rpartition(":")[0].endswith(".py"):
                where, _, name = ref.rpartition(":")
                origin = origins.get(("environment", "factory") if key == "factory" else ("environment", "tools", key))
                where = resolve_relative(where, origin)[0]
                if key == "factory":
                    env["factory"] = f"{where}:{name}"
                else:
                    env["tools"][key] = f"{where}:{name}"
    return missing


def load_recipe(ref: str | Path, overrides: list[str] | None = None) -> Recipe:
    """Load, merge, override and validate a recipe. The run name defaults to the file's stem. Relative
    file paths in it (data, reward functions) are resolved by :func:`resolve_paths`."""
    path = find_recipe(str(ref))
    data, origins = _load_chain(path)
    data = apply_overrides(data, origins, list(overrides or []))
    if data.get("name") is None:
        data["name"] = path.stem
    missing = resolve_paths(data, origins)
    recipe = validate_recipe_data(data, origins, source=str(path))
    if recipe.task.name == "dataset":
        recipe.task._looked_for = {k[len("task."):]: [str(p) for p in v] for k, v in missing.items() if k.startswith("task.")}
    return recipe


def dump_recipe(recipe: Recipe) -> str:
    """The fully resolved recipe as plain YAML (every default written out); loadable as a recipe."""
    return yaml.safe_dump(recipe.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
