"""The learning-rate schedule (hand-computed values) and the ProRL optimiser reset keeping its place."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr_cli.recipe.schema import OptimSpec
from rlvr_cli.train.optim import build_optimizer, build_scheduler, lr_factor


def test_warmup_then_constant():
    spec = OptimSpec(warmup_steps=4)
    # linear warm-up: update u (0-based) uses (u + 1) / 4 of the peak lr
    assert [lr_factor(u, 100, spec) for u in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]


def test_cosine_and_linear_decay_to_the_floor():
    cos = OptimSpec(schedule="cosine", warmup_steps=0, min_lr_ratio=0.1)
    # progress 0.5 of 10 updates: 0.1 + 0.9 * 0.5 * (1 + cos(pi/2)) = 0.55
    assert lr_factor(5, 10, cos) == pytest.approx(0.55)
    assert lr_factor(0, 10, cos) == pytest.approx(1.0) and lr_factor(10, 10, cos) == pytest.approx(0.1)
    lin = OptimSpec(schedule="linear", warmup_steps=2, min_lr_ratio=0.0)
    # after 2 warm-up updates, 8 remain: update 6 is 4/8 of the way -> 0.5
    assert lr_factor(6, 10, lin) == pytest.approx(0.5)
    assert lr_factor(1, 10, lin) == pytest.approx(1.0)  # the last warm-up update is at the peak
    assert math.isclose(lr_factor(20, 10, lin), 0.0)  # past the end: held at the floor


def test_scheduler_steps_once_per_update():
    spec = OptimSpec(lr=1.0, warmup_steps=2)
    p = torch.nn.Parameter(torch.zeros(1))
    opt = build_optimizer([p], spec)
    sched = build_scheduler(opt, spec, total_updates=10)
    seen = []
    for _ in range(3):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == [0.5, 1.0, 1.0]


def test_optimizer_reset_keeps_the_schedule_and_drops_the_moments(tmp_path):
    from rlvr_cli.train.session import Session

    spec = OptimSpec(lr=1.0, schedule="linear", warmup_steps=0)
    model = torch.nn.Linear(2, 1)
    opt = build_optimizer(model.parameters(), spec)
    sched = build_scheduler(opt, spec, total_updates=10)
    for _ in range(4):
        model(torch.ones(1, 2)).sum().backward()
        opt.step()
        sched.step()
    recipe = type("R", (), {"optim": spec})()
    s = Session(recipe, None, torch.device("cpu"), None, model, None, opt, sched, total_updates=10)
    s.reset_optimizer()
    assert s.optimizer is not opt and not s.optimizer.state  # fresh Adam moments
    assert s.optimizer.param_groups[0]["lr"] == pytest.approx(0.6)  # update 4 of 10: 1 - 4/10
    s.optimizer.step()
    s.scheduler.step()
    assert s.optimizer.param_groups[0]["lr"] == pytest.approx(0.5)
