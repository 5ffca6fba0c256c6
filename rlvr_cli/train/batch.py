"""One RL step's training batch: the rollout groups as rows, and the tensors each phase adds to them.

Built once from the kept groups (phase 1), B = groups x G rows, group-major; under N processes this
rank's contiguous share of whole groups, with :attr:`Batch.rows` naming their indices in the step's
batch. Phase 2 adds the behaviour and reference log-probs and the importance weights, phases 3-4 the
shaped rewards, the advantages, the loss mask and the zero-loss rows; the update then reads
everything it needs from the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rlvr_cli.algo.aggregation import aggregation_normalizer
from rlvr_cli.algo.env_tokens import EnvTokenMasks
from rlvr_cli.envs.protocol import MODEL
from rlvr_cli.train.objective import LossInputs
from rlvr_cli.train.packing import Packed, length_sorted_chunks, pack, response_logprobs
from rlvr_cli.train.rollouts.collect import Group


@dataclass
class Batch:
    """One step's training batch (this rank's rows), built by :meth:`from_groups`."""

    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    sampler_logprobs: list[list[float]]
    supports: list
    """Each row's sampling support (:class:`rlvr_cli.sampling.TokenSupport`) under top-k / top-p; empty
    without truncation."""
    rewards: torch.Tensor
    """(B,) raw reward, before shaping."""
    term_values: torch.Tensor
    """(B, K) each reward term before weighting (K = len(reward.terms))."""
    truncated: torch.Tensor
    """(B,) bool: the response hit max_new_tokens (finish reason `length`)."""
    mask: torch.Tensor
    """(B, Lr) float: 1 on real response tokens."""
    group_size: int
    pad_id: int
    device: torch.device
    rows: range
    """The indices of these rows in the step's batch (all of it in one process)."""
    n_rows: int
    """Rows of the step's batch, over every rank."""
    old_logp: torch.Tensor | None = None
    """(B, Lr) log-probs of the behaviour policy (phase 2)."""
    ref_logp: torch.Tensor | None = None
    """(B, Lr) log-probs of the reference; None when this step does not need it (phase 2)."""
    is_weights: torch.Tensor | None = None
    """(B, Lr) per-token weights of the policy loss: the importance weights (phase 2) times M2PO's mask; None: none."""
    behaviour_logp: torch.Tensor | None = None
    """(B, Lr) the behaviour policy's (sampler's) log-probs, for off_policy.behaviour_kl; None when off."""
    shaped: torch.Tensor | None = None
    """(n_rows,) shaped rewards of the whole step's batch (phase 3)."""
    advantages: torch.Tensor | None = None
    """(n_rows,) advantages of the whole step's batch (phase 4)."""
    adv: torch.Tensor | None = None
    """(B,) the advantages of these rows."""
    loss_mask: torch.Tensor | None = None
    """(B, Lr) float: the response tokens that count in the loss (masked truncations left out)."""
    zero_loss: torch.Tensor | None = None
    """(B,) bool: rows whose token loss is 0 whatever the weights (forwarded without a backward)."""
    model_tokens: torch.Tensor | None = None
    """(B, Lr) float: 1 on the response tokens the model wrote, 0 on environment tokens and padding
    (multi-turn, ``environment:``); None for single-turn batches (every response token the model's)."""
    calls: torch.Tensor | None = None
    """(B,) tool calls per trajectory (multi-turn; None single-turn)."""
    void_turns: torch.Tensor | None = None
    """(B,) void turns per trajectory (multi-turn; None single-turn)."""
    env_masks: EnvTokenMasks | None = None
    """The loss's per-term token masks under ``environment:`` (phase 4, rlvr_cli/algo/env_tokens.py); None single-turn."""

    @classmethod
    def from_groups(cls, groups: list[Group], share: range, group_size: int, pad_id: int, device) -> Batch:
        """The rows of the groups ``share`` names (this rank's contiguous share) of the step's ``groups``."""
        mine = groups[share.start : share.stop]
        prompt_ids = [grp.prompt_ids for grp in mine for _ in range(group_size)]
        response_ids = [resp for grp in mine for resp in grp.response_ids]
        batch = cls(
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            sampler_logprobs=[lp for grp in mine for lp in grp.logprobs],
            supports=[sp for grp in mine for sp in grp.supports],
            rewards=torch.tensor([x for grp in mine for x in grp.rewards], dtype=torch.float32, device=device),
            term_values=_term_values(mine, len(response_ids), device),
            truncated=torch.tensor([f == "length" for grp in mine for f in grp.finish_reasons], device=device),
            mask=pack(prompt_ids, response_ids, pad_id, device).response_mask if mine
            else torch.zeros(0, 1, device=device),  # a rank with no group of this step's batch
            group_size=group_size,
            pad_id=pad_id,
            device=device,
            rows=range(share.start * group_size, share.stop * group_size),
            n_rows=len(groups) * group_size,
        )
        if any(grp.origins for grp in groups):  # multi-turn: every group of a step has its trajectories' origins
            batch.model_tokens = _origins(mine, batch.mask)
            stats = [st for grp in mine for st in grp.episode_stats]
            batch.calls = torch.tensor([st.calls for st in stats], dtype=torch.float32, device=device)
            batch.void_turns = torch.tensor([st.void_turns for st in stats], dtype=torch.float32, device=device)
        return batch

    def __len__(self) -> int:
        return len(self.response_ids)

    @property
    def width(self) -> int:
        return self.mask.shape[1]

    @property
    def lengths(self) -> list[int]:
        """Prompt + response tokens per row (to sort micro-batches by)."""
        return [len(p) + len(r) for p, r in zip(self.prompt_ids, self.response_ids)]

    @property
    def response_lengths(self) -> torch.Tensor:
        """(B,) float32 response tokens per row."""
        return torch.tensor([len(x) for x in self.response_ids], dtype=torch.float32, device=self.device)

    def local_rows(self, step_rows: torch.Tensor) -> torch.Tensor:
        """The local indices of the rows of ``step_rows`` (indices in the step's batch) that this rank holds."""
        return torch.tensor([i - self.rows.start for i in step_rows.tolist() if i in self.rows], dtype=torch.long)

    def loss_inputs(self, idx: torch.Tensor, width: int) -> LossInputs:
        """The fixed tensors of rows ``idx``, cut to the response ``width`` of their micro-batch."""
        cut = lambda t: None if t is None else t[idx, :width]  # noqa: E731
        em = self.env_masks
        return LossInputs(cut(self.old_logp), cut(self.ref_logp), self.adv[idx].unsqueeze(1), cut(self.loss_mask),
                          cut(self.is_weights), cut(self.behaviour_logp),
                          None if em is None else EnvTokenMasks(cut(em.policy), cut(em.kl), cut(em.divisor), cut(em.echo)))

    def pack(self, idx: torch.Tensor) -> Packed:
        """Rows ``idx`` as tensors, with their sampling supports when the rollout truncated (top-k / top-p)."""
        return pack([self.prompt_ids[i] for i in idx], [self.response_ids[i] for i in idx], self.pad_id, self.device,
                    [self.supports[i] for i in idx] if self.supports else None)

    @torch.no_grad()
    def logprobs(self, model, temperature: float, chunks: int, amp, rows=None, with_entropy: bool = False):
        """log pi(y_t) of ``model`` for every response (or those of ``rows``), (B, Lr), in length-sorted
        chunks; with ``with_entropy`` also the per-token entropy, as a pair. Rows not computed are 0."""
        out = torch.zeros(len(self), self.width, device=self.device)
        ent = torch.zeros_like(out) if with_entropy else None
        for idx in length_sorted_chunks(range(len(self)) if rows is None else rows, self.lengths, chunks):
            with amp:
                lp, h = response_logprobs(model, self.pack(idx), temperature, with_entropy=with_entropy)
            out[idx.to(self.device), : lp.shape[1]] = lp
            if with_entropy:
                ent[idx.to(self.device), : lp.shape[1]] = h
        return (out, ent) if with_entropy else out

    def loss_counts(self, idx: torch.Tensor, aggregation: str) -> list:
        """The minibatch ``idx``'s normaliser Z (:func:`~rlvr_cli.algo.aggregation.aggregation_normalizer`, over
        the divisor's tokens under ``environment:``), its loss tokens and its echo tokens (this rank's)."""
        rows, em = idx.to(self.device), self.env_masks
        if em is None:
            mb = self.loss_mask[rows]
            return [aggregation_normalizer(mb, aggregation), mb.sum(), 0.0]
        echo = 0.0 if em.echo is None else float(em.echo[rows].sum())
        return [aggregation_normalizer(em.divisor[rows], aggregation), em.carry[rows].sum(), echo]

    @property
    def sampled_mask(self) -> torch.Tensor:
        """(B, Lr) float: the response tokens the sampler drew (and has log-probs for): the model's."""
        return self.mask if self.model_tokens is None else self.mask * self.model_tokens

    def sampler_logp(self) -> torch.Tensor:
        """(B, Lr) the sampler's log-probs of the responses (0 on padding)."""
        out = torch.zeros(len(self), self.width, device=self.device)
        for i, lp in enumerate(self.sampler_logprobs):
            if lp:
                out[i, : len(lp)] = torch.tensor(lp, device=self.device)
        return out


def _origins(groups: list[Group], mask: torch.Tensor) -> torch.Tensor:
    """(B, Lr) float model-token indicator of the groups' responses (rlvr_cli.envs.protocol.MODEL = 1)."""
    out = torch.zeros_like(mask)
    for i, org in enumerate(o for grp in groups for o in grp.origins):
        if org:
            out[i, : len(org)] = torch.tensor(org, dtype=out.dtype, device=out.device) == MODEL
    return out


def _term_values(groups: list[Group], rows: int, device) -> torch.Tensor:
    """(rows, K) reward terms of the groups' responses; (rows, 0) when there is no row (a rank without a group of
    this step) or no term values (a reshape to (0, -1) would be ambiguous)."""
    values = [v for grp in groups for v in grp.term_values]
    k = len(values[0]) if values else 0
    return torch.tensor(values, dtype=torch.float32, device=device).reshape(rows, k) if k else torch.zeros(rows, 0, device=device)

