"""rlvr_cli/models/notes.py: the learning-rate note for a pretrained model (not a built-in one, nor a run that
started from one), and the bf16 note on a CPU without bf16 units."""

from __future__ import annotations

import rlvr_cli.models.notes as notes
from rlvr_cli.recipe.load import load_recipe


def test_a_pretrained_model_at_a_built_in_learning_rate_gets_a_note(monkeypatch):
    monkeypatch.setattr(notes.precision, "slow_bf16_on_cpu", lambda: False)
    assert notes.model_notes(load_recipe("grpo", ["optim.lr=1e-3"])) == []  # builtin:tiny survives it
    (note,) = notes.model_notes(load_recipe("grpo", ["optim.lr=1e-4", "model.name=some/hub-model"]))
    assert note.startswith("optim.lr 0.0001 with full fine-tuning of a pretrained model (some/hub-model): above 1e-05")
    assert notes.model_notes(load_recipe("grpo", ["optim.lr=1e-5", "model.name=some/hub-model"])) == []  # at the bound


def test_a_run_that_started_from_a_built_in_model_counts_as_built_in(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints" / "step_4").mkdir(parents=True)
    (run / "recipe.yaml").write_text("model:\n  name: builtin:tiny\n")
    (run / "run.json").write_text("{}")
    assert notes.starts_from_builtin("builtin:tiny") and not notes.starts_from_builtin("some/hub-model")
    assert notes.starts_from_builtin(str(run)) == notes.starts_from_builtin(str(run / "checkpoints" / "step_4"))
    assert notes.starts_from_builtin(str(run), hops=0) is False


def test_bf16_on_a_cpu_without_its_units_gets_a_note(monkeypatch):
    monkeypatch.setattr(notes.precision, "slow_bf16_on_cpu", lambda: True)
    (note,) = notes.model_notes(load_recipe("grpo", ["rollout.sample_autocast=bfloat16"]))
    assert note.startswith("rollout.sample_autocast bfloat16 on a CPU without avx512_bf16 / amx_bf16")
    assert notes.model_notes(load_recipe("grpo", [])) == []
