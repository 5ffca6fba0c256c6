"""One source for names: the algo registries are keyed by exactly the schema's allowed values."""

from __future__ import annotations

import pytest

from rlvr_cli import algo
from rlvr_cli.recipe import schema
from rlvr_cli.recipe.schema import literal_values

PAIRS = [
    ("BASELINES", "Baseline"),
    ("SCALES", "AdvantageScale"),
    ("RATIOS", "RatioLevel"),
    ("KL_ESTIMATORS", "KLEstimator"),
    ("AGGREGATIONS", "Aggregation"),
    ("IS_MODES", "ISMode"),
]
"""The objectives have one registry of their own, read by the schema: tests/recipe/test_objectives.py."""


@pytest.mark.parametrize("registry,alias", PAIRS)
def test_registry_keys_equal_schema_literal(registry, alias):
    keys = list(getattr(algo, registry))
    allowed = literal_values(getattr(schema, alias))
    assert len(keys) == len(set(keys))
    assert set(keys) == set(allowed), f"{registry} {sorted(keys)} != {alias} {sorted(allowed)}"


def test_literal_values_reads_the_alias():
    # guards the helper itself: a known alias with known members
    assert set(literal_values(schema.RatioLevel)) == {"token", "sequence"}


@pytest.mark.parametrize("registry", ["BASELINES", "SCALES", "RATIOS", "KL_ESTIMATORS"])
def test_registry_values_are_callable(registry):
    assert all(callable(fn) for fn in getattr(algo, registry).values())


def test_every_aggregation_name_is_accepted():
    import torch

    v, m = torch.ones(2, 3), torch.ones(2, 3)
    for mode in algo.AGGREGATIONS:
        # token losses all 1: token_mean 6/6 = 1, seq_mean_token_mean (1 + 1)/2 = 1, sum_norm 6/(2*3) = 1
        assert algo.aggregate(v, m, mode, length_constant=3).item() == pytest.approx(1.0)
