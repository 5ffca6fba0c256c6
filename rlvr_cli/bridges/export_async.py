"""rollout.staleness, the off_policy corrections and truncated sampling in TRL's and verl's terms (issue 41).

Neither exporter's target trains at a fixed lag: TRL's ``GRPOTrainer`` and verl's ``RayPPOTrainer`` sample
on-policy; their asynchronous trainers (TRL 1.18's ``AsyncGRPOTrainer`` with ``AsyncGRPOConfig.max_staleness``,
verl's ``one_step_off_policy`` and ``fully_async_policy`` recipes) bound the lag by how far the sampler may run
ahead, so the lag of each batch depends on timing (rlvr's ``mode: bounded``). The staleness is therefore
named in a warning, not exported. Decoupled PPO is exported where it exists: rlvr's recompute +
``is_correction`` is verl's decoupled ``rollout_correction`` and TRL's ``vllm_importance_sampling_*``
(both: the recomputed log-probs over the rollout engine's), mapped by the exporters' own is_correction code.
"""

from __future__ import annotations

from rlvr_cli.bridges.base import Warnings


def _shared(r, w: Warnings, target: str) -> None:
    op, ro = r.off_policy, r.rollout
    if op.m2po is not None:
        w.add("off_policy.m2po", f"{target} has no M2PO second-moment mask (AReaL: actor.m2_threshold); not exported")
    if op.behaviour_kl is not None:
        w.add("off_policy.behaviour_kl", f"{target} has no KL to the behaviour (rollout) policy in the loss (prime-rl: "
              "kl_tau); not exported")
    if ro.top_p < 1.0 or ro.top_k:
        w.add("rollout.top_p" if ro.top_p < 1.0 else "rollout.top_k",
              f"{target}'s trainer computes log-probs over the whole vocabulary; rlvr renormalises every log-prob over "
              "each token's sampling support, so the ratio to the sampler's log-probs differs there by log(kept mass) "
              "(TRL#6789)")


def trl_async(r, w: Warnings) -> dict:
    """GRPOConfig keys for the staleness knob and its corrections (none: warnings only)."""
    st = r.rollout.staleness
    if st.max:
        w.add("rollout.staleness", f"TRL's GRPOTrainer samples on-policy; its AsyncGRPOTrainer (TRL >= 1.18, a vLLM "
              f"server) takes AsyncGRPOConfig(max_staleness={st.max}), a bound on a lag that depends on timing, not "
              "rlvr's fixed lag; not exported")
    _shared(r, w, "TRL")
    return {}


def verl_async(r, w: Warnings) -> dict:
    """Hydra overrides for the staleness knob and its corrections (none: warnings only)."""
    st = r.rollout.staleness
    if st.max:
        w.add("rollout.staleness", f"verl's PPO trainer samples on-policy; its recipes one_step_off_policy (a lag of 1) "
              "and fully_async_policy (async_training.staleness_threshold, a share of stale samples, not a lag in "
              f"steps) are separate entry points; lag {st.max} not exported")
    _shared(r, w, "verl")
    return {}
