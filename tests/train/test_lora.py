"""model.lora: a LoRA adapter (peft) as the trained part, the reference = the adapter disabled, adapter-only
checkpoints, resume, evaluation of an adapter run. On a tiny Llama built from a config (no download)."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("peft")

from rlvr_cli.errors import UserError  # noqa: E402
from rlvr_cli.metrics import TIMING  # noqa: E402
from rlvr_cli.models import load_model  # noqa: E402
from rlvr_cli.recipe.load import load_recipe  # noqa: E402
from rlvr_cli.train.rl import train_rl  # noqa: E402
from rlvr_cli.train.run_writer import RunDir  # noqa: E402

from conftest import interrupted_at_step, write_word_llama  # noqa: E402  (tests/conftest.py)


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """A 1-layer Llama with a word-level vocabulary, saved as a local model, and a JSONL addition task."""
    return write_word_llama(tmp_path_factory.mktemp("llama"))


def lora_recipe(root, *sets, name="grpo"):
    return load_recipe(name, [
        f"model.name={root / 'model'}", "task.name=dataset", f"task.path={root / 'data.jsonl'}", "task.question_field=q",
        "task.answer_field=a", "task.verifier=integer", "task.eval_fraction=0.2", 'task.prompt_template="{q}\\n"',
        "rollout.prompts_per_step=4", "rollout.group_size=4", "rollout.max_new_tokens=6", "eval.n=2",
        "eval.num_prompts=4", "eval.every=2", "checkpoint.every=2", "steps=4", "optim.lr=0.05",
        "model.lora.rank=4", "model.lora.alpha=8", "kl.placement=loss", "kl.beta=0.1", *sets])


def metrics(run) -> list[dict]:
    return [{k: v for k, v in row.items() if k not in TIMING} for row in RunDir(run).read_metrics()]


def test_adapter_trains_base_stays_and_reference_is_the_base(tiny_llama, tmp_path):
    from peft import PeftModel

    from rlvr_cli.train.reference import AdapterDisabled

    r = lora_recipe(tiny_llama)
    train_rl(r, tmp_path / "run")
    rows = metrics(tmp_path / "run")
    assert len(rows) == 4 and all(row["kl_mean"] is not None for row in rows)
    assert rows[-1]["kl_mean"] > 0  # the adapter moved the policy away from the base
    ck = tmp_path / "run" / "checkpoints" / "step_4"
    names = {p.name for p in ck.iterdir()}
    assert {"adapter_model.safetensors", "adapter_config.json", "config.json", "trainer_state.pt"} <= names
    assert "model.safetensors" not in names and "README.md" not in names  # the adapter only
    assert json.loads((ck / "adapter_config.json").read_text())["r"] == 4

    base, tok, _ = load_model(str(tiny_llama / "model"))
    ids = torch.tensor([tok("What is 3 plus 4?\n")["input_ids"]])
    want = base(input_ids=ids).logits
    policy = PeftModel.from_pretrained(load_model(str(tiny_llama / "model"))[0], str(ck))
    ref = AdapterDisabled(policy)(input_ids=ids).logits
    assert torch.equal(ref, want)  # pi_ref = the base weights, bit for bit
    trained = policy(input_ids=ids).logits
    assert not torch.allclose(trained, want)
    # `rlvr eval RUN` loads the run's last checkpoint: base + adapter merged (what the trained policy computes)
    merged, _, resolved = load_model(str(tmp_path / "run"))
    assert resolved.kind == "run" and resolved.step == 4
    assert torch.allclose(merged(input_ids=ids).logits, trained, atol=1e-5)


def test_lora_resume_equals_uninterrupted(tiny_llama, tmp_path, monkeypatch):
    r = lora_recipe(tiny_llama)
    train_rl(r, tmp_path / "a")
    train_rl(r, tmp_path / "b")
    assert metrics(tmp_path / "a") == metrics(tmp_path / "b")  # the adapter's initialisation is seeded

    restore = interrupted_at_step(monkeypatch, 3)
    with pytest.raises(KeyboardInterrupt):
        train_rl(r, tmp_path / "c")
    restore()
    train_rl(r, tmp_path / "c", resume=True)
    assert metrics(tmp_path / "c") == metrics(tmp_path / "a")


def test_keep_last_and_eval_cli(tiny_llama, tmp_path, cli):
    r = lora_recipe(tiny_llama, "checkpoint.keep_last=1", "checkpoint.every=1", "kl.placement=none", "kl.track=false")
    train_rl(r, tmp_path / "run")
    assert [p.name for p in (tmp_path / "run" / "checkpoints").iterdir()] == ["step_4"]
    res = cli("eval", str(tmp_path / "run"), "--n", "2", "--num-prompts", "4", "--out", str(tmp_path / "ev.json"))
    assert res.code == 0, res.stderr
    assert (tmp_path / "ev.json").is_file()


def test_lora_recipe_errors():
    with pytest.raises(UserError, match="kl.ref_reset_every with model.lora"):
        load_recipe("grpo", ["model.lora.rank=4", "kl.ref_reset_every=5"])
    with pytest.raises(UserError, match="model.reference with model.lora"):
        load_recipe("grpo", ["model.lora.rank=4", "model.reference=other"])
    r = load_recipe("grpo", ["model.lora.rank=4"])
    assert r.model.lora.alpha == 32 and r.model.lora.target_modules == "all-linear" and r.model.lora.dropout == 0
    assert load_recipe("grpo").model.lora is None  # full fine-tuning stays the default


def test_unknown_target_module_exits_2(tiny_llama, tmp_path):
    r = lora_recipe(tiny_llama, "model.lora.target_modules=[nope_proj]")
    with pytest.raises(UserError, match="model.lora.target_modules"):
        train_rl(r, tmp_path / "run")
