"""rollout.staleness (issue 41): staleness 0 is the synchronous trainer to the bit, a lag of k samples
step t with the policy of version t-1-k (and says so in policy_lag), and resume / kill keep that with
stale batches in flight (the pending versions are checkpointed). docs/async.md."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from rlvr_cli.errors import UserError
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.rollouts import sources
from rlvr_cli.train.parallel import check_settings
from rlvr_cli.train.rollouts.policy_versions import trainable_tensors, weights_swapped
from rlvr_cli.train.rl import train_rl
from rlvr_cli.train.run_writer import RunDir

from conftest import interrupted_at_step, tiny_run, write_word_llama  # tests/conftest.py

TIMING = {"step_time_s", "time_sample_s", "time_verify_s", "time_ref_s", "time_update_s", "tokens_per_s"}
SMALL = tiny_run("rollout.prompts_per_step=3", "rollout.group_size=4", "rollout.max_new_tokens=16", "steps=4")
ROLLOUT_KEYS = ("reward_mean", "accuracy", "len_mean", "truncated_frac", "outcomes", "gen_tokens")


def recipe(tiny_base, *sets):
    return load_recipe("grpo", [f"model.name={tiny_base}", *SMALL, *sets])


def lines(run) -> list[str]:
    """metrics.jsonl as written, each line without the wall-clock fields (which differ between any two runs)."""
    return [json.dumps({k: v for k, v in json.loads(line).items() if k not in TIMING})
            for line in (run / "metrics.jsonl").read_text().splitlines()]


def evals(run) -> dict:
    return {f.name: {k: v for k, v in json.loads(f.read_text()).items() if k not in TIMING | {"sample_s"}}
            for f in sorted((run / "eval").glob("step_*.json"))}


def test_staleness_zero_is_the_synchronous_trainer_to_the_bit(tiny_base, tmp_path):
    train_rl(recipe(tiny_base), tmp_path / "sync")
    train_rl(recipe(tiny_base, "rollout.staleness.max=0"), tmp_path / "zero")
    assert lines(tmp_path / "zero") == lines(tmp_path / "sync")
    assert [json.loads(x)["policy_lag"] for x in lines(tmp_path / "sync")] == [0, 0, 0, 0]


def test_a_lag_of_k_samples_step_t_with_version_t_minus_1_minus_k(tiny_base, tmp_path, monkeypatch):
    seen, versions = {}, {}
    real_collect, real_updated = sources.collect_rollouts, sources.LaggedSource.policy_updated

    def collect(session, task, scorer, step):  # the weights each step's batch is sampled with
        seen[step] = {k: v.clone() for k, v in trainable_tensors(session.model).items()}
        return real_collect(session, task, scorer, step)

    def updated(self, step):
        versions[step] = trainable_tensors(self.session.model)
        return real_updated(self, step)

    monkeypatch.setattr(sources, "collect_rollouts", collect)
    monkeypatch.setattr(sources.LaggedSource, "policy_updated", updated)
    train_rl(recipe(tiny_base, "rollout.staleness.max=2", "steps=5"), tmp_path / "k2")
    versions[0] = seen[1]  # step 1 samples with the initial weights (version 0)
    for t in range(1, 6):
        want = versions[max(0, t - 3)]
        assert all(torch.equal(seen[t][k], want[k]) for k in want), t
    assert not all(torch.equal(versions[4][k], versions[2][k]) for k in versions[2])  # the policy did move
    rows = RunDir(tmp_path / "k2").read_metrics()
    assert [r["policy_lag"] for r in rows] == [0, 1, 2, 2, 2]


def test_batches_of_one_version_are_the_same_batches_whatever_the_lag(tiny_base, tmp_path):
    # step 3 at k = 2 and at k = 3 is sampled by version 0: the same prompts and responses; step 4 differs
    # (version 1 against version 0), and step 1 is everybody's on-policy step
    train_rl(recipe(tiny_base, "rollout.staleness.max=2"), tmp_path / "k2")
    train_rl(recipe(tiny_base, "rollout.staleness.max=3"), tmp_path / "k3")
    a, b = RunDir(tmp_path / "k2").read_metrics(), RunDir(tmp_path / "k3").read_metrics()
    assert [{k: a[2][k] for k in ROLLOUT_KEYS}] == [{k: b[2][k] for k in ROLLOUT_KEYS}]
    assert a[1]["policy_lag"] == b[1]["policy_lag"] == 1 and a[3]["policy_lag"] == 2 and b[3]["policy_lag"] == 3


def test_swapping_a_version_in_and_out_leaves_the_weights_bit_for_bit(tiny_base):
    from rlvr_cli.models import load_model

    model, _, _ = load_model(tiny_base, torch.device("cpu"), "float32")
    own = trainable_tensors(model)
    other = {k: v + 1 for k, v in own.items()}
    with weights_swapped(model, other):
        assert all(torch.equal(p, other[k]) for k, p in model.named_parameters())
    assert all(torch.equal(p, own[k]) for k, p in model.named_parameters())


@pytest.mark.parametrize("how", ["ctrl_c", "kill_9"])
def test_resume_with_stale_batches_in_flight_equals_the_uninterrupted_run(tiny_base, tmp_path, monkeypatch, how):
    r = recipe(tiny_base, "rollout.staleness.max=2", "steps=5", "checkpoint.every=2", "eval.every=2")
    train_rl(r, tmp_path / "a")
    if how == "ctrl_c":  # stopped in step 4: the checkpoint of step 2 must hold versions 0 and 1
        restore = interrupted_at_step(monkeypatch, 4)
        with pytest.raises(KeyboardInterrupt):
            train_rl(r, tmp_path / "b")
        restore()
    else:  # killed after step 4's metrics line, before its checkpoint was complete
        shutil.copytree(tmp_path / "a", tmp_path / "b")
        shutil.rmtree(tmp_path / "b" / "checkpoints" / "step_4")
        (tmp_path / "b" / ".lock").unlink(missing_ok=True)
    state = torch.load(tmp_path / "b" / "checkpoints" / "step_2" / "trainer_state.pt", weights_only=True)
    assert sorted(state["rollout_source"]["versions"]) == [0, 1]
    train_rl(r, tmp_path / "b", resume=True)
    assert lines(tmp_path / "b") == lines(tmp_path / "a")
    assert evals(tmp_path / "b") == evals(tmp_path / "a")


def test_a_lora_policy_keeps_only_its_adapter_per_version_and_resumes_exactly(tmp_path, monkeypatch):
    pytest.importorskip("peft")
    root = write_word_llama(tmp_path / "llama")
    r = load_recipe("grpo", [
        f"model.name={root / 'model'}", "task.name=dataset", f"task.path={root / 'data.jsonl'}", "task.question_field=q",
        "task.answer_field=a", "task.verifier=integer", "task.eval_fraction=0.2", 'task.prompt_template="{q}\\n"',
        "rollout.prompts_per_step=4", "rollout.group_size=4", "rollout.max_new_tokens=6", "eval.n=2",
        "eval.num_prompts=4", "eval.every=0", "checkpoint.every=2", "steps=4", "optim.lr=0.05",
        "model.lora.rank=4", "model.lora.alpha=8", "rollout.staleness.max=1"])
    train_rl(r, tmp_path / "a")
    restore = interrupted_at_step(monkeypatch, 4)
    with pytest.raises(KeyboardInterrupt):
        train_rl(r, tmp_path / "b")
    restore()
    state = torch.load(tmp_path / "b" / "checkpoints" / "step_2" / "trainer_state.pt", weights_only=True)
    names = list(state["rollout_source"]["versions"][1])
    assert names and all("lora_" in n for n in names)
    train_rl(r, tmp_path / "b", resume=True)
    assert lines(tmp_path / "b") == lines(tmp_path / "a")


def test_a_checkpoint_without_the_pending_versions_is_a_user_error(tiny_base, tmp_path):
    r = recipe(tiny_base, "steps=3", "checkpoint.every=2", "rollout.staleness.max=2")
    train_rl(r, tmp_path / "a")
    shutil.rmtree(tmp_path / "a" / "checkpoints" / "step_3")
    path = tmp_path / "a" / "checkpoints" / "step_2" / "trainer_state.pt"
    state = torch.load(path, weights_only=True)
    del state["rollout_source"]  # as a checkpoint written without the versions would be
    torch.save(state, path)
    with pytest.raises(UserError, match=r"policy versions \[0, 1\]"):
        train_rl(r, tmp_path / "a", resume=True)


def test_refusals(cli):
    for sets, problem in [
        (["rollout.staleness.mode=bounded", "rollout.staleness.max=2"], "bounded needs overlap"),
        (["rollout.staleness.strategy=drop", "rollout.staleness.max=2"], "drop needs mode bounded"),
        (["rollout.staleness.mode=bounded", "rollout.staleness.overlap=true"], "bounded with max 0"),
    ]:
        res = cli("recipes", "validate", "grpo", *[a for s in sets for a in ("--set", s)])
        assert res.code == 2 and problem in res.stderr, res.stderr
    res = cli("recipes", "validate", "base_sft", "--set", "rollout.staleness.max=1")
    assert res.code == 2 and "samples nothing" in res.stderr
    with pytest.raises(UserError, match="fsdp2"):
        check_settings(load_recipe("grpo", ["rollout.staleness.max=1", "distributed.strategy=fsdp2"]), size=2)


def test_recipes_fields_names_the_knob_and_the_corrections(cli):
    out = cli("recipes", "fields").stdout
    for field in ("rollout.staleness.max", "rollout.staleness.mode", "rollout.staleness.strategy",
                  "rollout.staleness.overlap", "off_policy.m2po", "off_policy.behaviour_kl", "rollout.is_correction"):
        assert field in out, field
    assert "max_staleness" in out and "decoupled PPO" in out


def test_each_correction_acts_on_a_stale_batch(tiny_base, tmp_path):
    """At a lag of 2: decoupled PPO clips against the proximal policy (one on-policy-sized update has ratio 1
    exactly) and weights by pi_prox / pi_behaviour (not 1 once the policy has moved); M2PO masks; the KL to
    the behaviour policy changes the loss; DPPO's mask is measured against the behaviour policy."""
    one_update = ("optim.mu=1", "optim.minibatches=1", "rollout.staleness.max=2", "optim.lr=0.002")

    def run(name, *sets):
        train_rl(recipe(tiny_base, *one_update, *sets), tmp_path / name)
        return RunDir(tmp_path / name).read_metrics()

    plain = run("plain")
    assert max(r["ratio_max"] for r in plain[2:]) > 1.001  # pi_old = the behaviour: stale, so rho != 1
    decoupled = run("decoupled", "rollout.old_logprobs=recompute", "rollout.is_correction.mode=token_mask",
                    "rollout.is_correction.cap=5")
    for r in decoupled:
        assert r["ratio_max"] == 1.0 and r["ratio_min"] == 1.0  # u = pi_theta / pi_prox at the only update
    assert decoupled[0]["mismatch_abs_max"] < 1e-4 and decoupled[3]["mismatch_abs_max"] > 1e-3
    assert decoupled[3]["is_weight_mean"] != pytest.approx(1.0, abs=1e-4)
    m2po = run("m2po", "off_policy.m2po={m2_threshold: 0.0001}")
    assert m2po[0]["m2po_masked_frac"] == 0 and m2po[3]["m2po_masked_frac"] > 0
    assert m2po[3]["m2po_second_moment"] > 0.0001 and plain[0]["m2po_masked_frac"] is None
    kl = run("kl", "off_policy.behaviour_kl={coef: 1.0, estimator: k2}")
    assert kl[3]["loss"] != pytest.approx(plain[3]["loss"], rel=1e-6)
    dppo = run("dppo", "loss.objective={type: dppo_tv, delta_low: 0.001, delta_high: 0.001}")
    # stale tokens whose probability moved by more than delta since the behaviour policy sampled them are masked
    assert dppo[3]["clip_low_frac"] + dppo[3]["clip_high_frac"] > 0 and dppo[0]["clip_low_frac"] == 0


def test_a_run_saved_before_the_staleness_fields_existed_resumes(tiny_base, tmp_path):
    import yaml

    r = recipe(tiny_base, "steps=2", "checkpoint.every=1")
    train_rl(r, tmp_path / "a")
    saved = yaml.safe_load((tmp_path / "a" / "recipe.yaml").read_text())
    del saved["rollout"]["staleness"], saved["off_policy"]  # as the run's older version wrote it
    (tmp_path / "a" / "recipe.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    shutil.rmtree(tmp_path / "a" / "checkpoints" / "step_2")
    train_rl(r, tmp_path / "a", resume=True)  # the new fields at their defaults: the same recipe
    saved["loss"]["clip"]["eps_high"] = 0.3  # any other difference is still named
    (tmp_path / "a" / "recipe.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
    with pytest.raises(UserError, match="eps_high"):
        train_rl(r, tmp_path / "a", resume=True)
