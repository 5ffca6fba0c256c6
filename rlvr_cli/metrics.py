"""The metric names: one table for the step rows, the docs' glossary, `rlvr compare`'s labels and the tests.

Every key a trainer writes to ``metrics.jsonl`` is a :class:`Metric` here (:func:`step_row` refuses any
other), the metric table of docs/metrics.md is generated from :data:`METRICS` (``python -m
rlvr_cli.metrics``; a test checks it), and runs written under an older name are read through
:data:`RENAMED` (:func:`upgrade_row`). What the clip metrics count under each objective comes from the
objective registry (:mod:`rlvr_cli.recipe.objectives`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rlvr_cli.recipe.objectives import flag_meaning


@dataclass(frozen=True)
class Metric:
    name: str
    meaning: str
    label: str
    """Short name for a plot legend."""
    algorithms: tuple[str, ...] = ("rl",)
    timing: bool = False
    """Wall-clock measurements: vary between identical runs, left out of reproducibility checks."""

    @property
    def family(self) -> bool:
        """A name with a ``<term>`` placeholder: one key per reward term (``rewards/<term>/mean``)."""
        return "<" in self.name

    def matches(self, key: str) -> str | None:
        """The placeholder's value when ``key`` is one of this family's keys, else None."""
        if not self.family:
            return None
        head, _, rest = self.name.partition("<")
        tail = rest.partition(">")[2]
        if key.startswith(head) and key.endswith(tail) and len(key) > len(head) + len(tail):
            return key[len(head):len(key) - len(tail)]
        return None


RL, SFT, BOTH = ("rl",), ("sft",), ("rl", "sft")

METRICS: tuple[Metric, ...] = (
    Metric("step", "the step number (1-based)", "step", BOTH),
    Metric("reward_mean", "mean of the recipe's reward (sum_k w_k term_k) over every response sampled this step", "reward (train)"),
    Metric("rewards/<term>/mean", "mean of one reward term before weighting over every response sampled this step, one key per term of reward.terms (TRL's name): `<term>` is a function term's function name or a built-in term's type (`task`, `format`, ...), `name#i` when two terms share a name", "reward term"),
    Metric("reward_shaped_mean", "mean reward after the length controls, overlong shaping and KL-in-reward, over the trained batch (minus reward_mean: the mean shaping term without dynamic sampling)", "shaped reward"),
    Metric("accuracy", "fraction correct by the task's **true** verifier (whatever reward drives training), all sampled responses", "accuracy (train)"),
    Metric("kl_mean", "recipe estimator of KL(pi_old ‖ pi_ref) per response token, mean over tokens (null on the steps `kl.track_every` skips when KL is only tracked)", "KL mean"),
    Metric("kl_max", "the same estimator, max over tokens", "KL max"),
    Metric("kl_seq_mean", "mean over responses of the per-sequence sum of that estimator", "KL per sequence"),
    Metric("entropy", "mean per-token entropy of the sampling policy (at temperature T) over response tokens, first pass", "entropy"),
    Metric("len_mean", "response length in tokens (EOS included; under `environment:` the whole trajectory, tool replies included), all sampled responses", "length"),
    Metric("len_correct", "response length of the correct responses", "correct"),
    Metric("len_incorrect", "response length of the incorrect responses", "incorrect"),
    Metric("truncated_frac", "fraction of sampled responses cut at `max_new_tokens`", "truncated"),
    Metric("clip_low_frac", "fraction of loss tokens the objective limits on the low side, by loss.objective: " + flag_meaning("clip_low_frac"), "low (1-eps_low)"),
    Metric("clip_high_frac", "fraction of loss tokens the objective limits on the high side, by loss.objective: " + flag_meaning("clip_high_frac"), "high (1+eps_high)"),
    Metric("dual_clip_frac", "fraction of loss tokens under the dual clip, by loss.objective: " + flag_meaning("dual_clip_frac"), "dual clip"),
    Metric("ratio_max", "largest token (or sequence) ratio over the loss tokens of all updates of the step", "ratio max"),
    Metric("ratio_min", "smallest such ratio", "ratio min"),
    Metric("adv_abs_mean", "mean \\|A\\| over the trained batch", "\\|A\\| mean"),
    Metric("zero_std_frac", "fraction of trained groups whose shaped rewards have zero spread (A = 0)", "zero spread"),
    Metric("groups_all_correct_frac", "fraction of sampled groups whose responses are all correct", "all correct"),
    Metric("groups_all_wrong_frac", "fraction of sampled groups whose responses are all wrong", "all wrong"),
    Metric("groups_dropped_frac", "dynamic sampling: groups dropped / groups sampled", "dropped"),
    Metric("batch_groups", "groups trained on", "groups trained"),
    Metric("ds_rounds", "dynamic sampling: sampling rounds this step", "rounds"),
    Metric("ds_prompts", "dynamic sampling: prompts drawn this step", "prompts drawn"),
    Metric("loss", "mean loss over the step's applied updates (RL: the objective; SFT: token-mean NLL)", "loss", BOTH),
    Metric("grad_norm", "max pre-clip gradient norm over the applied updates", "grad norm", BOTH),
    Metric("lr", "learning rate of the step's first update", "lr", BOTH),
    Metric("tokens", "response tokens in the loss", "tokens", SFT),
    Metric("updates", "optimiser updates this step (mu x minibatches), applied or not", "updates"),
    Metric("updates_skipped", "updates not applied because the loss or gradient was not finite", "skipped", BOTH),
    Metric("updates_empty", "updates not applied because the minibatch had no loss token (e.g. all truncated and masked)", "empty"),
    Metric("train_passk", "pass@k objectives: mean over trained groups of the unbiased pass@k (k of advantage.passk) of their G samples", "pass@k (train)"),
    Metric("top_entropy_kept_frac", "top-entropy mask: fraction of loss tokens whose policy loss counts, over the step's updates", "kept (top-entropy)"),
    Metric("top_entropy_threshold", "top-entropy mask: the entropy threshold tau (the 1-q quantile of the minibatch), mean over updates", "entropy threshold"),
    Metric("cov_selected_frac", "Clip-Cov / KL-Cov: fraction of loss tokens cut (Clip-Cov) or penalised (KL-Cov)", "cov-selected"),
    Metric("cov_mean", "Clip-Cov / KL-Cov: mean centred covariance (logp - mean)(A - mean) over the loss tokens", "cov mean"),
    Metric("cov_selected_mean", "Clip-Cov / KL-Cov: mean covariance of the selected tokens", "cov selected"),
    Metric("entropy_coef", "loss.entropy_control: mean over the step's updates of the entropy coefficient alpha applied (0 while the last update's entropy was above the target; null without entropy_control)", "entropy coef"),
    Metric("entropy_coef_state", "loss.entropy_control: the coefficient c after the step's last update (null without entropy_control)", "entropy coef state"),
    Metric("gw_incorrect_share", "length bias (`rlvr_cli/algo/length_bias.py`): share of the trained batch's per-token gradient weight g_i = \\|A_i\\| w_i / Z (the recipe's aggregation; lengths = loss tokens after masks) carried by the incorrect responses (true verifier)", "incorrect share"),
    Metric("gw_incorrect_short_share", "that share carried by the shortest third of the incorrect responses", "short third"),
    Metric("gw_incorrect_mid_share", "that share carried by the middle third of the incorrect responses", "mid third"),
    Metric("gw_incorrect_long_share", "that share carried by the longest third of the incorrect responses (< short under GRPO's 1/\\|o\\|)", "long third"),
    Metric("gw_len_corr_incorrect", "Pearson correlation of length and g_i among the incorrect trained responses (< 0 under 1/\\|o\\|, 0 without a length divisor)", "corr(length, g) incorrect"),
    Metric("mismatch_abs_mean", "mean \\|log pi_trainer - log pi_sampler\\| over response tokens (when the behaviour log-probs are recomputed; under rollout.staleness pi_trainer is the proximal policy, so this measures staleness and numerics together)", "mismatch mean"),
    Metric("mismatch_abs_max", "max of that difference over the step's response tokens", "mismatch max"),
    Metric("is_ratio_p01", "1st percentile of the token ratio pi_trainer / pi_sampler", "ratio p1"),
    Metric("is_ratio_p50", "median of that ratio", "ratio p50"),
    Metric("is_ratio_p99", "99th percentile of that ratio", "ratio p99"),
    Metric("is_corrected_frac", "rollout.is_correction: fraction of response tokens whose weight was truncated or masked (0 for mode none)", "IS-corrected"),
    Metric("is_weight_mean", "rollout.is_correction: mean importance weight over response tokens (1 for mode none)", "IS weight mean"),
    Metric("policy_lag", "rollout.staleness: optimiser steps between the policy that sampled the step's batch and the one that trains on it (0 on-policy; min(k, step-1) at a fixed lag k)", "policy lag"),
    Metric("stale_batches_dropped", "rollout.staleness bounded with strategy drop: batches of this step sampled and dropped for being more than `max` steps old (0 otherwise)", "stale dropped"),
    Metric("m2po_masked_frac", "off_policy.m2po: fraction of the step's loss tokens M2PO masked (their (log pi_prox/pi_behaviour)^2 the largest; null when off)", "M2PO masked"),
    Metric("m2po_second_moment", "off_policy.m2po: mean (log pi_prox - log pi_behaviour)^2 over the step's loss tokens before masking (how off-policy the batch is)", "M2 (before mask)"),
    Metric("tools/call_rate", "environment: tool calls per trajectory, mean over every trajectory sampled this step (TRL's tools/call_frequency; null single-turn)", "calls per trajectory"),
    Metric("tools/failure_rate", "environment: fraction of the step's tool calls that failed (raised, timed out, unknown tool, bad arguments; null without a call)", "failed calls"),
    Metric("tools/env_token_share", "environment: fraction of the sampled response tokens appended by the environment (tool replies)", "env-token share"),
    Metric("tools/turns_mean", "environment: model turns per trajectory, mean", "turns"),
    Metric("tools/acc_with_call", "environment: accuracy (true verifier) of the trajectories that made at least one call (null without one)", "acc with call"),
    Metric("tools/acc_without_call", "environment: accuracy of the trajectories that made no call (null without one)", "acc without call"),
    Metric("tools/void_turns", "environment: void turns (neither a call nor an answer: SimpleTIR) per trajectory, mean", "void turns"),
    Metric("tools/prefix_mismatches", "environment: tool replies this step whose text re-tokenises differently at the seam with the model's turn (tokenizer(turn + reply) != tokenizer(turn) + tokenizer(reply)); the trajectory keeps its own tokens, this counts what a text pipeline would shift (0 on the built-in character tokenizer)", "prefix mismatches"),
    Metric("outcomes", "counts per verifier outcome (correct / incorrect / unparseable / timeout / error)", "outcomes"),
    Metric("gen_tokens", "tokens generated this step", "tokens generated"),
    Metric("time_sample_s", "seconds sampling", "sample s", timing=True),
    Metric("time_verify_s", "seconds verifying", "verify s", timing=True),
    Metric("time_ref_s", "seconds on behaviour and reference log-probs", "log-prob s", timing=True),
    Metric("time_update_s", "seconds in the optimiser updates", "update s", timing=True),
    Metric("time_wait_s", "rollout.staleness.overlap: seconds the trainer waited for the sampler process's batch (null in one process)", "wait s", timing=True),
    Metric("time_handover_s", "rollout.staleness.overlap: seconds handing weights to the sampler process (the trainer's copy and send of the previous step's, the sampler's load of the version it sampled this batch with; null in one process)", "handover s", timing=True),
    Metric("time_sampler_idle_s", "rollout.staleness.overlap: seconds the sampler process waited before this batch, for its weights or for the trainer (null in one process)", "sampler idle s", timing=True),
    Metric("step_time_s", "seconds for the whole step", "step s", BOTH, timing=True),
    Metric("tokens_per_s", "sampling throughput", "tokens/s", timing=True),
)
BY_NAME = {m.name: m for m in METRICS}
FAMILIES = tuple(m for m in METRICS if m.family)

RENAMED = {
    "zero_std_all_correct_frac": "groups_all_correct_frac",
    "zero_std_all_wrong_frac": "groups_all_wrong_frac",
    "filtered_frac": "groups_dropped_frac",
    "update_skipped": "updates_skipped",
}
"""Old name -> current name, for runs written before the rename (read by `rlvr compare`)."""

TIMING = frozenset(m.name for m in METRICS if m.timing)


def names(algorithm: str) -> list[str]:
    """The fixed keys of one step row of ``algorithm`` (`rl` or `sft`), in table order (a family such as
    ``rewards/<term>/mean`` has one key per reward term besides)."""
    return [m.name for m in METRICS if algorithm in m.algorithms and not m.family]


def family(key: str) -> tuple[Metric, str] | None:
    """(the family, the placeholder's value) of a key such as ``rewards/task/mean``; None for another."""
    for m in FAMILIES:
        if (value := m.matches(key)) is not None:
            return m, value
    return None


def label(name: str) -> str:
    """The legend name of a metric (the name itself for one not in the table)."""
    m = BY_NAME.get(name)
    if m is None and (fam := family(name)) is not None:
        return f"{fam[0].label}: {fam[1]}"
    return m.label if m else name


def step_row(algorithm: str, values: dict) -> dict:
    """A metrics.jsonl row: exactly the table's keys for ``algorithm`` (and any keys of its families), in
    table order."""
    want = names(algorithm)
    of_family = {k: f[0].name for k in values if k not in BY_NAME and (f := family(k)) is not None
                 and algorithm in f[0].algorithms}
    if set(values) - set(of_family) != set(want):
        raise KeyError(f"{algorithm} step row: missing {sorted(set(want) - set(values))}, "
                       f"not in rlvr_cli/metrics.py {sorted(set(values) - set(want) - set(of_family))}")
    order = [m.name for m in METRICS if algorithm in m.algorithms]
    keys = sorted(values, key=lambda k: order.index(of_family.get(k, k)))  # stable: the terms' order kept
    return {k: values[k] for k in keys}


def upgrade_row(row: dict) -> dict:
    """A row of an older run under the current names (``update_skipped: true`` counts as 1 skipped)."""
    out = {}
    for k, v in row.items():
        new = RENAMED.get(k, k)
        if k == "update_skipped" and isinstance(v, bool):
            v = int(v)
        out.setdefault(new, v)
    return out


def markdown_table() -> str:
    lines = ["| key | algorithm | meaning |", "|---|---|---|"]
    for m in METRICS:
        lines.append(f"| `{m.name}` | {', '.join(m.algorithms)} | {m.meaning} |")
    return "\n".join(lines) + "\n"


START, END = "<!-- METRICS:START -->", "<!-- METRICS:END -->"


DOC = str(Path(__file__).resolve().parents[1] / "docs/metrics.md")


def update_doc(path: str = DOC) -> bool:
    """Rewrite the metric table between the page's markers; True when it changed."""
    from rlvr_cli.io import rewrite_between_markers

    return rewrite_between_markers(path, START, END, markdown_table())


if __name__ == "__main__":  # python -m rlvr_cli.metrics [docs/metrics.md]
    import sys

    print("updated" if update_doc(sys.argv[1] if len(sys.argv) > 1 else DOC) else "up to date")
