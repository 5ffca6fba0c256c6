"""rlvr_cli/io.py: files written whole or not at all, lines that read back equal, paths as records name them."""

from __future__ import annotations

import json
import os

import pytest

from rlvr_cli import io


def test_a_write_replaces_the_file_whole_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "deep" / "er" / "a.json"  # missing folders are made
    io.atomic_write_json(path, {"b": 1, "a": [1, 2]})
    assert path.read_text() == '{\n  "b": 1,\n  "a": [\n    1,\n    2\n  ]\n}\n'  # key order kept, indent 2
    io.atomic_write_text(path, "é\n")
    assert path.read_bytes() == "é\n".encode("utf-8")
    assert os.listdir(path.parent) == ["a.json"]


def test_a_failed_write_keeps_the_old_content_and_removes_its_temporary(tmp_path):
    path = tmp_path / "a.json"
    io.atomic_write_json(path, {"old": True})
    with pytest.raises(TypeError):
        io.atomic_write_json(path, {"new": object()})  # not JSON: fails before any byte is written
    with pytest.raises(OSError):
        io.atomic_write_bytes(tmp_path / "a.json" / "under_a_file", b"x")
    assert json.loads(path.read_text()) == {"old": True} and os.listdir(tmp_path) == ["a.json"]


def test_jsonl_lines_read_back_equal_a_lone_surrogate_included(tmp_path):
    records = [{"t": "plain"}, {"t": "ü"}, {"t": json.loads('"\\ud800x"')}]
    io.atomic_write_jsonl(tmp_path / "r.jsonl", records)
    lines = (tmp_path / "r.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines[1] == '{"t": "ü"}' and lines[2] == '{"t": "\\ud800x"}'  # UTF-8 where it can, the escape where not
    assert [json.loads(x) for x in lines] == records


def test_rewrite_between_markers_says_whether_it_changed(tmp_path):
    path = tmp_path / "README.md"
    path.write_text("head\n<!-- a -->\nold\n<!-- b -->\ntail\n")
    assert io.rewrite_between_markers(path, "<!-- a -->", "<!-- b -->", "new\n") is True
    assert path.read_text() == "head\n<!-- a -->\nnew\n<!-- b -->\ntail\n"
    assert io.rewrite_between_markers(path, "<!-- a -->", "<!-- b -->", "new\n") is False


def test_display_path_is_relative_under_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert io.display_path(tmp_path / "runs" / "a") == os.path.join("runs", "a")
    assert io.display_path("runs/a") == "runs/a"  # relative: as given
    elsewhere = tmp_path.parent / "other"
    assert io.display_path(elsewhere) == str(elsewhere)
