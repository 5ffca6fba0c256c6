"""Hostile chat templates (issue 44): the Jinja sandbox held, but every failing template was an internal
error, one looped silently forever and one took 2.2 GiB. A template now renders in a worker process
with a time limit, a memory limit and an output limit, and every way it can fail is exit 2 naming the
model directory whose tokenizer carries it; a good template renders exactly as apply_chat_template."""

from __future__ import annotations

import shutil
import time

import pytest

from rlvr_cli.errors import UserError
from rlvr_cli.models.tokenizer import build_char_tokenizer
from rlvr_cli.recipe.schema import ArithmeticTaskSpec
from rlvr_cli.tasks import build_task, chat_render, encode_prompt

GOOD = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}{{ eos_token }}\n{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}")

HOSTILE = {
    "endless_loop": ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", r"took more than 1 s"),
    "memory": ("{{ 'x' * 2 ** 31 }}", r"more memory than the renderer's limit|died"),
    "output_size": ("{{ 'x' * 3000000 }}", r"rendered 3,000,000 characters for one prompt"),
    "raise_exception": ("{{ raise_exception('no system role') }}", r"TemplateError: no system role"),
    "syntax": ("{% for m in messages %}", r"TemplateSyntaxError"),
    "sandbox": ("{{ ''.__class__.__mro__[1].__subclasses__() }}", r"SecurityError"),
    "recursion": ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", r"recursed too deeply|RecursionError"),
    "undefined_call": ("{{ messages.nope() }}", r"UndefinedError"),
}


def _tokenizer(template: str, where: str = "/models/hostile"):
    tok = build_char_tokenizer()
    tok.chat_template = template
    tok.name_or_path = where
    return tok


def _task():
    return build_task(ArithmeticTaskSpec(digits=1, num_eval=4, prompt_template="what is {a} + {b}?", chat_template=True))


@pytest.fixture
def short_timeout(monkeypatch):
    monkeypatch.setattr(chat_render, "TIMEOUT_S", 1.0)


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_template_is_a_user_error_naming_the_model(case, short_timeout):
    template, needle = HOSTILE[case]
    task = _task()
    t0 = time.perf_counter()
    with pytest.raises(UserError, match=rf"^/models/hostile \(its tokenizer's chat_template\): .*({needle})"):
        encode_prompt(_tokenizer(template), task, task.eval_problems()[0])
    assert time.perf_counter() - t0 < 60


def test_the_renderer_recovers_after_a_killed_render(short_timeout):
    task = _task()
    with pytest.raises(UserError, match="took more than"):
        encode_prompt(_tokenizer(HOSTILE["endless_loop"][0]), task, task.eval_problems()[0])
    tok = _tokenizer(GOOD)
    assert tok.decode(encode_prompt(tok, task, task.eval_problems()[0])).endswith("<assistant>")


def test_a_good_template_renders_as_apply_chat_template(monkeypatch):
    task = _task()
    tok = _tokenizer(GOOD)
    for problem in task.eval_problems():
        messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": problem.prompt}]
        direct = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        assert chat_render.render_chat(tok, messages) == direct and tok.eos_token in direct
    # the second time comes from the cache: no worker round trip
    monkeypatch.setattr(chat_render, "_render", lambda *_a: pytest.fail("rendered again"))
    assert chat_render.render_chat(tok, messages) == direct


def test_a_hostile_template_in_a_model_directory_exits_2_through_the_cli(tiny_base, tmp_path, cli):
    """As a user meets it: a model directory whose tokenizer_config.json carries the template."""
    model = tmp_path / "model"
    shutil.copytree(tiny_base, model)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    tok.chat_template = HOSTILE["raise_exception"][0]
    tok.save_pretrained(model)
    recipe = tmp_path / "chat.yaml"
    recipe.write_text("task: {name: arithmetic, digits: 1, num_eval: 4, prompt_template: 'What is {a} + {b}?', chat_template: true}\n")
    out = tmp_path / "s.jsonl"
    r = cli("sample", str(model), "--task", str(recipe), "--n", "1", "--num-prompts", "1", "--out", str(out))
    assert r.code == 2, r.stderr
    assert f"{model} (its tokenizer's chat_template): the chat template cannot be rendered: TemplateError: no system role" in r.stderr
    assert not out.exists()
