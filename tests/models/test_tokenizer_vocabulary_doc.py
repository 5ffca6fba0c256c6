"""docs/tasks.md lists builtin:tiny's vocabulary; this test generates the list from the tokenizer and keeps
the doc equal to it (issue 49). On a change, paste the block this test prints in the failure."""

from __future__ import annotations

from pathlib import Path

from rlvr_cli.models.tokenizer import SPECIAL_TOKENS, build_char_tokenizer

DOC = Path(__file__).resolve().parents[2] / "docs" / "tasks.md"
START = "<!-- builtin vocabulary: generated from the tokenizer; tests/models/test_tokenizer_vocabulary_doc.py keeps it equal -->"
END = "<!-- end of builtin vocabulary -->"
NAMES = {" ": "space", "\n": "newline"}


def vocabulary_block() -> str:
    tok = build_char_tokenizer()
    chars = [t for t, _ in sorted(tok.get_vocab().items(), key=lambda kv: kv[1]) if t not in SPECIAL_TOKENS]
    shown = " ".join(NAMES.get(c, f"`{c}`") for c in chars)
    specials = ", ".join(f"`{s}`" for s in SPECIAL_TOKENS)
    return (f"{START}\n{len(chars)} characters, one token each: {shown}; and the special tokens {specials}.\n"
            f"Any other character (every uppercase letter, accents, `$`, `%`, `'`, `\"`, `{{`, `}}`, a tab) is `<unk>`.\n{END}")


def test_the_doc_lists_the_tokenizers_vocabulary():
    text = DOC.read_text(encoding="utf-8")
    assert START in text and END in text, f"docs/tasks.md lacks the vocabulary block:\n{vocabulary_block()}"
    got = text[text.index(START): text.index(END) + len(END)]
    assert got == vocabulary_block(), f"docs/tasks.md's vocabulary block is stale; it should read:\n{vocabulary_block()}"


def test_the_characters_said_unknown_are_unknown():
    tok = build_char_tokenizer()
    for c in "AZÉé$%'\"{}\t":
        assert tok(c, add_special_tokens=False)["input_ids"] == [tok.unk_token_id], c
