"""The worker pool: lazy start, a dead or hung worker is replaced, no check is lost, clean shutdown."""

import os
import signal
import subprocess
import sys
import threading
import time

from rlvr_cli.rewards import Check, VerifierPool
from rlvr_cli.rewards.pool import default_workers

HANG = "\\boxed{9^{9^{9^{9}}}}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # an unreaped zombie is not alive
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_default_worker_count():
    assert default_workers(0) == max(1, min(4, os.cpu_count()))
    assert default_workers(3) == 3


def test_workers_start_lazily_and_stop_on_close():
    pool = VerifierPool(workers=2, preload=())
    assert pool._workers == []  # nothing started yet
    out = pool.run([Check("math", "\\boxed{\\frac{1}{2}}", "0.5")])
    assert out[0].outcome == "correct"
    assert len(pool._workers) == 1  # one check needs only one worker
    pids = [w.proc.pid for w in pool._workers]
    pool.close()
    assert not any(_alive(pid) for pid in pids)


def test_hung_and_dead_workers_are_replaced_and_nothing_is_lost():
    with VerifierPool(workers=2, preload=()) as pool:
        # kill whichever worker takes the "victim" check while it is busy with it
        def kill_the_busy_worker():
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                for w in list(pool._workers):
                    if w.job == 1:
                        time.sleep(0.2)
                        os.kill(w.proc.pid, signal.SIGKILL)
                        return
                time.sleep(0.01)

        checks = [
            Check("math", "\\boxed{2}", "2", {}, 10),
            Check("math", HANG, "1", {}, 10),  # the victim: killed from outside mid-check
            Check("math", HANG, "1", {}, 1.0),  # hangs: the pool kills it at 1 s
            Check("math", "\\boxed{x+1}", "1+x", {}, 10),
            Check("math", "\\boxed{3}", "4", {}, 10),
        ]
        killer = threading.Thread(target=kill_the_busy_worker)
        killer.start()
        out = pool.run(checks)
        killer.join()
        assert [o.outcome for o in out] == ["correct", "error", "timeout", "correct", "incorrect"]
        assert "worker died" in out[1].detail
        # the replacements work
        assert pool.run([Check("math", "\\boxed{5}", "5")])[0].outcome == "correct"


def test_an_idle_worker_that_died_is_replaced_without_blame():
    with VerifierPool(workers=1, preload=()) as pool:
        pool.run([Check("math", "\\boxed{1}", "1")])
        os.kill(pool._workers[0].proc.pid, signal.SIGKILL)
        time.sleep(0.1)
        assert pool.run([Check("math", "\\boxed{1}", "1")])[0].outcome == "correct"


def test_workers_limit_their_memory():
    with VerifierPool(workers=1, memory_mb=1234, preload=()) as pool:
        pool.run([Check("math", "\\boxed{1}", "1")])
        with open(f"/proc/{pool._workers[0].proc.pid}/limits") as f:
            line = next(l for l in f if l.startswith("Max address space"))
        assert line.split()[3] == str(1234 * 1024 * 1024)


def test_a_check_that_runs_out_of_memory_or_breaks_is_an_error(monkeypatch):
    from rlvr_cli.rewards import integer, worker

    def explode(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(integer, "check", explode)
    reply = worker._answer({"id": 7, "verifier": "integer", "response": "#1", "reference": "1"}, print)
    assert (reply["id"], reply["outcome"], reply["detail"]) == (7, "error", "out of memory (worker memory limit)")
    monkeypatch.setattr(integer, "check", lambda *a, **k: 1 / 0)
    assert worker._answer({"id": 8, "verifier": "integer", "response": "", "reference": "1"}, print)["outcome"] == "error"


def test_workers_do_not_outlive_the_interpreter():
    script = (
        "from rlvr_cli.rewards import VerifierPool, Check\n"
        "p = VerifierPool(workers=2, preload=())\n"
        "p.run([Check('math', '\\\\boxed{1}', '1')] * 2)\n"
        "print(' '.join(str(w.proc.pid) for w in p._workers), flush=True)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    pids = [int(x) for x in out.stdout.split()]
    assert len(pids) == 2
    time.sleep(0.2)
    assert not any(_alive(pid) for pid in pids)
