"""Counter-based random numbers keyed by a row's identity, not by its place in a batch.

A ``torch.Generator`` hands out numbers in order: which uniform a row gets depends on how many rows
came before it in the batch and on how many draws were made before. That ties a sample to the batch
it was drawn in, so splitting a step's prompts over N processes (or dropping finished rows, or
refilling a batch) would change what every prompt's group samples.

Here the t-th uniform of a row is a pure function of ``(key, t)``: ``u = mix64(key + (t + 1) * G)``
with SplitMix64's finaliser ``mix64`` (Steele, Lea and Flood 2014, "Fast splittable pseudorandom
number generators", OOPSLA; the constants are those of Java's ``SplittableRandom``) and G its golden
ratio increment. A row's key is itself ``mix64`` of the names of the draw (seed, step, stream, round,
prompt index, sample index). Sampling then uses the inverse CDF: the token is the first index whose
cumulative probability exceeds ``u * total`` -- exact categorical sampling, and a token of zero
probability can never be drawn. The arithmetic is done on int64 tensors, whose multiplication wraps
modulo 2^64 in PyTorch, with logical right shifts built from arithmetic ones and a mask.

Draws made in order, where no row identity is needed (which prompts a step trains on, the minibatch
order, Clip-Cov's tie-breaks), come from a ``random.Random`` or a ``torch.Generator`` seeded by the
same names (:meth:`StreamKey.rng`, :meth:`StreamKey.generator`): every random number of a run is
named by one call of :func:`stream_key`, e.g. ``stream_key(seed, step, "prompts", round_)``.
"""

from __future__ import annotations

import hashlib
import random

import torch

_GOLDEN = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
_MASK64 = (1 << 64) - 1


def _signed(x: int) -> int:
    """The int64 with the same 64 bits as the unsigned ``x``."""
    x &= _MASK64
    return x - (1 << 64) if x >= 1 << 63 else x


def _srl(z: torch.Tensor, s: int) -> torch.Tensor:
    """Logical right shift of int64 bits (torch's ``>>`` sign-extends)."""
    return (z >> s) & ((1 << (64 - s)) - 1)


def mix64(z: torch.Tensor) -> torch.Tensor:
    """SplitMix64's finaliser on int64 tensors (a bijection of the 64-bit words)."""
    z = (z ^ _srl(z, 30)) * _signed(_M1)
    z = (z ^ _srl(z, 27)) * _signed(_M2)
    return z ^ _srl(z, 31)


def mix64_int(x: int) -> int:
    """:func:`mix64` on a Python int (the reference the tensor version is tested against)."""
    z = x & _MASK64
    z = ((z ^ (z >> 30)) * _M1) & _MASK64
    z = ((z ^ (z >> 27)) * _M2) & _MASK64
    return z ^ (z >> 31)


def _hash63(text: str, low: bool) -> int:
    """63 bits of the 64-bit BLAKE2b digest of ``text``: the low ones, or the high ones."""
    h = int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")
    return h & ((1 << 63) - 1) if low else h >> 1


class StreamKey(int):
    """The 63-bit key of a named family of draws (an ``int``: what :func:`row_keys` takes), which also
    seeds the in-order generators of the same names."""

    names: tuple

    def rng(self) -> random.Random:
        """A ``random.Random`` for draws made in order (e.g. which prompts a step trains on)."""
        return random.Random(self._sequential_seed())

    def generator(self, device="cpu") -> torch.Generator:
        """A ``torch.Generator`` for draws made in order (e.g. Clip-Cov's choice among tied tokens)."""
        g = torch.Generator(device=device)
        g.manual_seed(self._sequential_seed())
        return g

    def _sequential_seed(self) -> int:
        # the in-order generators hash the names joined by "/" (the counter-based key hashes their repr):
        # two spellings of one name, both kept so that every recorded run draws the same numbers
        return _hash63("/".join(str(n) for n in self.names), low=True)


def stream_key(*names: object) -> StreamKey:
    """The key naming a family of draws, e.g. ``stream_key(seed, step, "sample", round_)``: the
    counter-based draws' key itself, and ``.rng()`` / ``.generator()`` for draws made in order."""
    key = StreamKey(_hash63(repr(names), low=False))
    key.names = names
    return key


def row_keys(stream: int, rows: list[tuple[int, int]] | torch.Tensor, device="cpu") -> torch.Tensor:
    """int64 key of each row from its identity ``(prompt index, sample index)`` within ``stream``."""
    ids = torch.as_tensor(rows, dtype=torch.long).reshape(-1, 2)
    z = mix64(torch.full((ids.shape[0],), _signed(stream), dtype=torch.long) ^ mix64(ids[:, 0] * _signed(_GOLDEN)))
    return mix64(z ^ mix64(ids[:, 1] + 1)).to(device)


def uniforms(keys: torch.Tensor, t: int | torch.Tensor) -> torch.Tensor:
    """The t-th uniform in [0, 1) of each key (float64, 53 random bits). ``t`` may be a tensor that broadcasts
    against ``keys`` (e.g. ``uniforms(keys[:, None], torch.arange(T))``, every draw of a sampling call at once):
    int64 arithmetic wraps modulo 2^64 like the Python-int reference, so the values are the same bits."""
    step = (t + 1) * _signed(_GOLDEN) if isinstance(t, torch.Tensor) else _signed((t + 1) * _GOLDEN)
    z = mix64(keys + step)
    return _srl(z, 11).to(torch.float64) * (2.0**-53)


def sample_inverse_cdf(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Index drawn from each row of ``probs`` (B, V), unnormalised allowed, by the uniforms ``u`` (B,).

    The first index i with cdf_i > u * cdf_V: P(i) = p_i / sum p exactly, and p_i = 0 is never drawn.
    """
    cdf = probs.to(torch.float64).cumsum(dim=-1)
    target = (u.to(cdf.device) * cdf[:, -1]).unsqueeze(-1)
    idx = torch.searchsorted(cdf, target, right=True).squeeze(-1)
    # an index inside the vocabulary has p_i > 0 (the cdf rises there); u * cdf_V can round up to cdf_V
    # itself, past the end: then fall back to the last token of positive probability
    v = probs.shape[-1]
    if bool((idx >= v).any()):
        last = v - 1 - (probs > 0).flip(-1).to(torch.int8).argmax(dim=-1)
        idx = torch.minimum(idx, last)
    return idx
