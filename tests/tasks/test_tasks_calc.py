"""The `calc` task (rlvr_cli/tasks/calc.py): its traces hold the calculator's reply exactly as the
environment writes it, held-out prompts never train, and about tool_prob of the traces call."""

from __future__ import annotations

import random

from rlvr_cli.envs import episode_factory, problem_row
from rlvr_cli.models.tokenizer import build_char_tokenizer
from rlvr_cli.recipe.environment import EnvironmentSpec
from rlvr_cli.recipe.schema import CalcTaskSpec
from rlvr_cli.tasks import build_task


def test_a_trace_replays_through_the_environment_character_for_character():
    task = build_task(CalcTaskSpec(tool_prob=1.0))
    tok = build_char_tokenizer()
    make = episode_factory(EnvironmentSpec(factory="builtin:calculator"), tok, "builtin:tiny")
    rng = random.Random(0)
    for p in task.train_problems(rng, 20):
        trace = task.trace(p, rng)
        ep = make(problem_row(p))
        assert ep.reset(problem_row(p)) is None
        call_end = trace.index("</calc>") + len("</calc>")
        reply = ep.step(trace[:call_end])
        assert trace[call_end:] == reply.text + "#" + p.reference, trace
        assert set(trace) <= set(tok.get_vocab())  # every character is one of the tokenizer's


def test_problems_by_hand_and_the_held_out_split():
    task = build_task(CalcTaskSpec(num_eval=50))
    p = task.problem((347, 28))
    assert (p.prompt, p.reference, p.id) == ("347*28=", "9716", "calc:347*28")
    assert build_task(CalcTaskSpec(operation="sum3")).problem((1234, 5678, 9012)).reference == "15924"
    held = {q.prompt for q in task.eval_problems()}
    assert len(held) == 50
    assert not held & {q.prompt for q in task.train_problems(random.Random(1), 2000)}
    a, b = (int(x) for x in task.eval_problems()[0].prompt[:-1].split("*"))
    assert 100 <= a <= 999 and 10 <= b <= 99


def test_about_tool_prob_of_the_traces_call():
    task = build_task(CalcTaskSpec(tool_prob=0.5))
    rng = random.Random(3)
    traces = [task.trace(p, rng) for p in task.train_problems(rng, 400)]
    calls = sum(t.startswith("<calc>") for t in traces)
    assert 160 <= calls <= 240, calls  # 400 x 0.5 +- 4 sd
    assert all(t.startswith("<calc>") or t.startswith("#") for t in traces)
    assert build_task("calc").name == "calc"
