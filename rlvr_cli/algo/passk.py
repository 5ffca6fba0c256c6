"""pass@k and pass^k (unbiased) and maj@k (self-consistency) from n samples per prompt.

pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", arXiv:2107.03374 §2.1,
eq. 1): with n samples of which c are correct, the probability that at least one of k samples drawn
without replacement is correct is

    pass@k = 1 - C(n - c, k) / C(n, k) = 1 - prod_{i = n-c+1}^{n} (1 - k / i)

computed in the product form (no factorials, no overflow); it is 1 when n - c < k. The benchmark value
is the mean over prompts. Example: n = 4, c = 1 -> pass@1 = 0.25, pass@2 = 0.5, pass@4 = 1.

pass^k (Yao et al. 2024, tau-bench, arXiv:2406.12045, its reliability metric): the probability that all
k of k samples drawn without replacement are correct,

    pass^k = C(c, k) / C(n, k) = prod_{i=0}^{k-1} (c - i) / (n - i)

0 when c < k; pass^1 = pass@1 = c / n, and pass^k falls with k where pass@k rises. It is pass@k's
complement with correct and wrong swapped: pass^k(n, c) = 1 - pass@k(n, n - c). Example: n = 4, c = 2
-> pass^1 = 0.5, pass^2 = (2/4)(1/3) = 1/6, pass^3 = 0. prime-rl logs it per environment as
``pass^k`` beside ``pass@k`` for k = 1, 2, 4, ... <= n, and the verifiers library reports it as
``pass_all_k``; both use this estimator, averaged over prompts, on binary rewards. The gap between them
is disagreement among one prompt's samples: when every prompt's samples agree (c = 0 or c = n, as after
entropy collapse) pass@k = pass^k = pass@1 for every k.

maj@k (Wang et al. 2023, self-consistency, arXiv:2203.11171 §2): the answer given most often among k samples is the
prediction. Ties go to the answer whose first appearance comes first (deterministic); samples with no
extractable answer do not vote. With n >= k samples the n samples are cut into floor(n / k) disjoint
blocks of k and the result is the mean over blocks, which uses every sample once.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one prompt with n samples, c correct (arXiv:2107.03374 eq. 1, product form)."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def mean_pass_at_k(correct_counts: Sequence[int], n: int, k: int) -> float:
    """pass@k (arXiv:2107.03374 eq. 1) averaged over prompts, each with n samples and ``correct_counts[j]`` correct."""
    if not correct_counts:
        raise ValueError("no prompts")
    return sum(pass_at_k(n, c, k) for c in correct_counts) / len(correct_counts)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k for one prompt with n samples, c correct: C(c, k) / C(n, k) (arXiv:2406.12045, product form)."""
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    prod = 1.0
    for i in range(k):
        prod *= (c - i) / (n - i)  # reaches 0 at i = c when c < k
    return prod


def mean_pass_hat_k(correct_counts: Sequence[int], n: int, k: int) -> float:
    """pass^k (arXiv:2406.12045) averaged over prompts, each with n samples and ``correct_counts[j]`` correct."""
    if not correct_counts:
        raise ValueError("no prompts")
    return sum(pass_hat_k(n, c, k) for c in correct_counts) / len(correct_counts)


def majority_vote(answers: Sequence[Hashable | None]) -> Hashable | None:
    """Self-consistency vote (arXiv:2203.11171 §2): the most frequent non-None answer; ties go to the one that
    appears first. None if no votes.
    """
    counts: dict = {}
    first: dict = {}
    for i, a in enumerate(answers):
        if a is None:
            continue
        counts[a] = counts.get(a, 0) + 1
        first.setdefault(a, i)
    if not counts:
        return None
    return max(counts, key=lambda a: (counts[a], -first[a]))


def maj_at_k(answers: Sequence[Hashable | None], correct: Sequence[bool], k: int) -> float:
    """maj@k (arXiv:2203.11171 §2) for one prompt: mean over disjoint blocks of k samples of [the voted answer
    is correct].
    """
    n = len(answers)
    if len(correct) != n:
        raise ValueError("answers and correct differ in length")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k={k}, n={n}")
    truth = {}
    for a, ok in zip(answers, correct):
        if a is not None:
            truth[a] = truth.get(a, False) or bool(ok)
    blocks = n // k
    hits = 0
    for b in range(blocks):
        winner = majority_vote(answers[b * k : (b + 1) * k])
        hits += bool(winner is not None and truth.get(winner, False))
    return hits / blocks
