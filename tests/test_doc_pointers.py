"""Pointers that stay true (issue 43): every relative link in the README, docs/ and results/README.md
reaches a file and, with ``#anchor``, a heading of it; every repository path written in backticks there
exists; every ``docs/NAME.md`` (with its ``§N``, ``"Section"`` or ``#anchor``) and every ``README
"Section"`` / ``README, NAME section`` that the package's docstrings and --help texts, the recipes,
pyproject.toml and the tests name exists; every qualified Sphinx reference in the package's docstrings
names something. The README's "Where the math lives" table lists every module of rlvr_cli/algo/, and
its axis table names only schema fields, every knob of rollout.staleness and off_policy, and every
reward term type."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rlvr_cli.metrics import METRICS

ROOT = Path(__file__).resolve().parents[1]
MARKDOWN = [ROOT / "README.md", ROOT / "results" / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            ROOT / "bench" / "README.md"]
SOURCES = [*sorted((ROOT / "rlvr_cli").rglob("*.py")), *sorted((ROOT / "recipes").rglob("*.yaml")),
           *sorted(p for p in (ROOT / "tests").rglob("*.py") if p.name != Path(__file__).name),
           *sorted((ROOT / "bench").glob("*.py")),
           *sorted((ROOT / "tools").glob("*.py")), ROOT / "pyproject.toml"]
METRIC_NAMES = {m.name for m in METRICS}
REPO_DIRS = ("rlvr_cli/", "tests/", "recipes/", "results/", "docs/", "bench/", "tools/")

PENDING: set[tuple[str, str]] = set()
"""References known to be stale in a file another branch owns; each must still be there (the test says
so once it is fixed, so that the entry goes)."""


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (``-`` and ``_`` kept), spaces to ``-``."""
    text = re.sub(r"`", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def headings(md: Path) -> list[str]:
    """The headings of a markdown file, outside fenced code."""
    out, fenced = [], False
    for line in md.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)):
            out.append(m.group(1))
    return out


def anchors(md: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for h in headings(md):
        s = slug(h)
        out.add(s if s not in seen else f"{s}-{seen[s]}")
        seen[s] = seen.get(s, 0) + 1
    return out


def prose(md: Path) -> str:
    """A markdown file without its fenced code blocks (examples there name files a user would have)."""
    return re.sub(r"^```.*?^```", "", md.read_text(encoding="utf-8"), flags=re.S | re.M)


def section_problem(md: Path, ref: str) -> str | None:
    """What is wrong with a reference to section ``ref`` of ``md`` (``§N``, a heading's words, an anchor)."""
    if not md.is_file():
        return f"{md.relative_to(ROOT)} does not exist"
    if ref.startswith("#"):
        return None if ref[1:] in anchors(md) else f"{md.relative_to(ROOT)} has no heading with anchor {ref}"
    found = [h for h in headings(md) if (h.startswith(ref) if ref.startswith("§") else ref.lower() in h.lower())]
    return None if found else f"{md.relative_to(ROOT)} has no section {ref!r}"


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


@pytest.mark.parametrize("md", MARKDOWN, ids=_rel)
def test_every_relative_link_reaches_a_file_and_heading(md):
    problems = []
    for m in re.finditer(r"\[[^\]]*\]\(([^)\s]+)\)", prose(md)):
        target = m.group(1)
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        path, _, anchor = target.partition("#")
        dest = (md.parent / path).resolve() if path else md
        if not dest.exists():
            problems.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and (why := section_problem(dest, "#" + anchor)):
            problems.append(f"{target}: {why}")
    assert problems == [], f"{_rel(md)}: {problems}"


@pytest.mark.parametrize("md", MARKDOWN, ids=_rel)
def test_every_repository_path_in_backticks_exists(md):
    problems = []
    for m in re.finditer(r"`([^`\s]+)`", prose(md)):
        token = m.group(1).split("::")[0].rstrip(",.:;")
        if (token.startswith(REPO_DIRS) and not re.search(r"[<>*{}$]", token) and not (ROOT / token).exists()
                and token not in METRIC_NAMES):  # `tools/call_rate` is a metric (rlvr_cli/metrics.py), not a path
            problems.append(token)
    assert problems == [], f"{_rel(md)} names paths that do not exist: {problems}"


SECTION_REFS = [
    # docs/NAME.md, optionally with §N, "Section" or #anchor (not inside a URL)
    (re.compile(r'(?<![\w/.])(docs/[\w-]+\.md)(?: ?(§\d+)| +\\?"([^"\\]+)\\?"|(#[\w-]+))?'), None),
    # README "Section" / README.md "Section" / results/README.md "Section" (in source and --help, quotes may be escaped)
    (re.compile(r'(?<![\w/.])((?:results/)?README)(?:\.md)?,? +\\?"([^"\\]+)\\?"'), "quoted"),
    # README, length section / results/README.md, length section
    (re.compile(r"(?<![\w/.])((?:results/)?README)(?:\.md)?, ([\w -]+?) section"), "named"),
]


def source_references(text: str) -> list[tuple[str, str, Path, str | None]]:
    """(the reference as written, its target file, the section it names or None) in ``text``."""
    out = []
    docs, quoted, named = (p for p, _ in SECTION_REFS)
    for m in docs.finditer(text):
        section = m.group(2) or m.group(3) or m.group(4)
        out.append((m.group(0), ROOT / m.group(1), section))
    for pattern in (quoted, named):
        for m in pattern.finditer(text):
            out.append((m.group(0), ROOT / (m.group(1) + ".md"), m.group(2)))
    return out


@pytest.mark.parametrize("source", SOURCES, ids=_rel)
def test_every_section_a_docstring_or_help_text_names_exists(source):
    text = source.read_text(encoding="utf-8")
    problems = []
    for written, target, section in source_references(text):
        if (_rel(source), written.replace("\\", "")) in PENDING:
            continue
        why = section_problem(target, section) if section else (None if target.is_file() else f"{_rel(target)} does not exist")
        if why:
            problems.append(f"{written!r}: {why}")
    assert problems == [], f"{_rel(source)}: {problems}"


def test_pending_references_are_still_there():
    """An entry of PENDING that its owner has fixed must leave the list."""
    for path, written in PENDING:
        text = (ROOT / path).read_text(encoding="utf-8").replace("\\", "")
        assert written in text, f"{path} no longer says {written}: remove it from PENDING"


def test_the_references_the_checker_reads_are_the_ones_written():
    """The patterns find what the sources write (a pattern that matched nothing would pass everything)."""
    refs = source_references('see docs/design.md §6, docs/runs.md "Scaling out", docs/a.md#b-c, '
                             'help="(see README \\"Scaling out\\")", (README, length section), results/README.md, length section')
    assert [(w, _rel(t), s) for w, t, s in refs] == [
        ("docs/design.md §6", "docs/design.md", "§6"), ('docs/runs.md "Scaling out"', "docs/runs.md", "Scaling out"),
        ("docs/a.md#b-c", "docs/a.md", "#b-c"), ('README \\"Scaling out\\"', "README.md", "Scaling out"),
        ("README, length section", "README.md", "length"), ("results/README.md, length section", "results/README.md", "length")]
    assert section_problem(ROOT / "README.md", "Scaling out") == "README.md has no section 'Scaling out'"
    assert section_problem(ROOT / "docs" / "runs.md", "Scaling out") is None
    assert slug("§3 What a run leaves on disk") == "3-what-a-run-leaves-on-disk"
    assert slug("The 2026 objective family (`results/objectives/`) — CISPO") == "the-2026-objective-family-resultsobjectives--cispo"


def test_the_math_table_lists_every_algo_module():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("## Where the math lives", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"`rlvr_cli/algo/(\w+)\.py", table))
    tested = set(re.findall(r"`(tests/algo/test_\w+\.py)`", table))
    modules = {p.stem for p in (ROOT / "rlvr_cli" / "algo").glob("*.py") if p.stem != "__init__"}
    assert sorted(modules - listed) == [], "README 'Where the math lives' misses these rlvr_cli/algo modules"
    assert sorted(listed - modules) == [], "README 'Where the math lives' lists modules that do not exist"
    assert all((ROOT / t).is_file() for t in tested) and len(tested) >= len(modules)


def _axis_rows() -> list[list[str]]:
    """The README's "one field per choice" axis table: [axis, field, choices] per row."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Recipes: one field per choice", 1)[1].split("\n## ", 1)[0]
    rows = [re.split(r"(?<!\\)\|", line.strip())[1:-1] for line in section.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in r] for r in rows if len(r) == 3 and r[1].strip().startswith("`")]


def _schema_field(path: str):
    """The pydantic field at a dotted recipe path (``a.b.c``; ``a.b.*``: the section ``a.b``), or None."""
    import typing

    from rlvr_cli.recipe.schema import Recipe

    model, field = Recipe, None
    for part in path.removesuffix(".*").split("."):
        if model is None or part not in getattr(model, "model_fields", {}):
            return None
        field = model.model_fields[part]
        model = next((t for t in (field.annotation, *typing.get_args(field.annotation))
                      if isinstance(t, type) and hasattr(t, "model_fields")), None)
    return field


def _field_paths(cell: str) -> list[str]:
    """The recipe paths a field cell names: `a.b.c/d/e` is a.b.c, a.b.d and a.b.e."""
    out = []
    for token in re.findall(r"`([\w.*/]+)`", cell):
        first, *siblings = token.split("/")
        out += [first, *(first.rsplit(".", 1)[0] + "." + s for s in siblings)]
    return out


def _reward_term_types() -> set[str]:
    """Every ``type`` a reward term may have, from the schema's union of terms."""
    import typing

    from rlvr_cli.recipe.schema import RewardSpec

    def leaves(t):
        args = typing.get_args(t)
        if isinstance(t, type) and hasattr(t, "model_fields"):
            yield t
        for a in args:
            yield from leaves(a)

    types = set()
    for cls in leaves(RewardSpec.model_fields["terms"].annotation):
        types |= set(typing.get_args(cls.model_fields["type"].annotation))
    return types


def test_every_field_of_the_axis_table_is_in_the_schema():
    rows = _axis_rows()
    assert len(rows) >= 15, f"the axis table was not found: {len(rows)} rows"
    missing = [f"{axis}: {p}" for axis, fields, _ in rows for p in _field_paths(fields) if _schema_field(p) is None]
    assert missing == [], f"README axis rows name fields the schema does not have: {missing}"


def test_the_axis_table_has_the_staleness_off_policy_and_reward_rows_the_schema_has():
    """rollout.staleness's every knob, off_policy's every correction, and every reward term type (the
    user's `function` included) are in the table."""
    import typing

    from rlvr_cli.recipe.schema import OffPolicySpec, StalenessSpec

    named = {p for _, fields, _ in _axis_rows() for p in _field_paths(fields)}
    assert {f"rollout.staleness.{k}" for k in StalenessSpec.model_fields} <= named
    assert {f"off_policy.{k}" for k in OffPolicySpec.model_fields} <= named
    staleness = next(c for _, f, c in _axis_rows() if "rollout.staleness" in f)
    choices = set(re.findall(r"`(\w+)`", staleness))
    for knob in ("mode", "strategy"):
        assert set(typing.get_args(StalenessSpec.model_fields[knob].annotation)) <= choices, knob
    reward = next(c for _, f, c in _axis_rows() if f == "`reward.terms`")
    types = _reward_term_types()
    from rlvr_cli.recipe.reward_terms import REWARD_TERMS

    assert types == set(REWARD_TERMS), "the schema's reward-term union and the registry disagree"
    assert "function" in types and len(types) >= 10
    assert types - set(re.findall(r"`(\w+)`", reward)) == set(), "README reward row misses these term types"


NOT_AXES = {"name", "description", "algorithm", "seed", "steps", "device", "threads", "output_dir", "model", "task",
            "sft", "eval", "checkpoint", "trackers", "distributed"}
"""Recipe sections that choose no term of the objective (what runs, where, how it is logged and scaled):
no axis row. Every other top-level section is named by a row of the README's axis table."""

AWAITING_ROW: set[str] = set()
"""Sections whose axis row lands with their own change: ``environment`` (tools, multi-turn rollouts) gets
its README row from the branch that builds the environment: section. Until it has one it is let off;
once a row names it, that row is checked like every other (its fields in the schema, above)."""


def test_every_section_that_is_a_choice_has_an_axis_row():
    from rlvr_cli.recipe.schema import Recipe

    named = {p.split(".")[0] for _, fields, _ in _axis_rows() for p in _field_paths(fields)}
    sections = set(Recipe.model_fields)
    assert NOT_AXES | AWAITING_ROW <= sections, sorted((NOT_AXES | AWAITING_ROW) - sections)
    missing = sections - NOT_AXES - AWAITING_ROW - named
    assert missing == set(), f"README's axis table has no row for these recipe sections: {sorted(missing)}"
    assert not (NOT_AXES & named), f"sections listed as not an axis have a row: {sorted(NOT_AXES & named)}"


def test_the_axis_checks_can_fail():
    assert _schema_field("rollout.staleness.max") is not None and _schema_field("dynamic_sampling.*") is not None
    assert _schema_field("rollout.staleness.maximum") is None and _schema_field("off_policy.m3po") is None
    assert _field_paths("`loss.clip.eps_low/eps_high`, `kl.estimator`") == ["loss.clip.eps_low", "loss.clip.eps_high",
                                                                            "kl.estimator"]


def _unresolved_references(module: str, text: str) -> list[str]:
    """The Sphinx references in ``text`` (of ``module``) that name nothing: every fully qualified one
    (``rlvr_cli.a.b``), every relative one (``.a.b``, from the module's package) and every bare
    ``:data:`` (a constant of the module itself)."""
    import importlib

    def resolves(name: str) -> bool:
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
            except ImportError:
                continue
            try:
                for attr in parts[i:]:
                    obj = getattr(obj, attr)
                return True
            except AttributeError:
                return False
        return False

    package = module.rsplit(".", 1)[0]
    out = []
    for kind, name in re.findall(r":(mod|func|class|data|meth|attr|exc):`~?([\w.]+)`", text):
        if name.startswith("rlvr_cli."):
            full = name
        elif name.startswith("."):
            level = len(name) - len(name.lstrip("."))
            full = ".".join([*package.split(".")[:len(package.split(".")) - level + 1], name.lstrip(".")])
        elif kind == "data":
            full = f"{module.removesuffix('.__init__')}.{name}"
        else:
            continue  # a bare method or attribute of the class the docstring is in
        if not resolves(full):
            out.append(f":{kind}:`{name}`")
    return out


@pytest.mark.parametrize("source", sorted((ROOT / "rlvr_cli").rglob("*.py")), ids=_rel)
def test_every_qualified_docstring_reference_names_something(source):
    parts = source.relative_to(ROOT).with_suffix("").parts
    module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    if parts[-1] == "__init__":
        module += ".__init__"  # relative references count from the package itself
    assert _unresolved_references(module, source.read_text(encoding="utf-8")) == []


def test_an_unresolved_reference_is_caught():
    text = ":data:`rlvr_cli.models.builtin.SHIPPED`, :func:`~.lag.sampling_version`, :data:`NOPE`, :meth:`start`"
    assert _unresolved_references("rlvr_cli.train.rollouts.sources", text) == [
        ":data:`rlvr_cli.models.builtin.SHIPPED`", ":data:`NOPE`"]
