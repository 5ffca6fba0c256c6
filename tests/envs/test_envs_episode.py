"""One trajectory's counters and its failure modes (rlvr_cli/envs/episode.py), and `rlvr recipes validate`
refusing a bad environment with exit 2 and one line (never a traceback)."""

from __future__ import annotations

import pytest

from rlvr_cli.envs import episode_factory, problem_row
from rlvr_cli.errors import UserError
from rlvr_cli.recipe.environment import EnvironmentSpec

ENV = '''
class Env:
    def __init__(self, mode="ok"):
        self.mode = mode

    def reset(self, **row):
        if self.mode == "bad_reset":
            raise ValueError("reset failed")
        return "Hint: " + row["prompt"]

    def echo(self, x):
        return x

    def get_reward(self):
        return {"ok": 0.25, "nan": float("nan"), "text": "high", "none": None, "bad_reset": 0.0}[self.mode]
'''


@pytest.fixture
def env_ref(tmp_path):
    (tmp_path / "env.py").write_text(ENV)
    return f"{tmp_path}/env.py:Env"


def has_answer(text: str) -> bool:
    return "#" in text


def test_void_turns_calls_and_the_last_turn(env_ref):
    ep = episode_factory(EnvironmentSpec(factory=env_ref, protocol="tags", max_turns=3), None, "builtin:tiny", has_answer)({})
    assert ep.step("<echo>1</echo>").text == "<r>1</r>"  # turn 1: a call
    assert ep.step("<echo>2</echo>").text == "<r>2</r>"  # turn 2: a call
    assert ep.step("<echo>3</echo>") is None  # turn 3 = max_turns: a call gets no reply, and it is void (no answer)
    assert (ep.stats.turns, ep.stats.calls, ep.stats.void_turns) == (3, 2, 1)
    counted = episode_factory(EnvironmentSpec(factory=env_ref, protocol="tags"), None, "builtin:tiny")({})
    counted.step("<echo>1</echo>")
    counted.step("1</echo>")  # a failed call counts too (environment.call_cost prices calls: algo/env_tokens.py)
    assert (counted.stats.calls, counted.stats.failures) == (2, 1)
    answered = episode_factory(EnvironmentSpec(factory=env_ref, protocol="tags"), None, "builtin:tiny", has_answer)({})
    assert answered.step("#42") is None and answered.stats.void_turns == 0
    rambling = episode_factory(EnvironmentSpec(factory=env_ref, protocol="tags"), None, "builtin:tiny", has_answer)({})
    assert rambling.step("no idea") is None and rambling.stats.void_turns == 1
    unknown = episode_factory(EnvironmentSpec(factory=env_ref, protocol="tags"), None, "builtin:tiny")({})
    assert unknown.step("no idea") is None and unknown.stats.void_turns == 0  # without has_answer: not decidable


def test_reset_text_is_made_writable_and_the_row_is_trls(env_ref):
    from rlvr_cli.models.tokenizer import build_char_tokenizer
    from rlvr_cli.tasks import Problem

    row = problem_row(Problem("add3:001+002", "001+002=", "3", {"a": 1, "b": 2}))
    assert row == {"a": 1, "b": 2, "prompt": "001+002=", "answer": "3", "id": "add3:001+002"}
    ep = episode_factory(EnvironmentSpec(factory=env_ref), build_char_tokenizer(), "builtin:tiny")(row)
    assert ep.reset(row) == "hint: 001+002="


@pytest.mark.parametrize("mode, expected", [("ok", 0.25), ("none", None), ("nan", "returned nan"), ("text", "returned a str, not a number")])
def test_get_reward(env_ref, mode, expected):
    ep = episode_factory(EnvironmentSpec(factory=env_ref, options={"mode": mode}), None, "m")({})
    if isinstance(expected, str):
        with pytest.raises(UserError, match=f"environment.factory: .*get_reward\\(\\) {expected}"):
            ep.reward()
    else:
        assert ep.reward() == expected


def test_a_failing_reset_is_a_user_error_naming_the_row(env_ref):
    ep = episode_factory(EnvironmentSpec(factory=env_ref, options={"mode": "bad_reset"}), None, "m")({})
    with pytest.raises(UserError, match=r"environment.factory: .*reset\(\*\*row\) of row 'r7' raised ValueError: reset failed"):
        ep.reset({"id": "r7", "prompt": "p"})


def test_validate_refuses_a_bad_environment_with_exit_2(cli, tmp_path, monkeypatch):
    (tmp_path / "env.py").write_text(ENV)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.yaml").write_text("extends: dr_grpo\nenvironment:\n  factory: env.py:Evn\n")
    res = cli("recipes", "validate", str(tmp_path / "r.yaml"))
    assert res.code == 2 and "Traceback" not in res.stderr, res.stderr
    assert "environment.factory:" in res.stderr and "(did you mean 'Env'?)" in " ".join(res.stderr.split())
    (tmp_path / "r.yaml").write_text("extends: dr_grpo\nenvironment:\n  factory: env.py:Env\n")
    ok = cli("recipes", "validate", str(tmp_path / "r.yaml"))
    assert ok.code == 0, ok.stderr


def test_an_async_get_reward_is_awaited(tmp_path):
    (tmp_path / "a.py").write_text("class A:\n    def reset(self, **row):\n        return None\n\n"
                                   "    def t(self, x):\n        return x\n\n"
                                   "    async def get_reward(self):\n        return 0.75\n")
    ep = episode_factory(EnvironmentSpec(factory=f"{tmp_path}/a.py:A"), None, "m")({})
    assert ep.reward() == 0.75
