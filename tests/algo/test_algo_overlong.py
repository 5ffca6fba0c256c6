"""DAPO soft overlong punishment (rlvr_cli/algo/overlong.py)."""

from __future__ import annotations

import pytest
import torch

from rlvr_cli.algo.overlong import soft_overlong_penalty


def test_dapo_worked_example():
    # L_max = 20, B = 4, start = 16: 16 -> 0; 18 -> (16 - 18)/4 = -0.5; 20 -> (16 - 20)/4 = -1
    got = soft_overlong_penalty(torch.tensor([16, 18, 20]), max_len=20, buffer=4)
    assert torch.equal(got, torch.tensor([0.0, -0.5, -1.0]))


def test_every_region():
    # 1, 15 -> 0 (short); 17 -> -1/4; 19 -> -3/4; 21, 100 -> -1 (beyond L_max)
    got = soft_overlong_penalty(torch.tensor([1, 15, 17, 19, 21, 100]), max_len=20, buffer=4)
    assert torch.equal(got, torch.tensor([0.0, 0.0, -0.25, -0.75, -1.0, -1.0]))


def test_factor_scales_and_output_is_float():
    # factor 0.5: 18 -> 0.5 * -0.5 = -0.25; 20 -> -0.5
    got = soft_overlong_penalty(torch.tensor([16, 18, 20]), max_len=20, buffer=4, factor=0.5)
    assert got.dtype == torch.float32
    assert torch.equal(got, torch.tensor([0.0, -0.25, -0.5]))


def test_monotone_and_continuous_at_the_buffer_start():
    lengths = torch.arange(0, 30)
    pen = soft_overlong_penalty(lengths, max_len=24, buffer=8)
    assert (pen[1:] <= pen[:-1]).all()
    # start = 16: 16 -> 0, 17 -> -1/8
    assert pen[16].item() == 0.0 and pen[17].item() == pytest.approx(-0.125)


@pytest.mark.parametrize("buffer", [0, 20, 25, -1])
def test_buffer_must_be_inside_the_limit(buffer):
    with pytest.raises(ValueError):
        soft_overlong_penalty(torch.tensor([10]), max_len=20, buffer=buffer)
