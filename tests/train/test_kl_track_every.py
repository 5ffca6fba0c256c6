"""`kl.track_every`: when KL is only logged, the reference forward runs on step 1, every N steps and
at eval steps; when KL is in the objective it runs every step."""

from __future__ import annotations

from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.train.rl import train_rl
from rlvr_cli.train.run_writer import RunDir

from conftest import tiny_run  # tests/conftest.py: the shared tiny-run overrides

SMALL = tiny_run("steps=4", "rollout.max_new_tokens=16", "kl.track_every=3")


def _kl(name: str, tiny_base, out) -> list:
    r = load_recipe(name, [f"model.name={tiny_base}", *SMALL])
    return [row["kl_mean"] for row in RunDir(train_rl(r, out)).read_metrics()]


def test_tracked_kl_is_measured_at_its_cadence_and_in_the_objective_always(tiny_base, tmp_path):
    tracked = _kl("dr_grpo", tiny_base, tmp_path / "tracked")  # no KL term: step 1, step 3, the last (eval) step
    assert [k is not None for k in tracked] == [True, False, True, True]
    in_loss = _kl("grpo", tiny_base, tmp_path / "loss")  # k3 KL in the loss needs the reference every step
    assert all(k is not None for k in in_loss)


def test_kl_in_loss_and_in_reward_need_a_positive_beta():
    kl = lambda *sets: load_recipe("grpo", list(sets)).kl  # noqa: E731
    assert (kl("kl.beta=0.1").in_loss, kl("kl.beta=0.1").in_reward) == (True, False)
    assert (kl("kl.placement=reward", "kl.beta=0.1").in_loss, kl("kl.placement=reward", "kl.beta=0.1").in_reward) == (False, True)
    assert not kl("kl.beta=0").in_loss and not kl("kl.placement=reward", "kl.beta=0").in_reward
    assert not kl("kl.placement=none").in_loss and not kl("kl.placement=none").in_reward
    assert "in_loss" not in load_recipe("grpo", []).model_dump()["kl"]  # derived, never saved in recipe.yaml
