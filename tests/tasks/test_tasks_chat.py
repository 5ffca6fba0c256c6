"""Chat-form prompts: the tokenizer's chat template (with transformers 5's BatchEncoding), a system
prompt, the arithmetic task asked as a question and scored from free text, and their bad inputs."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rlvr_cli.errors import UserError
from rlvr_cli.models.tokenizer import build_char_tokenizer
from rlvr_cli.recipe.schema import ArithmeticTaskSpec, DatasetTaskSpec, ReasoningGymTaskSpec, RewardSpec
from rlvr_cli.rewards.scorer import Scorer, ScoreItem
from rlvr_cli.tasks import build_task, encode_prompt

TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}<assistant>{% endif %}")


def chat_tokenizer():
    tok = build_char_tokenizer()
    tok.chat_template = TEMPLATE
    return tok


def chat_task(**kw):
    return build_task(ArithmeticTaskSpec(digits=1, num_eval=8, prompt_template="what is {a} + {b}?",
                                         chat_template=True, **kw))


def test_chat_prompt_is_a_flat_list_of_the_rendered_templates_ids():
    """transformers 5's apply_chat_template(tokenize=True) returns a BatchEncoding, not a dict: the old
    isinstance(ids, dict) test made a list of its keys ('too many dimensions \\'str\\'' later)."""
    tok, task = chat_tokenizer(), chat_task()
    problem = task.eval_problems()[0]
    ids = encode_prompt(tok, task, problem)
    assert all(type(i) is int for i in ids)
    assert tok.decode(ids) == f"<user>{problem.prompt}\n<assistant>"
    assert problem.prompt == f"what is {problem.meta['a']} + {problem.meta['b']}?"


def test_system_prompt_comes_first():
    tok, task = chat_tokenizer(), chat_task(system_prompt="be brief.")
    ids = encode_prompt(tok, task, task.eval_problems()[0])
    assert tok.decode(ids).startswith("<system>be brief.\n<user>what is ")


def test_raw_prompts_stay_the_default():
    tok, task = chat_tokenizer(), build_task("arithmetic")
    problem = task.eval_problems()[0]
    assert task.answer_marker == "#" and problem.prompt.endswith("=")
    assert tok.decode(encode_prompt(tok, task, problem), skip_special_tokens=True) == problem.prompt


def test_a_tokenizer_without_chat_template_exits_2():
    task = chat_task()
    with pytest.raises(UserError, match="task.chat_template: true, but the model's tokenizer has no chat template"):
        encode_prompt(build_char_tokenizer(), task, task.eval_problems()[0])


def test_question_form_is_scored_from_free_text():
    task = chat_task()
    assert task.answer_marker == ""
    problem = task.eval_problems()[0]
    gold = problem.meta["a"] + problem.meta["b"]
    spec = RewardSpec(extract=["answer_colon_lenient", "last_number"], terms=[{"type": "task"}, {"type": "format", "weight": 0.1}])
    responses = [f"The answer is {gold}.", f"{problem.meta['a']} + {problem.meta['b']} = {gold}", f"Answer: {gold + 1}", "no idea"]
    with Scorer(spec, task) as scorer:
        scores = scorer.score([ScoreItem(problem, r, i) for i, r in enumerate(responses)])
    assert [s.correct for s in scores] == [True, True, False, False]
    assert [s.terms["format"] for s in scores] == [1.0, 0.0, 1.0, 0.0]
    assert [s.outcome for s in scores][-1] == "unparseable"


@pytest.mark.parametrize("kw,message", [
    ({"chat_template": True}, "chat_template needs prompt_template"),
    ({"prompt_template": "what is {a} + {c}?"}, r"unknown field\(s\) \['c'\]"),
    ({"prompt_template": "what is {a + {b}?"}, "prompt_template"),
    ({"prompt_template": "what is {a} + {b}?", "system_prompt": "hi"}, "system_prompt needs chat_template: true"),
])
def test_bad_chat_fields_are_named(kw, message):
    with pytest.raises(ValidationError, match=message):
        ArithmeticTaskSpec(**kw)


def test_system_prompt_needs_chat_template_on_every_task_kind():
    with pytest.raises(ValidationError, match="system_prompt needs chat_template"):
        DatasetTaskSpec(path="x.jsonl", system_prompt="hi")
    with pytest.raises(ValidationError, match="system_prompt needs chat_template"):
        ReasoningGymTaskSpec(dataset="chain_sum", system_prompt="hi")
    assert DatasetTaskSpec(path="x.jsonl", chat_template=True, system_prompt="hi").system_prompt == "hi"


def test_question_form_has_no_supervised_traces():
    import random

    task = chat_task()
    with pytest.raises(UserError, match="supervised traces exist only for the raw"):
        task.trace(task.eval_problems()[0], random.Random(0))


def test_trl_bridge_gives_the_same_conversation():
    pytest.importorskip("datasets")
    from rlvr_cli.bridges.trl_reward import train_dataset

    recipe = {"steps": 1, "rollout": {"prompts_per_step": 2},
              "task": {"name": "arithmetic", "digits": 1, "num_eval": 8, "prompt_template": "what is {a} + {b}?",
                       "chat_template": True, "system_prompt": "be brief."}}
    rows = train_dataset(recipe)
    assert len(rows) == 2
    assert rows[0]["prompt"][0] == {"role": "system", "content": "be brief."}
    assert rows[0]["prompt"][1]["role"] == "user" and rows[0]["prompt"][1]["content"].startswith("what is ")
