"""Runs one sweep invocation plans that start from another planned run's steps (sweep/continuation.py),
prerequisites (`needs`), scripts beside the runs, and the pool's order: what waited on another run goes
first, no more than --jobs at once, a failed prerequisite fails what waits on it and nothing hangs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from rlvr_cli.sweep.continuation import Start, find_continuations
from rlvr_cli.sweep.runner import Script, run_plans, run_sweeps
from rlvr_cli.sweep.spec import load_plan
from rlvr_cli.sweep.state import plan_states

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "train"))  # its helpers, when this file runs without tests/train
from test_train import evals, metrics  # noqa: E402

BODY = ("extends: grpo\nmodel:\n  name: {model}\nrollout:\n  prompts_per_step: 4\n  group_size: 4\n"
        "  max_new_tokens: 40\neval:\n  n: 4\n  num_prompts: 8\n  every: 2\ncheckpoint:\n  every: 2\n"
        "optim:\n  lr: 0.001\nsteps: {steps}\n{extra}")


def spec(path: Path, out: Path, variants: dict[str, str], extra: str = "") -> Path:
    arms = "".join(f"  - {{name: {n}, recipe: {r}}}\n" for n, r in variants.items())
    path.write_text(f"seeds: [0]\nrecipe_names: true\nout: {out}\n{extra}variants:\n{arms}compare: null\n")
    return path


def plans_of(*specs: Path):
    plans = [load_plan(s) for s in specs]
    return plans, [plan_states(p) for p in plans]


def test_a_run_that_is_another_trained_further_continues_it_and_equals_the_run_from_scratch(tiny_base, tmp_path):
    """Two specs whose recipes differ only in `steps` (and name): the longer run is the shorter one's
    finished directory continued with --resume, equal to a run trained from step 0; sweep.json says so."""
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.train.rl import train_rl

    (tmp_path / "short.yaml").write_text(BODY.format(model=tiny_base, steps=2, extra=""))
    (tmp_path / "long.yaml").write_text(BODY.format(model=tiny_base, steps=4, extra=""))
    plans, states = plans_of(spec(tmp_path / "s.yaml", tmp_path / "runs/short", {"a": "short.yaml"}),
                             spec(tmp_path / "l.yaml", tmp_path / "runs/long", {"b": "long.yaml"}))
    long_run, short_run = tmp_path / "runs/long/b-seed0", tmp_path / "runs/short/a-seed0"
    assert find_continuations([*plans[0].runs, *plans[1].runs]) == {long_run: Start(short_run, 2, ())}
    pool = run_sweeps(plans, states, jobs=2)
    assert all(r.complete for r in pool.results)
    fresh = tmp_path / "fresh"
    train_rl(load_recipe(str(tmp_path / "long.yaml"), ["seed=0"]), fresh)
    assert [r["step"] for r in metrics(long_run)] == [1, 2, 3, 4]
    assert metrics(long_run) == metrics(fresh) and evals(long_run) == evals(fresh)
    assert [r["step"] for r in metrics(short_run)] == [1, 2]  # the shorter run is left as it was
    record = json.loads((tmp_path / "runs/long/sweep.json").read_text())["runs"][0]
    assert record["copied"].startswith(f"cp -r {short_run} {long_run}") and "--resume" in record["command"]


def test_a_run_with_reference_resets_starts_from_the_run_without_them_and_equals_the_run_from_scratch(
        tiny_base, tmp_path):
    """ProRL's reset arm computes the no-reset arm's first N steps: it starts as a copy of the no-reset
    run without its checkpoints after step N, resumed with the resets; the result is the reset run
    trained from step 0."""
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.train.rl import train_rl

    (tmp_path / "plain.yaml").write_text(BODY.format(model=tiny_base, steps=6, extra=""))
    (tmp_path / "reset.yaml").write_text(BODY.format(model=tiny_base, steps=6, extra="kl:\n  ref_reset_every: 4\n"))
    (tmp_path / "reset5.yaml").write_text(BODY.format(model=tiny_base, steps=6, extra="kl:\n  ref_reset_every: 5\n"))
    runs = tmp_path / "runs"
    plans, states = plans_of(spec(tmp_path / "p.yaml", runs, {"plain": "plain.yaml", "reset": "reset.yaml",
                                                               "reset5": "reset5.yaml"}))
    # every 5: no checkpoint of the plain run at step 5, so that one trains from step 0
    assert find_continuations(plans[0].runs) == {runs / "reset-seed0": Start(runs / "plain-seed0", 4, ("step_6",))}
    assert run_sweeps(plans, states, jobs=2).results[0].complete
    fresh = tmp_path / "fresh"
    train_rl(load_recipe(str(tmp_path / "reset.yaml"), ["seed=0"]), fresh)
    assert metrics(runs / "reset-seed0") == metrics(fresh) and evals(runs / "reset-seed0") == evals(fresh)
    assert metrics(runs / "plain-seed0") != metrics(fresh)  # the source was left as it was
    assert (runs / "plain-seed0" / "checkpoints" / "step_6").is_dir()
    record = next(r for r in json.loads((runs / "sweep.json").read_text())["runs"] if r["name"] == "reset-seed0")
    assert record["copied"].startswith(f"cp -r {runs / 'plain-seed0'} {runs / 'reset-seed0'} && rm -r "
                                       f"{runs / 'reset-seed0' / 'checkpoints' / 'step_6'}")


def test_runs_that_differ_in_more_than_steps_or_would_evaluate_differently_are_not_continued(tmp_path):
    from rlvr_cli.recipe.load import load_recipe

    assert load_recipe("grpo").eval.every == 50
    recipes = {
        "a": "steps: 50", "b": "steps: 60",  # b is a trained further: a's last step is one of b's eval steps
        "f": "steps: 30", "g": "steps: 45",  # g's last step (45) is not an eval step of a: a starts from 0
        "c": "steps: 100\noptim:\n  lr: 0.001",  # another lr
        "d": "steps: 40\noptim:\n  schedule: cosine", "e": "steps: 80\noptim:\n  schedule: cosine",
    }
    for name, text in recipes.items():
        (tmp_path / f"{name}.yaml").write_text(f"extends: grpo\n{text}\n")
    s = spec(tmp_path / "x.yaml", tmp_path / "runs", {n: f"{n}.yaml" for n in recipes})
    s.write_text(s.read_text().replace("seeds: [0]", "seeds: 2"))
    runs = tmp_path / "runs"
    assert find_continuations(load_plan(s).runs) == {runs / f"b-seed{k}": Start(runs / f"a-seed{k}", 50, ())
                                                     for k in (0, 1)}


class FakeBackend:
    """Ends each job at the next poll, finished (run.json says so) unless its run is in ``fail``; logs
    what starts and how many run at once."""

    def __init__(self, fail=()):
        self.fail, self.started, self.running, self.most = set(fail), [], [], 0

    def start(self, job):
        self.started.append(job.name)
        self.running.append(job)
        self.most = max(self.most, len(self.running))

    def poll(self):
        """The oldest running job ends (one a poll, so that the order shows)."""
        if not self.running:
            return []
        job = self.running.pop(0)
        if job.command is not None:
            return [(job.name, 0, None)]
        out = Path(job.argv[job.argv.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        ok = out.name not in self.fail
        (out / "run.json").write_text(json.dumps({"status": "finished" if ok else "failed"}))
        return [(job.name, 0 if ok else 1, None)]

    def interrupt(self):
        self.running = []


def test_the_pool_runs_scripts_first_then_needs_before_their_arms_and_what_waited_goes_first(tmp_path):
    for i, name in enumerate(("base", "a", "b", "c")):
        (tmp_path / f"{name}.yaml").write_text(f"extends: grpo\nsteps: 50\noptim:\n  lr: 0.00{i + 1}\n")
    (tmp_path / "long.yaml").write_text("extends: grpo\nsteps: 100\noptim:\n  lr: 0.004\n")  # c trained further
    first = spec(tmp_path / "one.yaml", tmp_path / "one", {"a": "a.yaml", "src": "c.yaml"},
                 extra=f"needs:\n  - {{recipe: base.yaml, out: {tmp_path / 'base'}}}\n")
    second = spec(tmp_path / "two.yaml", tmp_path / "two", {"b": "b.yaml", "long": "long.yaml"})
    plans, states = plans_of(first, second)
    runs = [r for p in plans for r in [*p.needs, *p.runs]]
    continues = find_continuations(runs)
    assert continues == {tmp_path / "two/long-seed0": Start(tmp_path / "one/src-seed0", 50, ())}
    backend = FakeBackend()
    pool = run_plans(plans, states, backend, 2, [Script("r1", "true", tmp_path / "r1.log")], continues)
    order = [Path(n).name if "/" in n else n for n in backend.started]
    assert order[0] == "script r1" and order[1] == "base"
    assert order.index("a-seed0") > order.index("base")
    # the continued run starts as soon as its source ends, ahead of b, queued since the start
    assert order.index("long-seed0") == order.index("src-seed0") + 1
    assert backend.most <= 2 and len(order) == 6
    assert all(r.complete for r in pool.results) and pool.scripts[0].result == "finished"
    record = json.loads((tmp_path / "two/sweep.json").read_text())["runs"][1]
    assert record["copied"].startswith(f"cp -r {tmp_path / 'one/src-seed0'} {tmp_path / 'two/long-seed0'}")


def test_a_failed_prerequisite_fails_what_waits_on_it_without_starting_or_copying_and_nothing_hangs(tmp_path):
    (tmp_path / "base.yaml").write_text("extends: grpo\nsteps: 50\noptim:\n  lr: 0.001\n")
    (tmp_path / "a.yaml").write_text("extends: grpo\nsteps: 50\n")
    (tmp_path / "long.yaml").write_text("extends: grpo\nsteps: 100\n")  # a trained further
    s = spec(tmp_path / "one.yaml", tmp_path / "one", {"a": "a.yaml", "long": "long.yaml"},
             extra=f"needs:\n  - {{recipe: base.yaml, out: {tmp_path / 'base'}}}\n")
    plans, states = plans_of(s)
    backend = FakeBackend(fail={"base"})
    result = run_plans(plans, states, backend, 2, continuations=find_continuations(plans[0].runs)).results[0]
    assert [Path(n).name for n in backend.started] == ["base"]
    assert {o.run.name: o.result for o in result.outcomes} == {"base": "failed", "a-seed0": "failed",
                                                               "long-seed0": "failed"}
    assert "which did not finish" in next(o.detail for o in result.outcomes if o.run.name == "a-seed0")
    assert not (tmp_path / "one/long-seed0").exists()
