"""Synthetic paired evaluations with known truth, for calibrating the verdict rule (tests and results).

A logit model of per-prompt success (the one of the verdict-power note, fitted to results/staleness):

    logit p[arm, seed, prompt] = mu_prompt + tau * [arm = other] + v[arm, seed] + w[arm, seed, prompt]
    c[arm, seed, prompt] ~ Binomial(n, p)

mu ~ N(mu_mean, mu_sd^2) is the prompt's difficulty (shared by both arms: the pairing), v ~ N(0, seed_sd^2)
a training seed's level (its run-to-run variation), w ~ N(0, cell_sd^2) the seed's prompt-by-prompt
variation; v and w are drawn independently for the two arms (no common random numbers between arms with the
same seed, which makes a paired-seed test conservative, never liberal). tau = 0 is the null. The defaults
(mu 2.6 +- 2.4, cell_sd 0.6, n 16) give pass@1 about 0.80 and pass@16 0.99, as the staleness control.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import expit


@dataclass(frozen=True)
class World:
    prompts: int = 64
    seeds: int = 3
    n: int = 16
    seed_sd: float = 0.1
    cell_sd: float = 0.6
    mu_mean: float = 2.6
    mu_sd: float = 2.4


def draw(world: World, tau: float, rng: np.random.Generator, truth: bool = True
         ) -> tuple[np.ndarray, np.ndarray, float]:
    """(control, other, true difference): (seeds, prompts) pass@1 scores c/n of both arms and the
    expected pass@1 difference over these prompts (the estimand, averaged over seed effects; 0 at tau = 0,
    NaN with ``truth=False``, which skips its quadrature when only a rejection rate is wanted)."""
    mu = rng.normal(world.mu_mean, world.mu_sd, world.prompts)
    arms = []
    for shift in (0.0, tau):
        logit = mu[None, :] + shift + rng.normal(0, world.seed_sd, (world.seeds, 1)) \
            + rng.normal(0, world.cell_sd, (world.seeds, world.prompts))
        arms.append(rng.binomial(world.n, expit(logit)) / world.n)
    return arms[0], arms[1], (0.0 if not tau else true_difference(world, mu, tau) if truth else float("nan"))


def true_difference(world: World, mu: np.ndarray, tau: float, draws: int = 4000) -> float:
    """E[pass@1 other] - E[pass@1 control] on prompts ``mu``, by quadrature over the seed and cell noise."""
    z = np.random.default_rng(12345).normal(0, np.hypot(world.seed_sd, world.cell_sd), draws)
    return float(expit(mu[:, None] + tau + z[None, :]).mean() - expit(mu[:, None] + z[None, :]).mean())


def arm_seed_sd(world: World, rng: np.random.Generator, draws: int = 200) -> float:
    """The across-seed SD of one arm's pass@1 this world produces (what results/ report per arm)."""
    sds = []
    for _ in range(draws):
        a, _, _ = draw(World(**{**world.__dict__, "seeds": max(2, world.seeds)}), 0.0, rng)
        sds.append(a.mean(axis=1).std(ddof=1))
    return float(np.sqrt(np.mean(np.square(sds))))
