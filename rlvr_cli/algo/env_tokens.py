"""Tokens the model did not write: which terms of the loss a multi-turn trajectory's environment tokens carry.

A trajectory's response tokens are model tokens (m_it = 1, sampled) or environment tokens (e_it = 1, a
tool's reply appended by the sampler: rlvr_cli/sampling/turns.py); M_it is the response mask after the
trainer's own masks (truncation, the void-turn filter). The recipe's ``environment:`` knobs choose four
masks, each (B, T) float, and the loss becomes

    L = sum_it w_it(D) * ( P_it * l^pol_it + K_it * beta * KL_it ) / Z(D)              (the aggregation)
        + alpha * sum_it E_it * ( -log pi(y_it) ) / sum_it E_it                        (echo, its own mean)

with w and Z the aggregation's (rlvr_cli/algo/aggregation.py) computed on the divisor mask D:

- ``env_tokens`` sets P, the policy loss's tokens: `mask` P = M m (TRL's ``tool_mask``, verl's
  ``response_mask``, prime-rl's default: every anchor masks by fiat); `train` P = M (environment tokens
  are treated as the model's own: they need pi_old's log-probs, recomputed, never the sampler's);
  `echo` P = M m and E = M e' (prime-rl's ``echo`` algorithm, src/prime_rl/orchestrator/algo/echo.py:
  GRPO on actions plus a cross-entropy on environment tokens at weight alpha = ``echo_weight``, 0.1 by
  default; e' leaves out environment tokens before the first model token, as prime-rl leaves out the
  initial prompt).
- ``kl_on_env_tokens`` sets K (KL in the loss): M m, or M (TRL #2723 argues against KL on tool tokens).
- ``divisor_counts_env_tokens`` sets D, the tokens the length divisor |o_i| (seq_mean_token_mean) and the
  token count Z (token_mean) count: M m (TRL's ``grpo``: ``mask.sum(-1)`` over model tokens) or M (a
  divisor over the whole sequence, as a budget ``max_completion_length`` that tool tokens also use:
  TRL's ``dr_grpo``). Independent of which tokens carry loss. Under seq_mean_token_sum_norm the divisor
  is the constant L either way; D then only decides which rows count in N_seq.

Convention that differs between frameworks: prime-rl normalises each loss component by its own token
count ("so the components don't dilute each other"); here the echo term follows it (its own mean over
the minibatch's echo tokens), while the KL term shares the policy loss's divisor, as TRL adds
``beta * per_token_kl`` before one aggregation.

Worked example (the first unit test), token_mean, one row of 2 model tokens with policy losses [1, 3]
then 2 environment tokens whose policy loss under `train` would be [5, 7], log-probs of the env tokens
[-1, -3]: `mask` L = (1 + 3)/2 = 2; `train` with D = model tokens: (1+3+5+7)/2 = 8, with D = all:
16/4 = 4; `echo` alpha 0.1: 2 + 0.1 * (1 + 3)/2 = 2.2.

SimpleTIR's void-turn filter (Xue et al. 2025, arXiv 2509.02479, abstract and Fig. 4): a trajectory with a *void turn*,
a model turn that yields neither a complete code block (here: a tool call) nor a final answer, is left out of the policy
update (its M row is 0; it still counts in its group's baseline, which is computed before the filter).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class EnvTokenMasks:
    """The masks of one batch (module docstring), each (B, T) float."""

    policy: torch.Tensor
    """P: the tokens of the policy loss (and its entropy and behaviour-KL terms)."""
    kl: torch.Tensor
    """K: the tokens of the KL-in-loss term."""
    divisor: torch.Tensor
    """D: the tokens the aggregation's length divisor and normaliser count."""
    echo: torch.Tensor | None
    """E: the environment tokens of the echo cross-entropy; None unless env_tokens is `echo`."""

    @property
    def carry(self) -> torch.Tensor:
        """The tokens that carry any loss (P, K or E)."""
        out = torch.maximum(self.policy, self.kl)
        return out if self.echo is None else torch.maximum(out, self.echo)


def env_token_masks(mask: torch.Tensor, model_tokens: torch.Tensor, env_tokens: str, kl_on_env: bool,
                    divisor_counts_env: bool) -> EnvTokenMasks:
    """P, K, D, E from the response mask M (B, T) after the trainer's masks and the model-token indicator
    m (B, T, 1 where the model wrote the token), for ``env_tokens`` in `mask`, `train`, `echo`."""
    if env_tokens not in ("mask", "train", "echo"):
        raise ValueError(f"env_tokens must be mask, train or echo, not {env_tokens!r}")
    mask = mask.to(torch.float32)
    model = mask * model_tokens.to(mask.dtype)
    policy = mask if env_tokens == "train" else model
    echo = None
    if env_tokens == "echo":
        after_first = (model.cumsum(dim=1) > 0).to(mask.dtype)  # prime-rl leaves out what precedes the first turn
        echo = (mask - model) * after_first
    return EnvTokenMasks(policy, mask if kl_on_env else model, mask if divisor_counts_env else model, echo)


def echo_loss(logp: torch.Tensor, echo_mask: torch.Tensor, weight: float, echo_tokens: float) -> torch.Tensor:
    """alpha * sum_it E_it * (-log pi(y_it)) / N_E: prime-rl's echo cross-entropy over the environment
    tokens ``echo_mask`` (B, T) selects, normalised by ``echo_tokens``, the minibatch's count N_E (so that
    micro-batches add up to the minibatch's loss); 0 (with gradient) when there is none."""
    total = -(logp * echo_mask).sum()
    return weight * total / echo_tokens if echo_tokens > 0 else total * 0.0


def void_turn_rows(void_turns: torch.Tensor) -> torch.Tensor:
    """(B,) bool: SimpleTIR's filter, the trajectories with at least one void turn (counts ``void_turns`` (B,))."""
    return void_turns > 0


def call_cost_rewards(rewards: torch.Tensor, calls: torch.Tensor, cost: float) -> torch.Tensor:
    """r_i - c * n_i: the reward less ``cost`` per tool call (``calls`` (B,) n_i), a price on using the tool
    (issue 48; ms-swift PR #3503 prices a call the other way, with a capped bonus)."""
    return rewards - cost * calls.to(rewards.dtype)
