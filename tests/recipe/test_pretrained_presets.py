"""Presets for a pretrained model: the SmolLM2 preset, the learning-rate and bf16 notes, eval temperature
following the rollout's, and no silent arithmetic default for a model other than the built-in ones."""

from __future__ import annotations

import pytest

import rlvr_cli.models.precision as precision
from rlvr_cli.errors import UserError
from rlvr_cli.models.notes import model_notes
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.tasks import default_task


def lr_notes(*sets):
    return [n for n in model_notes(load_recipe("dr_grpo", list(sets))) if n.startswith("optim.lr")]


def test_learning_rate_note_for_a_pretrained_model():
    assert lr_notes() == []  # the built-in tiny model: the presets' 1e-4 is its lr
    from rlvr_cli.models.builtin import cache_root

    assert lr_notes(f"model.name={cache_root()}/builtin/tiny-abc") == []  # the built-in model's cached folder
    assert len(lr_notes("model.name=my/model")) == 1  # full fine-tuning at 1e-4
    assert lr_notes("model.name=my/model", "optim.lr=1e-5") == []  # the bound itself is fine
    assert len(lr_notes("model.name=x.gguf", "optim.lr=1.1e-5")) == 1
    assert lr_notes("model.name=my/model", "model.lora.rank=8") == []  # LoRA at 1e-4
    assert "LoRA adapter" not in "".join(lr_notes("model.name=my/model"))
    assert "a LoRA adapter" in lr_notes("model.name=my/model", "model.lora.rank=8", "optim.lr=2e-3")[0]


def test_no_learning_rate_note_for_a_run_that_started_from_a_builtin_model(tmp_path):
    """A warm start from an rlvr run (or one of its checkpoints) of the built-in model is not a pretrained
    model; a run of a pretrained model still is, and a chain of runs is followed back."""
    def run(name, model):
        d = tmp_path / name
        (d / "checkpoints" / "step_5").mkdir(parents=True)
        (d / "recipe.yaml").write_text(f"model:\n  name: {model}\n")
        return d

    tiny = run("tiny", "builtin:tiny")
    assert lr_notes(f"model.name={tiny}") == []
    assert lr_notes(f"model.name={tiny}/checkpoints/step_5") == []
    assert lr_notes(f"model.name={run('chained', str(tiny))}") == []
    assert len(lr_notes(f"model.name={run('smol', 'my/model')}")) == 1
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "recipe.yaml").write_text(": not yaml [")
    assert len(lr_notes(f"model.name={tmp_path / 'broken'}")) == 1


def test_bf16_note_only_on_a_cpu_without_bf16_units(monkeypatch):
    def notes(slow, *sets):
        monkeypatch.setattr(precision, "slow_bf16_on_cpu", lambda: slow)
        return [n for n in model_notes(load_recipe("dr_grpo", ["device=cpu", *sets])) if "avx512_bf16" in n]

    assert len(notes(True, "rollout.sample_autocast=bfloat16")) == 1
    assert "model.dtype" in notes(True, "model.dtype=bfloat16")[0]
    assert notes(False, "rollout.sample_autocast=bfloat16") == []
    assert notes(True) == [] and notes(True, "rollout.sample_autocast=float16") == []


def test_slow_bf16_reads_the_flags(monkeypatch):
    monkeypatch.setattr(precision.torch.cuda, "is_available", lambda: False)
    for flags, slow in (({"avx2"}, True), ({"avx2", "avx512_bf16"}, False), ({"amx_bf16"}, False), (None, False)):
        monkeypatch.setattr(precision, "cpu_flags", lambda f=flags: f)
        precision.slow_bf16_on_cpu.cache_clear()
        assert precision.slow_bf16_on_cpu() is slow
    precision.slow_bf16_on_cpu.cache_clear()


def test_eval_temperature_follows_the_rollout_unless_set():
    assert load_recipe("dr_grpo", ["rollout.temperature=0.7"]).eval.temperature == 0.7
    assert load_recipe("dr_grpo", ["rollout.temperature=0.7", "eval.temperature=1.0"]).eval.temperature == 1.0
    assert load_recipe("grpo").eval.temperature == 1.0  # the toy presets: T 1.0 for both, as before


def test_smollm2_preset():
    r = load_recipe("smollm2_dr_grpo")
    assert r.model.name == "smollm2-135m-instruct" and r.model.lora.rank == 16
    assert (r.task.digits, r.task.chat_template, r.rollout.temperature, r.eval.temperature) == (1, True, 0.7, 0.7)
    assert r.reward.extract[-1] == "last_number" and r.checkpoint.keep_last == 2
    assert not [n for n in model_notes(r) if n.startswith("optim.lr")]
    assert [n for n in model_notes(load_recipe("smollm2_dr_grpo", ["model.lora=null"])) if n.startswith("optim.lr")]


def test_no_silent_arithmetic_for_other_models(tmp_path, cli):
    assert default_task("builtin:tiny") == "arithmetic"
    with pytest.raises(UserError, match="--task"):
        default_task("smollm2-135m-instruct")
    res = cli("sample", str(tmp_path / "some-model"), "--out", str(tmp_path / "s.jsonl"))
    assert res.code == 2 and "--task" in res.stderr
    res = cli("eval", str(tmp_path), "--out", str(tmp_path / "e.json"))
    assert res.code == 2 and "--task" in res.stderr
