"""One registry entry per objective (rlvr_cli/recipe/objectives.py, issue 43): every registered objective is
in the schema, the metric table and docs/metrics.md, both exporters' output (or a warning) and
docs/objectives.md; an objective whose export mappings are missing is warned about, never a crash."""

from __future__ import annotations

import dataclasses
import importlib
import typing
from pathlib import Path
from typing import ClassVar, Literal

import pytest
import torch

from rlvr_cli import metrics
from rlvr_cli.algo.policy_loss import SurrogateOut
from rlvr_cli.bridges import TARGETS, export_recipe
from rlvr_cli.errors import UserError
from rlvr_cli.recipe import schema
from rlvr_cli.recipe.docs import OBJECTIVES_DOC, OBJECTIVES_END, OBJECTIVES_START
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.recipe.objectives import FLAG_METRICS, OBJECTIVES, ObjectiveSpec, markdown_tables, register

DOCS = Path(__file__).resolve().parents[2] / "docs"
NAMES = list(OBJECTIVES)


def _with(kind: str, *sets: str):
    return load_recipe("grpo", [f"loss.objective.type={kind}", *sets])


def test_the_registry_holds_the_six_objectives_default_first():
    assert NAMES == ["ppo_clip", "cispo", "sapo", "gmpo", "dppo_tv", "dppo_kl"]
    assert isinstance(load_recipe("grpo").loss.objective, OBJECTIVES["ppo_clip"])


@pytest.mark.parametrize("kind", NAMES)
def test_every_registered_objective_is_a_variant_of_the_schema(kind):
    union = typing.get_args(schema.LossSpec.model_fields["objective"].annotation)  # pydantic keeps the Union
    assert OBJECTIVES[kind] in union and len(union) == len(OBJECTIVES)
    assert type(_with(kind).loss.objective) is OBJECTIVES[kind]
    assert f"`{kind}`" in schema.LossSpec.model_fields["objective"].description


def test_an_unregistered_type_is_refused_naming_the_registered_ones():
    with pytest.raises(UserError) as e:
        load_recipe("grpo", ["loss.objective.type=toy"])
    assert "loss.objective" in str(e.value.problems) and all(k in str(e.value.problems) for k in NAMES)


@pytest.mark.parametrize("kind", NAMES)
def test_every_registered_objective_is_in_the_metric_table_and_its_page(kind):
    page = (DOCS / "metrics.md").read_text(encoding="utf-8")
    for name in FLAG_METRICS:
        assert name in metrics.BY_NAME and kind in metrics.BY_NAME[name].meaning
        row = next(line for line in page.splitlines() if line.startswith(f"| `{name}` "))
        assert f"{kind} " in row
    assert set(OBJECTIVES[kind].metrics) <= set(FLAG_METRICS)


def test_the_flags_carry_the_metric_names():
    """One name per thing: SurrogateOut's flag `clip_low` is what `clip_low_frac` counts."""
    flags = [f.name for f in dataclasses.fields(SurrogateOut)][2:]
    assert [f"{f}_frac" for f in flags] == list(FLAG_METRICS)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind", NAMES)
def test_every_registered_objective_is_exported_or_warned(kind, target):
    r = _with(kind)
    exp = export_recipe(r, target)
    mapped = getattr(r.loss.objective, f"to_{target}")(r.loss, lambda *a: None)
    warned = [w for w in exp.warnings if w.startswith("loss.objective:") and f"`{kind}`" in w]
    if mapped is None:
        assert warned, exp.warnings
    else:
        assert not warned
        prefix = "actor_rollout_ref.actor." if target == "verl" else ""
        assert all(exp.settings[prefix + k] == v for k, v in mapped.items())


def test_docs_objectives_tables_are_current_and_name_every_objective():
    """Regenerate with `python -m rlvr_cli.recipe.docs`."""
    assert Path(OBJECTIVES_DOC) == DOCS / "objectives.md"
    page = Path(OBJECTIVES_DOC).read_text(encoding="utf-8")
    assert f"{OBJECTIVES_START}\n{markdown_tables()}{OBJECTIVES_END}" in page
    for kind in NAMES:
        assert sum(line.startswith(("| ", "|")) and f"`{kind}`" in line for line in markdown_tables().splitlines()) >= 2


@pytest.mark.parametrize("kind", NAMES)
def test_each_entry_calls_the_function_it_documents(kind, monkeypatch):
    entry = OBJECTIVES[kind]
    path, fn = entry.function.split(": ")
    module = importlib.import_module("rlvr_cli." + path.removesuffix(".py").replace("/", "."))
    real, calls = getattr(module, fn), []

    def spy(*a, **k):
        calls.append(fn)
        return real(*a, **k)

    monkeypatch.setattr(module, fn, spy)
    r = _with(kind) if kind != "ppo_clip" else load_recipe("grpo")
    logp = torch.tensor([[-0.5, -1.0]], requires_grad=True)
    out = r.loss.objective.surrogate(r.loss, logp, torch.tensor([[-0.9, -0.7]]), torch.tensor([[1.0]]), torch.ones(1, 2))
    assert calls == [fn] and isinstance(out, SurrogateOut)


# --- an objective whose export mappings are missing ---------------------------------------------------
class ToyObjective(ObjectiveSpec):
    """A registered objective with no TRL or verl mapping (the base class's to_trl / to_verl: None)."""

    type: Literal["toy"]
    label: ClassVar = "toy"
    function: ClassVar = "algo/policy_loss.py: clipped_surrogate"


@pytest.fixture
def toy_registered():
    register(ToyObjective)
    yield
    del OBJECTIVES["toy"]


@pytest.mark.parametrize("target", TARGETS)
def test_an_objective_without_a_mapping_is_warned_and_exported_as_ppo_clip(toy_registered, target):
    r = load_recipe("grpo")
    r.loss.objective = ToyObjective(type="toy")  # not in the schema's union, which was built before it registered
    exp = export_recipe(r, target)
    assert f"loss.objective: {target.upper() if target == 'trl' else target} has no `toy` loss; exported the PPO-clip loss" in "\n".join(exp.warnings)
    if target == "trl":
        assert exp.settings["loss_type"] == "grpo"
    else:
        assert exp.settings["actor_rollout_ref.actor.policy_loss.loss_mode"] == "vanilla"


def test_register_refuses_a_second_entry_of_a_name_and_an_unknown_metric(toy_registered):
    with pytest.raises(ValueError, match="twice"):
        register(ToyObjective)

    class Bad(ObjectiveSpec):
        type: Literal["bad"]
        metrics: ClassVar = {"clip_mid_frac": "?"}

    with pytest.raises(ValueError, match="clip_mid_frac"):
        register(Bad)
    assert "bad" not in OBJECTIVES


# --- what the entries refuse, read by the schema ---------------------------------------------------------
@pytest.mark.parametrize("kind", NAMES)
def test_the_schema_refuses_what_each_entry_says_is_inert(kind):
    entry = OBJECTIVES[kind]
    if entry.sequence_ratio_inert:
        with pytest.raises(UserError, match="ratio: `sequence` would be inert"):
            _with(kind, "loss.ratio=sequence")
    elif entry.aggregation is None:
        assert _with(kind, "loss.ratio=sequence").loss.ratio == "sequence"
    if entry.aggregation is not None:
        other = next(a for a in schema.literal_values(schema.Aggregation) if a != entry.aggregation[0])
        with pytest.raises(UserError, match=f"aggregation: objective {kind}"):
            _with(kind, f"loss.aggregation={other}")
    if not entry.reads_loss_clip:
        with pytest.raises(UserError, match="only objective ppo_clip reads it"):
            _with(kind, "loss.clip.eps_high=0.3")
