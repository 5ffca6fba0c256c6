"""`rlvr doctor`: what would make a run learn nothing or mislead, measured on the base model before training.

It draws the first ``num_prompts`` prompts of the run's first step and samples G responses to each
with the trainer's own sampling round (:mod:`rlvr_cli.sampling.rounds`: the recipe's rollout settings,
the keyed random streams, the sampling autocast), so these are the responses step 1 samples for them
(on the same machine; tests/evaluation/test_doctor.py checks it); then it scores them with the recipe's
reward terms (the user's ``function`` terms included, through the worker pool) and checks:

- truncated responses: cut at ``rollout.max_new_tokens`` before their answer. `warn` from
  :data:`TRUNCATED_WARN`; `FAIL` when every response is cut and that leaves none usable
  (``reward.truncated_is_incorrect`` or ``overlong.mask_truncated``).
- groups with zero reward spread (all right or all wrong), and groups with no learning signal: every
  advantage of the group 0 under the recipe's baseline and scale (or masked). `warn` from
  :data:`SILENT_WARN`; `FAIL` when no group has a signal: the first update would be zero.
- the reward per term (mean, spread, groups where it varies); a term constant on every response adds
  nothing (`warn`: a broken function returns the same value everywhere).
- reward against accuracy: within groups holding both right and wrong responses, the share of (right,
  wrong) pairs where the wrong one scores at least as high. `warn` above 0: the reward teaches
  something besides correctness.
- the data, on every row of a file task (named by ``file:line``; rlvr_cli/evaluation/doctor_data.py):
  prompts longer than the context (`FAIL`: training stops at the step that draws one), gold answers the
  verifier cannot read (`FAIL`: every response to them is an ``error``), characters the tokenizer maps
  to its unknown token (`warn`).
- whether the true reward can be learned: no prompt solved in any sample at the base is `FAIL` (RL
  cannot raise accuracy from 0), with its own message.
- with an environment: the share of trajectories that call the tool, failed calls, accuracy with and
  without a call; `warn` when none calls (RL cannot teach a call the model never makes).
- the sampling settings: top-p / top-k draw from a truncated distribution; the loss's log-probs are
  renormalised on each token's sampling support, so the truncated policy is what trains, and a token
  alone in its support gets no gradient (`warn`; docs/async.md).

The recipe's own notes and the model notes (learning rate, precision) that ``rlvr recipes validate``
prints come with it. The reward is the trainer's, shaped as step 1 shapes it (one function,
rlvr_cli/rewards/shaping.py::shape_rewards): the terms plus an environment's ``get_reward()``, length
controls, the tool calls' price (``environment.call_cost``) and DAPO's soft overlong punishment; KL in
the reward adds nothing at step 1 (the policy is the reference, k1 = 0).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from rlvr_cli.algo.advantages import group_advantages, zero_spread_groups
from rlvr_cli.errors import UserError
from rlvr_cli.evaluation import doctor_data
from rlvr_cli.keyed_random import stream_key
from rlvr_cli.models import load_model, resolve_device, sampling_autocast, trainer_autocast
from rlvr_cli.models.notes import model_notes
from rlvr_cli.recipe.schema import Recipe
from rlvr_cli.rewards import ScoreItem, Scorer
from rlvr_cli.rewards.shaping import environment_rewards, shape_rewards
from rlvr_cli.evaluation.decoding import environment_turns
from rlvr_cli.sampling.rounds import RoundKey, RoundSettings, draw_prompts, sample_round
from rlvr_cli.tasks import build_task, encode_prompt

TRUNCATED_WARN = 0.25
"""Share of truncated responses from which the doctor warns: beyond a quarter, the limit shapes what is learned."""
SILENT_WARN = 0.5
"""Share of groups without spread (or signal) from which the doctor warns: half the batch then trains nothing."""
LENGTH_SAMPLE = 256
"""Training prompts drawn, beside the sampled ones and the evaluation's, to look for prompts longer than the context."""


@dataclass
class Finding:
    check: str
    value: str
    verdict: str
    """`ok`, `info`, `warn` (learns less, or something misleading) or `FAIL` (learns nothing, or stops)."""
    detail: str = ""


@dataclass
class TermStats:
    key: str
    weight: float
    mean: float
    std: float
    low: float
    high: float
    groups_with_spread: int


@dataclass
class Diagnosis:
    findings: list[Finding]
    terms: list[TermStats]
    notes: list[str]
    prompts: int
    responses: int
    seconds: float = 0.0
    samples: list[dict] = field(default_factory=list)
    """A few sampled responses with their reward and verdict, to read."""

    @property
    def failures(self) -> list[str]:
        """One line per reason the run would learn nothing or stop."""
        return [f"{f.check}: {f.detail}" for f in self.findings if f.verdict == "FAIL"]


def _share(k: int, n: int) -> str:
    return f"{k} of {n} ({k / n:.0%})" if n else "0 of 0"


def diagnose(recipe: Recipe, num_prompts: int = 8) -> Diagnosis:
    """Sample, score and check a recipe's first step on its base model (see the module docstring)."""
    t0 = time.perf_counter()
    if recipe.algorithm != "rl":
        raise UserError("algorithm: rlvr doctor checks RL recipes; an SFT recipe samples nothing")
    task = build_task(recipe.task)
    device = resolve_device(recipe.device)
    model, tok, _ = load_model(recipe.model.name, device, recipe.model.dtype)
    model.eval()
    ro, g = recipe.rollout, recipe.rollout.group_size
    amp = sampling_autocast(ro.sample_autocast, trainer_autocast(recipe.model.dtype, recipe.model.autocast, device))
    key = RoundKey(recipe.seed, 1, 0)  # step 1's first round
    problems = draw_prompts(task, key, num_prompts)
    prompt_ids = [encode_prompt(tok, task, p) for p in problems]
    limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
    fits = [j for j, ids in enumerate(prompt_ids) if not isinstance(limit, int) or len(ids) + ro.max_new_tokens <= limit]
    findings = _data_findings(recipe, task, tok, limit, problems)
    items: list[ScoreItem] = []
    if fits:
        turns = environment_turns(recipe.environment, recipe.model.name, tok, task, recipe.reward.extract)
        sampled = sample_round(model, tok, task, ro, key, problems, fits, RoundSettings(amp, turns))  # multi-turn too
        out = sampled.samples
        items = [ScoreItem(problems[fits[k // g]], sampled.texts[k], k % g, 1, out.finish_reasons[k] == "length", ids)
                 for k, ids in enumerate(out.response_ids)]
    with Scorer(recipe.reward, task, seed=recipe.seed) as scorer:
        scores = scorer.score(items) if items else []
    diag = Diagnosis(findings, [], recipe.notes() + model_notes(recipe), len(fits), len(items))
    if items:
        _check_scores(recipe, items, scores, diag, Trajectories.of(out, len(items)))
    findings.append(_sampling(recipe))
    diag.samples = [{"prompt": it.problem.prompt, "response": it.response, "reward": s.reward, "outcome": s.outcome}
                    for it, s in list(zip(items, scores))[:: max(1, g)][:4]]
    diag.seconds = time.perf_counter() - t0
    return diag


@dataclass
class Trajectories:
    """What the environment adds to each response's reward at step 1 (zeros for single-turn)."""

    env_rewards: list[float]
    """TRL's ``get_reward()`` per trajectory (rlvr_cli/rewards/shaping.py::environment_rewards)."""
    calls: list[int]
    """Tool calls per trajectory, priced by ``environment.call_cost``."""
    failures: list[int] = field(default_factory=list)
    """Failed calls per trajectory (an error, a timeout, a malformed call); empty for single-turn."""

    @classmethod
    def of(cls, out, n: int) -> "Trajectories":
        episodes = getattr(out, "episodes", None) or []
        return cls(environment_rewards(out, n), [ep.stats.calls for ep in episodes] or [0] * n,
                   [ep.stats.failures for ep in episodes])

    def finding(self, correct: list[bool]) -> Finding | None:
        """How often the base model calls the tool, how often a call fails, and its accuracy with and without a
        call (the step's ``tools/*`` metrics, before training); `warn` when no trajectory calls: RL only
        reweights what the model samples, so a model that never calls is not taught to (TRL #5366)."""
        if not self.failures:
            return None
        n, calling, calls = len(self.calls), sum(c > 0 for c in self.calls), sum(self.calls)
        if not calling:
            return Finding("tool calls", f"no trajectory of {n} calls the tool", "warn",
                           "the base model never calls it, and RL reweights only what it samples: no trajectory can "
                           "show a call paying off (prompt the call's form, or warm-start on traces that call; docs/tools.md)")

        def acc(rows):
            return f"{sum(rows) / len(rows):.2f}" if rows else "-"
        with_ = [c for c, k in zip(correct, self.calls) if k]
        without = [c for c, k in zip(correct, self.calls) if not k]
        return Finding("tool calls", f"{_share(calling, n)} of trajectories call; {_share(sum(self.failures), calls)} "
                       f"calls fail; accuracy {acc(with_)} with a call, {acc(without)} without", "info")


def _check_scores(recipe: Recipe, items: list[ScoreItem], scores, diag: Diagnosis, traj: Trajectories) -> None:
    """The findings that need the scored responses (rows are groups of G, in order): the reward is the
    trainer's (terms + the environment's ``get_reward()``), shaped as step 1 shapes it."""
    g, n = recipe.rollout.group_size, len(items)
    rewards = torch.tensor([s.reward + e for s, e in zip(scores, traj.env_rewards)], dtype=torch.float64).view(-1, g)
    correct = torch.tensor([s.correct for s in scores]).view(-1, g)
    cut = torch.tensor([it.truncated for it in items]).view(-1, g)
    lengths = torch.tensor([len(it.completion_ids) for it in items], dtype=torch.float32).view(-1, g)
    keys = list(scores[0].terms)
    terms = torch.tensor([[s.terms[k] for k in keys] for s in scores], dtype=torch.float64).view(-1, g, len(keys))
    calls = torch.tensor(traj.calls, dtype=torch.float64)
    shaped = shape_rewards(recipe, rewards.flatten(), lengths.flatten().to(rewards.dtype), None, None, None,
                           calls=calls).view(-1, g)  # step 1: pi = pi_ref, so KL in the reward adds nothing
    f = diag.findings
    k = int(cut.sum())
    unusable = recipe.reward.truncated_is_incorrect or recipe.overlong.mask_truncated
    if k == n and unusable:
        why = ("none enters the loss (overlong.mask_truncated)" if recipe.overlong.mask_truncated else
               "none can be correct, and every answer-based term is 0 (reward.truncated_is_incorrect)")
        f.append(Finding("truncated responses", _share(k, n), "FAIL", f"every response was cut at "
                         f"rollout.max_new_tokens = {recipe.rollout.max_new_tokens} before its end: {why}"))
    else:
        f.append(Finding("truncated responses", _share(k, n), "warn" if k / n >= TRUNCATED_WARN else "ok",
                         "cut at rollout.max_new_tokens before their end: their answers are scored 0" if k / n >= TRUNCATED_WARN else ""))
    p = rewards.shape[0]
    flat = int(zero_spread_groups(shaped).sum())
    f.append(Finding("groups with zero reward spread", _share(flat, p), "warn" if flat / p >= SILENT_WARN else "ok",
                     "all right or all wrong: a group baseline gives them advantage 0 "
                     "(dynamic_sampling.enabled resamples such groups)" if flat / p >= SILENT_WARN else ""))
    silent = int(_silent_groups(recipe, shaped, terms, cut).sum())
    verdict = "FAIL" if silent == p else "warn" if silent / p >= SILENT_WARN else "ok"
    f.append(Finding("groups with no learning signal", _share(silent, p), verdict,
                     f"every advantage is 0 under advantage.baseline {recipe.advantage.baseline} and scale "
                     f"{recipe.advantage.scale} (or masked): the update of step 1 would be zero" if verdict == "FAIL" else
                     "these groups train nothing" if verdict == "warn" else ""))
    acc = float(correct.double().mean())
    solved = float(correct.any(dim=1).double().mean())
    f.append(Finding("accuracy (task verifier)", f"{acc:.2f} (a prompt solved at least once: {solved:.2f})", "info"))
    if k < n:  # every response cut is its own FAIL, and the cause
        f.append(Finding(*doctor_data.learnable_finding(int(correct.any(dim=1).sum()), p, n, g)))
    f.append(_disagreement(rewards, correct))
    if (tools := traj.finding(correct.flatten().tolist())) is not None:
        f.append(tools)
    for j, (key, term) in enumerate(zip(keys, recipe.reward.terms)):
        v = terms[:, :, j]
        label = term.doctor_label(key)  # rlvr_cli/recipe/reward_terms.py
        diag.terms.append(TermStats(label, term.weight, float(v.mean()), float(v.std()) if v.numel() > 1 else 0.0,
                                    float(v.min()), float(v.max()), int((~zero_spread_groups(v)).sum())))
    constant = [t for t in diag.terms if t.high - t.low <= 1e-12]
    if constant and len(keys) > 1:
        user_code = {term.doctor_label(key) for key, term in zip(keys, recipe.reward.terms) if term.user_code}
        broken = " (a function that returns one value for everything is likely broken)" if any(
            t.key in user_code for t in constant) else ""
        f.append(Finding("constant reward terms", ", ".join(f"{t.key} = {t.low:g}" for t in constant), "warn",
                         f"the same value on every response: the term adds nothing to the advantage{broken}"))
    if not solved and f[-1].check == "constant reward terms":  # flat because nothing is right, not broken
        f[-1].detail = ("the same value on every response: the term adds nothing to the advantage (no response "
                        "is correct: see `true reward learnable`)")


def _silent_groups(recipe: Recipe, shaped, terms, cut) -> torch.Tensor:
    """(P,) groups where every response's advantage is 0 or masked out (GDPO: every term flat in the group)."""
    if recipe.reward.combination == "decoupled":
        flat = torch.stack([zero_spread_groups(terms[:, :, j]) for j in range(terms.shape[2])]).all(dim=0)
        live = (~flat).unsqueeze(1).expand_as(cut)
    else:
        a = recipe.advantage
        live = group_advantages(shaped, a.baseline, a.scale, a.eps) != 0
    if recipe.overlong.mask_truncated:
        live = live & ~cut
    return ~live.any(dim=1)


def _disagreement(rewards, correct) -> Finding:
    """(right, wrong) pairs within a group where the wrong response scores at least as high."""
    pairs = bad = 0
    for r, c in zip(rewards.tolist(), correct.tolist()):
        right = [x for x, ok in zip(r, c) if ok]
        wrong = [x for x, ok in zip(r, c) if not ok]
        pairs += len(right) * len(wrong)
        bad += sum(w >= x for x in right for w in wrong)
    if not pairs:
        return Finding("reward vs accuracy", "no group with both right and wrong responses", "info")
    return Finding("reward vs accuracy", f"wrong >= right in {_share(bad, pairs)} pairs", "warn" if bad else "ok",
                   "within a group a wrong response scores at least as high as a right one: the reward teaches "
                   "something besides correctness" if bad else "")


def _data_findings(recipe: Recipe, task, tok, limit, sampled) -> list[Finding]:
    """The checks of the task's rows (every row of a file task; else the sampled prompts, LENGTH_SAMPLE
    more training draws and the held-out prompts): context length, gold answers, vocabulary."""
    rows, every = doctor_data.task_rows(task, recipe.seed, LENGTH_SAMPLE, sampled)
    return [Finding(*doctor_data.context_finding(rows, every, task, tok, limit, recipe.rollout.max_new_tokens)),
            Finding(*doctor_data.gold_finding(rows, every, task.verifier)),
            Finding(*doctor_data.vocabulary_finding(rows, every, tok, recipe.model.name))]


def _sampling(recipe: Recipe) -> Finding:
    ro = recipe.rollout
    value = f"temperature {ro.temperature:g}, top_p {ro.top_p:g}, top_k {ro.top_k}"
    if ro.top_p < 1 or ro.top_k > 0:
        return Finding("sampling", value, "warn", "responses come from a truncated distribution, and every log-prob "
                       "the loss takes is renormalised on the support each token was sampled from "
                       "(rlvr_cli/algo/logprobs.py, docs/async.md): the policy trained is the truncated one, and a "
                       "token alone in its support (top-p at a confident token) has probability 1 and no gradient")
    return Finding("sampling", value + " (the full distribution)", "ok")
