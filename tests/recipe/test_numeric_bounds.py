"""Bounds from the math on every numeric knob (issue 44): hostile values through `rlvr recipes validate --set`
are exit 0 or 2, never 1 or a traceback; every numeric field has both ends, so no astronomically large value
passes; the prompt templates' format widths are bounded; the commands' numeric options have bounds too.

Validation only (no training) except the tiny runs at the bounds, in tests/train/test_bounded_runs.py."""

from __future__ import annotations

import typing

import pytest

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.docs import _models_in, _range
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.recipe.schema import Recipe

NEEDS = {  # what a section needs before one of its fields can be set alone
    "loss.entropy_control": ["loss.entropy_control.target=0.3"],
    "overlong.soft_punish": ["overlong.soft_punish.buffer=4"],
    "advantage.passk": ["advantage.passk.method=pkpo", "advantage.passk.k=2"],
    "task.name=dataset": ["task.path=data.jsonl"],
    "task.name=reasoning_gym": ["task.dataset=countdown"],
}


def _numeric(annotation) -> bool:
    return any(a in (int, float) for a in [annotation, *typing.get_args(annotation)]) or any(
        _numeric(a) for a in typing.get_args(annotation) if typing.get_origin(a) in (typing.Annotated, tuple, list))


def numeric_fields(model=Recipe, prefix: str = "", needs: tuple = ()):
    """(dotted path, the --set items it needs first, field info) of every numeric field, union variants included."""
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        subs = _models_in(info.annotation)
        if len(subs) == 1:
            yield from numeric_fields(subs[0], f"{path}.", needs + tuple(NEEDS.get(path, ())))
        elif subs:
            for sub in subs:
                tag = "name" if "name" in sub.model_fields else "type"
                choice = f"{path}.{tag}={typing.get_args(sub.model_fields[tag].annotation)[0]}"
                yield from numeric_fields(sub, f"{path}.", needs + (choice, *NEEDS.get(choice, ())))
        elif _numeric(info.annotation) and typing.get_origin(info.annotation) is not typing.Literal:
            yield path, needs, info


FIELDS = list(numeric_fields())


def _set(path: str, needs: tuple, value: str) -> list[str]:
    """The --set items giving ``path`` the YAML ``value`` (a reward term is one list item; betas a pair)."""
    if path.startswith("reward.terms."):
        kind = next(n.split("=")[1] for n in needs if n.startswith("reward.terms.type="))
        return [f"reward.terms=[{{type: {kind}, {path.rsplit('.', 1)[1]}: {value}}}]"]
    if path == "optim.betas":
        return [*needs, f"optim.betas=[{value}, 0.99]"]
    if path in ("eval.pass_at_k", "eval.maj_at_k"):
        return [*needs, f"{path}=[{value}]"]
    return [*needs, f"{path}={value}"]


HUGE_INT = str(10**30)
ALWAYS_REFUSED = ["1e300", "-1e300", ".nan", ".inf", "-.inf", "1e400", HUGE_INT + "0"]
"""No numeric field may take these: each has a finite upper end below 1e31."""
MAYBE = ["1e-300", "-1e-300", HUGE_INT, "-5", "0"]


def test_the_walk_finds_every_numeric_knob():
    paths = {p for p, _, _ in FIELDS}
    for known in ("loss.objective.tau_pos", "loss.objective.is_cap", "model.lora.alpha", "reward.terms.weight",
                  "loss.entropy_control.delta", "distributed.timeout_s", "task.eval_fraction", "task.num_train",
                  "optim.betas", "eval.pass_at_k", "seed"):
        assert known in paths, known
    assert len(FIELDS) > 110


@pytest.fixture(scope="module")
def defaults(tmp_path_factory):
    """A recipe of the schema's defaults, quick to parse (the walk validates ~1,400 times)."""
    path = tmp_path_factory.mktemp("walk") / "defaults.yaml"
    path.write_text("description: the schema's defaults\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("path,needs,info", FIELDS, ids=[f"{p}[{(n or ('',))[-1]}]" for p, n, _ in FIELDS])
def test_hostile_values_are_exit_0_or_2_never_an_internal_error(path, needs, info, cli, defaults):
    """Every value through the `--set` path (load_recipe, then the notes `validate` prints): a recipe or a
    UserError (exit 2), nothing else (exit 1); then one through the command itself."""
    for value in ALWAYS_REFUSED + MAYBE:
        try:
            load_recipe(defaults, _set(path, needs, value)).notes()
        except UserError as e:
            assert value not in ALWAYS_REFUSED or path.rsplit(".", 1)[-1] in str(e), (value, e.problems)
        else:
            assert value not in ALWAYS_REFUSED, f"{path}={value} passed validation"
    res = cli("recipes", "validate", defaults, *[x for item in _set(path, needs, "1e300") for x in ("--set", item)])
    out = res.stdout + res.stderr
    assert res.code == 2 and path.rsplit(".", 1)[-1] in out and "Traceback" not in out, out


@pytest.mark.parametrize("path,needs,info", FIELDS, ids=[f"{p}[{(n or ('',))[-1]}]" for p, n, _ in FIELDS])
def test_every_numeric_field_has_both_ends(path, needs, info):
    if path in ("eval.pass_at_k", "eval.maj_at_k"):  # k values: each within 1..eval.n, checked by EvalSpec
        return
    interval = _range(info)
    assert interval and "inf" not in interval, f"{path}: {interval or 'no bound'}"


# --- across fields: what fits in memory -------------------------------------------------------------------
@pytest.mark.parametrize("sets,words", [
    (["rollout.prompts_per_step=100000", "rollout.group_size=1024"], "tokens per step"),
    (["rollout.max_new_tokens=1000000", "rollout.group_size=1024", "rollout.prompts_per_step=4096"], "2**31"),
    (["eval.num_prompts=1000000", "eval.n=4096"], "num_prompts x n"),
])
def test_batches_that_cannot_fit_in_memory_are_refused(sets, words):
    with pytest.raises(UserError, match=words.replace("*", r"\*")):
        load_recipe("grpo", sets)


# --- prompt templates: format widths --------------------------------------------------------------------
@pytest.mark.parametrize("task,template", [
    ("arithmetic", "What is {a:1000000000} + {b}?"),
    ("arithmetic", "What is {a:>1001} + {b}?"),
    ("arithmetic", "What is {a:{b}} + {b}?"),
    ("arithmetic", "What is {a} + {b:.999999999}?"),
    ("dataset", "{question:1000000000}"),
    ("dataset", "{question:{answer}}"),
    ("reasoning_gym", "{question:x<99999999}"),
])
def test_a_huge_or_data_driven_format_width_is_refused(task, template, tmp_path):
    needs = {"dataset": ["task.path=data.jsonl"], "reasoning_gym": ["task.dataset=countdown"]}.get(task, [])
    path = tmp_path / "r.yaml"
    path.write_text(f"extends: grpo\ntask:\n  name: {task}\n  prompt_template: {template!r}\n", encoding="utf-8")
    with pytest.raises(UserError) as e:
        load_recipe(str(path), needs)
    (line,) = e.value.problems
    assert "prompt_template" in line and ("at most 1000" in line or "nested field" in line), line


def test_ordinary_format_specs_still_pass():
    r = load_recipe("grpo", ["task.prompt_template=What is {a:>6} + {b:06d}?"])
    assert r.task.prompt_template == "What is {a:>6} + {b:06d}?"


# --- the commands' numeric options ----------------------------------------------------------------------------
@pytest.mark.parametrize("args,flag", [
    (["eval", "builtin:tiny", "--n", HUGE_INT], "--n"),
    (["eval", "builtin:tiny", "--num-prompts", HUGE_INT], "--num-prompts"),
    (["eval", "builtin:tiny", "--num-prompts", "1e400"], "--num-prompts"),
    (["eval", "builtin:tiny", "--max-new-tokens", HUGE_INT], "--max-new-tokens"),
    (["eval", "builtin:tiny", "--budget", HUGE_INT], "--budget"),
    (["eval", "builtin:tiny", "--threads", HUGE_INT], "--threads"),
    (["eval", "builtin:tiny", "--temperature", "1e300"], "--temperature"),
    (["eval", "builtin:tiny", "--temperature", "nan"], "--temperature"),
    (["eval", "builtin:tiny", "--n", "4096", "--num-prompts", "1000000"], "--num-prompts"),
    (["eval", "builtin:tiny", "--pass-at-k", HUGE_INT], "--pass-at-k"),
    (["sample", "builtin:tiny", "--out", "x.jsonl", "--n", HUGE_INT], "--n"),
    (["sample", "builtin:tiny", "--out", "x.jsonl", "--top-k", HUGE_INT], "--top-k"),
    (["sample", "builtin:tiny", "--out", "x.jsonl", "--batch-size", HUGE_INT], "--batch-size"),
    (["sample", "builtin:tiny", "--out", "x.jsonl", "--n", "4096", "--num-prompts", "1000000"], "--num-prompts"),
    (["verify", "x.jsonl", "--workers", HUGE_INT], "--workers"),
    (["verify", "x.jsonl", "--timeout", "1e300"], "--timeout"),
    (["compare", ".", "--resamples", "1000000000000000"], "--resamples"),
    (["compare", ".", "--smooth", HUGE_INT], "--smooth"),
    (["train", "grpo", "--nproc", "1000000"], "--nproc"),
    (["sweep", "sweep.yaml", "--jobs", HUGE_INT], "--jobs"),
    (["sweep", "sweep.yaml", "--threads", HUGE_INT], "--threads"),
    (["train", "grpo", "--seed", HUGE_INT], "seed"),
    (["train", "grpo", "--set", "distributed.timeout_s=1e30", "--nproc", "2"], "distributed.timeout_s"),
])
def test_huge_command_options_are_exit_2_before_any_work(args, flag, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = cli(*args)
    out = res.stdout + res.stderr
    assert res.code == 2 and flag in out and "internal error" not in out, out
    assert not any(tmp_path.iterdir())  # nothing written
