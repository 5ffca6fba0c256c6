"""How often does a model call the calculator, and how accurate is it with and without a call?

    python tools/calc_tool_use.py builtin:tiny-calc --prompts 128 --n 4

Samples ``--n`` responses (temperature 1) to each of the first ``--prompts`` held-out prompts of the
`calc` task, in the multi-turn loop of docs/tools.md written out plainly: decode until EOS, the token
budget or a stop string of the episode (`</calc>`), hand the turn to the episode
(:func:`rlvr_cli.envs.episode_factory` with `builtin:calculator`), append its reply's tokens and go on,
up to ``max_turns`` turns. It prints the share of responses that made at least one call and the accuracy
(the integer after the last `#` equals the product) of those that did and of those that did not. A
measurement of a warm start, not of the trainer's sampler (the multi-turn sampler of rlvr_cli/train/).
"""

from __future__ import annotations

import argparse
import re

import torch


def sample(model, tok, ids: list[int], episode, max_new: int, max_turns: int, gen: torch.Generator) -> str:
    """One response (model turns and replies as text), by plain decoding with a KV cache."""
    response, past, feed = "", None, torch.tensor([ids])
    for turn in range(max_turns):
        text, budget = "", max_new - len(response)
        while budget > 0:
            with torch.no_grad():
                out = model(input_ids=feed, past_key_values=past, use_cache=True)
            past = out.past_key_values
            probs = torch.softmax(out.logits[0, -1].float(), -1)
            nxt = int(torch.multinomial(probs, 1, generator=gen))
            if nxt == tok.eos_token_id:
                break
            text += tok.decode([nxt])
            budget -= 1
            feed = torch.tensor([[nxt]])
            if any(text.endswith(s) for s in episode.stop_strings):
                break
        response += text
        reply = episode.step(text) if turn < max_turns else None
        if reply is None or nxt == tok.eos_token_id and not any(text.endswith(s) for s in episode.stop_strings):
            break
        response += reply.text
        # the turn's last token (the end of `</calc>`) was sampled but not fed yet: it goes in before the reply
        feed = torch.tensor([[nxt, *tok(reply.text, add_special_tokens=False)["input_ids"]]])
    return response


def main() -> None:
    from rlvr_cli.envs import episode_factory, problem_row
    from rlvr_cli.models import load_model
    from rlvr_cli.recipe.environment import EnvironmentSpec
    from rlvr_cli.tasks import build_task
    from rlvr_cli.warm_start import ensure_built

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model", nargs="?", default="builtin:tiny-calc")
    ap.add_argument("--prompts", type=int, default=128)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-new", type=int, default=48)
    ap.add_argument("--max-turns", type=int, default=3)
    ap.add_argument("--error-rate", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show", type=int, default=0, help="Print the first N responses.")
    args = ap.parse_args()
    ensure_built(args.model)
    model, tok, _ = load_model(args.model)
    task = build_task("calc")
    spec = EnvironmentSpec(factory="builtin:calculator", options={"error_rate": args.error_rate}, max_turns=args.max_turns)
    make = episode_factory(spec, tok, args.model, has_answer=lambda t: "#" in t)
    gen = torch.Generator().manual_seed(args.seed)
    counts = {True: [0, 0], False: [0, 0]}  # called -> [responses, correct]
    for p in task.eval_problems()[:args.prompts]:
        ids = list(tok(p.prompt, add_special_tokens=True)["input_ids"])
        for _ in range(args.n):
            ep = make(problem_row(p))
            ep.reset(problem_row(p))
            text = sample(model, tok, ids, ep, args.max_new, args.max_turns, gen)
            m = re.match(r"-?\d+", text.rsplit("#", 1)[1]) if "#" in text else None
            called = ep.stats.calls > 0
            if args.show > 0:
                args.show -= 1
                print(f"{p.prompt}{text!r}")
            counts[called][0] += 1
            counts[called][1] += int(m is not None and m.group(0) == p.reference)
    total = sum(c[0] for c in counts.values())
    print(f"{args.model}: {total} responses to {args.prompts} calc prompts (n={args.n}, temperature 1)")
    print(f"  called the calculator: {counts[True][0] / total:.3f}")
    for called, (n, ok) in counts.items():
        label = "with a call   " if called else "without a call"
        print(f"  accuracy {label}: {ok / n:.3f} ({ok}/{n})" if n else f"  accuracy {label}: - (0 responses)")
    all_ok = sum(c[1] for c in counts.values())
    print(f"  accuracy overall: {all_ok / total:.3f}")


if __name__ == "__main__":
    main()
