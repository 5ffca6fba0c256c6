"""Loading a user's environment in TRL's shape (rlvr_cli/envs/loading.py): a TRL environment class from a
file runs unchanged; bad references are one UserError naming the field and the reference."""

from __future__ import annotations

import pytest

from rlvr_cli.envs import episode_factory
from rlvr_cli.envs.loading import load_environment
from rlvr_cli.errors import UserError
from rlvr_cli.recipe.environment import EnvironmentSpec

TRL_ENV = '''
class Wordle:
    """A TRL environment_factory class, as TRL's docs write one: no constructor arguments."""

    def __init__(self):
        self.secret = None
        self.guesses = 0

    def reset(self, **kwargs):
        self.secret = kwargs["answer"]
        self.guesses = 0
        return "guess the number"

    def guess(self, word: str) -> str:
        """Guess the secret."""
        self.guesses += 1
        return "right" if word.strip() == self.secret else "wrong"

    def add(self, a: int, b: int) -> int:
        return a + b

    def _private(self):
        return "not a tool"

    def get_reward(self) -> float:
        return 1.0 / self.guesses if self.guesses else 0.0


class Quiet:
    def reset(self, **kwargs):
        return None


class NoReset:
    def tool(self, x):
        return x


class Scaled:
    def __init__(self, scale=1):
        self.scale = scale

    def reset(self, **kwargs):
        return None

    def times(self, x: int):
        return x * self.scale


def double(x: int) -> int:
    return 2 * x

NOT_A_FUNCTION = 3
'''


@pytest.fixture
def env_file(tmp_path):
    path = tmp_path / "my_env.py"
    path.write_text(TRL_ENV)
    return str(path)


def test_a_trl_environment_class_runs_unchanged(env_file):
    make = episode_factory(EnvironmentSpec(factory=f"{env_file}:Wordle", protocol="hermes"), None, "some/model")
    ep = make({"answer": "42"})
    assert ep.reset({"answer": "42", "prompt": "p"}) == "guess the number"
    assert set(ep.tools) == {"guess", "add"}  # public methods but reset and get_reward; not _private
    assert ep.stop_strings == ("</tool_call>",)
    wrong = ep.step('<tool_call>\n{"name": "guess", "arguments": {"word": "41"}}\n</tool_call>')
    right = ep.step('<tool_call>\n{"name": "guess", "arguments": {"word": "42"}}\n</tool_call>')
    assert wrong.text == "<tool_response>\nwrong\n</tool_response>" and not wrong.failed
    assert right.text == "<tool_response>\nright\n</tool_response>"
    assert ep.reward() == 0.5  # get_reward: 1 / 2 guesses
    assert (ep.stats.calls, ep.stats.failures, ep.stats.turns) == (2, 0, 2)


def test_each_trajectory_gets_a_fresh_object(env_file):
    make = episode_factory(EnvironmentSpec(factory=f"{env_file}:Wordle", protocol="tags"), None, "x")
    a, b = make({}), make({})
    a.reset({"answer": "1"})
    b.reset({"answer": "2"})
    a.step("<guess>1</guess>")
    assert a.reward() == 1.0 and b.reward() == 0.0


def test_options_are_the_factorys_keywords_and_plain_functions_are_tools(env_file):
    spec = EnvironmentSpec(factory=f"{env_file}:Scaled", options={"scale": 3}, tools=[f"{env_file}:double"], protocol="tags")
    ep = episode_factory(spec, None, "builtin:tiny")({})
    assert ep.reset({}) is None and ep.reward() is None  # no get_reward: None, not 0
    assert ep.step("<times>5</times>").text == "<r>15</r>"
    assert ep.step("<double>5</double>").text == "<r>10</r>"
    only_tools = episode_factory(EnvironmentSpec(tools=[f"{env_file}:double"]), None, "builtin:tiny")({})
    assert only_tools.reset({"x": 1}) is None and only_tools.stop_strings == ("</double>",)


@pytest.mark.parametrize("spec, field, says", [
    (dict(factory="nowhere.py:Env"), "environment.factory:", "no such file"),
    (dict(factory="FILE:Wordel"), "environment.factory:", "did you mean 'Wordle'?"),
    (dict(factory="FILE:NoReset"), "environment.factory:", "no reset method"),
    (dict(factory="FILE:Quiet"), "environment.factory:", "has no tools"),
    (dict(factory="FILE:NOT_A_FUNCTION"), "environment.factory:", "is a int, not a class"),
    (dict(factory="FILE:Scaled", options={"sclae": 2}), "environment.options:", "unexpected keyword argument 'sclae'"),
    (dict(tools=["FILE:NOT_A_FUNCTION"]), "environment.tools[0]:", "is a int, not a function"),
    (dict(tools=["FILE:double", "FILE:double"]), "environment.tools[1]:", "a second tool named 'double'"),
    (dict(factory="builtin:calculater"), "environment.factory:", "did you mean 'calculator'?"),
    (dict(factory="no_such_module_xyz:Env"), "environment.factory:", "cannot import no_such_module_xyz"),
    (dict(), "environment:", "give a factory"),
    (dict(factory="Wordle"), "environment.factory:", "is not a reference"),
    (dict(factory="builtin:calculator", options={"error_rate": 2}), "environment.factory:", "error_rate must be"),
])
def test_a_bad_reference_is_one_line_naming_the_field(env_file, spec, field, says):
    spec = {k: (v.replace("FILE", env_file) if isinstance(v, str) else [x.replace("FILE", env_file) for x in v]
                if isinstance(v, list) else v) for k, v in spec.items()}
    with pytest.raises(UserError) as e:
        load_environment(EnvironmentSpec(**spec))
    (line,) = e.value.problems
    assert line.startswith(field) and says in line, line


def test_a_module_that_raises_at_import_is_named_with_its_line(tmp_path):
    (tmp_path / "broken.py").write_text("x = 1\nraise RuntimeError('boom')\n")
    with pytest.raises(UserError, match=r"environment.factory: .*broken.py:Env: cannot import .*RuntimeError: boom \(at .*broken.py:2\)"):
        load_environment(EnvironmentSpec(factory=f"{tmp_path}/broken.py:Env"))


@pytest.mark.parametrize("body, says", [
    ("import time\ntime.sleep(60)\n", "did not finish within 1 s"),
    ("import os\nos._exit(0)\n", "ended the process (exit status 0)"),
])
def test_a_module_that_hangs_or_exits_at_import_is_stopped_and_named(tmp_path, monkeypatch, body, says):
    """The module is imported first in a child process with a time limit: rlvr's own process never hangs
    in it or ends with it."""
    import rlvr_cli.checked_import as function_import

    monkeypatch.setattr(function_import, "IMPORT_TIMEOUT_S", 1.0)
    (tmp_path / "slow.py").write_text(body + "def tool(x):\n    return x\n")
    for spec, field in ((EnvironmentSpec(factory=f"{tmp_path}/slow.py:Env"), "environment.factory"),
                        (EnvironmentSpec(tools=[f"{tmp_path}/slow.py:tool"]), "environment.tools[0]")):
        with pytest.raises(UserError) as e:
            load_environment(spec)
        (line,) = e.value.problems
        assert line.startswith(f"{field}: ") and "slow.py" in line and says in line, line


def test_a_tool_name_the_tokenizer_cannot_write_is_refused(tmp_path):
    from rlvr_cli.models.tokenizer import build_char_tokenizer

    (tmp_path / "t.py").write_text("def Upper(x):\n    return x\n")
    with pytest.raises(UserError, match="cannot write the tool name 'Upper'"):
        episode_factory(EnvironmentSpec(tools=[f"{tmp_path}/t.py:Upper"]), build_char_tokenizer(), "builtin:tiny")
