"""The initial model's evaluation computed once (rlvr_cli/evaluation/cache.py): a later run reuses the
record only where it would have computed the same one, and computes it otherwise."""

from __future__ import annotations

import json

import pytest
import torch

import rlvr_cli.train.evalhook as evalhook
from rlvr_cli.evaluation import cache
from rlvr_cli.recipe.load import load_recipe
from rlvr_cli.tasks import build_task
from rlvr_cli.train.rl import train_rl
from rlvr_cli.train.evalhook import _settings

from conftest import tiny_run  # tests/conftest.py: the shared tiny-run overrides

SMALL = tiny_run("rollout.prompts_per_step=4", "rollout.group_size=4", "rollout.max_new_tokens=40", "eval.n=4",
                 "eval.num_prompts=8", "eval.every=2", "checkpoint.every=2", without=("eval.at_start",))


@pytest.fixture
def eval_cache(tmp_path, monkeypatch, rlvr_cache):
    """The cache on, in its own directory (the built models stay where the test session built them)."""
    monkeypatch.setenv("RLVR_EVAL_CACHE", "1")
    d = tmp_path / "evals"
    monkeypatch.setattr(cache, "cache_dir", lambda: d)
    return d


def recipe(tiny_base, *sets):
    return load_recipe("grpo", [f"model.name={tiny_base}", *SMALL, *sets])


def record(run, step):
    return json.loads((run / "eval" / f"step_{step}.json").read_text())


def test_a_second_run_reuses_the_step_0_record_and_computes_the_rest(tiny_base, tmp_path, eval_cache, monkeypatch):
    train_rl(recipe(tiny_base), tmp_path / "a")
    assert len(list(eval_cache.glob("*.json"))) == 1
    calls = []
    real = evalhook.evaluate_policy
    monkeypatch.setattr(evalhook, "evaluate_policy", lambda *a, **k: calls.append(1) or real(*a, **k))
    # another seed and another training reward: the same base, prompts and eval settings
    train_rl(recipe(tiny_base, "seed=7", "reward.terms=[{type: format_only}]"), tmp_path / "b")
    assert calls == [1]  # step 2 only
    a0, b0 = record(tmp_path / "a", 0), record(tmp_path / "b", 0)
    assert (a0["reused"], b0["reused"], record(tmp_path / "b", 2)["reused"]) == (False, True, False)
    assert {**a0, "reused": True} == b0  # the very record, sample_s (the time it took when computed) included


def test_a_fresh_evaluation_equals_the_cached_one(tiny_base, tmp_path, eval_cache, monkeypatch):
    train_rl(recipe(tiny_base), tmp_path / "a")
    train_rl(recipe(tiny_base), tmp_path / "b")
    monkeypatch.setenv("RLVR_EVAL_CACHE", "0")
    train_rl(recipe(tiny_base), tmp_path / "c")
    b0, c0 = record(tmp_path / "b", 0), record(tmp_path / "c", 0)
    assert b0["reused"] and not c0["reused"]
    drop = {"reused", "sample_s"}
    assert {k: v for k, v in b0.items() if k not in drop} == {k: v for k, v in c0.items() if k not in drop}


def test_off_writes_nothing_and_a_damaged_entry_is_recomputed(tiny_base, tmp_path, eval_cache, monkeypatch):
    monkeypatch.setenv("RLVR_EVAL_CACHE", "off")
    train_rl(recipe(tiny_base), tmp_path / "off")
    assert not eval_cache.exists()
    monkeypatch.setenv("RLVR_EVAL_CACHE", "1")
    train_rl(recipe(tiny_base), tmp_path / "a")
    (entry,) = eval_cache.glob("*.json")
    entry.write_text('{"key": "')  # cut short
    train_rl(recipe(tiny_base), tmp_path / "b")
    assert not record(tmp_path / "b", 0)["reused"]
    assert json.loads(entry.read_text())["result"]["samples_digest"] == record(tmp_path / "a", 0)["samples_digest"]


def _key(model, tok, r, threads=None):
    old = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        return cache.initial_eval_key(model, tok, build_task(r.task), r.task, r.reward, _settings(r.eval), None,
                                      torch.device("cpu"))
    finally:
        torch.set_num_threads(old)


@pytest.mark.parametrize("sets, same", [
    (["seed=3"], True),                                   # the training seed: not the eval's
    (["eval.every=1", "eval.at_start=true"], True),       # when, not what
    (["reward.terms=[{type: random, p: 0.5}]"], True),    # the eval scores with the true verifier
    (["optim.lr=0.5", "kl.beta=0.3", "steps=9"], True),
    (["eval.seed=99"], False),
    (["eval.n=2"], False),
    (["eval.num_prompts=4"], False),
    (["eval.temperature=0.5"], False),
    (["eval.max_new_tokens=20"], False),
    (["eval.pass_at_k=[1, 2]"], False),
    (["task.digits=2"], False),
    (["reward.truncated_is_incorrect=false"], False),      # decides a true outcome
])
def test_the_key_changes_exactly_with_what_the_record_depends_on(tiny_base, sets, same):
    from rlvr_cli.models import load_model

    base = recipe(tiny_base)
    model, tok, _ = load_model(base.model.name, torch.device("cpu"), base.model.dtype)
    assert (_key(model, tok, base) == _key(model, tok, recipe(tiny_base, *sets))) is same


def test_the_key_changes_with_the_code_and_the_libraries(tiny_base, monkeypatch):
    from rlvr_cli.models import load_model

    r = recipe(tiny_base)
    model, tok, _ = load_model(r.model.name, torch.device("cpu"), r.model.dtype)
    before = _key(model, tok, r)
    monkeypatch.setattr(cache, "package_source_digest", lambda: "another sampler")
    assert _key(model, tok, r) != before
    monkeypatch.undo()
    assert _key(model, tok, r) == before
    real = cache.library_versions()
    monkeypatch.setattr(cache, "library_versions", lambda: {**real, "sympy": "0.0"})
    assert _key(model, tok, r) != before


def test_the_key_changes_with_one_weight_and_with_the_thread_count(tiny_base):
    from rlvr_cli.models import load_model

    r = recipe(tiny_base)
    model, tok, _ = load_model(r.model.name, torch.device("cpu"), r.model.dtype)
    before = _key(model, tok, r)
    assert _key(model, tok, r, threads=2) != before
    with torch.no_grad():
        p = next(model.parameters())
        p.view(-1)[0] = torch.nextafter(p.view(-1)[0], torch.tensor(float("inf")))  # one ulp
    assert _key(model, tok, r) != before


def test_a_model_the_key_cannot_read_is_evaluated_uncached(tiny_base, tmp_path, eval_cache, monkeypatch):
    def unreadable(model):
        raise TypeError("a quantised tensor")

    monkeypatch.setattr(cache, "weights_digest", unreadable)
    train_rl(recipe(tiny_base), tmp_path / "a")
    assert not record(tmp_path / "a", 0)["reused"] and not eval_cache.exists()
