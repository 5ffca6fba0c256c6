"""`rlvr export --to trl`: every shipped RL preset builds a real ``trl.GRPOConfig``; an exported recipe
trains for 2 steps with TRL's ``GRPOTrainer`` on the built-in model and rlvr's reward function; the
run's ``trainer_state.json`` reads back into `rlvr compare`."""

from __future__ import annotations

import json

import pytest
import yaml

trl = pytest.importorskip("trl", reason="the `trl` extra is not installed")

from rlvr_cli.bridges import export_recipe  # noqa: E402
from rlvr_cli.cli.export import render  # noqa: E402
from rlvr_cli.recipe.load import list_shipped, load_recipe  # noqa: E402

RL_PRESETS = [name for name, path in list_shipped() if load_recipe(str(path)).algorithm == "rl"]


@pytest.mark.parametrize("preset", RL_PRESETS)
def test_every_preset_builds_a_grpo_config(preset):
    r = load_recipe(preset)
    exp = export_recipe(r, "trl")
    cfg = trl.GRPOConfig(**exp.settings)
    assert cfg.num_generations == r.rollout.group_size
    assert cfg.max_completion_length == r.rollout.max_new_tokens
    assert cfg.importance_sampling_level == r.loss.ratio
    eps_high = 1 + r.loss.objective.eps_high if r.loss.objective.type == "cispo" else r.loss.clip.eps_high  # TRL's cap
    assert cfg.epsilon == r.loss.clip.eps_low and cfg.epsilon_high == eps_high
    assert cfg.num_iterations == r.optim.mu
    # TRL's generation batch is one rlvr step: P * G completions
    assert cfg.generation_batch_size == r.rollout.prompts_per_step * r.rollout.group_size
    assert cfg.max_steps == r.steps * r.optim.minibatches * r.optim.mu


def test_carried_and_not_carried_knobs():
    dapo = export_recipe(load_recipe("dapo"), "trl")
    assert dapo.settings["loss_type"] == "dapo" and dapo.settings["beta"] == 0.0
    assert any(w.startswith("dynamic_sampling.enabled:") for w in dapo.warnings)
    dr = export_recipe(load_recipe("dr_grpo"), "trl")
    assert dr.settings["loss_type"] == "dr_grpo" and dr.settings["scale_rewards"] == "none"
    assert not any(w.startswith("advantage.eps") for w in dr.warnings)  # no std, no eps
    kl_r = export_recipe(load_recipe("grpo_kl_in_reward"), "trl")
    assert any(w.startswith("kl.placement:") for w in kl_r.warnings)
    loo = export_recipe(load_recipe("grpo", ["advantage.baseline=leave_one_out", "loss.clip.dual_clip=3"]), "trl")
    assert loo.settings["delta"] == 3 and any(w.startswith("advantage.baseline:") for w in loo.warnings)


def test_cli_writes_yaml_and_strict_exits_2(cli, tmp_path):
    out = tmp_path / "dapo.trl.yaml"
    res = cli("export", "dapo", "--to", "trl", "--out", str(out))
    assert res.code == 0, res.stderr
    assert "warning: dynamic_sampling.enabled:" in res.stderr
    doc = yaml.safe_load(out.read_text())
    trl.GRPOConfig(**doc["grpo_config"])
    assert doc["rlvr_recipe"]["dynamic_sampling"]["enabled"] is True
    strict = cli("export", "dapo", "--to", "trl", "--strict", "--out", str(tmp_path / "x.yaml"))
    assert strict.code == 2 and "--strict" in strict.stderr
    assert not (tmp_path / "x.yaml").exists()
    assert cli("export", "base_sft", "--to", "trl").code == 2
    assert cli("export", "grpo", "--to", "openrlhf").code == 2


def test_python_snippet_is_valid_python(cli, tmp_path):
    out = tmp_path / "grpo_trl.py"
    assert cli("export", "grpo", "--to", "trl", "--out", str(out)).code == 0
    compile(out.read_text(), str(out), "exec")


def test_reward_function_scores_like_rlvr():
    from rlvr_cli.bridges.trl_reward import RlvrReward, train_dataset

    r = load_recipe("dapo", ["rollout.max_new_tokens=20", "overlong.soft_punish.buffer=4"])
    ds = train_dataset(r, 2)
    row = ds[0]
    reward = RlvrReward(r, eos_token_id=2)
    right, wrong = f"#{row['rlvr_reference']}", f"#{int(row['rlvr_reference']) + 1}"
    kw = {k: [row[k]] * 3 for k in ("rlvr_id", "rlvr_reference", "rlvr_meta")}
    # lengths 5 (no penalty), 18 (in the 4-token buffer (16, 20]: (16 - 18)/4 = -0.5), 20 without EOS (truncated)
    out = reward([row["prompt"]] * 3, [right, right, right], completion_ids=[[1] * 4 + [2], [1] * 17 + [2], [1] * 20], **kw)
    assert out == pytest.approx([1.0, 0.5, -1.0])
    assert reward([row["prompt"]], [wrong], completion_ids=[[1, 2]], **{k: v[:1] for k, v in kw.items()}) == [0.0]
    reward.close()


@pytest.fixture(scope="module")
def trl_run(tmp_path_factory):
    """A real 2-step TRL run of an exported recipe (builtin:tiny, rlvr's reward), kept for the import test."""
    from rlvr_cli.bridges.trl_reward import trainer_inputs

    out = tmp_path_factory.mktemp("trl") / "grpo-trl"
    r = load_recipe(
        "grpo",
        ["steps=2", "device=cpu", "rollout.prompts_per_step=2", "rollout.group_size=4", "rollout.max_new_tokens=24",
         "optim.micro_batches=1", "checkpoint.every=0", "name=grpo-trl"],
    )
    exp = export_recipe(r, "trl")
    settings = dict(exp.settings, output_dir=str(out))
    out.mkdir(parents=True)
    (out / "rlvr_export.yaml").write_text(render(exp, r, "grpo"))  # what labels the run in `rlvr compare`
    trainer = trl.GRPOTrainer(args=trl.GRPOConfig(**settings), **trainer_inputs(r))
    trainer.train()
    trainer.save_state()  # trainer_state.json (log_history) in output_dir
    trainer.reward_funcs[0].close()
    return out, trainer


def test_grpo_trainer_runs_two_steps(trl_run):
    out, trainer = trl_run
    assert trainer.state.global_step == 2 * 2  # 2 rlvr steps x 2 minibatches
    logged = [h for h in trainer.state.log_history if "rewards/rlvr/mean" in h]
    assert len(logged) == 2  # one log row per rlvr step
    assert all(0.0 <= h["rlvr/accuracy"] <= 1.0 for h in logged)
    assert (out / "trainer_state.json").is_file()


def test_trl_run_reads_into_compare(trl_run, tmp_path, cli):
    from rlvr_cli.compare.foreign import load_trl

    out, trainer = trl_run
    run = load_trl(out)
    assert list(run.metrics.index) == [1, 2]  # TRL's updates 2 and 4 are rlvr steps 1 and 2
    assert run.recipe["framework"] == "trl" and run.recipe["rollout"]["group_size"] == 4
    logged = [h for h in trainer.state.log_history if "reward" in h]
    assert run.metrics["reward_mean"].tolist() == pytest.approx([h["reward"] for h in logged])
    assert run.metrics["len_mean"].tolist() == pytest.approx([h["completions/mean_length"] for h in logged])
    for name in ("accuracy", "entropy", "truncated_frac", "clip_low_frac"):
        assert name in run.metrics.columns
    assert "completions/max_length" in run.metrics.columns  # unknown names are kept as they are

    broken = tmp_path / "broken-trl"
    broken.mkdir()
    (broken / "trainer_state.json").write_text("{not json")
    res = cli("compare", str(out), str(broken), "--out", str(tmp_path / "cmp"))
    assert res.code == 0, res.stderr
    summary = json.loads((tmp_path / "cmp" / "summary.json").read_text())
    assert len(summary["runs"]) == 1
    assert any("broken-trl" in s["path"] and "trainer_state.json" in s["reason"] for s in summary["skipped"])


REMEDY_RECIPES = [n for n in RL_PRESETS if n.startswith(("experiments/remedies/", "experiments/mismatch/"))]


def test_remedy_recipes_are_all_covered():
    assert len([n for n in REMEDY_RECIPES if "remedies/" in n]) == 9 and len([n for n in REMEDY_RECIPES if "mismatch/" in n]) == 7


@pytest.mark.parametrize("preset", REMEDY_RECIPES)
def test_remedy_recipes_map_to_grpo_config(preset):
    """Every 2025-remedy field is carried by its TRL name or named in a warning."""
    r = load_recipe(preset)
    exp = export_recipe(r, "trl")
    cfg = trl.GRPOConfig(**exp.settings)
    fields = {w.split(":", 1)[0] for w in exp.warnings}
    assert cfg.top_entropy_quantile == (r.loss.top_entropy_quantile or 1.0)
    assert ("loss.cov_penalty" in fields) == (r.loss.cov_penalty is not None)
    assert ("advantage.passk" in fields) == (r.advantage.passk is not None)
    assert cfg.use_vllm == ("rollout.sample_autocast" in fields) == (r.rollout.sample_autocast != "none")
    ic = r.rollout.is_correction
    assert cfg.vllm_importance_sampling_correction == (ic.mode != "none")
    if ic.mode != "none":
        assert cfg.vllm_importance_sampling_mode == ic.mode
        assert cfg.vllm_importance_sampling_clip_max == ic.cap and cfg.vllm_importance_sampling_clip_min == ic.cap_low


def test_remedy_values_by_hand():
    te = export_recipe(load_recipe("experiments/remedies/top_entropy"), "trl")
    assert te.settings["top_entropy_quantile"] == 0.2
    # 64 responses per minibatch in 4 micro batches of 16: TRL's quantile is per micro batch
    assert any(w.startswith("loss.top_entropy_quantile:") and "(16 completions" in w for w in te.warnings)
    one = export_recipe(load_recipe("experiments/remedies/top_entropy", ["optim.micro_batches=1"]), "trl")
    assert not any(w.startswith("loss.top_entropy_quantile") for w in one.warnings)
    assert export_recipe(load_recipe("grpo"), "trl").settings["top_entropy_quantile"] == 1.0
    tight = export_recipe(load_recipe("experiments/mismatch/sequence_mask_tight"), "trl").settings
    assert (tight["use_vllm"], tight["vllm_importance_sampling_mode"], tight["vllm_importance_sampling_clip_max"]) == (True, "sequence_mask", 1.05)
    low = export_recipe(load_recipe("experiments/mismatch/token_truncate", ["rollout.is_correction.cap_low=0.5"]), "trl").settings
    assert (low["vllm_importance_sampling_mode"], low["vllm_importance_sampling_clip_min"]) == ("token_truncate", 0.5)
    # TRL's default is correction on (sequence_mask, cap 3): mode none must switch it off
    assert export_recipe(load_recipe("experiments/mismatch/none"), "trl").settings["vllm_importance_sampling_correction"] is False
    kl_cov = export_recipe(load_recipe("experiments/remedies/kl_cov"), "trl")
    assert any(w.startswith("loss.cov_penalty:") and "kl_cov" in w for w in kl_cov.warnings)
    pk = export_recipe(load_recipe("experiments/remedies/pkpo_k4"), "trl")
    assert any(w.startswith("advantage.passk:") and "k = 4" in w for w in pk.warnings)
    pk1 = export_recipe(load_recipe("experiments/remedies/pkpo_k4", ["advantage.passk.k=1"]), "trl")
    assert not any(w.startswith("advantage.passk") for w in pk1.warnings)  # PKPO at k = 1 is the plain reward


def test_top_entropy_quantile_selects_the_same_tokens_as_rlvr():
    """TRL's own GRPOTrainer.get_high_entropy_mask, fed the exported quantile, keeps rlvr's tokens."""
    from types import SimpleNamespace

    import torch

    from rlvr_cli.algo.entropy_remedies import top_entropy_mask

    q = export_recipe(load_recipe("experiments/remedies/top_entropy"), "trl").settings["top_entropy_quantile"]
    gen = torch.Generator().manual_seed(0)
    entropy = torch.randperm(24, generator=gen).reshape(3, 8).float() / 4  # distinct, exact in float32
    mask = torch.ones(3, 8)
    mask[2, 5:] = 0
    acc = SimpleNamespace(pad_across_processes=lambda t, dim, pad_index: t, gather=lambda t: t)  # one process
    theirs = trl.GRPOTrainer.get_high_entropy_mask(SimpleNamespace(accelerator=acc), entropy, mask, 1 - q)
    ours = top_entropy_mask(entropy, mask, q)
    assert torch.equal(theirs, ours) and 0 < int(ours.sum()) < int(mask.sum())


def test_strict_exits_2_on_a_remedy(cli):
    res = cli("export", "experiments/remedies/clip_cov", "--to", "trl", "--strict")
    assert res.code == 2 and "loss.cov_penalty" in res.stderr
