"""The length bias of a loss aggregation, measured on one batch: who gets how much gradient per token.

With the policy-gradient token loss l_it = -A_i * rho_it (rho_it = 1 on-policy) and the aggregation of
:mod:`rlvr_cli.algo.aggregation` (loss = sum_it w_it l_it / Z), the gradient is

    grad loss = - sum_i (A_i * w_i / Z) * sum_t grad log pi(o_it)

so every token of response i is pushed by the same *per-token gradient weight*

    g_i = |A_i| * w_i / Z

with w_i and Z exactly as ``aggregation_weights`` / ``aggregation_normalizer`` define them (this module
calls them, on a mask of |o_i| ones per response, so the two cannot drift apart):

    seq_mean_token_mean      (GRPO)      w_i = 1/|o_i|   Z = N_seq        g_i = |A_i| / (N_seq * |o_i|)
    token_mean               (DAPO)      w_i = 1         Z = sum_j |o_j|  g_i = |A_i| / sum_j |o_j|
    seq_mean_token_sum_norm  (Dr. GRPO)  w_i = 1/L       Z = N_seq        g_i = |A_i| / (N_seq * L)

Only the first makes g_i depend on the response's own length: that is the 1/|o| bias of Liu et al.
2025 ("Understanding R1-Zero-Like Training", arXiv 2503.20783, §3.1): at a fixed |A_i| < 0, a longer
wrong response is pushed down less per token, so a choice that lengthens wrong responses is
penalised less than one that shortens them (and the sign flips for correct responses).

Measured here, over the responses that carry gradient (|A_i| > 0 and |o_i| > 0):

- ``share_incorrect``: sum of g_i over incorrect responses / sum of g_i over all (each response counted
  once: the weight on one decision token in it, not the sum over its tokens);
- ``share_incorrect_terciles`` (short, mid, long): the same share split by length tercile *among the
  incorrect responses* (sorted by length, ties in batch order, cut into three rank groups whose sizes
  differ by at most one, the larger groups first); the three add up to ``share_incorrect``. Without a
  length bias the three are about equal (up to the spread of |A|); GRPO's 1/|o| makes long < short;
- ``corr_len_weight_incorrect``: Pearson correlation of |o_i| with g_i among the incorrect responses
  (None with fewer than two or a constant length or weight). ~0 without a length bias, < 0 under 1/|o|.

Convention that differs between frameworks: the length constant L (Dr. GRPO; verl's
``loss_agg_mode: seq-mean-token-sum-norm``) is a recipe constant here (default: max new tokens), never the
padded batch length; it scales every g_i alike, so shares and the correlation do not depend on it.

Worked example (the unit test): advantages [+1, -1, -1, -1], lengths [2, 2, 4, 8], correct [1, 0, 0, 0]
under seq_mean_token_mean: g = [1/8, 1/8, 1/16, 1/32] (sum 11/32), so share_incorrect = 7/11 and the
terciles of the three incorrect (lengths 2, 4, 8) are (4/11, 2/11, 1/11); under Dr. GRPO every g is
1/(4L) and the shares are 3/4 and (1/4, 1/4, 1/4).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rlvr_cli.algo.aggregation import aggregation_normalizer, aggregation_weights

TERCILES = ("short", "mid", "long")


@dataclass(frozen=True)
class LengthBias:
    """The measurement of :func:`length_bias` (see the module docstring for each field)."""

    share_incorrect: float | None
    share_incorrect_terciles: tuple[float, float, float] | None
    corr_len_weight_incorrect: float | None

    def as_metrics(self, prefix: str = "gw_") -> dict[str, float | None]:
        """Flat metrics: gw_incorrect_share, gw_incorrect_{short,mid,long}_share, gw_len_corr_incorrect."""
        terc = self.share_incorrect_terciles or (None, None, None)
        out: dict[str, float | None] = {f"{prefix}incorrect_share": self.share_incorrect}
        out.update({f"{prefix}incorrect_{name}_share": v for name, v in zip(TERCILES, terc)})
        out[f"{prefix}len_corr_incorrect"] = self.corr_len_weight_incorrect
        return out


def per_token_gradient_weight(
    advantages: torch.Tensor | Sequence[float],
    lengths: torch.Tensor | Sequence[int],
    mode: str,
    length_constant: int | None = None,
) -> torch.Tensor:
    """g_i = |A_i| * w_i / Z (B,) for responses with ``lengths`` |o_i| (tokens that count) under ``mode``.

    A response with |o_i| = 0 (fully masked) gets 0 and does not count in Z. Returns zeros when
    nothing is left (Z = 0).
    """
    adv = torch.as_tensor(advantages, dtype=torch.float32).reshape(-1)
    lens = torch.as_tensor(lengths, dtype=torch.long).reshape(-1)
    if adv.shape != lens.shape:
        raise ValueError(f"advantages ({adv.numel()}) and lengths ({lens.numel()}) differ in size")
    if (lens < 0).any():
        raise ValueError("lengths must be >= 0")
    width = int(lens.max()) if lens.numel() else 0
    mask = (torch.arange(max(width, 1)).unsqueeze(0) < lens.unsqueeze(1)).to(torch.float32)
    z = aggregation_normalizer(mask, mode)
    w = aggregation_weights(mask, mode, length_constant)[:, 0] * (lens > 0)  # the weight of any counted token
    return adv.abs() * w / z if z > 0 else torch.zeros_like(adv)


def _pearson(x: torch.Tensor, y: torch.Tensor) -> float | None:
    if x.numel() < 2:
        return None
    x, y = x.double() - x.double().mean(), y.double() - y.double().mean()
    den = float((x.square().sum() * y.square().sum()).sqrt())
    if den <= 1e-30 * max(1.0, float(y.abs().max()) ** 2):
        return None
    return float((x * y).sum()) / den


def length_bias(
    advantages: torch.Tensor | Sequence[float],
    lengths: torch.Tensor | Sequence[int],
    correct: torch.Tensor | Sequence[bool],
    mode: str,
    length_constant: int | None = None,
) -> LengthBias:
    """Share of per-token gradient weight on incorrect responses (total and by length tercile) and the
    length-weight correlation among them, for one batch (module docstring)."""
    g = per_token_gradient_weight(advantages, lengths, mode, length_constant)
    lens = torch.as_tensor(lengths, dtype=torch.long).reshape(-1)
    ok = torch.as_tensor(correct).reshape(-1).to(torch.bool)
    if ok.shape != g.shape:
        raise ValueError(f"correct ({ok.numel()}) and advantages ({g.numel()}) differ in size")
    live = g > 0
    total = float(g[live].sum())
    if total <= 0:
        return LengthBias(None, None, None)
    wrong = (live & ~ok).nonzero().reshape(-1)
    share = float(g[wrong].sum()) / total
    order = wrong[torch.argsort(lens[wrong], stable=True)]
    groups = torch.tensor_split(order, 3)
    terciles = tuple(float(g[idx].sum()) / total for idx in groups)
    corr = _pearson(lens[wrong].to(torch.float64), g[wrong].to(torch.float64))
    return LengthBias(share, terciles, corr)  # type: ignore[arg-type]


def conditional_verbosity(filler_words: Sequence[int], correct: Sequence[bool]) -> dict[str, float | None]:
    """How a model's filler depends on its own correctness, from its samples (one entry per response).

        filler_given_incorrect = P(filler > 0 | wrong)   filler_given_correct = P(filler > 0 | right)
        filler_words_incorrect = E[filler | filler > 0, wrong]   (and the same for right)

    The length is in filler words and conditioned on rambling at all, so it separates *how often* a
    model rambles from *how long*. None where a case has no response (or none that rambles). A base
    for the length-inflation experiment needs P(filler | wrong) well above P(filler | right): only a
    length choice conditional on being wrong is favoured by GRPO's 1/|o| (docs/length.md).
    Example: fillers [0, 2, 4, 0], correct [1, 0, 0, 1] -> 1.0 / 0.0, lengths 3.0 / None.
    """
    if len(filler_words) != len(correct):
        raise ValueError(f"filler_words ({len(filler_words)}) and correct ({len(correct)}) differ in size")
    out: dict[str, float | None] = {}
    for case, want in (("incorrect", False), ("correct", True)):
        fill = [f for f, ok in zip(filler_words, correct) if bool(ok) == want]
        rambling = [f for f in fill if f > 0]
        out[f"filler_given_{case}"] = len(rambling) / len(fill) if fill else None
        out[f"filler_words_{case}"] = sum(rambling) / len(rambling) if rambling else None
    return out
