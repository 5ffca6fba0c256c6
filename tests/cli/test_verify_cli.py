"""`rlvr verify`: scores a JSONL, reports malformed lines by number, keeps what is asked for."""

import json

import pytest

from rlvr_cli.cli import main


def run(argv) -> int:
    with pytest.raises(SystemExit) as e:
        main(argv)
    return e.value.code


def sample_line(response, reference="632", **extra):
    line = {"prompt_id": "add3:347+285", "prompt": "347+285=", "reference": reference, "response": response,
            "num_tokens": len(response), "finish_reason": "eos", "sample_index": 0, "task": "arithmetic",
            "verifier": "integer", "model": "builtin:tiny", "sampling": {"temperature": 1.0}}
    line.update(extra)
    return json.dumps(line)


@pytest.fixture
def samples(tmp_path):
    path = tmp_path / "samples.jsonl"
    lines = [
        sample_line("12,13,6#632"),
        sample_line("#631"),
        "{not json",
        "",
        sample_line("#632=632"),
        "[1, 2]",
        json.dumps({"response": 5, "reference": "1", "verifier": "integer"}),
        sample_line("no marker"),
    ]
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'{"response": "\xff", "reference": "1"}\n')
    return path


def test_scores_and_reports_malformed_lines(samples, tmp_path, capsys):
    out = tmp_path / "scored.jsonl"
    assert run(["verify", str(samples), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    for number, why in [(3, "not valid JSON"), (6, "not a JSON object"), (7, "no string field 'response'"), (9, "not valid UTF-8")]:
        assert f"line {number}: {why}" in err
    assert "line 4" not in err  # a blank line is not a problem
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["response"], r["outcome"], r["reward"]) for r in rows] == [
        ("12,13,6#632", "correct", 1.0), ("#631", "incorrect", 0.0), ("#632=632", "correct", 1.0),
        ("no marker", "unparseable", 0.0)]
    assert rows[0]["prompt_id"] == "add3:347+285" and rows[0]["answer"] == "632"  # input fields kept
    assert "accuracy" in err and "2/4" in err


def test_keep_correct_is_rejection_sampling(samples, tmp_path):
    out = tmp_path / "sft.jsonl"
    assert run(["verify", str(samples), "--keep", "correct", "--out", str(out)]) == 0
    assert [json.loads(line)["response"] for line in out.read_text().splitlines()] == ["12,13,6#632", "#632=632"]


def test_any_jsonl_with_named_fields_and_a_math_verifier(tmp_path):
    path = tmp_path / "other.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [
        {"completion": "so \\boxed{\\frac{1}{2}}", "gold": 0.5},
        {"completion": "#### 7", "gold": 7},
        {"completion": "\\boxed{8}", "gold": "7"},
    ]) + "\n")
    out = tmp_path / "scored.jsonl"
    code = run(["verify", str(path), "--verifier", "math", "--response-field", "completion",
                "--reference-field", "gold", "--out", str(out), "--timeout", "10"])
    assert code == 0
    assert [json.loads(line)["outcome"] for line in out.read_text().splitlines()] == ["correct", "correct", "incorrect"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--verifier", "astrology"], "--verifier astrology: unknown"),
        (["--keep", "great", "--out", "x.jsonl"], "--keep great: outcomes are"),
        (["--extract", "regex"], "--extract regex"),
    ],
)
def test_bad_flags_exit_2(samples, capsys, args, message):
    assert run(["verify", str(samples), *args]) == 2
    assert message in capsys.readouterr().err


def test_missing_or_hopeless_files_exit_2(tmp_path, capsys):
    assert run(["verify", str(tmp_path / "nope.jsonl")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text("garbage\n\n")
    assert run(["verify", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "line 1: not valid JSON" in err and "no line could be scored" in err


def test_hostile_lines_are_per_line_errors_and_the_output_is_written(tmp_path, capsys):
    """A 5000-digit integer, 100,000-deep JSON and a lone surrogate each cost their own line only."""
    path = tmp_path / "hostile.jsonl"
    lines = [
        sample_line("#632"),
        '{"response": "#1", "reference": ' + "9" * 5000 + ', "verifier": "integer"}',
        "[" * 100_000 + "]" * 100_000,
        '{"response": "#632 \\ud800", "reference": "632", "verifier": "integer"}',
        sample_line("#631"),
    ]
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path / "scored.jsonl"
    assert run(["verify", str(path), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "line 2:" in err and "4300" in err and "line 3:" in err and "nested too deeply" in err
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["outcome"] for r in rows] == ["correct", "correct", "incorrect"]
    assert rows[1]["response"] == "#632 \ud800"  # the lone surrogate survives the round trip
