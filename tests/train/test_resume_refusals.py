"""A refused `--resume` leaves the run byte for byte (issue 44: a failed resume rewrote recipe.yaml, steps
2 -> 3, and run.json, finished -> failed). A resume records itself (its recipe, `running`, its pid in
the lock file) only at its first write, so every refusal before it, whether found in the recipe, in the
checkpoint, in the task's data or in the model's chat template at the first rollout, writes nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import tiny_run, write_word_llama  # tests/conftest.py

CHAT_TEMPLATE = "{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}<a>{% endif %}"
SETS = tiny_run("steps=2", "optim.schedule=constant")


def _snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (the lock file included) and its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _args(*sets: str) -> list[str]:
    return [x for s in sets for x in ("--set", s)]


def _chat_sets(root: Path) -> list[str]:
    return [f"model.name={root / 'chat-model'}", "task.digits=1", "task.num_eval=8", "task.prompt_template=what is {a} + {b}?",
            "task.chat_template=true", "reward.extract=[last_number]", *SETS]


def _dataset_sets(root: Path) -> list[str]:
    return [f"model.name={root / 'llama' / 'model'}", "task.name=dataset", f"task.path={root / 'llama' / 'data.jsonl'}",
            "task.question_field=q", "task.answer_field=a", "task.verifier=integer", "task.eval_fraction=0.2",
            'task.prompt_template="{q}\\n"', *SETS, "rollout.max_new_tokens=6", "eval.max_new_tokens=6"]


SETS_OF = {"chat": _chat_sets, "dataset": _dataset_sets}


@pytest.fixture(scope="module")
def finished(tiny_base, tmp_path_factory) -> Path:
    """A directory with two finished 2-step runs (a checkpoint at step 2) and what they read: the built-in
    model asked in chat form through a copy whose tokenizer carries a chat template (``chat-run``), and
    a word-level Llama on a JSONL dataset task (``dataset-run``)."""
    from transformers import AutoTokenizer

    from rlvr_cli.cli import main

    root = tmp_path_factory.mktemp("resume-refusals")
    shutil.copytree(tiny_base, root / "chat-model")
    tok = AutoTokenizer.from_pretrained(root / "chat-model")
    tok.chat_template = CHAT_TEMPLATE
    tok.save_pretrained(root / "chat-model")
    write_word_llama(root / "llama")
    for kind, sets in SETS_OF.items():
        with pytest.raises(SystemExit) as e:
            main(["train", "grpo", "--out", str(root / f"{kind}-run"), *_args(*sets(root))])
        assert e.value.code in (0, None)
        assert json.loads((root / f"{kind}-run" / "run.json").read_text())["status"] == "finished"
    return root


def _copy(finished: Path, tmp_path: Path) -> Path:
    """A copy of the runs and of what they read, bytes unchanged but for the saved recipes' paths (so
    that a case damages its own copy, and the copied run reads the copied model and data)."""
    root = tmp_path / "copy"
    shutil.copytree(finished, root, symlinks=True)
    for kind in SETS_OF:
        recipe = root / f"{kind}-run" / "recipe.yaml"
        recipe.write_text(recipe.read_text().replace(str(finished), str(root)))
    return root


CASES = {
    # (run kind, extra --set, what to damage, the refusal's words)
    "another_recipe": ("chat", ["optim.lr=0.5"], None, "--resume with a different recipe: optim.lr"),
    "fewer_steps": ("chat", ["steps=1"], None, "a run cannot be shortened"),
    "a_damaged_trainer_state": ("chat", ["steps=3"], "trainer_state", "trainer_state.pt: cannot read the checkpoint's trainer state"),
    "a_hostile_chat_template": ("chat", ["steps=3"], "template", "the chat template cannot be rendered: TemplateError: nope"),
    "a_damaged_data_file": ("dataset", ["steps=3"], "data", "data.jsonl"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_refused_resume_leaves_the_run_byte_for_byte(case, finished, tmp_path, cli):
    kind, more, damage, words = CASES[case]
    root = _copy(finished, tmp_path)
    run = root / f"{kind}-run"
    if damage == "trainer_state":
        (run / "checkpoints" / "step_2" / "trainer_state.pt").write_bytes(b"not a torch file")
    elif damage == "template":
        ck = run / "checkpoints" / "step_2"  # a full fine-tune resumes with the checkpoint's own tokenizer
        config = json.loads((ck / "tokenizer_config.json").read_text())
        config["chat_template"] = "{{ raise_exception('nope') }}"
        (ck / "tokenizer_config.json").write_text(json.dumps(config))
        (ck / "chat_template.jinja").unlink(missing_ok=True)
    elif damage == "data":
        (root / "llama" / "data.jsonl").write_text('{"q": "What is 1 plus 2?"}\n')  # no answer field
    (run / ".lock").write_text("4194304\n")  # the run was trained by another process than this test's
    before = _snapshot(run)
    r = cli("train", "grpo", "--out", str(run), "--resume", *_args(*SETS_OF[kind](root), *more))
    assert r.code == 2, r.stdout + r.stderr
    assert words in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert _snapshot(run) == before


def test_a_resume_that_starts_records_itself_and_its_pid(finished, tmp_path, cli):
    """The other side: a resume that trains writes its recipe (steps 3), `extended` and its pid."""
    import os

    root = _copy(finished, tmp_path)
    run = root / "chat-run"
    r = cli("train", "grpo", "--out", str(run), "--resume", *_args(*_chat_sets(root), "steps=3"))
    assert r.code == 0, r.stderr
    status = json.loads((run / "run.json").read_text())
    assert status["status"] == "finished" and status["extended"][-1] == {"from_steps": 2, "to_steps": 3, "at_step": 2}
    assert "steps: 3" in (run / "recipe.yaml").read_text()
    assert (run / ".lock").read_text().strip() == str(os.getpid())
