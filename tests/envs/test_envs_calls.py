"""The two call protocols (rlvr_cli/envs/calls.py): what is a call, what is malformed, and the reply's text."""

from __future__ import annotations

import pytest

from rlvr_cli.envs import calls, episode_factory
from rlvr_cli.envs.calls import Call, Malformed, parse
from rlvr_cli.recipe.environment import EnvironmentSpec


def calc(expression: str) -> str:
    return expression


def add(a: int, b: int) -> int:
    return a + b


def now() -> str:
    return "noon"


TOOLS = {"calc": calc, "add": add, "now": now}


@pytest.mark.parametrize("text, expected", [
    ("<calc>347*28</calc>", Call("calc", ("347*28",))),
    ("think <calc>1,2</calc>  \n", Call("calc", ("1,2",))),  # one parameter: the whole text, commas too
    ("<add>3,4</add>", Call("add", (3, 4))),  # int annotations converted
    ("<now></now>", Call("now")),
    ("<calc>1+1</calc> and more", None),  # a call must end the turn
    ("#9716", None),
    ("<r>5</r>", None),  # the model writing a reply itself is no call
    ("<calc>1</calc><calc>2</calc>", Call("calc", ("2",))),  # the last call
    ("1+1</calc>", Malformed("calc", "error: </calc> without <calc>")),
    ("<add>3</add>", Malformed("add", "error: add takes 2 arguments, got 1")),
    ("<add>3,x</add>", Malformed("add", "error: add: argument b is not an int: 'x'")),
    ("<add>3," + "9" * 5000 + "</add>", Malformed("add", "error: add: argument b is not an int: '" + "9" * 40 + "'")),
    ("<now>5</now>", Malformed("now", "error: now takes no arguments")),
    ("<sqrt>4</sqrt>", Malformed("sqrt", "error: unknown tool 'sqrt' (tools: add, calc, now)")),
])
def test_tags(text, expected):
    assert parse("tags", text, TOOLS) == expected


@pytest.mark.parametrize("text, expected", [
    ('<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>', Call("add", (), {"a": 1, "b": 2})),
    ('<tool_call>{"name": "now"}</tool_call>\n', Call("now", (), {})),
    ('<tool_call>{"name": "add", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}</tool_call>', Call("add", (), {"a": 1, "b": 2})),
    ('<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call> then text', None),
    ("plain answer", None),
    ('<tool_call>{"name": "add", "arguments": {"a": 1,}}</tool_call>', "not JSON"),
    ('<tool_call>["add"]</tool_call>', 'a tool call is {"name"'),
    ('<tool_call>{"name": "add", "arguments": [1, 2]}</tool_call>', "not a JSON object"),
    ('<tool_call>{"name": "rm", "arguments": {}}</tool_call>', "unknown tool 'rm'"),
    ('{"name": "add"}</tool_call>', "</tool_call> without <tool_call>"),
    ("<tool_call>" + "[" * 100_000 + "]" * 100_000 + "</tool_call>", "not JSON"),  # deeper than the stack
    ('<tool_call>{"name": "add", "arguments": "' + "[" * 100_000 + '"}</tool_call>', "not a JSON object"),
    ('<tool_call>{"name": 5}</tool_call>', 'a tool call is {"name"'),
])
def test_hermes(text, expected):
    got = parse("hermes", text, TOOLS)
    if isinstance(expected, str):
        assert isinstance(got, Malformed) and expected in got.error, got
    else:
        assert got == expected


def test_the_reply_text_and_stop_strings_of_each_protocol():
    assert calls.stop_strings("tags", TOOLS) == ("</calc>", "</add>", "</now>")
    assert calls.stop_strings("hermes", TOOLS) == ("</tool_call>",)
    assert calls.wrap("tags", "9716") == "<r>9716</r>"
    assert calls.wrap("hermes", "3") == "<tool_response>\n3\n</tool_response>"
    assert calls.wrap("hermes", "3", chatml=True) == (
        "<|im_end|>\n<|im_start|>user\n<tool_response>\n3\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
    assert calls.render_call("tags", "add", 1, 2) == "<add>1,2</add>"
    assert parse("hermes", calls.render_call("hermes", "add", a=1, b=2), TOOLS) == Call("add", (), {"a": 1, "b": 2})


def test_a_malformed_call_is_a_failed_call_the_model_reads(tmp_path):
    (tmp_path / "t.py").write_text("def add(a: int, b: int) -> int:\n    return a + b\n")
    ep = episode_factory(EnvironmentSpec(tools=[f"{tmp_path}/t.py:add"], protocol="hermes", max_turns=8, max_output_tokens=200), None, "m")({})
    bad = ep.step('<tool_call>{"name": "add", "arguments": {"a": 1}}</tool_call>')  # TypeError from the call
    assert bad.failed and "error: TypeError:" in bad.text and "missing 1 required positional argument" in bad.text
    junk = ep.step("<tool_call>{not json</tool_call>")
    assert junk.failed and junk.text.startswith("<tool_response>\nerror: the tool call is not JSON")
    assert ep.step('<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>').text == "<tool_response>\n3\n</tool_response>"
    assert (ep.stats.calls, ep.stats.failures) == (3, 2)


def test_protocol_auto_is_tags_on_builtin_models_and_hermes_otherwise():
    from rlvr_cli.envs.episode import resolve_protocol

    assert resolve_protocol("auto", "builtin:tiny") == "tags"
    assert resolve_protocol("auto", "HuggingFaceTB/SmolLM2-135M") == "hermes"
    assert resolve_protocol("tags", "Qwen/Qwen3-0.6B") == "tags"


class ChatMLTokenizer:
    """A stand-in for a ChatML tokenizer (Qwen, SmolLM2): what the episode reads of one, its vocabulary."""

    def get_vocab(self):
        return {"<|im_start|>": 1, "<|im_end|>": 2, **{c: 10 + i for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")}}

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids, skip_special_tokens=False):
        return "".join(chr(i) for i in ids)


def test_a_hermes_reply_on_a_chatml_tokenizer_switches_roles_as_the_chat_template(tmp_path):
    from rlvr_cli.envs.episode import is_chatml

    (tmp_path / "t.py").write_text("def add(a: int, b: int) -> int:\n    return a + b\n")
    ep = episode_factory(EnvironmentSpec(tools=[f"{tmp_path}/t.py:add"]), ChatMLTokenizer(), "Qwen/Qwen3-0.6B")({})
    reply = ep.step('<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>')
    assert reply.text == "<|im_end|>\n<|im_start|>user\n<tool_response>\n3\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    assert is_chatml(ChatMLTokenizer()) and not is_chatml(None)
