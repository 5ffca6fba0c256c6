"""N processes train a recipe to the numbers of one process (CPU, gloo, 2 processes under torchrun).

Each test starts torchrun once and trains its runs one after the other in one process group
(tests/dist/train_many.py), against the same runs on one process. Sampled tokens, rewards, counts and
lengths are equal exactly (keyed draws); continuous metrics.jsonl fields agree to 1e-5 relative plus
1e-6 absolute (KL and the loss are differences of nearly equal numbers: at step 1 the KL is ~1e-13;
the ratio extremes, one token's ratio each, to 1e-4: 1.2e-5 was measured once; the gradient norm and
the mean KLs, functions of every parameter after k updates, to 5e-5: WHOLE_MODEL),
the eval files likewise, and the final parameters to 1e-5 absolute.

Why ``optim.adam_eps=1e-3`` here: Adam's first updates are about lr * sign(g), so a parameter whose
gradient is at rounding level flips sign under any change of summation order and moves by 2 lr. That
happens in one process too: micro_batches 4 -> 2 (the same gradient, summed in another order) moves the
parameters by 2e-4 at lr 3e-4 in 3 steps. A large eps makes the update proportional to the gradient,
so comparing parameters compares the gradients (they agree to ~1e-7).
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import tiny_run  # tests/conftest.py: the shared tiny-run overrides

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "dist" / "train_many.py"
TIMING = {"step_time_s", "time_sample_s", "time_verify_s", "time_ref_s", "time_update_s", "tokens_per_s", "sample_s"}
SMALL = tiny_run("rollout.prompts_per_step=4", "rollout.group_size=4", "rollout.max_new_tokens=20", "steps=3",
                 "eval.num_prompts=3", "optim.lr=3e-4", "optim.adam_eps=1e-3")
RECIPES = {
    "grpo": ("grpo", []),  # KL in the loss (a reference), 2 minibatches, 4 micro-batches
    "dr_grpo": ("dr_grpo", ["optim.mu=2"]),
    "dapo": ("dapo", ["rollout.prompts_per_step=3", "overlong.soft_punish.buffer=8"]),  # dynamic sampling; 3 groups over 2 ranks
    "batch_std": ("grpo", ["advantage.scale=batch_std", "kl.placement=reward", "kl.estimator=k1", "kl.beta=0.1"]),
    # a lag of 1 with M2PO's mask over every rank's tokens (DDP only: fsdp2 refuses staleness)
    "stale": ("grpo", ["rollout.staleness.max=1", "off_policy.m2po={m2_threshold: 0.0001}"]),
}
DDP_ONLY = ("stale",)


def _env() -> dict:
    return {**os.environ, "OMP_NUM_THREADS": "1", "RLVR_RECIPES": str(ROOT / "recipes"), "PYTHONPATH": str(ROOT)}


def torchrun(nproc: int, *args: str, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", *args]
    return subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=timeout, **kw)


def train_many(runs: list[dict], tmp: Path, nproc: int) -> None:
    spec = tmp / f"runs-{nproc}-{len(list(tmp.glob('runs-*')))}.json"
    spec.write_text(json.dumps(runs))
    if nproc == 1:
        out = subprocess.run([sys.executable, str(WORKER), str(spec)], env=_env(), capture_output=True, text=True,
                             timeout=300)
    else:
        out = torchrun(nproc, str(WORKER), str(spec))
    assert out.returncode == 0, out.stderr[-4000:]


def runs_of(names, tiny_base, tmp: Path, tag: str, extra=()) -> list[dict]:
    return [{"recipe": RECIPES[n][0], "out": str(tmp / f"{n}-{tag}"),
             "sets": [f"model.name={tiny_base}", *SMALL, *RECIPES[n][1], *extra]} for n in names]


def metrics(run: Path) -> list[dict]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def evals(run: Path) -> dict:
    return {f.name: {k: v for k, v in json.loads(f.read_text()).items() if k not in TIMING}
            for f in sorted((run / "eval").glob("*.json"))}


EXTREMES = {"ratio_max", "ratio_min", "kl_max"}
"""One token's value (exp(logp - logp_old), or its KL estimate): its rounding is that of one
log-softmax, not of a mean, and a rank's batch (its own prefill of fewer prompts) rounds it
differently; 1e-4 (measured up to 2e-5)."""


WHOLE_MODEL = {"grad_norm", "kl_mean", "kl_seq_mean"}
"""Functions of every parameter after k updates: the all-reduced gradient rounds differently from one
process's sum (~1e-7 per element), Adam carries that into the weights, and it grows with the steps.
5e-5 relative (measured up to 1.6e-5 for grad_norm at step 2 and 2.0e-5 for kl_seq_mean at step 10 on
an AMD EPYC; within 1e-5 on the machines before it)."""


def assert_close(a, b, where: str = "", rel: float = 1e-5) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), f"{where}: keys {set(a) ^ set(b)}"
        for k in a:
            assert_close(a[k], b[k], f"{where}.{k}", 1e-4 if k in EXTREMES else 5e-5 if k in WHOLE_MODEL else rel)
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: lengths"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_close(x, y, f"{where}[{i}]", rel)
    elif isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        if math.isnan(a) or math.isnan(b):
            assert math.isnan(a) and math.isnan(b), f"{where}: {a} vs {b}"
        else:
            assert abs(a - b) <= rel * max(abs(a), abs(b)) + 1e-6, f"{where}: {a} vs {b}"
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


def final_params(run: Path) -> dict:
    from safetensors.torch import load_file

    last = max((run / "checkpoints").glob("step_*"), key=lambda d: int(d.name.split("_")[1]))
    return load_file(str(last / "model.safetensors"))


def max_param_diff(a: Path, b: Path) -> float:
    pa, pb = final_params(a), final_params(b)
    assert set(pa) == set(pb)
    return max(float((pa[k].float() - pb[k].float()).abs().max()) for k in pa)


def assert_same_run(one: Path, two: Path) -> None:
    assert_close(metrics(one), metrics(two), two.name)
    assert_close(evals(one), evals(two), two.name)
    assert max_param_diff(one, two) <= 1e-5


@pytest.fixture(scope="module")
def one_process_runs(tiny_base, tmp_path_factory) -> Path:
    """The recipes of RECIPES trained on one process (shared by the DDP and FSDP2 comparisons)."""
    tmp = tmp_path_factory.mktemp("one")
    train_many(runs_of(list(RECIPES), tiny_base, tmp, "one"), tmp, 1)
    return tmp


@pytest.mark.parametrize("strategy", ["ddp", "fsdp2"])
def test_two_processes_train_to_the_numbers_of_one(strategy, one_process_runs, tiny_base, tmp_path):
    names = [n for n in RECIPES if strategy == "ddp" or n not in DDP_ONLY]
    train_many(runs_of(names, tiny_base, tmp_path, strategy, [f"distributed.strategy={strategy}"]), tmp_path, 2)
    for n in names:
        one, two = one_process_runs / f"{n}-one", tmp_path / f"{n}-{strategy}"
        assert len(metrics(one)) == 3
        assert_same_run(one, two)
        info = json.loads((two / "run.json").read_text())
        assert info["distributed"]["world_size"] == 2 and info["status"] == "finished"
    # the dapo runs dropped groups and sampled a second round at least once: the refill was exercised
    assert any(r["ds_rounds"] > 1 or r["groups_dropped_frac"] > 0 for r in metrics(one_process_runs / "dapo-one"))
    # the stale run's steps 2-3 were sampled one version late, and M2PO masked tokens of both ranks
    assert [r["policy_lag"] for r in metrics(one_process_runs / "stale-one")] == [0, 1, 1]
    assert any(r["m2po_masked_frac"] for r in metrics(one_process_runs / "stale-one"))


def _children_with_rank(parent: int, rank: int) -> int | None:
    """The pid of the torchrun worker of ``rank`` (from the workers' environments)."""
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[1]) != parent:
                continue
            env = (d / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in env:
            return int(d.name)
    return None


def _start_cli(tmp: Path, out: Path, sets: list[str], nproc: int = 2) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
           "-m", "rlvr_cli", "train", "grpo", "--out", str(out), *[x for s in sets for x in ("--set", s)]]
    return subprocess.Popen(cmd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _wait_for_checkpoint(proc: subprocess.Popen, out: Path, step: int, limit_s: float = 240) -> None:
    """Until the run has written checkpoint ``step`` (failing if the command ends first or takes too long)."""
    deadline = time.time() + limit_s
    while not (out / "checkpoints" / f"step_{step}").is_dir():
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        assert time.time() < deadline
        time.sleep(0.05)


FAULT_STEPS = 12


def _fault_sets(tiny_base, timeout_s: int) -> list[str]:
    # long enough that the fault lands mid-run even on an idle machine (steps 3-5 alone can finish
    # between the step-2 checkpoint and the signal)
    return [f"model.name={tiny_base}", *SMALL, f"steps={FAULT_STEPS}", "checkpoint.every=2",
            f"distributed.timeout_s={timeout_s}"]


@pytest.mark.parametrize("fault", ["kill", "hang"])
def test_a_dead_or_hung_rank_fails_the_run_in_bounded_time_and_one_process_resumes_it(
        fault, tiny_base, tmp_path, cli):
    timeout_s = 10 if fault == "kill" else 5
    sets = _fault_sets(tiny_base, timeout_s)
    out = tmp_path / "faulty"
    proc = _start_cli(tmp_path, out, sets)
    try:
        _wait_for_checkpoint(proc, out, 2)
        victim, other = _children_with_rank(proc.pid, 1), _children_with_rank(proc.pid, 0)
        assert victim is not None and other is not None
        os.kill(victim, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
        hit = time.time()
        while Path(f"/proc/{other}").exists() and time.time() < hit + timeout_s + 60:
            time.sleep(0.05)
        took = time.time() - hit  # until rank 0 is gone
        if fault == "hang":
            os.kill(victim, signal.SIGKILL)  # else torchrun waits out its own grace period for the stopped one
        log = proc.communicate(timeout=120)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode != 0
    assert took < timeout_s + 15, f"rank 0 still there {took:.0f}s after the fault"
    # torchrun names the failed rank (kill: "rank : 1"); the hung one leaves rank 0's timeout, naming it
    assert re.search(r"rank\s*:\s*1\b" if fault == "kill" else r"rank 0 of 2: the collective", log), log[-3000:]
    status = json.loads((out / "run.json").read_text())
    assert status["status"] == "failed" and "rank 0 of 2" in status["error"], status
    steps_done = len(metrics(out))
    assert 2 <= steps_done < FAULT_STEPS
    if fault == "hang":
        return  # resuming is the same as after a kill

    # --resume on ONE process continues the 2-process run: it ends as the uninterrupted run does
    r = cli("train", "grpo", "--out", str(out), "--resume", *[x for s in sets for x in ("--set", s)])
    assert r.code == 0, r.stdout + r.stderr
    whole = tmp_path / "whole"
    r = cli("train", "grpo", "--out", str(whole), *[x for s in sets for x in ("--set", s)])
    assert r.code == 0, r.stdout + r.stderr
    assert_same_run(whole, out)
    assert json.loads((out / "run.json").read_text())["status"] == "finished"


def _child_of(parent: int) -> int | None:
    """The pid of one child of ``parent`` (torchrun, under `rlvr train --nproc`)."""
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == parent:
                return int(d.name)
        except (OSError, ValueError, IndexError):  # a process that ended while being read
            continue
    return None


def test_rank_0_killed_under_nproc_is_recorded_as_failed_by_the_launcher(tiny_base, tmp_path):
    """rank 0 writes run.json; killed with -9 it cannot, so `rlvr train --nproc` records the failure."""
    out = tmp_path / "run"
    sets = _fault_sets(tiny_base, 10)
    proc = subprocess.Popen([sys.executable, "-m", "rlvr_cli", "train", "grpo", "--out", str(out), "--nproc", "2",
                             *[x for s in sets for x in ("--set", s)]],
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for_checkpoint(proc, out, 2)
        launcher = _child_of(proc.pid)
        rank0 = _children_with_rank(launcher, 0) if launcher else None
        assert rank0 is not None
        os.kill(rank0, signal.SIGKILL)
        log = proc.communicate(timeout=120)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, log[-3000:]
    status = json.loads((out / "run.json").read_text())
    assert status["status"] == "failed" and "ended without recording why" in status["error"], status
    assert "--resume" in status["error"] and "internal error" not in log
    # one line says it (issue 44): not torchrun's log lines, traceback and report, nor gloo's message
    assert re.search(r"^run failed: rank 0 of 2 was killed by SIGKILL, pid \d+; the other ranks stopped", log.strip().splitlines()[-1]), log[-3000:]
    assert "Traceback" not in log and "ChildFailedError" not in log and ".cc:" not in log, log[-3000:]


def test_a_one_process_run_resumes_on_two_fsdp2_processes_with_nproc(tiny_base, tmp_path, cli):
    sets = [f"model.name={tiny_base}", *SMALL, "steps=4", "checkpoint.every=2"]
    args = [x for s in sets for x in ("--set", s)]
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert cli("train", "grpo", "--out", str(whole), *args).code == 0
    assert cli("train", "grpo", "--out", str(part), *args).code == 0
    import shutil

    shutil.rmtree(part / "checkpoints" / "step_4")  # as if it had stopped after step 2
    # the one-process optimiser state is loaded into FSDP2 shards, and gathered back at step 4
    r = cli("train", "grpo", "--out", str(part), "--resume", "--nproc", "2", *args,
            "--set", "distributed.strategy=fsdp2")
    assert r.code == 0, r.stdout + r.stderr
    assert_same_run(whole, part)
    assert json.loads((part / "run.json").read_text())["distributed"]["world_size"] == 2


def test_bad_distributed_settings_exit_2_before_anything_is_written(tiny_base, tmp_path, cli):
    out = tmp_path / "never"
    r = cli("train", "grpo", "--out", str(out), "--nproc", "3", "--set", "rollout.prompts_per_step=2",
            "--set", f"model.name={tiny_base}")
    assert r.code == 2 and "rollout.prompts_per_step" in r.stdout + r.stderr
    r = cli("train", "base_sft", "--out", str(out), "--nproc", "2")
    assert r.code == 2 and "distributed" in r.stdout + r.stderr
    assert not out.exists()


def test_fsdp2_needs_a_decoder_block_class():
    import torch

    from rlvr_cli.train.parallel import shard_fsdp2
    from rlvr_cli.errors import UserError

    with pytest.raises(UserError, match="distributed.strategy"):
        shard_fsdp2(torch.nn.Linear(2, 2))


def test_shares_are_contiguous_whole_and_balanced():
    from rlvr_cli.dist import share

    for n in range(1, 9):
        for size in range(1, n + 1):
            parts = [share(n, r, size) for r in range(size)]
            assert [i for p in parts for i in p] == list(range(n))
            assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_mismatch_statistics_under_two_processes_are_the_whole_batchs(tmp_path):
    """The sampler/trainer mismatch quantiles and IS fractions logged under N processes are those of
    the whole step's batch (every rank's tokens gathered), not of rank 0's rows."""
    sys.path.insert(0, str(ROOT / "tests" / "dist"))
    import mismatch_stats

    out = torchrun(2, str(ROOT / "tests" / "dist" / "mismatch_stats.py"), str(tmp_path / "two.json"))
    assert out.returncode == 0, out.stderr[-4000:]
    two = json.loads((tmp_path / "two.json").read_text())
    whole, half = mismatch_stats.stats(range(0, 8)), mismatch_stats.stats(range(0, 4))
    assert set(two) == set(whole) >= {"is_ratio_p01", "is_ratio_p99", "is_corrected_frac", "is_weight_mean"}
    for k in whole:  # float64 throughout (the weights' sums too, not their float32 copies): summation order only
        assert two[k] == pytest.approx(whole[k], rel=1e-12), k
    assert half["is_ratio_p99"] != pytest.approx(whole["is_ratio_p99"], rel=1e-3)  # rank 0's half would differ
    assert half["is_corrected_frac"] != pytest.approx(whole["is_corrected_frac"], rel=1e-3)
