"""The objective registry: one entry per ``loss.objective.type``, read by everything that names an objective.

An entry is the objective's recipe section (a Pydantic class chosen by its ``type``, as prime-rl chooses a
loss config; verl's ``core_algos.py`` registers each policy loss by name the same way) and carries, in one
place: its parameters and their bounds (the fields), its formula (:meth:`ObjectiveSpec.surrogate` calls its
``rlvr_cli.algo`` function), what its flagged tokens mean for the metrics that count them (``metrics``), the
compositions it refuses, its TRL and verl mappings (:meth:`ObjectiveSpec.to_trl` / ``to_verl``; None: the
target has no such loss and the exporter warns) and its line in docs/objectives.md. The schema's
discriminated union, the trainer (``rlvr_cli.train.objective``), the metric table (``rlvr_cli.metrics``),
both exporters and ``rlvr_cli.bridges.docs`` read :data:`OBJECTIVES`; a new objective is one
``@register``-ed class here plus its ``algo/`` function and their tests.

The bounds come from the float32 arithmetic the formulas run in: log-ratios are clamped to +-20 before
``exp`` (``rlvr_cli.algo.policy_loss.MAX_LOG_RATIO``), so no ratio exceeds exp(20) = 4.85e8 and a bound
beyond it never binds (and 1e300 would overflow float32 in ``clamp``).
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Annotated, Callable, ClassVar, Literal, Union

from pydantic import Field, model_validator

from rlvr_cli.recipe.strict import Strict

if TYPE_CHECKING:
    from rlvr_cli.algo.policy_loss import SurrogateOut

Warn = Callable[[str, str], None]
"""``warn(rlvr_field, what the target does instead)``: one export warning line."""
# ``loss`` below is the recipe's ``LossSpec`` (rlvr_cli.recipe.schema, which imports this module).

MAX_RATIO_BOUND = 4.8e8
"""Largest ratio bound or cap: the ratio never exceeds exp(20) = 4.85e8 (log-ratios are clamped to +-20)."""
MAX_LOG_BOUND = 20.0
"""Largest log-space bound: +-20 is where the trainer clamps log-ratios (exp(20) = 4.85e8)."""


class ObjectiveSpec(Strict):
    """One policy objective: its docstring is its docs line (paper and formula), the fields are its
    parameters, the class variables say how the rest of rlvr treats it."""

    label: ClassVar[str]
    """Its name in prose and in docs/objectives.md."""
    function: ClassVar[str]
    """``algo/FILE.py: function``: where its formula lives (:meth:`surrogate` calls it; a test checks)."""
    params_doc: ClassVar[str | None] = None
    """Where its parameters are when not in its own fields (PPO clip: loss.clip)."""
    metrics: ClassVar[dict[str, str]] = {}
    """Metric -> which tokens it counts under this objective; a metric of :data:`FLAG_METRICS` not listed is
    always 0. The flags of :class:`rlvr_cli.algo.policy_loss.SurrogateOut` carry the metric's name without
    ``_frac``."""
    zero_gradient: ClassVar[bool] = True
    """The flagged tokens get no gradient (Clip-Cov then leaves them out of its candidates)."""
    reads_loss_clip: ClassVar[bool] = False
    """loss.clip is its parameter section (any other objective refuses a changed loss.clip)."""
    sequence_ratio_inert: ClassVar[str | None] = None
    """Why loss.ratio `sequence` would be inert under it (then refused); None: the sequence ratio acts."""
    aggregation: ClassVar[tuple[str, str] | None] = None
    """(the only loss.aggregation it accepts, why: a format string over ``aggregation``); None: any."""
    paper_aggregation: ClassVar[tuple[str, str] | None] = None
    """(the aggregation its paper and anchors use, the note printed when the recipe differs)."""
    trl_doc: ClassVar[str] = "none: warned, the PPO-clip loss exported"
    verl_doc: ClassVar[str] = "none: warned, the PPO-clip loss exported"

    @classmethod
    def name(cls) -> str:
        """The ``type`` value that selects it."""
        return typing.get_args(cls.model_fields["type"].annotation)[0]

    def surrogate(self, loss, logp, old_logp, adv, mask) -> SurrogateOut:
        """Per-token policy loss: ``logp`` (B, T) with gradient, the behaviour ``old_logp`` (B, T), ``adv``
        (B, 1), ``mask`` (B, T); ``loss`` is the recipe's loss section (the ratio level)."""
        raise NotImplementedError

    def to_trl(self, loss, warn: Warn) -> dict | None:
        """``GRPOConfig`` keys that replace the PPO-clip loss's; None: TRL has no such loss (warned)."""
        return None

    def to_verl(self, loss, warn: Warn) -> dict | None:
        """Keys under ``actor_rollout_ref.actor`` (``policy_loss.loss_mode`` first) that replace the PPO-clip
        loss's; None: verl has no such loss (warned)."""
        return None


OBJECTIVES: dict[str, type[ObjectiveSpec]] = {}
"""``loss.objective.type`` -> its entry, in registration order (the default first)."""
FLAG_METRICS = ("clip_low_frac", "clip_high_frac", "dual_clip_frac")
"""The step metrics that count an objective's flagged tokens (``rlvr_cli.metrics``)."""


def register(cls: type[ObjectiveSpec]) -> type[ObjectiveSpec]:
    """Add an objective to :data:`OBJECTIVES` (a class decorator); its name must be new."""
    name = cls.name()
    if name in OBJECTIVES:
        raise ValueError(f"objective {name!r} is registered twice")
    unknown = set(cls.metrics) - set(FLAG_METRICS)
    if unknown:
        raise ValueError(f"objective {name!r}: metrics {sorted(unknown)} are not flag metrics {FLAG_METRICS}")
    OBJECTIVES[name] = cls
    return cls


def _ratio(loss, logp, old_logp, mask):
    from rlvr_cli.algo.policy_loss import RATIOS

    return RATIOS[loss.ratio](logp, old_logp, mask)


def _trl_forced_aggregation(loss, warn: Warn, loss_type: str, aggregation: str) -> None:
    if loss.aggregation != aggregation:
        warn("loss.aggregation", f"TRL's {loss_type} loss always aggregates as {aggregation}, not {loss.aggregation}")


@register
class PPOClipObjective(ObjectiveSpec):
    """PPO's clipped surrogate (GRPO, DAPO, GSPO): -min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A), bounds in loss.clip."""

    type: Literal["ppo_clip"]

    label: ClassVar = "PPO clip"
    function: ClassVar = "algo/policy_loss.py: clipped_surrogate"
    params_doc: ClassVar = "bounds in `loss.clip`"
    metrics: ClassVar = {"clip_low_frac": "clipped low (A < 0, rho < 1 - eps_low; zero gradient)",
                         "clip_high_frac": "clipped high (A > 0, rho > 1 + eps_high; zero gradient)",
                         "dual_clip_frac": "under the dual clip (A < 0, rho > c; zero gradient)"}
    reads_loss_clip: ClassVar = True
    trl_doc: ClassVar = "`loss_type` by aggregation (grpo / dapo / dr_grpo), `epsilon`, `epsilon_high`, `delta` (dual clip)"
    verl_doc: ClassVar = "`loss_mode=vanilla` (`gspo` with the sequence ratio), `clip_ratio_low/high`, `clip_ratio_c` (dual clip)"

    def surrogate(self, loss, logp, old_logp, adv, mask):
        from rlvr_cli.algo.policy_loss import clipped_surrogate

        c = loss.clip
        return clipped_surrogate(_ratio(loss, logp, old_logp, mask), adv, c.eps_low, c.eps_high, c.dual_clip)

    def to_trl(self, loss, warn):
        return {}  # the exporters' base case: loss.clip

    def to_verl(self, loss, warn):
        return {}


@register
class CISPOObjective(ObjectiveSpec):
    """CISPO (MiniMax-M1, arXiv 2506.13585 §3.1): -sg(clip(rho, 1 - eps_low, 1 + eps_high)) A log pi_t; a capped token keeps its gradient."""

    type: Literal["cispo"]
    eps_low: float | None = Field(None, ge=0, lt=1)
    """epsilon_low^IS: the importance weight is raised to at least 1 - eps_low (null = no lower bound, as the paper and TRL)."""
    eps_high: float = Field(4.0, ge=0, le=MAX_RATIO_BOUND)
    """epsilon_high^IS: 1 + eps_high caps the importance weight, gradient kept (4.0 = cap 5, ScaleRL arXiv 2510.13786; verl's example 0.2); at most 4.8e8, since no ratio exceeds exp(20)."""

    label: ClassVar = "CISPO"
    function: ClassVar = "algo/objectives.py: cispo_surrogate"
    metrics: ClassVar = {"clip_low_frac": "weight raised to 1 - eps_low (gradient kept)",
                         "clip_high_frac": "weight capped at 1 + eps_high (gradient kept)"}
    zero_gradient: ClassVar = False
    paper_aggregation: ClassVar = ("token_mean", "the paper and TRL aggregate with token_mean (1 / sum_i |o_i|)")
    trl_doc: ClassVar = ("`loss_type=\"cispo\"`, `epsilon_high = 1 + eps_high` (TRL's is the cap itself); no lower bound "
                         "(warned if `eps_low` is set); always token-mean")
    verl_doc: ClassVar = "`loss_mode=cispo`, `clip_ratio_low = eps_low` (10 = none when null), `clip_ratio_high = eps_high`"

    def surrogate(self, loss, logp, old_logp, adv, mask):
        from rlvr_cli.algo.objectives import cispo_surrogate

        return cispo_surrogate(logp, _ratio(loss, logp, old_logp, mask), adv, self.eps_low, self.eps_high)

    def to_trl(self, loss, warn):
        _trl_forced_aggregation(loss, warn, "cispo", "token_mean")
        if self.eps_low is not None:
            warn("loss.objective.eps_low", f"TRL's cispo has no lower bound on the weight; 1 - eps_low = {1 - self.eps_low:g} is not exported")
        if loss.ratio == "sequence":
            warn("loss.ratio", "TRL's cispo sums per-token terms: under importance_sampling_level sequence it weights each sequence by its length")
        # TRL's epsilon_high is the cap itself under cispo (its loss clamps the ratio at max=epsilon_high)
        return {"loss_type": "cispo", "epsilon_high": 1.0 + self.eps_high}

    def to_verl(self, loss, warn):
        low = VERL_CISPO_NO_LOWER_BOUND if self.eps_low is None else self.eps_low
        return {"policy_loss.loss_mode": "cispo", "clip_ratio": low, "clip_ratio_low": low, "clip_ratio_high": self.eps_high}


VERL_CISPO_NO_LOWER_BOUND = 10.0
"""verl's clip_ratio_low giving CISPO no lower bound (1 - 10 < 0 < any ratio), as verl's CISPO example sets it."""


@register
class SAPOObjective(ObjectiveSpec):
    """SAPO (Gao et al. 2025, arXiv 2511.20347): -(4 / tau) sigmoid(tau (rho - 1)) A, a smooth gate instead of the hard clip."""

    type: Literal["sapo"]
    # tau in [1e-6, 1e6]: below, the loss is dominated by its constant -2A/tau (2e6 A at 1e-6; 4/tau is inf in
    # float32 under 1.2e-38); above, the gate's half width 1.76/tau nears float32's resolution of rho near 1
    # (1.2e-7), so every off-policy token's gradient is 0 (at 1e300, tau (rho - 1) = inf * 0 is NaN)
    tau_pos: float = Field(1.0, ge=1e-6, le=1e6)
    """tau of SAPO's gate for A > 0 (paper, TRL and verl: 1.0); 1e-6..1e6, where 4/tau and tau (rho - 1) stay finite in float32."""
    tau_neg: float = Field(1.05, ge=1e-6, le=1e6)
    """tau of SAPO's gate for A <= 0 (paper, TRL and verl: 1.05); 1e-6..1e6, as tau_pos."""

    label: ClassVar = "SAPO"
    function: ClassVar = "algo/objectives.py: sapo_surrogate"
    zero_gradient: ClassVar = False
    paper_aggregation: ClassVar = ("seq_mean_token_mean", "the paper, TRL and verl aggregate with seq_mean_token_mean")
    trl_doc: ClassVar = "`loss_type=\"sapo\"`, `sapo_temperature_pos/neg`; always seq-mean-token-mean"
    verl_doc: ClassVar = "`loss_mode=sapo`, `actor.tau_pos/tau_neg`"

    def surrogate(self, loss, logp, old_logp, adv, mask):
        from rlvr_cli.algo.objectives import sapo_surrogate

        return sapo_surrogate(_ratio(loss, logp, old_logp, mask), adv, self.tau_pos, self.tau_neg)

    def to_trl(self, loss, warn):
        _trl_forced_aggregation(loss, warn, "sapo", "seq_mean_token_mean")
        return {"loss_type": "sapo", "sapo_temperature_pos": self.tau_pos, "sapo_temperature_neg": self.tau_neg}

    def to_verl(self, loss, warn):
        if loss.aggregation != "seq_mean_token_mean":
            warn("loss.aggregation", f"verl's sapo loss aggregates as seq-mean-token-mean, not {loss.aggregation}")
        # compute_policy_loss_sapo reads the actor config's tau_pos / tau_neg (not policy_loss.*)
        return {"policy_loss.loss_mode": "sapo", "tau_pos": self.tau_pos, "tau_neg": self.tau_neg}


@register
class GMPOObjective(ObjectiveSpec):
    """GMPO (Zhao et al. 2025, arXiv 2507.20673; verl `geo_mean`): -A_i exp(mean_t clip(log rho_t)), the token ratios' geometric mean clipped in log space."""

    type: Literal["gmpo"]
    eps_low: float = Field(0.4, ge=0, le=MAX_LOG_BOUND)
    """For A < 0 each log rho_t is clipped below at -eps_low (the authors' 0.4, i.e. rho >= e^-0.4); at most 20, where log-ratios are clamped."""
    eps_high: float = Field(0.4, ge=0, le=MAX_LOG_BOUND)
    """For A > 0 each log rho_t is clipped above at +eps_high (the authors' 0.4, i.e. rho <= e^0.4); at most 20, where log-ratios are clamped."""

    label: ClassVar = "GMPO"
    function: ClassVar = "algo/objectives.py: gmpo_surrogate"
    metrics: ClassVar = {"clip_low_frac": "log-ratio clipped (A < 0; zero gradient)",
                         "clip_high_frac": "log-ratio clipped (A > 0; zero gradient)"}
    sequence_ratio_inert: ClassVar = "GMPO builds its own sequence ratio, the geometric mean of clipped token ratios"
    aggregation: ClassVar = ("seq_mean_token_mean", "has one loss per sequence (broadcast to its tokens); {aggregation} "
                             "would weight sequences by length, which is not GMPO (use seq_mean_token_mean)")
    verl_doc: ClassVar = "`loss_mode=geo_mean`, `clip_ratio_low/high` (log space); verl ignores `loss_agg_mode` for it"

    def surrogate(self, loss, logp, old_logp, adv, mask):
        from rlvr_cli.algo.objectives import gmpo_surrogate
        from rlvr_cli.algo.policy_loss import token_log_ratio

        # its own sequence level: the schema refuses loss.ratio sequence
        return gmpo_surrogate(token_log_ratio(logp, old_logp, mask), adv, mask, self.eps_low, self.eps_high)

    def to_verl(self, loss, warn):
        warn("loss.objective", "verl's geo_mean ignores loss_agg_mode (a plain mean over the micro batch's sequences) and reduces rollout IS weights to a per-sequence geometric mean")
        return {"policy_loss.loss_mode": "geo_mean", "clip_ratio": self.eps_low, "clip_ratio_low": self.eps_low,
                "clip_ratio_high": self.eps_high}


# DPPO's deltas: a TV delta is a difference of probabilities (at most 1); the binary KL of float32 probabilities
# stays below 104 + 19 (-log of the smallest float32, 1.4e-45, plus log(1 / KL_EPS) of algo/trust_region.py):
# a larger delta never masks a token
DPPO_MAX_KL_DELTA = 125.0


class _DPPOObjective(ObjectiveSpec):
    delta_low: float | None = Field(None, gt=0, le=DPPO_MAX_KL_DELTA)
    """delta_low: largest fall of pi(y_t) (TV, at most 1) / binary KL (KL, at most 125) allowed for A <= 0 (null = verl's example: 0.15 TV, 0.05 KL); a larger delta never masks."""
    delta_high: float | None = Field(None, gt=0, le=DPPO_MAX_KL_DELTA)
    """delta_high: largest rise of pi(y_t) (TV, at most 1) / binary KL (KL, at most 125) allowed for A > 0 (null = verl's example: 0.15 TV, 0.05 KL)."""
    is_cap: float = Field(20.0, gt=1, le=MAX_RATIO_BOUND)
    """C: the kept token's importance weight sg(min(rho, C)) (paper §5.4: large; verl's fallback 20, its example 10000); at most 4.8e8, since no ratio exceeds exp(20)."""

    divergence: ClassVar[str]
    """``rlvr_cli.algo.trust_region.DIVERGENCES``: `tv` or `kl`."""
    default_delta: ClassVar[float]
    max_delta: ClassVar[float]
    function: ClassVar = "algo/trust_region.py: dppo_surrogate"
    metrics: ClassVar = {"clip_low_frac": "masked (A <= 0; zero gradient)", "clip_high_frac": "masked (A > 0; zero gradient)"}
    sequence_ratio_inert: ClassVar = "DPPO's mask and weight read each token's probability, not a ratio"
    verl_doc: ClassVar = ("`loss_mode={name}`, `clip_ratio_low/high = delta`, `clip_ratio_c = is_cap` always (verl's "
                          "default 3.0 would truncate rho at 3)")

    @model_validator(mode="after")
    def _resolve_deltas(self):
        self.delta_low = self.default_delta if self.delta_low is None else self.delta_low
        self.delta_high = self.default_delta if self.delta_high is None else self.delta_high
        if max(self.delta_low, self.delta_high) > self.max_delta:
            raise ValueError(f"{self.type}: delta_low and delta_high must be <= {self.max_delta:g} "
                             f"(got {self.delta_low:g}, {self.delta_high:g}); a larger delta never masks a token")
        return self

    def surrogate(self, loss, logp, old_logp, adv, mask):
        from rlvr_cli.algo.trust_region import dppo_surrogate

        # a per-token trust region: the schema refuses loss.ratio sequence
        return dppo_surrogate(logp, old_logp, adv, self.divergence, self.delta_low, self.delta_high, self.is_cap)

    def to_verl(self, loss, warn):
        # clip_ratio_c always: verl's ActorConfig defaults it to 3.0 (dual clip's c), which would cap rho at 3
        return {"policy_loss.loss_mode": self.name(), "clip_ratio": self.delta_low, "clip_ratio_low": self.delta_low,
                "clip_ratio_high": self.delta_high, "clip_ratio_c": self.is_cap}


@register
class DPPOTVObjective(_DPPOObjective):
    """DPPO (arXiv 2602.04879; verl `dppo_tv`): -A sg(min(rho, C)) log pi_t on tokens whose |pi - pi_old| stays within delta on A's side, 0 elsewhere."""

    type: Literal["dppo_tv"]

    label: ClassVar = "DPPO (TV)"
    divergence, default_delta, max_delta = "tv", 0.15, 1.0


@register
class DPPOKLObjective(_DPPOObjective):
    """DPPO (arXiv 2602.04879; verl `dppo_kl`): as dppo_tv with the binary KL of {y_t, not y_t} as the divergence."""

    type: Literal["dppo_kl"]

    label: ClassVar = "DPPO (binary KL)"
    divergence, default_delta, max_delta = "kl", 0.05, DPPO_MAX_KL_DELTA


Objective = Annotated[Union[tuple(OBJECTIVES.values())], Field(discriminator="type")]  # noqa: UP007 - a runtime tuple
"""``loss.objective``: one section per registered objective, chosen by ``type``."""


def check_loss(loss) -> None:
    """Refuse (ValueError) a loss section whose objective would silently ignore one of its knobs."""
    entry, kind = type(loss.objective), loss.objective.type
    if not entry.reads_loss_clip and loss.clip != type(loss.clip)():
        raise ValueError(f"clip: only objective ppo_clip reads it (its eps and dual clip would be inert under {kind}); "
                         "set the bounds in loss.objective")
    if loss.ratio == "sequence" and entry.sequence_ratio_inert:
        raise ValueError(f"ratio: `sequence` would be inert under objective {kind}: {entry.sequence_ratio_inert}")
    if entry.aggregation is not None and loss.aggregation != entry.aggregation[0]:
        raise ValueError(f"aggregation: objective {kind} " + entry.aggregation[1].format(aggregation=loss.aggregation))


def objective_notes(loss) -> list[str]:
    """Remarks on a valid choice that departs from the objective's paper (printed, not errors)."""
    paper = type(loss.objective).paper_aggregation
    if paper is not None and loss.aggregation != paper[0]:
        return [f"loss.objective {loss.objective.type}: {paper[1]}."]
    return []


def flag_meaning(metric: str) -> str:
    """What ``metric`` (one of :data:`FLAG_METRICS`) counts under each objective, for the metric table."""
    return ", ".join(f"{name} {entry.metrics.get(metric, 'always 0')}" for name, entry in OBJECTIVES.items())


def _params(entry: type[ObjectiveSpec]) -> str:
    fields = [f"`{f}`" for f in entry.model_fields if f != "type"]
    return entry.params_doc or (", ".join(fields) if fields else "no parameter")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown_tables() -> str:
    """The objective tables of docs/objectives.md: what each computes and counts, then its TRL / verl mapping."""
    lines = ["| objective | `loss.objective.type` (parameters) | what it computes | what `clip_low_frac` / "
             "`clip_high_frac` / `dual_clip_frac` count | function |", "|---|---|---|---|---|"]
    for name, e in OBJECTIVES.items():
        counts = "; ".join(f"{m.removesuffix('_frac')}: {e.metrics[m]}" for m in FLAG_METRICS if m in e.metrics)
        lines.append(f"| {e.label} | `{name}` ({_params(e)}) | {_cell(' '.join(e.__doc__.split()))} | {_cell(counts or 'nothing (always 0)')} "
                     f"| `{e.function}` |")
    lines += ["", "| `type` | TRL 1.16 (`GRPOConfig`) | verl 0.9.1 |", "|---|---|---|"]
    for name, e in OBJECTIVES.items():
        lines.append(f"| `{name}` | {_cell(e.trl_doc)} | {_cell(e.verl_doc.format(name=name))} |")
    return "\n".join(lines) + "\n"
