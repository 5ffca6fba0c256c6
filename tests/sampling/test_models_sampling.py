"""Model references, the tiny model in Hugging Face format, and the sampler against a full forward pass."""

from __future__ import annotations

import json

import pytest
import torch

from rlvr_cli.algo.logprobs import token_logprobs
from rlvr_cli.errors import UserError
from rlvr_cli.models import load_model, resolve_model_ref
from rlvr_cli.models.tiny import build_tiny_model
from rlvr_cli.models.tokenizer import build_char_tokenizer
from rlvr_cli.sampling import SamplingOptions, filter_logits, generate, static_decode_supported


def sample(model, prompts, generator=None, row_keys=None, **settings):
    """:func:`generate` with its :class:`SamplingOptions` given as keywords."""
    return generate(model, prompts, SamplingOptions(**settings), generator=generator, row_keys=row_keys)


@pytest.fixture(scope="module")
def tiny():
    tok = build_char_tokenizer()
    model = build_tiny_model(tok, seed=0).eval()
    return model, tok


@pytest.fixture(scope="module")
def tiny_llama(tiny):
    """A small random Llama (RoPE, RMSNorm, SwiGLU) on the same tokenizer: the other static-decoder architecture."""
    from transformers import LlamaConfig, LlamaForCausalLM

    _, tok = tiny
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=4, intermediate_size=128, max_position_embeddings=128,
                      pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = LlamaForCausalLM(cfg).eval()
    return model, tok


def _family(tok, config_cls, model_cls, **dims):
    dims = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, **dims}
    cfg = config_cls(vocab_size=len(tok), intermediate_size=128, max_position_embeddings=128,
                     pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                     **dims)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = model_cls(cfg).eval()
        with torch.no_grad():  # biases and norm weights away from their 0 / 1 initialisation, so they count
            for name, p in model.named_parameters():
                if name.endswith("bias") or "norm" in name:
                    p.add_(torch.randn_like(p) * 0.3)
    return model, tok


@pytest.fixture(scope="module")
def llama_gqa(tiny):
    """Llama with grouped-query attention (4 query heads over 2 key/value heads) and every bias on."""
    from transformers import LlamaConfig, LlamaForCausalLM

    return _family(tiny[1], LlamaConfig, LlamaForCausalLM, num_key_value_heads=2, attention_bias=True, mlp_bias=True)


@pytest.fixture(scope="module")
def qwen2(tiny):
    """Qwen2 (Qwen2.5's architecture): biases on q/k/v only, grouped-query attention."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    return _family(tiny[1], Qwen2Config, Qwen2ForCausalLM, num_key_value_heads=2)


@pytest.fixture(scope="module")
def llama_14_2(tiny):
    """Qwen2.5-0.5B's attention layout in a Llama: 14 query heads over 2 key/value heads of 64 (7 per group)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    return _family(tiny[1], LlamaConfig, LlamaForCausalLM, hidden_size=896, num_attention_heads=14,
                   num_key_value_heads=2, num_hidden_layers=1)


@pytest.fixture(scope="module")
def qwen3(tiny):
    """Qwen3: RMSNorm over each head's q and k, a head_dim that is not hidden / heads, grouped-query attention."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    return _family(tiny[1], Qwen3Config, Qwen3ForCausalLM, num_key_value_heads=1, head_dim=24)


def ids(tok, text):
    return tok(text, add_special_tokens=True)["input_ids"]


def test_tiny_model_size_and_hf_round_trip(tiny, tmp_path):
    model, tok = tiny
    n = sum(p.numel() for p in model.parameters())
    assert 300_000 <= n <= 1_000_000
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    loaded, ltok, res = load_model(str(tmp_path))
    assert res.kind == "path"
    x = torch.tensor([ids(tok, "347+285=")])
    with torch.no_grad():
        assert torch.allclose(model(x).logits, loaded(x).logits, atol=1e-6)
    assert ltok.decode(ids(ltok, "12,13,6#632")) == "12,13,6#632"


def test_builtin_init_is_built_once_and_loadable():
    a = resolve_model_ref("builtin:tiny-init")
    b = resolve_model_ref("builtin:tiny-init")
    assert a.path == b.path and a.kind == "builtin"
    model, tok, _ = load_model("builtin:tiny-init")
    assert tok.eos_token_id is not None and model.config.vocab_size == len(tok)


def test_model_references(tmp_path, tiny):
    model, tok = tiny
    run = tmp_path / "run"
    for step in (2, 10):
        d = run / "checkpoints" / f"step_{step}"
        model.save_pretrained(d)
        tok.save_pretrained(d)
    (run / "checkpoints" / ".tmp-step_12-99").mkdir()  # an unfinished write is ignored
    (run / "run.json").write_text(json.dumps({"status": "running"}))
    r = resolve_model_ref(str(run))
    assert r.kind == "run" and r.step == 10 and r.path.endswith("step_10")
    c = resolve_model_ref(str(run / "checkpoints" / "step_2"))
    assert c.kind == "checkpoint" and c.step == 2
    assert resolve_model_ref("org/some-model").kind == "hub"


@pytest.mark.parametrize(
    "ref,match",
    [("builtin:huge", "unknown built-in"), ("not a model id!", "no such directory")],
)
def test_bad_model_references(ref, match):
    with pytest.raises(UserError, match=match):
        resolve_model_ref(ref)


def test_bad_directories(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match="no model"):
        resolve_model_ref(str(tmp_path / "empty"))
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    with pytest.raises(UserError, match="no complete checkpoint"):
        resolve_model_ref(str(run))
    f = tmp_path / "file.txt"
    f.write_text("x")
    with pytest.raises(UserError, match="not a file"):
        resolve_model_ref(str(f))


def test_hub_ids_fail_cleanly_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserError, match="cannot load"):
        load_model("rlvr-test/definitely-not-cached")


@pytest.mark.parametrize("arch", ["tiny", "tiny_llama", "llama_gqa", "qwen2", "qwen3"])
@pytest.mark.parametrize("decoder", ["static", "generic"])
def test_sampler_logprobs_match_a_full_forward(arch, decoder, request):
    model, tok = request.getfixturevalue(arch)
    prompts = [ids(tok, "347+285="), ids(tok, "1,2,3>6:"), ids(tok, "9+1=")] * 4
    g = torch.Generator().manual_seed(0)
    out = sample(model, prompts, max_new_tokens=12, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                   generator=g, temperature=0.7, decoder=decoder)
    for p, r, lp in zip(prompts, out.response_ids, out.logprobs):
        full = torch.tensor([p + r])
        with torch.no_grad():
            logits = model(full).logits
        ref = token_logprobs(logits[:, len(p) - 1 : -1], full[:, len(p):], 0.7)[0]
        assert torch.allclose(ref, torch.tensor(lp), atol=1e-5)


def test_greedy_matches_transformers_generate_and_batching(tiny):
    model, tok = tiny
    a, b = ids(tok, "347+285="), ids(tok, "9+1=")
    kw = dict(max_new_tokens=15, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, greedy=True)
    single_a = sample(model, [a], **kw).response_ids[0]
    single_b = sample(model, [b], **kw).response_ids[0]
    hf = model.generate(torch.tensor([a]), max_new_tokens=15, do_sample=False, eos_token_id=tok.eos_token_id,
                        pad_token_id=tok.pad_token_id)
    assert single_a == hf[0, len(a):].tolist()[: len(single_a)]
    both = sample(model, [b, a], **kw).response_ids  # left padding must not change the result
    assert both == [single_b, single_a]


def test_sampling_is_deterministic_for_a_seed_and_reports_finish(tiny):
    model, tok = tiny
    prompts = [ids(tok, "347+285=")] * 16
    kw = dict(max_new_tokens=6, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    o1 = sample(model, prompts, generator=torch.Generator().manual_seed(3), **kw)
    o2 = sample(model, prompts, generator=torch.Generator().manual_seed(3), **kw)
    o3 = sample(model, prompts, generator=torch.Generator().manual_seed(4), **kw)
    assert o1.response_ids == o2.response_ids and o1.response_ids != o3.response_ids
    for r, why in zip(o1.response_ids, o1.finish_reasons):
        assert (why == "eos") == (r[-1] == tok.eos_token_id)
        assert why == "eos" or len(r) == 6
    assert o1.gen_tokens == sum(len(r) for r in o1.response_ids)


def test_eos_is_a_response_token_and_stops_the_row():
    # a "model" that always puts all mass on EOS: every response is exactly [eos]
    tok = build_char_tokenizer()
    model = build_tiny_model(tok).eval()
    bias = torch.zeros(len(tok))
    bias[tok.eos_token_id] = 100.0
    model.lm_head.register_forward_hook(lambda m, i, o: o + bias)
    out = sample(model, [ids(tok, "1+1=")] * 3, max_new_tokens=5, eos_token_id=tok.eos_token_id,
                   pad_token_id=tok.pad_token_id, generator=torch.Generator().manual_seed(0))
    assert out.response_ids == [[tok.eos_token_id]] * 3 and out.finish_reasons == ["eos"] * 3


def test_min_think_suppression(tiny):
    model, tok = tiny
    bias = torch.zeros(len(tok))
    bias[tok.eos_token_id] = 100.0
    h = model.lm_head.register_forward_hook(lambda m, i, o: o + bias)
    try:
        out = sample(model, [ids(tok, "1+1=")] * 2, max_new_tokens=8, eos_token_id=tok.eos_token_id,
                       pad_token_id=tok.pad_token_id, generator=torch.Generator().manual_seed(0),
                       suppress_ids=[tok.eos_token_id], suppress_until=4)
    finally:
        h.remove()
    assert all(len(r) == 5 and r[-1] == tok.eos_token_id for r in out.response_ids)


def test_filter_logits_top_k_and_top_p():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    assert torch.isinf(filter_logits(logits, top_k=2)[0, 2:]).all()
    kept = ~torch.isinf(filter_logits(logits, top_p=0.8))
    assert kept.tolist() == [[True, True, False, False]]  # 0.5 + 0.3 reaches 0.8
    kept = ~torch.isinf(filter_logits(logits, top_p=0.81))
    assert kept.tolist() == [[True, True, True, False]]
    assert (~torch.isinf(filter_logits(logits, top_p=0.01))).sum() == 1  # the top token always stays


@pytest.mark.parametrize("logits, top_p, ours", [
    ([1.0] * 4, 0.5, [0, 1]),                  # a 4-way tie: two kept, the lowest ids
    ([2.0, 1.0, 1.0, 1.0, 0.0], 0.6, [0, 1]),  # the top token, then the lowest id of the tie
    ([0.0] * 20, 0.27, [0, 1, 2, 3, 4, 5]),    # filter_logits' docstring example (a tie longer than 16)
    ([0.0] * 7 + [3.0] + [0.0] * 7, 0.95, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13]),
])
def test_top_p_at_equal_logits_keeps_the_lowest_ids_and_transformers_the_same_size_and_mass(logits, top_p, ours):
    """Documented in filter_logits (issue 50): at exactly equal logits rlvr keeps the lowest ids (stable
    sort); transformers' TopPLogitsWarper keeps as many tokens with the same mass, not necessarily those."""
    from transformers.generation.logits_process import TopPLogitsWarper

    z = torch.tensor([logits])
    kept = (~torch.isinf(filter_logits(z, top_p=top_p)))[0]
    assert kept.nonzero().flatten().tolist() == ours
    theirs = ~torch.isinf(TopPLogitsWarper(top_p)(None, z.clone()))[0]
    probs = torch.softmax(z[0], dim=-1)
    assert int(theirs.sum()) == len(ours) and float(probs[theirs].sum()) == pytest.approx(float(probs[kept].sum()))
    if len(logits) <= 5:  # a short tie: transformers keeps its highest ids, so the sets differ
        assert kept.tolist() != theirs.tolist()


@pytest.mark.parametrize("autocast", [None, torch.bfloat16, torch.float16],
                         ids=["float32", "bf16-autocast", "fp16-autocast"])
@pytest.mark.parametrize("arch", ["tiny", "tiny_llama", "llama_gqa", "llama_14_2", "qwen2", "qwen3"])
def test_static_decoder_gives_the_generic_decoders_samples_bit_for_bit(arch, autocast, request):
    _known_amx_gap(arch)
    model, tok = request.getfixturevalue(arch)
    assert static_decode_supported(model)
    # rows of different widths that finish at different steps: left padding, masking and dropping finished rows;
    # then rows of one width, where no key is masked (grouped-query attention takes another kernel call then)
    mixed = [ids(tok, "347+285="), ids(tok, "9+1="), ids(tok, "1,2,3>6:")] * 8
    even = [ids(tok, "347+285="), ids(tok, "1,2,3>6:")] * 8
    kw = dict(max_new_tokens=20, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, temperature=0.9,
              autocast_dtype=autocast)  # autocast: as `rollout.sample_autocast` samples (on the CPU here)
    for prompts, seed in [(mixed, 0), (mixed, 1), (mixed, 2), (even, 0)]:
        a = sample(model, prompts, generator=torch.Generator().manual_seed(seed), decoder="generic", **kw)
        b = sample(model, prompts, generator=torch.Generator().manual_seed(seed), decoder="static", **kw)
        assert a.response_ids == b.response_ids and a.finish_reasons == b.finish_reasons
        assert a.logprobs == b.logprobs  # the same kernels in the same order: equal, not merely close
        if prompts is mixed:
            reasons = a.finish_reasons
    assert set(reasons) == {"eos", "length"}  # both ways of finishing were exercised


def test_static_decoder_refuses_what_it_does_not_cover(tiny):
    model, tok = tiny
    with pytest.raises(ValueError, match="static decoder"):
        model.train()  # dropout on: only the model's own forward applies it
        try:
            sample(model, [ids(tok, "1+1=")], max_new_tokens=2, eos_token_id=tok.eos_token_id,
                     pad_token_id=tok.pad_token_id, decoder="static")
        finally:
            model.eval()
    with pytest.raises(ValueError, match="decoder must be"):
        sample(model, [ids(tok, "1+1=")], max_new_tokens=2, eos_token_id=tok.eos_token_id,
                 pad_token_id=tok.pad_token_id, decoder="fast")


@pytest.mark.parametrize("arch", ["tiny_llama", "llama_gqa", "qwen2", "qwen3"])
def test_static_decoder_without_fused_projections_gives_the_same_samples(arch, request, monkeypatch):
    _known_amx_gap(arch)
    from rlvr_cli.sampling import decode_step

    model, tok = request.getfixturevalue(arch)
    prompts = [ids(tok, "347+285="), ids(tok, "9+1="), ids(tok, "1,2,3>6:")] * 4
    kw = dict(max_new_tokens=16, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, decoder="static")
    built = []  # which way each decoder was built
    init = decode_step.StaticDecoder.__init__

    def spy(self, *a, **k):
        init(self, *a, **k)
        built.append(self.fuse)

    monkeypatch.setattr(decode_step.StaticDecoder, "__init__", spy)
    fused = sample(model, prompts, generator=torch.Generator().manual_seed(0), **kw)
    monkeypatch.setattr(decode_step, "FUSE_MAX_BYTES", 0)  # as for a model whose weight copies would be large
    separate = sample(model, prompts, generator=torch.Generator().manual_seed(0), **kw)
    assert built == [True, False]
    assert fused.response_ids == separate.response_ids and fused.logprobs == separate.logprobs


def test_static_decoder_leaves_sliding_window_and_scaled_rope_models_to_their_own_forward(tiny):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    tok = tiny[1]
    windowed, _ = _family(tok, Qwen2Config, Qwen2ForCausalLM, num_key_value_heads=2, use_sliding_window=True,
                          sliding_window=4, max_window_layers=0)
    scaled, _ = _family(tok, LlamaConfig, LlamaForCausalLM,
                        rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0})
    assert not static_decode_supported(windowed) and not static_decode_supported(scaled)
    kw = dict(max_new_tokens=6, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    for model in (windowed, scaled):
        with pytest.raises(ValueError, match="static decoder does not support"):
            sample(model, [ids(tok, "347+285=")] * 2, decoder="static", **kw)
        out = sample(model, [ids(tok, "347+285=")] * 2, generator=torch.Generator().manual_seed(0), **kw)
        assert all(1 <= len(r) <= 6 for r in out.response_ids)  # auto: through the model's own forward


def test_ignore_eos_gives_fixed_length_responses(tiny):
    model, tok = tiny
    bias = torch.zeros(len(tok))
    bias[tok.eos_token_id] = 3.0  # EOS is likely, so a normal sampler stops early
    h = model.lm_head.register_forward_hook(lambda m, i, o: o + bias)
    try:
        kw = dict(max_new_tokens=7, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
        prompts = [ids(tok, "1+1=")] * 8
        free = sample(model, prompts, generator=torch.Generator().manual_seed(0), **kw)
        fixed = sample(model, prompts, generator=torch.Generator().manual_seed(0), ignore_eos=True, **kw)
    finally:
        h.remove()
    assert any(len(r) < 7 for r in free.response_ids)
    assert all(len(r) == 7 for r in fixed.response_ids) and fixed.finish_reasons == ["length"] * 8
    assert any(tok.eos_token_id in r[:-1] for r in fixed.response_ids)  # EOS was drawn and sampling went on
    assert fixed.gen_tokens == 8 * 7 and all(len(lp) == 7 for lp in fixed.logprobs)
    # until the first EOS anywhere in the batch, both draw from the same stream
    assert [r[0] for r in fixed.response_ids] == [r[0] for r in free.response_ids]


def test_a_model_directory_without_tokenizer_files_says_which_are_missing(tiny_base, tmp_path, cli):
    import shutil
    from pathlib import Path

    model = tmp_path / "model"
    model.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(Path(tiny_base) / name, model / name)
    res = cli("sample", str(model), "--task", "arithmetic", "--n", "1", "--num-prompts", "1", "--out", str(tmp_path / "s.jsonl"))
    assert res.code == 2, res.stderr
    assert "no tokenizer files" in res.stderr and "tokenizer.json" in res.stderr and "config.json" in res.stderr
    assert "internal error" not in res.stderr
    res = cli("train", "grpo", "--out", str(tmp_path / "run"), "--set", f"model.name={model}")
    assert res.code == 2 and "no tokenizer files" in res.stderr and not (tmp_path / "run").exists()


@pytest.mark.parametrize("truncation", [{"top_k": 3}, {"top_p": 0.6}, {"top_k": 5, "top_p": 0.8}])
def test_truncated_sampling_records_the_log_prob_it_drew_with_and_its_support(tiny, truncation):
    """TRL#6789: the recorded log-prob is that of the renormalised (truncated) distribution the token was
    drawn from, and the support it was drawn from comes with it, so a full forward renormalised over the
    same support recomputes it; the full-vocabulary log softmax differs by the log of the kept mass."""
    from rlvr_cli.algo.logprobs import token_logprobs_on_support

    model, tok = tiny
    prompts = [ids(tok, "347+285="), ids(tok, "9+1=")] * 3
    out = sample(model, prompts, max_new_tokens=10, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                 generator=torch.Generator().manual_seed(0), temperature=1.3, **truncation)
    assert len(out.supports) == len(prompts)
    gaps = []
    for p, r, lp, sp in zip(prompts, out.response_ids, out.logprobs, out.supports):
        assert len(sp.sizes) == len(r)
        support = sp.padded(len(r), max(1, sp.widest))
        assert all(r[t] in support[t].tolist() or sp.sizes[t] == 0 for t in range(len(r)))
        full = torch.tensor([p + r])
        with torch.no_grad():
            logits = model(full).logits[:, len(p) - 1 : -1]
        on_support, _ = token_logprobs_on_support(logits, full[:, len(p):], support.unsqueeze(0), 1.3)
        assert torch.allclose(on_support[0], torch.tensor(lp), atol=1e-5)
        gaps.append(torch.tensor(lp) - token_logprobs(logits, full[:, len(p):], 1.3)[0])
    gaps = torch.cat(gaps)
    assert (gaps >= -1e-5).all() and gaps.max() > 0.01  # -log(kept mass) >= 0, and truncation did cut


def test_untruncated_sampling_stores_no_support(tiny):
    model, tok = tiny
    out = sample(model, [ids(tok, "9+1=")] * 2, max_new_tokens=6, eos_token_id=tok.eos_token_id,
                 pad_token_id=tok.pad_token_id, generator=torch.Generator().manual_seed(0))
    assert out.supports == []


def _known_amx_gap(arch: str) -> None:
    """On a Xeon with AMX, qwen3's static and generic decoders differ in the last float bits (found
    2026-12-06, also at the commit before; the golden runs show the same gap: tests/golden/make_golden.py
    UNPINNED). Expected to fail there until the cause is found, exact everywhere else."""
    from rlvr_cli.numerics import cpu_flags

    if arch == "qwen3" and "amx_tile" in (cpu_flags() or set()):
        pytest.xfail("qwen3 static vs generic decoder: last-bit gap on AMX CPUs (tests/golden/make_golden.py UNPINNED)")
