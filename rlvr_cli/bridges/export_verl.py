"""A recipe as Hydra overrides of verl's PPO trainer (names and behaviour of verl 0.9.1).

Keys are dotted paths into ``verl/trainer/config/ppo_trainer.yaml``; a key that starts with ``+`` is
not in verl's schema and is added (Hydra's syntax), as verl's DAPO example does for
``reward.reward_kwargs``. verl counts ``data.train_batch_size`` and ``ppo_mini_batch_size`` in
prompts (each with ``rollout.n`` responses); ``ppo_epochs`` is rlvr's mu.

Values are written in Hydra's override grammar so that verl reads back exactly the string rlvr meant
(:func:`format_value`): a string that is not a plain word is single-quoted (a comma is then not a
sweep, ``=`` and spaces are literal), quotes and the backslashes before them are escaped, and ``${`` is
escaped for OmegaConf (a name or path containing ``${oc.env:...}`` stays text instead of being
resolved by verl). A line break or NUL cannot be written in an override line at all: such a character
is replaced by a space with a warning (so ``--strict`` refuses the export).
"""

from __future__ import annotations

import re

from rlvr_cli.bridges.base import Export, Warnings
from rlvr_cli.bridges.export_async import verl_async
from rlvr_cli.bridges.export_tools import environment_verl
from rlvr_cli.recipe.reward_terms import VerifierTerm

VERL_STD_EPS = 1e-6
"""verl's compute_grpo_outcome_advantage default epsilon (not exposed in the config)."""
VERL_DUAL_CLIP_DEFAULT = 3.0
NO_DUAL_CLIP = 1.0e9
"""clip_ratio_c that never binds in practice: verl has no switch to turn dual-clip off."""
RS_NO_BOUND = float("inf")
"""The rejection-sampling upper ratio bound for "no lower cap": verl parses the threshold with float()
and compares log(bound) = inf, so it never binds. (A finite 1e9 did bind for seq_sum_k1: verl clamps
each token's log-ratio to +-20, but a sum over many tokens passes log(1e9) = 20.7, so a sequence whose
pi_old / pi_rollout fell below 1e-9 was rejected where rlvr keeps it.)"""
VERL_LOG_RATIO_BOUND = 20.0
"""verl's SAFETY_BOUND (trainer/ppo/rollout_corr_helper.py): each token's log(pi_old / pi_rollout) is
clamped to +-20 before the rejection statistics are computed (and summed, for seq_sum_k1)."""

AGG_MODES = {
    "seq_mean_token_mean": "seq-mean-token-mean",
    "token_mean": "token-mean",
    "seq_mean_token_sum_norm": "seq-mean-token-sum-norm",
}
KL_LOSS_TYPES = {"k1": "k1", "k2": "k2", "k3": "low_var_kl"}

ACTOR = "actor_rollout_ref.actor"
ROLLOUT = "actor_rollout_ref.rollout"


def _advantage(r, w: Warnings) -> dict:
    a = r.advantage
    out = {"algorithm.adv_estimator": "grpo", "algorithm.norm_adv_by_std_in_grpo": a.scale == "group_std"}
    if a.baseline == "leave_one_out":
        out["algorithm.adv_estimator"] = "rloo"
        if a.scale != "none":
            w.add("advantage.scale", "verl's rloo never divides by a std")
    elif a.baseline == "none":
        w.add("advantage.baseline", "verl's grpo always subtracts the group mean; `none` is not available")
    if a.scale == "batch_std":
        out["algorithm.adv_estimator"] = "reinforce_plus_plus_baseline"
        w.add("advantage.scale", "verl has no batch-std GRPO; reinforce_plus_plus_baseline whitens the group-mean advantages over the batch's tokens (it also subtracts their mean)")
    if a.scale == "mean":
        w.add("advantage.scale", "verl has no MaxRL advantage (the authors' fork github.com/tajwarfahim/maxrl adds adv_estimator=maxrl); exported grpo without the std")
    if a.scale == "group_std" and a.eps != VERL_STD_EPS:
        w.add("advantage.eps", f"verl adds {VERL_STD_EPS:g} to the std (not configurable), rlvr {a.eps:g}")
    if r.reward.combination == "decoupled":
        out["algorithm.adv_estimator"] = "gdpo"
        w.add("reward.combination", "verl's gdpo reads each term from the reward manager's extra info "
              "(algorithm.gdpo_reward_keys / gdpo_reward_weights), which rlvr's verl_reward does not emit; and its batch "
              "step whitens over tokens (a long response weighs more), rlvr's over sequences")
    return out


def _policy_loss(r, w: Warnings) -> dict:
    lo = r.loss
    out = {
        f"{ACTOR}.policy_loss.loss_mode": "gspo" if lo.ratio == "sequence" else "vanilla",
        f"{ACTOR}.loss_agg_mode": AGG_MODES[lo.aggregation],
        f"{ACTOR}.clip_ratio": lo.clip.eps_low,
        f"{ACTOR}.clip_ratio_low": lo.clip.eps_low,
        f"{ACTOR}.clip_ratio_high": lo.clip.eps_high,
        f"{ACTOR}.entropy_coeff": lo.entropy_coef,
    }
    if lo.aggregation == "seq_mean_token_sum_norm":
        # verl's default divisor is the padded width of the micro batch; rlvr's L is a constant
        out[f"{ACTOR}.loss_scale_factor"] = lo.length_constant
    if r.loss.entropy_control is not None:
        w.add("loss.entropy_control", f"verl has no adaptive entropy coefficient; exported entropy_coeff = c_0 = {lo.entropy_coef:g} (fixed)")
    own = _objective(r, w)
    if own:
        return {**out, **own}
    cov = lo.cov_penalty
    if cov is not None and lo.ratio == "sequence":
        w.add("loss.cov_penalty", f"verl's policy_loss.loss_mode is one loss: exported gspo, `{cov.type}` is not exported")
    elif cov is not None:
        out.update(_cov_penalty(r, w))
        if lo.clip.dual_clip is not None:
            w.add("loss.clip.dual_clip", f"verl's {cov.type} loss has no dual clip")
    if lo.ratio == "sequence":
        if lo.clip.dual_clip is not None:
            w.add("loss.clip.dual_clip", "verl's gspo loss has no dual clip")
    elif cov is None:
        out[f"{ACTOR}.clip_ratio_c"] = lo.clip.dual_clip if lo.clip.dual_clip is not None else NO_DUAL_CLIP
        if lo.clip.dual_clip is None:
            w.add("loss.clip.dual_clip", f"verl always applies dual clip (default c = {VERL_DUAL_CLIP_DEFAULT:g}); exported clip_ratio_c = {NO_DUAL_CLIP:g} so it practically never binds")
    return out


def _objective(r, w: Warnings) -> dict:
    """loss.objective through its registry entry's verl mapping (rlvr_cli/recipe/objectives.py): the actor
    keys of its own loss mode; {} for the PPO-clip loss (also exported, warned, for an objective verl has
    no loss mode for)."""
    lo = r.loss
    own = Warnings()
    keys = lo.objective.to_verl(lo, own.add)
    if keys is None:
        w.add("loss.objective", f"verl has no `{lo.objective.type}` loss; exported the PPO-clip loss")
        return {}
    if not keys:
        return {}
    mode = keys["policy_loss.loss_mode"]
    if lo.cov_penalty is not None:
        w.add("loss.cov_penalty", f"verl's policy_loss.loss_mode is one loss: exported {mode}, `{lo.cov_penalty.type}` is not exported")
    if lo.ratio == "sequence":
        w.add("loss.ratio", f"verl's {mode} loss has no sequence-level ratio; exported the token ratio")
    w.extend(own)
    return {f"{ACTOR}.{k}": v for k, v in keys.items()}


def _cov_penalty(r, w: Warnings) -> dict:
    """Clip-Cov / KL-Cov as verl's policy_loss.loss_mode clip_cov / kl_cov (core_algos.py's
    compute_policy_loss_clip_cov / _kl_cov; the differences are listed in rlvr_cli/algo/entropy_remedies.py)."""
    cov = r.loss.cov_penalty
    pl = f"{ACTOR}.policy_loss"
    out: dict = {f"{pl}.loss_mode": cov.type}
    if cov.type == "clip_cov":
        out.update({f"{pl}.clip_cov_ratio": cov.clip_ratio, f"{pl}.clip_cov_lb": cov.lb, f"{pl}.clip_cov_ub": cov.ub})
        w.add("loss.cov_penalty", "verl's clip_cov draws its tokens among lb < cov < ub minus those PPO's clip already holds, from the global RNG, and zeroes their loss (value and gradient)")
    else:
        out.update({f"{pl}.kl_cov_ratio": cov.kl_ratio, f"{pl}.ppo_kl_coef": cov.coef})
        w.add("loss.cov_penalty", f"verl's kl_cov has no PPO clip for any token (loss -A * ratio, plus the penalty on the selected ones); rlvr keeps loss.clip ({r.loss.clip.eps_low:g}/{r.loss.clip.eps_high:g})")
    w.add("loss.cov_penalty", "verl computes the covariance and picks its tokens (at least one) per micro batch on each GPU; rlvr over the whole minibatch")
    return out


def _remedies(r, w: Warnings) -> dict:
    """The top-entropy mask, pass@k objectives and the sampler/trainer mismatch (docs/remedies.md)."""
    ro, out = r.rollout, {}
    if r.loss.top_entropy_quantile is not None:
        w.add("loss.top_entropy_quantile", "verl has no top-entropy token mask: not exported, every token carries policy gradient")
    pk = r.advantage.passk
    if pk is not None and not (pk.method == "pkpo" and pk.k == 1):  # PKPO at k = 1 is the plain reward
        w.add("advantage.passk", f"verl has no `{pk.method}` pass@k objective (its adv_estimator grpo_passk is another one: only a group's best response gets r_max - r_second_max); exported the pass@1 advantage")
    if ro.sample_autocast != "none":
        out[f"{ROLLOUT}.dtype"] = ro.sample_autocast
        w.add("rollout.sample_autocast", f"verl's rollout engine (vLLM / SGLang) runs the whole model in {ro.sample_autocast} with its own kernels, and the actor trains in actor.fsdp_config.dtype (bfloat16 mixed precision by default), not in float32")
    return {**out, **_is_correction(r, w)}


def _is_correction(r, w: Warnings) -> dict:
    """rollout.is_correction as algorithm.rollout_correction (decoupled mode, bypass_mode false: the
    actor recomputes log pi_old and the weights are pi_old / pi_rollout, as rlvr's)."""
    ic, rc = r.rollout.is_correction, "algorithm.rollout_correction"
    out: dict = {f"{rc}.rollout_is": None, f"{rc}.rollout_rs": None}
    if ic.mode == "none":
        return out
    out[f"{ROLLOUT}.calculate_log_probs"] = True  # the rollout engine's log-probs, which the weights need
    level, kind = ic.mode.split("_")
    if kind == "truncate":
        out[f"{rc}.rollout_is"] = level
        out[f"{rc}.rollout_is_threshold"] = ic.cap
        if ic.cap_low is not None:
            w.add("rollout.is_correction.cap_low", f"verl's rollout_is truncates from above only; weights below {ic.cap_low:g} are not raised")
        return out
    # masking is verl's rejection sampling on the k1 statistic log(pi_rollout / pi_old) (per token, or
    # summed over the response), kept within [log lower, log upper] (verl/trainer/ppo/rollout_corr_helper.py,
    # compute_rollout_rejection_mask, read at verl commit b178a3c; the keys are 0.9.1's): rlvr's
    # w = pi_old / pi_rollout in [cap_low, cap] is pi_rollout / pi_old in [1 / cap, 1 / cap_low]
    upper = 1.0 / ic.cap_low if ic.cap_low is not None else RS_NO_BOUND
    out[f"{rc}.rollout_rs"] = "token_k1" if level == "token" else "seq_sum_k1"
    out[f"{rc}.rollout_rs_threshold"] = f"{1.0 / ic.cap:.10g}_{upper:.10g}"
    w.add("rollout.is_correction", f"verl's rejection sampling ({out[f'{rc}.rollout_rs']}) removes the rejected tokens from response_mask, so they also leave the loss's denominator; rlvr (and TRL) keep them with weight 0")
    if level == "sequence":
        w.add("rollout.is_correction", f"verl's seq_sum_k1 clamps each token's log(pi_old / pi_rollout) to +-{VERL_LOG_RATIO_BOUND:g} before summing, rlvr sums the log-ratios as they are: a response with a token beyond +-{VERL_LOG_RATIO_BOUND:g} can be kept by one and rejected by the other")
    return out


def _kl(r, w: Warnings) -> dict:
    kl = r.kl
    in_loss, in_reward = kl.in_loss, kl.in_reward
    out = {f"{ACTOR}.use_kl_loss": in_loss, "algorithm.use_kl_in_reward": in_reward}
    if in_loss:
        out[f"{ACTOR}.kl_loss_coef"] = kl.beta
        out[f"{ACTOR}.kl_loss_type"] = KL_LOSS_TYPES[kl.estimator]
        if kl.estimator == "k3":
            w.add("kl.estimator", "verl clamps low_var_kl (k3) to [-10, 10] per token; rlvr does not")
    if in_reward:
        # rlvr's reward placement is always r - beta * sum_t k1_t with the behaviour log-probs, as verl's
        out["algorithm.kl_penalty"] = "kl"
        out["algorithm.kl_ctrl.type"] = "fixed"
        out["algorithm.kl_ctrl.kl_coef"] = kl.beta
    if kl.track and not (in_loss or in_reward):
        w.add("kl.track", "verl computes the reference log-probs only when KL is in the loss or the reward; the logs will have no KL")
    if kl.ref_reset_every:
        w.add("kl.ref_reset_every", "verl has no reference reset: its reference stays the initial policy")
    if r.model.reference not in (None, r.model.name):
        w.add("model.reference", "verl's reference policy is always actor_rollout_ref.model.path (the initial policy)")
    return out


def _batch(r, w: Warnings) -> dict:
    p, m = r.rollout.prompts_per_step, r.optim.minibatches
    mini = p // m if p % m == 0 else p
    if p % m != 0:
        w.add("optim.minibatches", f"verl splits the batch by prompts: {p} prompts do not split into {m} minibatches; exported one")
    ro = r.rollout
    micro = max(1, mini * ro.group_size // r.optim.micro_batches)
    out = {
        "data.train_batch_size": p,
        "data.max_response_length": ro.max_new_tokens,
        f"{ROLLOUT}.n": ro.group_size,
        f"{ROLLOUT}.temperature": ro.temperature,
        f"{ROLLOUT}.top_p": ro.top_p,
        f"{ROLLOUT}.top_k": ro.top_k if ro.top_k > 0 else -1,
        f"{ROLLOUT}.response_length": ro.max_new_tokens,
        f"{ACTOR}.ppo_epochs": r.optim.mu,
        f"{ACTOR}.ppo_mini_batch_size": mini,
        # micro batches (responses per forward pass) change memory, not the gradient
        f"{ACTOR}.ppo_micro_batch_size_per_gpu": micro,
        f"{ROLLOUT}.log_prob_micro_batch_size_per_gpu": micro,
        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": micro,
        "trainer.total_training_steps": r.steps,
        f"{ACTOR}.data_loader_seed": r.seed,
        "data.seed": r.seed,
    }
    if ro.old_logprobs == "sampler":
        w.add("rollout.old_logprobs", "verl recomputes the behaviour log-probs with the actor (the rollout engine's are not used)")
    return out


def _optim(r, w: Warnings) -> dict:
    o = r.optim
    out = {
        f"{ACTOR}.optim.lr": o.lr,
        f"{ACTOR}.optim.weight_decay": o.weight_decay,
        f"{ACTOR}.optim.betas": list(o.betas),
        f"{ACTOR}.optim.lr_warmup_steps": o.warmup_steps,
        f"{ACTOR}.optim.min_lr_ratio": o.min_lr_ratio,
        f"{ACTOR}.optim.lr_scheduler_type": "cosine" if o.schedule == "cosine" else "constant",
        f"{ACTOR}.grad_clip": o.grad_clip if o.grad_clip is not None else NO_DUAL_CLIP,
    }
    if o.schedule == "linear":
        w.add("optim.schedule", "verl's FSDP actor has only constant and cosine schedules; exported constant")
    if o.adam_eps != 1e-8:
        w.add("optim.adam_eps", "verl's actor config has no AdamW epsilon (torch's default 1e-8)")
    if o.grad_clip is None:
        w.add("optim.grad_clip", f"verl always clips the gradient norm; exported {NO_DUAL_CLIP:g}")
    return out


def _shaping(r, w: Warnings) -> dict:
    out: dict = {}
    ds = r.dynamic_sampling
    if ds.enabled:
        out["algorithm.filter_groups.enable"] = True
        out["algorithm.filter_groups.metric"] = "acc" if ds.metric == "accuracy" else "reward"
        out["algorithm.filter_groups.max_num_gen_batches"] = ds.max_rounds
        w.add("dynamic_sampling.enabled", "verl acts on algorithm.filter_groups only in its DAPO/v1 trainer (trainer/ppo/v1), and `acc` must be a reward_extra_info field of your reward function")
    sp = r.overlong.soft_punish
    if sp is not None:
        out["reward.reward_manager.name"] = "dapo"
        out["+reward.reward_kwargs.overlong_buffer_cfg.enable"] = True
        out["+reward.reward_kwargs.overlong_buffer_cfg.len"] = sp.buffer
        out["+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor"] = sp.factor
        out["+reward.reward_kwargs.overlong_buffer_cfg.log"] = False
        out["+reward.reward_kwargs.max_resp_len"] = r.rollout.max_new_tokens
    if r.overlong.mask_truncated:
        w.add("overlong.mask_truncated", "verl has no overlong filtering: truncated responses stay in the loss")
    terms = r.reward.terms
    if terms != [VerifierTerm()]:  # the task's own verifier at weight 1, as verl_reward scores
        w.add("reward.terms", "rlvr_cli/bridges/verl_reward.py scores the task's verifier only (0/1); other terms and weights are not carried")
    if r.reward.truncated_is_incorrect:
        w.add("reward.truncated_is_incorrect", "verl's reward function does not know a response was truncated: an answer in a cut response still counts")
    for knob in ("brevity_bonus", "group_length_penalty", "incorrect_offset") if r.reward.length_control else ():
        if getattr(r.reward.length_control, knob) is not None:
            w.add(f"reward.length_control.{knob}", "not exported: verl has no such reward shaping and rlvr's verl_reward scores one response without its group")
    for kind, text in dict.fromkeys((t.type, t.verl_export) for t in r.reward.terms if t.verl_export):  # the registry's
        w.add(f"reward.terms.{kind}", text)
    return out


def _precision(r, w: Warnings) -> dict:
    if r.model.autocast in ("bfloat16", "float16"):
        w.add("model.autocast", f"not exported: verl's actor trains under its FSDP mixed precision "
              f"(actor.fsdp_config, bfloat16 compute by default), not a {r.model.autocast} autocast of rlvr's weights")
    return {}


def _lora(r, w: Warnings) -> dict:
    lora = r.model.lora
    if lora is None:
        return {}
    if lora.dropout:
        w.add("model.lora.dropout", "verl's LoRA has no dropout setting (peft's default 0 there)")
    m = "actor_rollout_ref.model"  # verl's reference is then the actor with the adapter off, as in rlvr
    return {f"{m}.lora_rank": lora.rank, f"{m}.lora_alpha": lora.alpha, f"{m}.target_modules": lora.target_modules}


def export_verl(r) -> Export:
    """Hydra overrides (dotted key -> value) for an RL recipe, with the warnings."""
    w = Warnings()
    settings = {
        "actor_rollout_ref.model.path": r.model.name,
        **_lora(r, w),
        **_precision(r, w),
        **_batch(r, w),
        **_advantage(r, w),
        **_policy_loss(r, w),
        **_kl(r, w),
        **_optim(r, w),
        **_shaping(r, w),
        **_remedies(r, w),
        **verl_async(r, w),
        "trainer.experiment_name": r.name or "rlvr",
        "trainer.logger": ["console", "file"],  # the file logger's JSONL is what `rlvr compare` reads back
        "trainer.save_freq": r.checkpoint.every if r.checkpoint.every else -1,
        "trainer.test_freq": r.eval.every if r.eval.every else -1,
        "trainer.val_before_train": r.eval.at_start,
    }
    notes = [
        "still to set: actor_rollout_ref.rollout.name (vllm or sglang), trainer.n_gpus_per_node, data.train_files / data.val_files (parquet from verl's data scripts)",
        "reward: reward.custom_reward_function.path=<rlvr_cli/bridges/verl_reward.py> reward.custom_reward_function.name=compute_score (data_source = the task name, ground_truth = the gold answer)",
        "eval.*: verl validates mean reward on data.val_files, not pass@k; run `rlvr eval` on its checkpoints",
    ]
    settings.update(environment_verl(r, w, notes))
    settings = {k: _expressible(k, v, w) for k, v in settings.items()}
    if r.model.name.startswith("builtin:"):
        notes.append(f"model.name {r.model.name}: verl needs a directory; print it with `python -c \"from rlvr_cli.models import resolve_model_ref as f; print(f('{r.model.name}').path)\"`")
    return Export("verl", settings, list(w), notes)


LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00"
"""Characters an override line cannot hold: what ``str.splitlines`` splits on, and NUL (no argv can)."""
_BARE = re.compile(r"[A-Za-z_/][A-Za-z0-9_\-./]*\Z")
_HYDRA_WORDS = {"null", "true", "false", "inf", "nan"}


def _expressible(key: str, value, w: Warnings):
    """``value`` with every line break replaced by a space (warned: the exported value differs)."""
    if isinstance(value, (list, tuple)):
        return [_expressible(key, v, w) for v in value]
    if isinstance(value, str) and any(c in LINE_BREAKS for c in value):
        w.add(key, f"{value!r} holds a line break or NUL, which a Hydra override line cannot; written with spaces instead")
        return "".join(" " if c in LINE_BREAKS else c for c in value)
    return value


def _escape_before(text: str, target: str, escaped_target: str) -> str:
    """``text`` with each ``target`` replaced by ``escaped_target`` and the backslashes right before it
    doubled (a backslash run before an escape would otherwise escape the escape)."""
    out, i = [], 0
    while True:
        j = text.find(target, i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        k = j
        while k > i and text[k - 1] == "\\":
            k -= 1
        out.append(text[i:k] + "\\" * (2 * (j - k)) + escaped_target)
        i = j + len(target)


def quote(text: str) -> str:
    """A string as a single-quoted Hydra value that OmegaConf resolves back to ``text`` exactly.

    Two layers: OmegaConf reads ``\\${`` as a literal ``${`` (and ``\\\\`` before ``${`` as one
    backslash); Hydra's quoted value reads ``\\'`` as a quote and ``\\\\`` before a quote or at the
    end as one backslash. ``text`` must hold no line break (see ``LINE_BREAKS``)."""
    text = _escape_before(text, "${", "\\${")
    text = _escape_before(text, "'", "\\'")
    stripped = text.rstrip("\\")
    text = stripped + "\\" * (2 * (len(text) - len(stripped)))
    return f"'{text}'"


def format_value(value) -> str:
    """A value as Hydra's override grammar reads it (True/False, null, [a,b], plain numbers, plain
    words bare, every other string quoted with :func:`quote`)."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(format_value(v) for v in value) + "]"
    if isinstance(value, str):
        if _BARE.match(value) and value.lower() not in _HYDRA_WORDS:
            return value
        return quote(value)  # also any string Hydra would read as a number (0.5_1e+09)
    return str(value)
