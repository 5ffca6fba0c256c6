"""rlvr_cli/sampling/turns.py: multi-turn trajectories on one KV cache, with a stand-in environment.

The stand-in's tool "answers" every model turn that ends with a stop string by a fixed reply; the tests
check the token stream (origins, the reply's ids where they belong, the budget, the turn limit), the
keyed reproducibility, and that the cache the replies are fed through is the one a fresh forward over the
whole sequence gives (the trainer's recomputed log-probs equal the sampler's)."""

from __future__ import annotations

import pytest
import torch

from rlvr_cli.envs.protocol import ENVIRONMENT, MODEL, EpisodeStats, ToolReply
from rlvr_cli.keyed_random import row_keys
from rlvr_cli.models import load_model
from rlvr_cli.sampling import SamplingOptions
from rlvr_cli.sampling.turns import generate_turns
from rlvr_cli.train.packing import pack, response_logprobs

REPLY = "=42;"


class Echo:
    """A stand-in episode: a turn ending with one of ``stops`` is a call, answered by ``REPLY``."""

    def __init__(self, stops=("1", "2"), prefix: str | None = None):
        self.stop_strings, self.stats, self.prefix, self.seen = tuple(stops), EpisodeStats(), prefix, []

    def reset(self, row):
        self.row = row
        return self.prefix

    def step(self, turn_text):
        self.seen.append(turn_text)
        self.stats.turns += 1
        if turn_text.endswith(self.stop_strings):
            self.stats.calls += 1
            return ToolReply(REPLY)
        return None

    def reward(self):
        return None


@pytest.fixture(scope="module")
def tiny(tiny_base):
    model, tok, _ = load_model(tiny_base)
    model.eval()
    return model, tok


def _sample(tiny, n=6, max_new=24, max_turns=3, prefix=None, decoder="auto", keys=None, stops=("1", "2")):
    model, tok = tiny
    prompt = tok("12+34=", add_special_tokens=True)["input_ids"]
    eps = [Echo(stops, prefix) for _ in range(n)]
    keys = row_keys(7, [(0, i) for i in range(n)]) if keys is None else keys
    opts = SamplingOptions(max_new, tok.eos_token_id, tok.pad_token_id, temperature=1.3, decoder=decoder)
    return generate_turns(model, tok, [prompt] * n, eps, [{"prompt": "12+34="}] * n, opts, max_turns, keys), tok


def test_replies_sit_after_each_call_as_environment_tokens(tiny):
    out, tok = _sample(tiny)
    reply = tok(REPLY, add_special_tokens=False)["input_ids"]
    calls = 0
    for ids, org, lp, ep, fin, turns in zip(out.response_ids, out.origins, out.logprobs, out.episodes,
                                            out.finish_reasons, out.turns):
        assert len(ids) == len(org) == len(lp) <= 24
        assert all(v == 0.0 for v, o in zip(lp, org) if o == ENVIRONMENT)
        assert all(v < 0.0 for v, o in zip(lp, org) if o == MODEL)
        # every environment run is (a prefix of) the reply, right after a model token ending a call
        k = 0
        while k < len(ids):
            if org[k] == ENVIRONMENT:
                run = ids[k: k + len(reply)]
                assert run == reply[: len(run)] and tok.decode(ids[:k]).endswith(("1", "2"))
                k += len(run)
            else:
                k += 1
        assert turns <= 3 and ep.stats.calls <= turns == len(ep.seen)
        assert fin in ("eos", "stop", "length")
        calls += ep.stats.calls
    assert calls >= 3, "the stand-in must be called for the test to say anything"
    assert all(m == 0 for m in out.prefix_mismatches)  # the character tokenizer cannot drift


def test_the_turn_limit_and_the_budget_hold(tiny):
    out, _ = _sample(tiny, max_turns=1)
    assert all(o == [MODEL] * len(o) for o in out.origins) and all(t == 1 for t in out.turns)
    out, _ = _sample(tiny, max_new=9)
    assert all(len(r) <= 9 for r in out.response_ids)


def test_a_reset_text_opens_the_response_as_environment_tokens(tiny):
    out, tok = _sample(tiny, prefix="<a>")
    head = tok("<a>", add_special_tokens=False)["input_ids"]
    for ids, org in zip(out.response_ids, out.origins):
        assert ids[:3] == head and org[:3] == [ENVIRONMENT] * 3 and org[3] == MODEL


@pytest.mark.parametrize("decoder", ["auto", "generic"])
def test_the_cache_through_replies_is_a_fresh_forward(tiny, decoder):
    """The sampler's log-prob of every model token equals the trainer's forward over the whole sequence."""
    out, tok = _sample(tiny, decoder=decoder)
    model, _ = tiny
    packed = pack(out.prompt_ids, out.response_ids, tok.pad_token_id)
    with torch.no_grad():
        lp, _ = response_logprobs(model, packed, temperature=1.3)
    assert any(ENVIRONMENT in o for o in out.origins)
    for i, (org, slp) in enumerate(zip(out.origins, out.logprobs)):
        model_pos = [t for t, o in enumerate(org) if o == MODEL]
        got = lp[i, model_pos]
        assert torch.allclose(got, torch.tensor([slp[t] for t in model_pos]), atol=1e-5)


def test_a_trajectory_depends_on_its_key_only(tiny):
    out, _ = _sample(tiny)
    again, _ = _sample(tiny)
    assert again.response_ids == out.response_ids
    keys = row_keys(7, [(0, i) for i in range(6)])
    alone, _ = _sample(tiny, n=1, keys=keys[4:5])
    assert alone.response_ids == out.response_ids[4:5] and alone.origins == out.origins[4:5]
    other, _ = _sample(tiny, keys=row_keys(8, [(0, i) for i in range(6)]))
    assert other.response_ids != out.response_ids


def test_the_character_tokenizer_round_trips_any_seam(tiny):
    """Re-tokenisation drift is impossible on the built-in tokenizer: text + reply tokenises as the parts."""
    _, tok = tiny
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    for a, b in [("12+3[", "=15]"), ("ab ", " cd"), ("#", "#"), ("<r>", "</r>")]:
        assert enc(a + b) == enc(a) + enc(b) and tok.decode(enc(a + b)) == a + b


def test_a_merge_across_the_seam_is_counted_on_a_bpe_tokenizer():
    """A BPE that merges "a" + "b": the reply "b" after a turn ending in "a" re-tokenises as one token."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from rlvr_cli.sampling.turns import seam_mismatch

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Whitespace()
    bpe.train_from_iterator(["ab ab ab abab cd cd"] * 10, trainers.BpeTrainer(special_tokens=["<unk>"], vocab_size=12))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, unk_token="<unk>")
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    assert len(enc("ab")) == 1 and len(enc("a")) == 1
    assert seam_mismatch(tok, "xa", "b", enc("b"))
    assert not seam_mismatch(tok, "xa ", "b", enc("b"))


@pytest.mark.parametrize("decoder", ["auto", "generic"])
def test_without_a_call_a_trajectory_is_the_single_turn_sample(tiny, decoder):
    """The same keyed draws, position by position: no stop string, no reply, exactly `generate`'s tokens and log-probs."""
    from rlvr_cli.sampling import generate

    model, tok = tiny
    prompt = tok("12+34=", add_special_tokens=True)["input_ids"]
    keys = row_keys(9, [(0, i) for i in range(8)])
    opts = SamplingOptions(24, tok.eos_token_id, tok.pad_token_id, temperature=1.3, decoder=decoder)
    plain = generate(model, [prompt] * 8, opts, row_keys=keys)
    turns = generate_turns(model, tok, [prompt] * 8, [Echo(stops=()) for _ in range(8)], [{}] * 8, opts, 3, keys)
    assert turns.response_ids == plain.response_ids and turns.finish_reasons == plain.finish_reasons
    assert turns.logprobs == plain.logprobs and turns.gen_tokens == plain.gen_tokens
