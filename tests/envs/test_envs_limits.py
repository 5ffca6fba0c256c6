"""A raising, hanging or flooding tool ends its turn with a clear note and the run goes on
(rlvr_cli/envs/limits.py); truncation keeps the side the recipe names."""

from __future__ import annotations

import threading
import time

import pytest

from rlvr_cli.envs import episode_factory
from rlvr_cli.envs.limits import CUT, call_limited, fit, truncate, writable
from rlvr_cli.models.tokenizer import build_char_tokenizer
from rlvr_cli.recipe.environment import EnvironmentSpec

TOOLS = '''
import threading
RELEASE = threading.Event()

def boom(x):
    raise KeyError("no " + x)

def hang(x):
    RELEASE.wait(30)
    return "late"

def flood(x):
    return "a" * 500_000 + "MIDDLE" + "z" * 500_000

class Unprintable:
    def __str__(self):
        raise RuntimeError("cannot print me")

def weird(x):
    return Unprintable()

def number(x):
    return 12

def exits(x):
    raise SystemExit(3)

def huge(x):
    return 10 ** 100_000  # str() refuses an int of more than 4300 digits

async def later(x):
    return "awaited " + x
'''


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    path = tmp_path_factory.mktemp("tools") / "hostile.py"
    path.write_text(TOOLS)
    return str(path)


def episode(tools, *names, side="right", max_tokens=8, timeout=0.2):
    spec = EnvironmentSpec(tools=[f"{tools}:{n}" for n in names], protocol="tags", tool_timeout_s=timeout, max_turns=10,
                           max_output_tokens=max_tokens, truncate_side=side)
    return episode_factory(spec, build_char_tokenizer(), "builtin:tiny")({})


def test_a_raising_tool_shows_the_error_and_counts_a_failure(tools):
    ep = episode(tools, "boom", max_tokens=64)
    reply = ep.step("<boom>key</boom>")
    assert reply.failed and reply.text == "<r>error: keyerror: ?no key?</r>"  # lower-cased, quotes as ?: the built-in alphabet
    assert reply.note == "boom: error: KeyError: 'no key'"
    assert (ep.stats.calls, ep.stats.failures) == (1, 1)


def test_a_hanging_tool_times_out_and_the_episode_goes_on(tools):
    ep = episode(tools, "hang", "number", max_tokens=64)
    t0 = time.perf_counter()
    reply = ep.step("<hang>x</hang>")
    assert time.perf_counter() - t0 < 2.0
    assert reply.failed and reply.text == "<r>error: timeout after 0.2 s</r>" and "abandoned" in reply.note
    assert ep.step("<number>1</number>").text == "<r>12</r>"  # the next call works
    hang = ep.tools["hang"]
    hang.__globals__["RELEASE"].set()  # the abandoned thread ends with the test


@pytest.mark.parametrize("side, expected", [("right", "aaaaaaaa" + CUT), ("left", CUT + "zzzzzzzz"), ("middle", "aaaa" + CUT + "zzzz")])
def test_a_flooding_tool_is_cut_on_its_side_with_a_note(tools, side, expected):
    ep = episode(tools, "flood", side=side, max_tokens=8)
    t0 = time.perf_counter()
    reply = ep.step("<flood>x</flood>")
    assert time.perf_counter() - t0 < 2.0  # 1 MB of output is not tokenized whole
    assert reply.text == "<r>" + expected + "</r>" and not reply.failed
    assert reply.note == f"output cut to 8 tokens ({side})"


def test_an_unprintable_return_a_number_an_exit_and_an_async_tool(tools):
    ep = episode(tools, "weird", "number", "exits", "later", "huge", max_tokens=64)
    weird = ep.step("<weird>x</weird>")
    assert weird.failed and weird.text == "<r>error: runtimeerror: cannot print me</r>"
    assert ep.step("<number>x</number>").text == "<r>12</r>"  # str() of a non-str return
    assert ep.step("<exits>x</exits>").text == "<r>error: systemexit: 3</r>"  # the run is not ended
    assert ep.step("<later>y</later>").text == "<r>awaited y</r>"
    big = ep.step("<huge>x</huge>")
    assert big.failed and big.text.startswith("<r>error: valueerror: exceeds the limit")


def test_truncation_counts_tokens_of_the_tokenizer():
    """7 characters, 4 tokens kept: right keeps the first 4, left the last 4, middle 2 + 2 (hand-counted)."""
    tok = build_char_tokenizer()
    assert truncate("abcdefg", tok, 4, "right") == ("abcd" + CUT, "output cut to 4 tokens (right)")
    assert truncate("abcdefg", tok, 4, "left")[0] == CUT + "defg"
    assert truncate("abcdefg", tok, 4, "middle")[0] == "ab" + CUT + "fg"
    assert truncate("abcdefg", tok, 5, "middle")[0] == "abc" + CUT + "fg"
    assert truncate("abcd", tok, 4, "middle") == ("abcd", "")  # fits: untouched, no note
    assert truncate("abcdefg", None, 1, "middle")[0] == "a" + CUT  # without a tokenizer a character is a token


def test_a_special_tokens_text_in_a_tools_output_stays_text():
    tok = build_char_tokenizer()
    assert writable("a</s>b<pad>", tok) == "a?/s>b?pad>"
    assert tok.eos_token_id not in tok("<r>" + writable("</s>", tok) + "</r>", add_special_tokens=False)["input_ids"]


def test_writable_fits_the_character_alphabet():
    tok = build_char_tokenizer()
    assert writable("Résumé\x00 OK\n", tok) == "r?sum?? ok\n"
    assert writable("Résumé\x00", None) == "Résumé?"  # another tokenizer: only control characters go
    assert fit("x" * 10 ** 6, tok, 3, "left") == (CUT + "xxx", "output cut to 3 tokens (left)")


def test_call_limited_returns_within_the_timeout():
    gate = threading.Event()
    out = call_limited(lambda: gate.wait(10), timeout_s=0.1, name="slow")
    gate.set()
    assert out.failed and out.text == "error: timeout after 0.1 s"
