"""Issue 28: every float knob of the recipe refuses .inf and .nan (exit 2 naming the field)."""

from __future__ import annotations

import math
import types
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from rlvr_cli.recipe import schema


def _float_in(annotation) -> bool:
    if annotation is float:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _float_in(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, tuple, dict):
        return any(_float_in(a) for a in typing.get_args(annotation))
    return False


def _models_in(annotation):
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for a in typing.get_args(annotation):
        yield from _models_in(a)


def _float_fields() -> list[tuple[type, str]]:
    """(model, field) for every float field of every section reachable from Recipe, union members included."""
    seen, todo, out = set(), [schema.Recipe], []
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, info in model.model_fields.items():
            if _float_in(info.annotation):
                out.append((model, name))
            todo.extend(_models_in(info.annotation))
    return sorted(out, key=lambda mf: (mf[0].__name__, mf[1]))


FIELDS = _float_fields()


def test_the_walk_finds_the_known_float_knobs():
    names = {f"{m.__name__}.{f}" for m, f in FIELDS}
    for known in ("OptimSpec.lr", "OptimSpec.adam_eps", "KLSpec.beta", "ClipSpec.dual_clip", "ClipCovSpec.lb",
                  "DistributedSpec.timeout_s", "SoftPunishSpec.factor", "LossSpec.entropy_coef"):
        assert known in names
    assert len(FIELDS) > 30


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("model,field", FIELDS, ids=[f"{m.__name__}.{f}" for m, f in FIELDS])
def test_every_float_field_refuses_non_finite(model, field, value):
    instance = model.model_construct()
    with pytest.raises(ValidationError) as e:
        model.__pydantic_validator__.validate_assignment(instance, field, value)
    errors = e.value.errors()
    assert any(err["loc"][:1] == (field,) for err in errors), errors
    assert all(err["type"] != "missing" for err in errors)


# every float path --set can reach from the shipped grpo recipe (union members of other kinds are above)
GRPO_PATHS = ["optim.lr", "optim.adam_eps", "optim.grad_clip", "optim.weight_decay", "kl.beta",
              "loss.clip.eps_low", "loss.clip.eps_high", "loss.clip.dual_clip", "loss.entropy_coef",
              "distributed.timeout_s", "task.styles.direct", "task.styles.terse", "task.styles.verbose"]


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan"])
@pytest.mark.parametrize("path", GRPO_PATHS)
def test_validate_exits_2_naming_the_field(cli, path, value):
    res = cli("recipes", "validate", "grpo", "--set", f"{path}={value}")
    assert res.code == 2, (res.stdout, res.stderr)
    assert path in res.stderr + res.stdout


def test_a_nonfinite_value_in_a_recipe_file_names_file_and_field(cli, tmp_path):
    f = tmp_path / "r.yaml"
    f.write_text("base: grpo\noverlong:\n  buffer: 4\n  soft_punish:\n    factor: .inf\n")
    res = cli("recipes", "validate", str(f))
    assert res.code == 2
    assert "overlong.soft_punish.factor" in res.stderr + res.stdout


def test_every_shipped_recipe_still_validates(cli):
    root = Path(schema.__file__).resolve().parents[2] / "recipes"
    files = sorted(str(p) for p in root.rglob("*.yaml"))
    res = cli("recipes", "validate", *files)
    assert res.code == 0, res.stdout + res.stderr
