"""results/reproduce.py: the commands it would run (dry run), with --threads and --set passed to every training run."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load():
    spec = importlib.util.spec_from_file_location("reproduce", ROOT / "results" / "reproduce.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["reproduce"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_dry_run_passes_threads_and_overrides_to_every_training_run(tmp_path):
    out = subprocess.run(
        [sys.executable, "results/reproduce.py", "--only", "kl", "--seeds", "2", "--dry-run", "--jobs", "1",
         "--threads", "2", "--set", "steps=5", "--runs", str(tmp_path / "runs")],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    train = [line for line in out if line.startswith("rlvr train")]
    assert len(train) == 6  # 3 variants x 2 seeds
    assert all(line.endswith("--set threads=2 --set steps=5") for line in train)
    assert all(str(tmp_path / "runs" / "kl") in line for line in train)
    assert any(line.startswith("rlvr compare") for line in out)


def test_commands_run_with_this_checkouts_code():
    mod = load()
    assert mod.runnable(["rlvr", "train", "x.yaml"]) == [sys.executable, "-m", "rlvr_cli", "train", "x.yaml"]
    assert mod.runnable(["bash", "results/r1_pipeline.sh"]) == ["bash", "results/r1_pipeline.sh"]
    assert mod.train_command("r.yaml", Path("o"), 3) == ["rlvr", "train", "r.yaml", "--out", "o", "--seed", "3"]


def test_one_pool_runs_everything_longest_chains_first_prerequisites_before_their_runs(monkeypatch, tmp_path):
    mod = load()
    events: list[tuple[str, str]] = []
    busy = {"now": 0, "most": 0}

    def work(name):
        events.append(("start", name))
        busy["now"] += 1
        busy["most"] = max(busy["most"], busy["now"])
        import time

        time.sleep(0.02)
        busy["now"] -= 1
        events.append(("end", name))
        return True

    monkeypatch.setattr(mod, "run_one", lambda cmd, out, dry, log: log.append(str(out)) or work(str(out)))
    monkeypatch.setattr(mod, "run_script", lambda name, cmd, dry: work(name))
    monkeypatch.setattr(mod, "build_one", lambda model, exp, dry: work(model))
    monkeypatch.setattr(mod.subprocess, "run", lambda *a, **k: type("R", (), {"returncode": 0})())
    monkeypatch.setattr(mod, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(mod, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(mod, "ROOT", tmp_path)
    plain = mod.Experiment("plain", {"a": "a.yaml", "b": "b.yaml"})
    chained = mod.Experiment("chained", {"c": "c.yaml"}, prerequisites=[("base.yaml", str(tmp_path / "base"))])
    built = mod.Experiment("built", {"d": "d.yaml"}, builds=["builtin:tiny-length"])
    mod.reproduce([plain, built, chained], ["inference_compute", "r1"], seeds=2, jobs=2, dry=False)
    starts = [n for kind, n in events if kind == "start"]
    assert len(starts) == 1 + 1 + 4 + 2 + 2 + 2  # prerequisite, build, 2 x 2 plain, 2 built, 2 chained, 2 scripts
    # the serial chains are queued first: the R1 script, then the experiments waiting on a build or a prerequisite
    assert starts[:3] == ["r1", "builtin:tiny-length", str(tmp_path / "base")]
    assert starts.index("inference_compute") < starts.index(str(tmp_path / "runs/plain/a-seed0"))
    for first, exp, variant in (("base", "chained", "c"), ("builtin:tiny-length", "built", "d")):
        end = events.index(("end", first if ":" in first else str(tmp_path / first)))
        assert all(events.index(("start", str(tmp_path / f"runs/{exp}/{variant}-seed{s}"))) > end for s in (0, 1))
    assert busy["most"] == 2  # never more than --jobs at once
    for exp in ("plain", "built", "chained"):
        assert (tmp_path / "results" / exp / "commands.md").is_file()


def test_scripts_call_this_checkouts_rlvr():
    mod = load()
    env = mod.checkout_env()
    out = subprocess.run(["sh", "-c", "command -v rlvr && rlvr --help >/dev/null && echo ok"], env=env,
                         capture_output=True, text=True, cwd="/")
    assert out.stdout.splitlines()[-1] == "ok", out.stderr
    assert str(ROOT) in env["PYTHONPATH"].split(":")


def test_an_experiment_that_fails_before_queueing_anything_raises_instead_of_hanging(monkeypatch, tmp_path):
    import threading

    mod = load()
    monkeypatch.setattr(mod, "RUNS", tmp_path / "runs")

    def broken(*a, **k):
        raise ValueError("no such recipe")

    monkeypatch.setattr(mod, "train_command", broken)
    got: list[BaseException] = []

    def go():
        try:
            mod.reproduce([mod.Experiment("x", {"a": "a.yaml"})], [], seeds=1, jobs=2, dry=False)
        except ValueError as e:
            got.append(e)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    t.join(timeout=20)
    assert not t.is_alive(), "reproduce() hung on an experiment that failed before queueing a run"
    assert got and "no such recipe" in str(got[0])


def test_a_run_that_is_another_trained_further_continues_it_and_equals_the_run_from_scratch(tiny_base, tmp_path,
                                                                                             monkeypatch):
    """Two experiments whose recipes differ only in `steps` (and name): the longer run is the shorter
    one's finished directory continued with --resume, its metrics and evaluations those of a run trained
    from step 0, and its commands.md says how it was made."""
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.train.rl import train_rl
    sys.path.insert(0, str(ROOT / "tests" / "train"))  # its helpers, when this file runs without tests/train
    from test_train import evals, metrics

    body = ("extends: grpo\nmodel:\n  name: {model}\nrollout:\n  prompts_per_step: 4\n  group_size: 4\n"
            "  max_new_tokens: 40\neval:\n  n: 4\n  num_prompts: 8\n  every: 2\ncheckpoint:\n  every: 2\n"
            "steps: {steps}\n")
    (tmp_path / "short.yaml").write_text(body.format(model=tiny_base, steps=2))
    (tmp_path / "long.yaml").write_text(body.format(model=tiny_base, steps=4))
    mod = load()
    monkeypatch.setattr(mod, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(mod, "RESULTS", tmp_path / "results")
    exps = [mod.Experiment("short", {"a": str(tmp_path / "short.yaml")}),
            mod.Experiment("long", {"b": str(tmp_path / "long.yaml")})]
    assert mod.find_continuations(exps, 1) == {tmp_path / "runs/long/b-seed0": (tmp_path / "runs/short/a-seed0", 2, ())}
    mod.reproduce(exps, [], seeds=1, jobs=2, dry=False)
    long_run = tmp_path / "runs/long/b-seed0"
    fresh = tmp_path / "fresh"
    train_rl(load_recipe(str(tmp_path / "long.yaml"), ["seed=0"]), fresh)
    assert [r["step"] for r in metrics(long_run)] == [1, 2, 3, 4]
    assert metrics(long_run) == metrics(fresh) and evals(long_run) == evals(fresh)
    assert [r["step"] for r in metrics(tmp_path / "runs/short/a-seed0")] == [1, 2]  # the shorter run is left as it was
    commands = (tmp_path / "results/long/commands.md").read_text()
    assert f"cp -r {tmp_path}/runs/short/a-seed0 {long_run}" in commands and "--resume" in commands


def test_a_run_with_reference_resets_starts_from_the_run_without_them_and_equals_the_run_from_scratch(
        tiny_base, tmp_path, monkeypatch):
    """ProRL's reset arm computes the no-reset arm's first N steps: reproduce copies the no-reset run
    without its checkpoints after step N and resumes it with the resets; the result is the reset run
    trained from step 0, and commands.md says how it was made."""
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.train.rl import train_rl
    sys.path.insert(0, str(ROOT / "tests" / "train"))  # its helpers, when this file runs without tests/train
    from test_train import evals, metrics

    body = ("extends: grpo\nmodel:\n  name: {model}\nrollout:\n  prompts_per_step: 4\n  group_size: 4\n"
            "  max_new_tokens: 40\neval:\n  n: 4\n  num_prompts: 8\n  every: 2\ncheckpoint:\n  every: 2\n"
            "optim:\n  lr: 0.001\nsteps: 6\n{extra}")
    (tmp_path / "plain.yaml").write_text(body.format(model=tiny_base, extra=""))
    (tmp_path / "reset.yaml").write_text(body.format(model=tiny_base, extra="kl:\n  ref_reset_every: 4\n"))
    (tmp_path / "reset2.yaml").write_text(body.format(model=tiny_base, extra="kl:\n  ref_reset_every: 5\n"))
    mod = load()
    monkeypatch.setattr(mod, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(mod, "RESULTS", tmp_path / "results")
    exps = [mod.Experiment("p", {"plain": str(tmp_path / "plain.yaml"), "reset": str(tmp_path / "reset.yaml"),
                                 "reset5": str(tmp_path / "reset2.yaml")})]
    runs = tmp_path / "runs" / "p"
    # every 5: no checkpoint of the plain run at step 5, so that one trains from step 0
    assert mod.find_continuations(exps, 1) == {runs / "reset-seed0": (runs / "plain-seed0", 4, ("step_6",))}
    mod.reproduce(exps, [], seeds=1, jobs=2, dry=False)
    fresh = tmp_path / "fresh"
    train_rl(load_recipe(str(tmp_path / "reset.yaml"), ["seed=0"]), fresh)
    assert metrics(runs / "reset-seed0") == metrics(fresh) and evals(runs / "reset-seed0") == evals(fresh)
    assert metrics(runs / "plain-seed0") != metrics(fresh)  # the source was left as it was
    assert (runs / "plain-seed0" / "checkpoints" / "step_6").is_dir()
    commands = (tmp_path / "results/p/commands.md").read_text()
    assert f"cp -r {runs}/plain-seed0 {runs}/reset-seed0 && rm -r {runs}/reset-seed0/checkpoints/step_6" in commands


def test_runs_that_differ_in_more_than_steps_or_would_evaluate_differently_are_not_continued(tmp_path, monkeypatch):
    mod = load()
    monkeypatch.setattr(mod, "RUNS", tmp_path / "runs")
    assert mod.load_recipe("grpo").eval.every == 50
    recipes = {
        "a": "steps: 50", "b": "steps: 60",  # b is a trained further: a's last step is one of b's eval steps
        "f": "steps: 30", "g": "steps: 45",  # g's last step (45) is not an eval step of a: a starts from 0
        "c": "steps: 100\noptim:\n  lr: 0.001",  # another lr
        "d": "steps: 40\noptim:\n  schedule: cosine", "e": "steps: 80\noptim:\n  schedule: cosine",
    }
    for name, text in recipes.items():
        (tmp_path / f"{name}.yaml").write_text(f"extends: grpo\n{text}\n")
    exps = [mod.Experiment("x", {n: str(tmp_path / f"{n}.yaml") for n in recipes})]
    runs = tmp_path / "runs" / "x"
    assert mod.find_continuations(exps, 2) == {runs / f"b-seed{s}": (runs / f"a-seed{s}", 50, ()) for s in (0, 1)}


def test_a_continued_run_whose_source_failed_fails_without_copying_and_nothing_hangs(monkeypatch, tmp_path):
    mod = load()
    monkeypatch.setattr(mod, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(mod, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(mod.subprocess, "run", lambda *a, **k: type("R", (), {"returncode": 0})())
    started: list[Path] = []
    monkeypatch.setattr(mod, "run_one", lambda cmd, out, dry, log: started.append(out) or False)  # every run fails
    monkeypatch.setattr(mod, "find_continuations",
                        lambda exps, seeds: {tmp_path / "runs/l/b-seed0": mod.Start(tmp_path / "runs/s/a-seed0", 2)})
    exps = [mod.Experiment("s", {"a": "a.yaml"}), mod.Experiment("l", {"b": "b.yaml"})]
    mod.reproduce(exps, [], seeds=1, jobs=2, dry=False)
    assert started == [tmp_path / "runs/s/a-seed0"]  # the continued run never started, and was not copied
    assert not (tmp_path / "runs/l/b-seed0").exists()

    # a pool that refuses new work (shut down after another experiment failed) still ends the waiter's future
    from concurrent.futures import Future

    before, fut = Future(), Future()

    def refuse(fn, urgent=False):
        raise RuntimeError("cannot schedule new futures after shutdown")

    mod._after(before, fut, refuse, lambda: True)
    before.set_result(True)
    assert isinstance(fut.exception(timeout=5), RuntimeError)


def test_slots_start_urgent_work_first_then_the_oldest_and_refuse_after_shutdown():
    import threading
    from concurrent.futures import ThreadPoolExecutor

    mod = load()
    order: list[str] = []
    running, gate = threading.Event(), threading.Event()

    def job(name: str, wait: bool = False) -> str:
        if wait:
            running.set()
            gate.wait(5)  # holds the only slot until everything else is queued
        order.append(name)
        return name

    with ThreadPoolExecutor(max_workers=1) as pool:
        slots = mod.Slots(pool)
        first = slots.submit(lambda: job("first", wait=True))
        assert running.wait(5)  # the slot has taken it: what comes next is queued behind it
        later = [slots.submit(lambda n=n: job(n)) for n in ("a", "b")]
        urgent = slots.submit(lambda: job("urgent"), urgent=True)
        gate.set()
        assert [f.result(timeout=5) for f in (first, *later, urgent)] == ["first", "a", "b", "urgent"]
    assert order == ["first", "urgent", "a", "b"]
    with ThreadPoolExecutor(max_workers=1) as pool:
        failing = mod.Slots(pool).submit(lambda: 1 / 0)
    assert isinstance(failing.exception(timeout=5), ZeroDivisionError)  # the waiter sees the job's error
    refused = mod.Slots(pool)
    with pytest.raises(RuntimeError):
        refused.submit(lambda: None)
    assert refused.queue == []  # nothing left behind that a later `_next` would run


def sleeping_reproduce(monkeypatch, tmp_path, seconds: float):
    """reproduce.py loaded with every run a sleep of ``seconds`` that logs its path (relative to tmp_path)
    into the returned list, and the comparisons and outputs under tmp_path: (module, started)."""
    import time

    mod = load()
    monkeypatch.setattr(mod, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(mod, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(mod, "ROOT", tmp_path)
    monkeypatch.setattr(mod.subprocess, "run", lambda *a, **k: type("R", (), {"returncode": 0})())
    started: list[str] = []

    def work(out):
        started.append(str(Path(out).relative_to(tmp_path)))
        time.sleep(seconds)
        return True

    monkeypatch.setattr(mod, "run_one", lambda cmd, out, dry, log: work(out))
    monkeypatch.setattr(mod, "continue_one", lambda cmd, out, start, dry, log: work(out))
    return mod, started


def test_a_continued_run_starts_as_soon_as_its_source_ends_ahead_of_runs_queued_before_it(monkeypatch, tmp_path):
    """One slot: s/a-seed0 is continued by l/b-seed0, which starts right after it, not after s/c and s/d
    (queued before it); an experiment with a continued run is queued before plain ones."""
    mod, started = sleeping_reproduce(monkeypatch, tmp_path, 0.1)
    monkeypatch.setattr(mod, "find_continuations",
                        lambda exps, seeds: {tmp_path / "runs/l/b-seed0": mod.Start(tmp_path / "runs/s/a-seed0", 2)})
    exps = [mod.Experiment("p", {"x": "x.yaml"}), mod.Experiment("l", {"b": "b.yaml"}),
            mod.Experiment("s", {"a": "a.yaml", "c": "c.yaml", "d": "d.yaml"})]
    mod.reproduce(exps, [], seeds=1, jobs=1, dry=False)
    assert started == ["runs/s/a-seed0", "runs/l/b-seed0", "runs/s/c-seed0", "runs/s/d-seed0", "runs/p/x-seed0"]


def test_runs_queued_after_their_prerequisite_go_ahead_of_runs_queued_meanwhile(monkeypatch, tmp_path):
    mod, started = sleeping_reproduce(monkeypatch, tmp_path, 0.1)
    chained = mod.Experiment("c", {"r": "r.yaml"}, prerequisites=[("base.yaml", str(tmp_path / "base"))])
    plain = mod.Experiment("p", {name: f"{name}.yaml" for name in "wxyz"})
    mod.reproduce([plain, chained], [], seeds=1, jobs=1, dry=False)
    assert started[0] == "base"
    # queued after the prerequisite ended, behind 4 plain runs: it starts second or third (the slot that
    # freed may take the next plain run before the waiting experiment has queued its run), not last
    assert started.index("runs/c/r-seed0") <= 2, started
