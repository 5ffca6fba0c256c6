"""What a recipe cannot do on N processes, said before anything starts: `rlvr train --nproc N` refuses it
(:func:`rlvr_cli.train.parallel.check_settings`) and `rlvr sweep` refuses a spec whose `nproc` one of its
arms cannot run (:mod:`rlvr_cli.sweep.preflight`), from this one list, without importing torch."""

from __future__ import annotations


def distributed_problem(recipe, size: int) -> str | None:
    """Why ``recipe`` cannot give its one-process numbers on ``size`` processes, or None when it can."""
    if size <= 1:
        return None
    if recipe.algorithm != "rl":
        return f"distributed: {size} processes: only `algorithm: rl` runs distributed; run SFT on one process"
    if recipe.rollout.staleness.overlap:
        return (f"rollout.staleness.overlap: its sampler process serves one trainer process, not {size}; run "
                "it on one process (or set overlap false: the same numbers at a fixed lag, sampled in-process)")
    p = recipe.rollout.prompts_per_step
    if size > p:
        return (f"rollout.prompts_per_step ({p}) is smaller than the {size} processes: a group never straddles "
                "ranks, so every rank needs at least one prompt; use at most that many processes (--nproc)")
    if recipe.rollout.staleness.max and recipe.distributed.strategy == "fsdp2":  # issue 41
        return (f"rollout.staleness.max with distributed.strategy fsdp2 on {size} processes: the older policy "
                "versions would be kept and checkpointed shard by shard; use strategy ddp")
    lo = recipe.loss
    for field, value in (("loss.top_entropy_quantile", lo.top_entropy_quantile), ("loss.cov_penalty", lo.cov_penalty)):
        if value is not None:  # their token choice needs the whole minibatch's quantile / covariance on one rank
            return (f"{field}: chooses tokens from statistics of the whole minibatch, which {size} processes "
                    "do not gather yet; run it on one process")
    return None
