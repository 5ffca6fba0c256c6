"""Hostile input found by trying each command as a user would (issue 50's last step): each is one line naming
the file (and line), exit 2, or read correctly; never an internal error."""

from __future__ import annotations

import json
import sys

import pytest

DIGITS = "1" + "0" * (sys.get_int_max_str_digits() + 1)
"""An integer of more digits than Python converts from text (yaml.safe_load raised ValueError: exit 1)."""


def _refused(res) -> str:
    assert res.code == 2, (res.code, res.stderr)
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    return " ".join(res.stderr.split())


@pytest.mark.parametrize("text, line", [(f"steps: {DIGITS}\n", 1), (f"steps: 2\nloss:\n  clip:\n    eps_low: {DIGITS}\n", 4)],
                         ids=["top", "nested"])
def test_an_integer_of_thousands_of_digits_in_a_recipe_is_named_at_its_line(cli, tmp_path, text, line):
    path = tmp_path / "r.yaml"
    path.write_text(text)
    said = _refused(cli("recipes", "validate", str(path)))
    assert f"error: {path}:{line}: invalid YAML: an integer of more than {sys.get_int_max_str_digits()} digits" in said
    assert _refused(cli("export", str(path), "--to", "verl")) == said


def test_an_integer_of_thousands_of_digits_in_set_is_named(cli):
    said = _refused(cli("recipes", "validate", "grpo", "--set", f"steps={DIGITS}"))
    assert "error: --set steps=1000" in said and f"a number of more than {sys.get_int_max_str_digits()} digits" in said


def test_an_integer_of_thousands_of_digits_in_a_sweep_spec_is_named_at_its_line(cli, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(f"base: grpo\nsteps: {DIGITS}\n")
    said = _refused(cli("sweep", str(path), "--dry-run"))
    assert f"error: {path}:2: invalid YAML: an integer of more than" in said


def test_verify_reads_a_file_that_starts_with_a_byte_order_mark(cli, tmp_path):
    path = tmp_path / "bom.jsonl"
    line = json.dumps({"response": "#5", "reference": "5", "verifier": "integer"})
    path.write_bytes(b"\xef\xbb\xbf" + line.encode() + b"\n" + line.encode() + b"\n")
    res = cli("verify", str(path), "--out", str(tmp_path / "out.jsonl"))
    assert res.code == 0, res.stderr
    assert [json.loads(x)["outcome"] for x in (tmp_path / "out.jsonl").read_text().splitlines()] == ["correct"] * 2


def test_verify_names_a_directory_or_a_device_for_what_it_is(cli, tmp_path):
    (tmp_path / "d.jsonl").mkdir()
    assert f"error: {tmp_path / 'd.jsonl'}: a directory, not a JSONL file" in _refused(cli("verify", str(tmp_path / "d.jsonl")))
    assert "error: /dev/null: not a regular file" in _refused(cli("verify", "/dev/null"))
