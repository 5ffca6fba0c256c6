"""How far bf16 autocast moves a model's log-probs from float32, and what each correction mode would do.

    python results/mismatch_probe.py [MODEL]      # default: builtin:tiny; prints one line per mode

Samples 64 responses (float32, temperature 1, seed 0, up to 30 tokens) to arithmetic prompts, then
scores them twice with a full forward pass: in float32 (the trainer) and under CPU bf16 autocast (a
bf16 sampler). Prints the mismatch statistics of rlvr_cli/algo/is_correction.py for every mode at
cap 2 and at the tight caps of recipes/experiments/mismatch/. The sampler's KV-cache path is not part
of the comparison, so this is the autocast mismatch alone.
"""

from __future__ import annotations

import sys

import torch

from rlvr_cli.algo.is_correction import IS_MODES, is_correction_weights
from rlvr_cli.models import load_model
from rlvr_cli.train.packing import pack, response_logprobs

CAPS = [(mode, 2.0) for mode in IS_MODES] + [("token_truncate", 1.02), ("sequence_truncate", 1.05),
                                             ("sequence_mask", 1.05)]


def main(model_ref: str = "builtin:tiny") -> None:
    torch.set_num_threads(1)
    model, tok, _ = load_model(model_ref)
    gen = torch.Generator().manual_seed(0)
    pairs = torch.randint(0, 999, (64, 2), generator=gen).tolist()
    prompts = [tok.encode(f"{a:03d}+{b:03d}=") for a, b in pairs]
    responses = []
    with torch.no_grad():
        for p in prompts:
            ids, out = torch.tensor([p]), []
            for _ in range(30):
                probs = torch.softmax(model(ids).logits[0, -1].float(), dim=-1)
                t = int(torch.multinomial(probs, 1, generator=gen))
                out.append(t)
                ids = torch.cat([ids, torch.tensor([[t]])], dim=1)
                if t == tok.eos_token_id:
                    break
            responses.append(out)
        batch = pack(prompts, responses, tok.pad_token_id)
        trainer, _ = response_logprobs(model, batch)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            sampler, _ = response_logprobs(model, batch)
    mask = batch.response_mask
    print(f"{len(responses)} responses, {int(mask.sum())} tokens")
    seq = torch.exp(((trainer - sampler) * mask).sum(dim=1).double())
    q = torch.quantile(seq, torch.tensor([0.01, 0.5, 0.99], dtype=torch.float64)).tolist()
    print("sequence ratio p1 / p50 / p99: " + " / ".join(f"{v:.3f}" for v in q))
    for mode, cap in CAPS:
        stats = is_correction_weights(trainer, sampler, mask, mode, cap).stats
        print(f"{mode:18s} cap {cap:<5g} " + " ".join(f"{k} {v:.4f}" for k, v in stats.items()))


if __name__ == "__main__":
    main(*sys.argv[1:2])
