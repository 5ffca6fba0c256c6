"""rlvr_cli/train/rollouts/lag.py: the version that samples step t at a fixed lag k, and a batch's lag,
against numbers worked by hand."""

from rlvr_cli.train.rollouts.lag import policy_lag, sampling_version
from rlvr_cli.train.rollouts.sampler_process import Plan


def test_sampling_version_by_hand():
    # k = 2: steps 1..5 take versions 0, 0, 0, 1, 2 (the first k steps the initial weights)
    assert [sampling_version(t, 2) for t in range(1, 6)] == [0, 0, 0, 1, 2]
    # k = 0 is the synchronous trainer: step t is sampled by version t-1
    assert [sampling_version(t, 0) for t in range(1, 5)] == [0, 1, 2, 3]


def test_policy_lag_by_hand():
    # k = 2 as above: lags 0, 1, 2, 2, 2
    assert [policy_lag(t, sampling_version(t, 2)) for t in range(1, 6)] == [0, 1, 2, 2, 2]
    assert policy_lag(7, 6) == 0 and policy_lag(7, 3) == 3


def test_the_sampler_plan_and_the_in_process_lag_agree():
    """The overlapped sampler's fixed plan names the version the in-process lag samples with."""
    plan = Plan("fixed", 3, "wait")
    assert [plan.oldest(t) for t in range(1, 8)] == [0, 0, 0, 0, 1, 2, 3]
    assert plan.version_for(6, [0, 1, 2, 3]) == 2 and plan.version_for(6, [3, 4]) is None
