"""rlvr_cli/models' one dtype-name map: every name a recipe may write resolves through it."""

import typing

import pytest
import torch

from rlvr_cli.models import DTYPES, dtype_named, trainer_autocast
from rlvr_cli.recipe.schema import ModelSpec, RolloutSpec


def _names(model, field):
    return set(typing.get_args(model.model_fields[field].annotation))


def test_every_dtype_name_of_the_schema_is_in_the_map():
    names = _names(ModelSpec, "dtype") | _names(ModelSpec, "autocast") | _names(RolloutSpec, "sample_autocast")
    assert names - {"auto", "none"} == set(DTYPES)


def test_dtype_named():
    assert dtype_named("none") is None
    assert dtype_named("bfloat16") is torch.bfloat16 and dtype_named("float16") is torch.float16
    with pytest.raises(KeyError):
        dtype_named("float8")


def test_trainer_autocast():
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert trainer_autocast("auto", "auto", cpu) is None
    assert trainer_autocast("auto", "auto", cuda) is torch.bfloat16  # mixed precision on CUDA
    assert trainer_autocast("float32", "auto", cuda) is None  # an explicit dtype: no autocast
    assert trainer_autocast("auto", "float16", cpu) is torch.float16
    assert trainer_autocast("auto", "none", cuda) is None


def test_sampling_autocast():
    from rlvr_cli.models import sampling_autocast

    assert sampling_autocast("none", None) is None and sampling_autocast("none", torch.bfloat16) is torch.bfloat16
    assert sampling_autocast("bfloat16", None) is torch.bfloat16  # a deliberate mismatch beside a float32 trainer
