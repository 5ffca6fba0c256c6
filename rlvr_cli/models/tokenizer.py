"""A character-level tokenizer for the built-in tasks, in plain Hugging Face format.

It is a ``tokenizers`` WordLevel model over single characters (a pre-tokenizer isolates every
character, a ``Fuse`` decoder joins them back), wrapped as ``PreTrainedTokenizerFast``. Saved with
``save_pretrained`` it is a ``tokenizer.json`` that ``AutoTokenizer.from_pretrained`` loads with no
custom code, so a checkpoint of the built-in model is an ordinary Hugging Face model directory.
"""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK)

# Every character a built-in task can write. Letters are there for the verbose traces and for the
# "think"/format markers; anything else maps to <unk> (so file tasks need a real tokenizer).
CHARACTERS = "0123456789+-*/=()#,.:;?! \nabcdefghijklmnopqrstuvwxyz<>[]|_"


def build_char_tokenizer(characters: str = CHARACTERS) -> PreTrainedTokenizerFast:
    """Return the character tokenizer: ids 0-3 are <pad>, <s>, </s>, <unk>, then one id per character."""
    if len(set(characters)) != len(characters):
        raise ValueError("duplicate characters in the tokenizer alphabet")
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in characters:
        vocab[ch] = len(vocab)
    backend = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    # [\s\S] rather than "." so that a newline is a character like any other (Oniguruma's "." skips it).
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token=PAD, bos_token=BOS, eos_token=EOS, unk_token=UNK
    )
