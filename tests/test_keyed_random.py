"""Counter-based uniforms: exact SplitMix64, independent of batch composition, exact inverse-CDF draws."""

from __future__ import annotations

import torch

from rlvr_cli.keyed_random import mix64, mix64_int, row_keys, sample_inverse_cdf, stream_key, uniforms


def _signed(x: int) -> int:
    return x - (1 << 64) if x >= 1 << 63 else x


def test_mix64_matches_the_integer_reference():
    xs = [0, 1, 2, 12345, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 0x9E3779B97F4A7C15]
    got = mix64(torch.tensor([_signed(x) for x in xs], dtype=torch.long)).tolist()
    assert got == [_signed(mix64_int(x)) for x in xs]


def test_splitmix64_first_output_of_seed_zero():
    # SplitMix64 seeded with 0 first returns mix64(0 + golden) = 0xE220A8397B1DCDAF (the published sequence)
    assert mix64_int(0x9E3779B97F4A7C15) == 0xE220A8397B1DCDAF


def test_a_rows_uniforms_do_not_depend_on_the_other_rows():
    stream = stream_key(0, 7, "sample", 0)
    all_rows = [(j, i) for j in range(4) for i in range(8)]
    full = torch.stack([uniforms(row_keys(stream, all_rows), t) for t in range(5)])
    part = torch.stack([uniforms(row_keys(stream, all_rows[8:16]), t) for t in range(5)])
    assert torch.equal(full[:, 8:16], part)
    assert len(set(full.flatten().tolist())) == full.numel()  # no two draws collide


def test_streams_differ_and_uniforms_are_in_the_unit_interval():
    a = uniforms(row_keys(stream_key(0, 1, "sample"), [(0, 0), (0, 1)]), 0)
    b = uniforms(row_keys(stream_key(0, 2, "sample"), [(0, 0), (0, 1)]), 0)
    assert not torch.equal(a, b)
    u = uniforms(row_keys(stream_key(1), [(j, 0) for j in range(20000)]), 3)
    assert float(u.min()) >= 0.0 and float(u.max()) < 1.0
    counts = torch.histc(u, bins=10, min=0.0, max=1.0)
    assert float(counts.min()) > 1850 and float(counts.max()) < 2150  # 2000 expected per decile


def test_inverse_cdf_by_hand():
    probs = torch.tensor([[0.25, 0.25, 0.5]] * 5)  # exact in binary
    u = torch.tensor([0.1, 0.25, 0.49, 0.5, 0.99], dtype=torch.float64)
    # cdf = [0.25, 0.5, 1.0]: the first index whose cdf exceeds u
    assert sample_inverse_cdf(probs, u).tolist() == [0, 1, 1, 2, 2]


def test_inverse_cdf_never_draws_a_zero_probability_token():
    probs = torch.tensor([[0.0, 0.75, 0.0, 0.25, 0.0]] * 4)
    u = torch.tensor([0.0, 0.75, 0.999999, 1.0 - 2**-53], dtype=torch.float64)
    assert sample_inverse_cdf(probs, u).tolist() == [1, 3, 3, 3]
    unnormalised = torch.tensor([[0.0, 3.0, 1.0]])
    assert sample_inverse_cdf(unnormalised, torch.tensor([0.74], dtype=torch.float64)).tolist() == [1]
    assert sample_inverse_cdf(unnormalised, torch.tensor([0.76], dtype=torch.float64)).tolist() == [2]


def test_inverse_cdf_frequencies_follow_the_probabilities():
    probs = torch.tensor([0.1, 0.2, 0.3, 0.4]).expand(40000, 4)
    u = uniforms(row_keys(stream_key(3), [(j, 0) for j in range(40000)]), 0)
    freq = torch.bincount(sample_inverse_cdf(probs, u), minlength=4).float() / 40000
    assert torch.allclose(freq, torch.tensor([0.1, 0.2, 0.3, 0.4]), atol=0.01)


def test_a_table_of_every_draw_equals_the_draws_one_step_at_a_time():
    keys = row_keys(stream_key(5, "table"), [(j, k) for j in range(7) for k in range(3)])
    table = uniforms(keys[:, None], torch.arange(40))
    step_by_step = torch.stack([uniforms(keys, t) for t in range(40)], dim=1)
    assert torch.equal(table, step_by_step)  # the same bits, int64 wrap-around included


def test_a_target_at_the_total_falls_back_to_the_last_positive_token():
    probs = torch.tensor([[0.0, 0.75, 0.0, 0.25, 0.0], [0.5, 0.5, 0.0, 0.0, 0.0]])
    # u = 1 puts the target at cdf_V itself, past every index: the last token of positive probability
    assert sample_inverse_cdf(probs, torch.tensor([1.0, 1.0], dtype=torch.float64)).tolist() == [3, 1]
    assert sample_inverse_cdf(probs, torch.tensor([0.9, 0.9], dtype=torch.float64)).tolist() == [3, 1]


def test_one_key_names_both_the_counter_draws_and_the_in_order_generators():
    import hashlib
    import random

    key = stream_key(7, 3, "prompts", 1)
    digest = lambda text: int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")  # noqa: E731
    assert key == digest(repr((7, 3, "prompts", 1))) >> 1  # the counter-based key: row_keys takes it as an int
    seed = digest("7/3/prompts/1") & ((1 << 63) - 1)  # the in-order generators: the names joined by "/"
    assert key.rng().random() == random.Random(seed).random()
    assert torch.equal(torch.rand(4, generator=key.generator()), torch.rand(4, generator=torch.Generator().manual_seed(seed)))
    assert torch.equal(row_keys(key, [(0, 1)]), row_keys(int(key), [(0, 1)]))
