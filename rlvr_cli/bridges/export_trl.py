"""A recipe as the keyword arguments of TRL's ``GRPOConfig`` (names and behaviour of TRL 1.16.0).

How rlvr's batch maps onto TRL's: an rlvr step samples P prompts x G responses once and makes
mu * M optimiser updates on it (M minibatches, each accumulated over ``micro_batches`` chunks). TRL
generates ``generation_batch_size = per_device_train_batch_size * steps_per_generation`` completions
at once, makes one optimiser update every ``gradient_accumulation_steps`` micro-steps and reuses the
batch ``num_iterations`` times. So ``per_device_train_batch_size = P*G / (M * micro)``,
``gradient_accumulation_steps = micro``, ``steps_per_generation = M * micro``, ``num_iterations = mu``,
and TRL's ``max_steps`` (optimiser updates) is ``steps * M * mu``.

The reward is not part of the config: :mod:`rlvr_cli.bridges.trl_reward` builds the dataset and the
reward function (the recipe's terms, its verifiers, DAPO's soft overlong punishment) for the trainer.
"""

from __future__ import annotations

from rlvr_cli.bridges.base import Export, Warnings
from rlvr_cli.bridges.export_async import trl_async
from rlvr_cli.bridges.export_tools import environment_trl

TRL_STD_EPS = 1e-4
"""TRL adds 1e-4 to the std before dividing (grpo_trainer.py, fixed)."""

LOSS_TYPES = {"seq_mean_token_mean": "grpo", "token_mean": "dapo", "seq_mean_token_sum_norm": "dr_grpo"}
SCALE_REWARDS = {"group_std": "group", "batch_std": "batch", "none": "none", "mean": "none"}


def _batch_layout(r, w: Warnings) -> dict:
    p, g = r.rollout.prompts_per_step, r.rollout.group_size
    m, micro = r.optim.minibatches, r.optim.micro_batches
    total = p * g
    if total % (m * micro) != 0:
        if total % m == 0:
            w.add("optim.micro_batches", f"{total} responses do not split into {m}x{micro} chunks; exported without accumulation (same gradient, more memory)")
            micro = 1
        else:
            w.add("optim.minibatches", f"{total} responses do not split into {m} equal minibatches; TRL needs equal ones, exported one minibatch of {total}")
            m, micro = 1, 1
    return {
        "per_device_train_batch_size": total // (m * micro),
        "gradient_accumulation_steps": micro,
        "steps_per_generation": m * micro,
        "num_generations": g,
        "num_iterations": r.optim.mu,
        "max_steps": r.steps * m * r.optim.mu,
        "_updates_per_step": m * r.optim.mu,
        "_minibatches": m,
    }


def _schedule(r, w: Warnings) -> dict:
    o = r.optim
    out: dict = {"learning_rate": o.lr, "warmup_steps": o.warmup_steps}
    if o.schedule == "constant":
        out["lr_scheduler_type"] = "constant_with_warmup" if o.warmup_steps else "constant"
    elif o.schedule == "cosine" and o.min_lr_ratio > 0:
        out["lr_scheduler_type"] = "cosine_with_min_lr"
        out["lr_scheduler_kwargs"] = {"min_lr_rate": o.min_lr_ratio}
    else:
        out["lr_scheduler_type"] = o.schedule
        if o.min_lr_ratio > 0:
            w.add("optim.min_lr_ratio", f"TRL's `linear` schedule decays to 0, not to {o.min_lr_ratio} * lr")
    if o.warmup_steps:
        w.add("optim.warmup_steps", "transformers' warm-up gives update t the factor t/W (0 at the first update); rlvr gives (t+1)/W")
    return out


def _objective(r, w: Warnings) -> dict:
    a, lo, kl = r.advantage, r.loss, r.kl
    out = {
        "scale_rewards": SCALE_REWARDS[a.scale],
        "loss_type": LOSS_TYPES[lo.aggregation],
        "importance_sampling_level": lo.ratio,
        "epsilon": lo.clip.eps_low,
        "epsilon_high": lo.clip.eps_high,
        "delta": lo.clip.dual_clip,
        "mask_truncated_completions": r.overlong.mask_truncated,
        "beta": kl.beta if kl.in_loss else 0.0,
    }
    if r.reward.combination == "decoupled":
        out["multi_objective_aggregation"] = "normalize_then_sum"
        w.add("reward.combination", "TRL normalises each reward *function* (GDPO): pass one function per reward term with "
              "reward_weights; rlvr's trl_reward.RlvrReward returns the weighted sum, one function. TRL's per-term eps is 1e-4")
    if lo.entropy_coef:
        out["entropy_coef"] = lo.entropy_coef  # a GRPOConfig field since TRL 1.x; left out at 0 for older TRL
    out.update(_policy_objective(r, w))
    out.update(_entropy_control(r))
    if a.scale == "mean":
        w.add("advantage.scale", "TRL has no MaxRL (divide by the group's success rate); exported scale_rewards none")
    if a.baseline != "group_mean":
        w.add("advantage.baseline", f"TRL's GRPO always subtracts the group mean; `{a.baseline}` is not available (leave-one-out is G/(G-1) times the group-mean advantage)")
    if a.scale in ("group_std", "batch_std") and a.eps != TRL_STD_EPS:
        w.add("advantage.eps", f"TRL adds {TRL_STD_EPS:g} to the std (fixed), rlvr {a.eps:g}")
    if lo.aggregation == "seq_mean_token_sum_norm" and lo.length_constant != r.rollout.max_new_tokens:
        w.add("loss.length_constant", f"TRL's dr_grpo divides by max_completion_length ({r.rollout.max_new_tokens}), not {lo.length_constant}")
    if lo.aggregation == "token_mean" and r.optim.minibatches > 1:
        w.add("loss.aggregation", "TRL's dapo divides each update by the generation batch's average tokens per update; rlvr by the minibatch's own token count")
    if lo.clip.dual_clip is not None and lo.clip.dual_clip < 1 + lo.clip.eps_high:
        w.add("loss.clip.dual_clip", f"TRL's delta caps the ratio for every token; below 1 + eps_high ({1 + lo.clip.eps_high:g}) it also cuts positive-advantage tokens, rlvr's cap acts on A < 0 only")
    if lo.entropy_coef and lo.aggregation != "token_mean":
        w.add("loss.entropy_coef", "TRL's entropy bonus is always the token mean; rlvr aggregates it like the policy loss")
    if kl.in_loss and kl.estimator != "k3":
        w.add("kl.estimator", f"TRL's KL term is always k3; `{kl.estimator}` is not available")
    if kl.in_reward:
        w.add("kl.placement", f"TRL has no KL in the reward; exported beta 0 (no KL at all) instead of r - {kl.beta:g} * sum k1")
    if kl.track and out["beta"] == 0:
        w.add("kl.track", "TRL measures KL only when beta > 0; the logs will have no KL")
    return out


def _policy_objective(r, w: Warnings) -> dict:
    """loss.objective through its registry entry's TRL mapping (rlvr_cli/recipe/objectives.py); an objective
    TRL has no loss for is warned and exported as the PPO-clip loss."""
    lo = r.loss
    settings = lo.objective.to_trl(lo, w.add)
    if settings is None:
        w.add("loss.objective", f"TRL has no `{lo.objective.type}` loss; exported the PPO-clip loss ({LOSS_TYPES[lo.aggregation]})")
        return {}
    return settings


def _entropy_control(r) -> dict:
    """loss.entropy_control as TRL's adaptive entropy (the same rule: arXiv 2505.22312)."""
    ec = r.loss.entropy_control
    if ec is None:
        return {}
    return {"use_adaptive_entropy": True, "entropy_coef": r.loss.entropy_coef, "entropy_target": ec.target,
            "entropy_coef_delta": ec.delta, "entropy_coef_min": ec.coef_min, "entropy_coef_max": ec.coef_max}


def _remedies(r, w: Warnings, layout: dict, notes: list[str]) -> dict:
    """The 2025 remedies (docs/remedies.md): top-entropy mask, Clip-Cov / KL-Cov, pass@k, mismatch correction."""
    lo, ro = r.loss, r.rollout
    q = lo.top_entropy_quantile
    out: dict = {"top_entropy_quantile": 1.0 if q is None else q}
    if q is not None and layout["gradient_accumulation_steps"] > 1:
        w.add("loss.top_entropy_quantile", f"TRL takes the entropy quantile per forward micro batch ({layout['per_device_train_batch_size']} completions, gathered over processes), rlvr over the minibatch ({layout['per_device_train_batch_size'] * layout['gradient_accumulation_steps']})")
    if q is not None and lo.entropy_coef:
        w.add("loss.top_entropy_quantile", "TRL's entropy bonus then acts on the kept high-entropy tokens only; rlvr's on every token")
    if lo.cov_penalty is not None:
        w.add("loss.cov_penalty", f"TRL has no Clip-Cov / KL-Cov; `{lo.cov_penalty.type}` is not exported (the PPO-clip loss alone)")
    pk = r.advantage.passk
    if pk is not None and not (pk.method == "pkpo" and pk.k == 1):  # PKPO at k = 1 is the plain reward
        w.add("advantage.passk", f"TRL has no pass@k objective; `{pk.method}` k = {pk.k} is not exported (the pass@1 GRPO advantage)")
    # TRL samples with a differing numerics only through vLLM, and corrects only there (use_vllm=True)
    if ro.sample_autocast != "none":
        out["use_vllm"] = True
        w.add("rollout.sample_autocast", f"TRL has no autocast sampling; exported use_vllm=True: vLLM samples in the checkpoint's dtype with its own kernels, not the trainer's weights under {ro.sample_autocast} autocast")
    ic = ro.is_correction
    out["vllm_importance_sampling_correction"] = ic.mode != "none"  # TRL's default is True (sequence_mask, cap 3)
    if ic.mode != "none":
        # same modes, same ratio pi_trainer / pi_sampler (sequence: exp of the summed log-differences),
        # truncate clamps to [cap_low, cap], mask zeroes outside it and keeps the token in the denominator
        out["vllm_importance_sampling_mode"] = ic.mode
        out["vllm_importance_sampling_clip_max"] = ic.cap
        out["vllm_importance_sampling_clip_min"] = ic.cap_low
        if "use_vllm" not in out:
            notes.append("rollout.is_correction: TRL corrects only with use_vllm=True; without vLLM it samples with the trained model itself, so there is no mismatch to correct (as rlvr without sample_autocast)")
    if "use_vllm" in out:
        notes.append("use_vllm=True: needs vllm installed and a GPU (vllm_mode colocate or server)")
    return out


def _reference(r, w: Warnings, layout: dict) -> dict:
    kl = r.kl
    if r.model.reference not in (None, r.model.name):
        w.add("model.reference", "TRL's reference model is always the initial policy")
    if not kl.ref_reset_every:
        return {}
    w.add("kl.ref_reset_every", "TRL's sync_ref_model copies the policy into the reference (alpha 1) but keeps the optimiser state; rlvr also resets it")
    return {
        "sync_ref_model": True,
        "ref_model_mixup_alpha": 1.0,
        "ref_model_sync_steps": kl.ref_reset_every * layout["_updates_per_step"],
    }


def _rest(r, w: Warnings) -> list[str]:
    notes = []
    if r.dynamic_sampling.enabled:
        w.add("dynamic_sampling.enabled", "TRL has no dynamic sampling: all-correct and all-wrong groups stay in the batch with zero advantage")
    for kind, text in dict.fromkeys((t.type, t.trl_export) for t in r.reward.terms if t.trl_export):  # the registry's
        w.add(f"reward.terms.{kind}", text)
    if r.rollout.old_logprobs == "sampler":
        w.add("rollout.old_logprobs", "TRL recomputes the behaviour log-probs with a forward pass (its sampler's are not used)")
    for knob in ("brevity_bonus", "group_length_penalty", "incorrect_offset") if r.reward.length_control else ():
        if getattr(r.reward.length_control, knob) is not None:
            w.add(f"reward.length_control.{knob}", "not exported: TRL has no such reward shaping and rlvr's trl_reward does not add it")
    if r.overlong.soft_punish is not None:
        notes.append("overlong.soft_punish: TRL has none; rlvr's reward function (trl_reward.RlvrReward) adds it, so use that reward")
    notes += [note for t in r.reward.terms if (note := t.trl_note())]
    lora = r.model.lora
    if lora is not None:  # a GRPOTrainer argument, not a GRPOConfig one
        notes.append(f"model.lora: GRPOTrainer(peft_config=peft.LoraConfig(r={lora.rank}, lora_alpha={lora.alpha:g}, "
                     f"lora_dropout={lora.dropout:g}, target_modules={lora.target_modules!r}, task_type='CAUSAL_LM')); "
                     "trl_reward.trainer_inputs passes it")
    notes.append("eval.*: TRL does not compute pass@k; run `rlvr eval` on TRL's checkpoints (output_dir/checkpoint-N)")
    notes.append("reward and dataset: GRPOTrainer(args=GRPOConfig(**grpo_config), **rlvr_cli.bridges.trl_reward.trainer_inputs(rlvr_recipe))")
    return notes


def _precision(r, notes: list[str]) -> dict:
    """Trainer's bf16/fp16 flags are mixed precision (autocast over the loaded weights): rlvr's model.autocast,
    or a model.dtype the weights are loaded in."""
    dtype, amp = r.model.dtype, r.model.autocast
    if dtype == "auto" and amp == "auto":
        notes.append("model.dtype auto: exported bf16=False (float32, rlvr's choice on CPU); on a GPU set bf16=True (rlvr's auto there: float32 weights, bf16 autocast)")
    return {"bf16": "bfloat16" in (dtype, amp), "fp16": "float16" in (dtype, amp), "use_cpu": r.device == "cpu"}


def export_trl(r) -> Export:
    """``GRPOConfig`` keyword arguments for an RL recipe, with the warnings."""
    w = Warnings()
    notes: list[str] = []
    layout = _batch_layout(r, w)
    o = r.optim
    settings = {
        "output_dir": f"{r.output_dir}/{r.name or 'rlvr'}-trl",
        "seed": r.seed,
        **{k: v for k, v in layout.items() if not k.startswith("_")},
        "max_completion_length": r.rollout.max_new_tokens,
        "temperature": r.rollout.temperature,
        "top_p": r.rollout.top_p,
        "top_k": r.rollout.top_k,
        **_objective(r, w),
        **_schedule(r, w),
        "weight_decay": o.weight_decay,
        "adam_beta1": o.betas[0],
        "adam_beta2": o.betas[1],
        "adam_epsilon": o.adam_eps,
        "max_grad_norm": o.grad_clip if o.grad_clip is not None else 0.0,
        **_remedies(r, w, layout, notes),
        **_reference(r, w, layout),
        **trl_async(r, w),
        **_precision(r, notes),
        "gradient_checkpointing": False,
        "logging_steps": layout["_updates_per_step"],
        "save_strategy": "steps" if r.checkpoint.every else "no",
        "save_steps": max(1, r.checkpoint.every) * layout["_updates_per_step"],
        "report_to": "none",
    }
    if r.checkpoint.keep_last:
        settings["save_total_limit"] = r.checkpoint.keep_last
    notes += _rest(r, w)
    settings.update(environment_trl(r, w, notes))
    return Export("trl", settings, list(w), notes)
