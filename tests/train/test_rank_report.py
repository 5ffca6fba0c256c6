"""`rlvr train --nproc 2` with a rank killed said it in torchrun's words: gloo's C++ source path and
"GLHF", torchrun's log lines and a Python traceback (issue 44). The launcher now holds those back and
says one line; here on the stderr torchrun really wrote when rank 1 of 2 was killed with SIGKILL (the
end-to-end run is tests/train/test_distributed.py's rank-0 kill)."""

from __future__ import annotations

import io

from rlvr_cli.dist import backend_message
from rlvr_cli.train.rank_report import HeldOutput, failure_line, root_cause

GLOO = ("[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:7851: Connection "
        "reset by peer. This is typically caused by a remote worker hanging or bugs in the application. Check the logs "
        "of the remote worker before reporting an error. GLHF! \U0001f3d6\ufe0f")

TORCHRUN = """\
W1205 08:06:39.400000 20668 site-packages/torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 20675 closing signal SIGTERM
E1205 08:06:39.465000 20668 site-packages/torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: -9) local_rank: 1 (pid: 20677) of binary: /usr/bin/python
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "/usr/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 383, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
=======================================================
rlvr_cli FAILED
-------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-05_08:06:39
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 20675)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 20675
-------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-05_08:06:39
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 20677)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 20677
=======================================================
"""

RANK0 = ("rank 0 of 2: the collective all_gather_object failed (RuntimeError: Read error [127.0.0.1]:7851: Connection "
         "reset by peer); another rank died or did not answer within distributed.timeout_s; continue with --resume")


def test_gloo_message_loses_its_source_path_and_advice():
    assert backend_message(RuntimeError(GLOO)) == "Read error [127.0.0.1]:7851: Connection reset by peer"
    assert backend_message(RuntimeError("[../gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 5000ms")) == \
        "Timed out waiting 5000ms"


def test_torchrun_output_is_held_and_the_ranks_pass_through():
    out = io.BytesIO()
    held = HeldOutput(out)
    text = ("grpo  18/5000 reward 0.000\n" + TORCHRUN).encode()
    for i in range(0, len(text), 7):  # as the pipe delivers it: in pieces that split lines
        held.feed(text[i:i + 7])
    held.close()
    assert out.getvalue() == b"grpo  18/5000 reward 0.000\n"
    assert bytes(held.held) == TORCHRUN.encode()


def test_a_killed_rank_is_one_line_naming_it():
    assert root_cause(TORCHRUN).rank == 1
    line = failure_line(2, 1, TORCHRUN, [(0, [RANK0])])
    assert line == ("rank 1 of 2 was killed by SIGKILL, pid 20677; the other ranks stopped at the collective they were "
                    "waiting on; continue with --resume")


def test_the_root_cause_rank_s_own_failure_is_the_line():
    report = TORCHRUN.replace("exitcode  : -9 (pid: 20677)", "exitcode  : 1 (pid: 20677)")
    own = "rank 1 of 2: step 3: the weights became non-finite after the optimiser step"
    assert failure_line(2, 1, report, [(0, [RANK0]), (1, [own])]) == own
    assert failure_line(2, 1, report, [(0, [RANK0])]).startswith("rank 1 of 2 failed first (exit status 1")


def test_without_a_report_the_first_firsthand_failure_is_the_line():
    stopped = "rank 1 of 2: stopped by torchrun (SIGTERM) after another rank failed; continue with --resume"
    assert failure_line(2, 1, "", [(0, [RANK0]), (1, [stopped])]) == RANK0
    assert failure_line(2, 1, "", [(1, [stopped])]) == stopped
    assert failure_line(2, 1, "", []) is None
