"""Where a training step's time goes, and what the levers left inside the trainer would pay.

    python bench/profile_step.py                                  # dr_grpo on builtin:tiny (the results/ shape)
    python bench/profile_step.py --recipe grpo --steps 6 --set kl.track=false
    python bench/profile_step.py --levers                          # + the phase-2 levers, measured from outside

1. The torch profiler over steps 2..N of a recipe run (step 1 warms up): the top operators by self
   CPU time, the share of matmuls, attention and the rest, and the step's phases from the run's own
   metrics (time_sample_s, time_ref_s, time_update_s, time_verify_s).
2. --levers, each measured without changing the trainer:
   - KL tracking: the same run with `kl.track` on and off, interleaved (for recipes whose KL is not
     in the objective the reference forward only feeds the logged kl_* metrics);
   - torch.compile of the policy's forward + backward on one micro-batch shape (one bucket of a
     bucketed run): compile seconds, eager and compiled ms per call, the loss difference; and with
     dynamic shapes over every micro-batch of one step (each its own width, one compile for all):
     compile seconds, eager and compiled ms per step, interleaved, and the steps it takes to pay off;
   - padding: of the tokens the update's micro-batch forwards process, the share that is padding
     (what sequence packing would remove), on a batch the sampler actually drew;
   - a shared prompt prefix for the reference forward: each distinct prompt forwarded once, its KV
     cache copied to the G rows of its group, then the responses: CPU time against the trainer's one
     forward over prompt + response, and the largest log-prob difference; and for the update's
     forward + backward: one forward, the trainer's length-sorted micro-batches, and the shared prefix
     over one forward and over micro-batches of whole groups (the prefix is per group, so its
     micro-batches cannot be sorted by row);
   - the sampler's threshold for dropping finished rows from the decoded batch, with a check that
     every threshold draws the same samples.

Not a test: the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

MATMUL = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}


def run(recipe: str, steps: int, overrides: list[str], profile_from: int | None = None):
    """Train ``steps`` steps (no eval, no checkpoints); the metrics rows and a profiler over steps >= profile_from."""
    import rlvr_cli.train.rl as rl
    from quiet_train import train_quietly
    from rlvr_cli.recipe.load import load_recipe

    r = load_recipe(recipe, [f"steps={steps}", "eval.every=0", "eval.at_start=false", "checkpoint.every=0",
                             *overrides])
    prof = torch.profiler.profile() if profile_from else None
    real_step = rl._train_step

    def step(*args):  # rl._train_step(..., step): the step number comes last
        n = args[-1]
        if prof is not None and n == profile_from:
            prof.__enter__()
        try:
            return real_step(*args)
        finally:
            if prof is not None and n == steps:
                prof.__exit__(None, None, None)

    rows = train_quietly(r, rl, "_train_step", step)
    return r, rows, prof


def phases(rows: list[dict]) -> dict:
    keys = ["step_time_s", "time_sample_s", "time_ref_s", "time_update_s", "time_verify_s", "gen_tokens"]
    return {k: statistics.median(row[k] for row in rows[1:] or rows) for k in keys}


def report_profile(prof, n_steps: int, top: int) -> None:
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    share = {"matmul": 0.0, "attention": 0.0}
    for e in events:
        if e.key in MATMUL:
            share["matmul"] += e.self_cpu_time_total
        elif "scaled_dot_product" in e.key or "flash_attention" in e.key:
            share["attention"] += e.self_cpu_time_total
    print(f"profiled operators: {total / 1e6 / n_steps:.3f} s of operator time per step; "
          f"matmuls {share['matmul'] / total:.0%}, attention {share['attention'] / total:.0%}, "
          f"the rest (elementwise, copies, indexing, optimizer) {1 - sum(share.values()) / total:.0%}")
    print(f"{'operator':52s} {'self ms/step':>12s} {'share':>6s} {'calls/step':>10s}")
    for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:top]:
        print(f"{e.key[:52]:52s} {e.self_cpu_time_total / 1e3 / n_steps:12.1f} {e.self_cpu_time_total / total:6.1%} "
              f"{e.count / n_steps:10.0f}")


def lever_kl_track(recipe: str, steps: int, overrides: list[str], reps: int) -> None:
    ratios, on_s, off_s, ref_s = [], [], [], []
    for rep in range(reps):
        got = {}
        for track in ((True, False) if rep % 2 == 0 else (False, True)):
            _, rows, _ = run(recipe, steps, [*overrides, f"kl.track={str(track).lower()}"])
            got[track] = phases(rows)
        ratios.append(got[True]["step_time_s"] / got[False]["step_time_s"])
        on_s.append(got[True]["step_time_s"])
        off_s.append(got[False]["step_time_s"])
        ref_s.append(got[True]["time_ref_s"])
    print(f"kl.track on/off: step {statistics.median(on_s):.3f} s vs {statistics.median(off_s):.3f} s, ratio median "
          f"{statistics.median(ratios):.2f}x (range {min(ratios):.2f}-{max(ratios):.2f}, n={reps}); the reference "
          f"forward takes {statistics.median(ref_s):.3f} s of a tracked step. At a cadence of every k steps the "
          f"saving is (1 - 1/k) of that.")


def lever_compile_and_padding(recipe: str, overrides: list[str]) -> None:
    from rlvr_cli.models import load_model
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.sampling import SamplingOptions, generate
    from rlvr_cli.tasks import build_task, encode_prompt
    from rlvr_cli.train.packing import length_sorted_chunks, pack, response_logprobs

    r = load_recipe(recipe, overrides)
    model, tok, _ = load_model(r.model.name)
    task = build_task(r.task)
    ro = r.rollout
    import random

    problems = task.train_problems(random.Random(0), ro.prompts_per_step)
    prompts = [encode_prompt(tok, task, p) for p in problems for _ in range(ro.group_size)]
    options = SamplingOptions(ro.max_new_tokens, tok.eos_token_id, tok.pad_token_id, ro.temperature)
    out = generate(model, prompts, options, generator=torch.Generator().manual_seed(0))
    resp = out.response_ids
    n = len(resp)
    lengths = [len(p) + len(x) for p, x in zip(prompts, resp)]
    real = padded = 0
    order = torch.arange(n)
    for mb in order.tensor_split(r.optim.minibatches):
        for idx in length_sorted_chunks(mb, lengths, r.optim.micro_batches):
            b = pack([prompts[i] for i in idx], [resp[i] for i in idx], tok.pad_token_id)
            real += int(b.attention_mask.sum())
            padded += b.input_ids.numel()
    print(f"padding: {1 - real / padded:.0%} of the tokens in the update's micro-batch forwards are padding "
          f"({real} real of {padded}); packing would remove at most that share of the forward/backward work")

    # one micro-batch shape (the largest chunk of this batch); a run sees one such shape per width bucket
    idx = max(length_sorted_chunks(order, lengths, r.optim.minibatches * r.optim.micro_batches), key=len)
    b = pack([prompts[i] for i in idx], [resp[i] for i in idx], tok.pad_token_id)
    model.train()

    def fwd_bwd(m):
        logp, _ = response_logprobs(m, b, ro.temperature, with_entropy=True)
        loss = -(logp * b.response_mask).sum() / b.response_mask.sum()
        loss.backward()
        model.zero_grad(set_to_none=True)
        return float(loss.detach())

    def per_call(m, reps=5):
        fwd_bwd(m)
        t0 = time.perf_counter()
        for _ in range(reps):
            fwd_bwd(m)
        return (time.perf_counter() - t0) / reps

    eager = per_call(model)
    t0 = time.perf_counter()
    compiled = torch.compile(model, dynamic=False)
    first = fwd_bwd(compiled)
    compile_s = time.perf_counter() - t0
    comp = per_call(compiled)
    diff = abs(first - fwd_bwd(model))
    print(f"torch.compile of forward+backward on one micro-batch [{b.input_ids.shape[0]} x {b.input_ids.shape[1]}]: "
          f"compile {compile_s:.1f} s, eager {eager * 1e3:.1f} ms, compiled {comp * 1e3:.1f} ms per call "
          f"({eager / comp:.2f}x), |loss difference| {diff:.1e}")
    calls = r.optim.mu * r.optim.minibatches * r.optim.micro_batches
    saved = (eager - comp) * calls
    if saved > 0:
        print(f"  at {calls} such calls per step it saves {saved:.3f} s/step: one bucket's compile pays off after "
              f"{compile_s / saved:.0f} steps (every further width bucket costs another compile)")
    else:
        print("  compiled is not faster here: it does not pay at any run length")

    # a run's real case: every micro-batch of the step, each its own width, through one dynamic-shape compile
    packs = [pack([prompts[i] for i in idx], [resp[i] for i in idx], tok.pad_token_id)
             for mb in order.tensor_split(r.optim.minibatches) for idx in length_sorted_chunks(mb, lengths, r.optim.micro_batches)]

    def step_fwd_bwd(m):
        for p in packs:
            logp, _ = response_logprobs(m, p, ro.temperature, with_entropy=True)
            (-(logp * p.response_mask).sum() / p.response_mask.sum()).backward()
        model.zero_grad(set_to_none=True)

    torch._dynamo.reset()
    t0 = time.perf_counter()
    dyn = torch.compile(model, dynamic=True)
    step_fwd_bwd(dyn)
    compile_s = time.perf_counter() - t0
    times: dict[str, list[float]] = {"eager": [], "compiled": []}
    for rep in range(6):
        for name, m in (("eager", model), ("compiled", dyn)) if rep % 2 == 0 else (("compiled", dyn), ("eager", model)):
            c0 = time.perf_counter()
            step_fwd_bwd(m)
            times[name].append(time.perf_counter() - c0)
    ratios = [e / c for e, c in zip(times["eager"], times["compiled"])]
    saved = statistics.median(times["eager"]) - statistics.median(times["compiled"])
    widths = sorted({p.input_ids.shape[1] for p in packs})
    print(f"torch.compile(dynamic=True) of forward+backward over one step's {len(packs)} micro-batches (widths "
          f"{widths[0]}-{widths[-1]}): compile + first pass {compile_s:.1f} s, eager "
          f"{statistics.median(times['eager']) * 1e3:.0f} ms, compiled {statistics.median(times['compiled']) * 1e3:.0f} ms "
          f"per step ({statistics.median(ratios):.2f}x, {min(ratios):.2f}-{max(ratios):.2f}, 6 interleaved)")
    if saved > 0:
        print(f"  it pays off after {compile_s / saved:.0f} steps, in every run (a run is its own process)")
    else:
        print("  compiled is not faster here: it does not pay at any run length")


def lever_shared_prefix(recipe: str, overrides: list[str], reps: int = 5) -> None:
    """Reference log-probs with each distinct prompt forwarded once (its cache copied to the group's rows)."""
    import random

    from rlvr_cli.models import load_model
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.sampling import SamplingOptions, _left_pad, cache_kwarg, generate
    from rlvr_cli.tasks import build_task, encode_prompt
    from rlvr_cli.train.packing import pack, response_logprobs

    r = load_recipe(recipe, overrides)
    model, tok, _ = load_model(r.model.name)
    task, ro = build_task(r.task), r.rollout
    problems = task.train_problems(random.Random(1), ro.prompts_per_step)
    distinct = [encode_prompt(tok, task, p) for p in problems]
    prompts = [p for p in distinct for _ in range(ro.group_size)]
    options = SamplingOptions(ro.max_new_tokens, tok.eos_token_id, tok.pad_token_id)
    resp = generate(model, prompts, options, generator=torch.Generator().manual_seed(1)).response_ids
    full = pack(prompts, resp, tok.pad_token_id)
    rows = torch.arange(len(distinct)).repeat_interleave(ro.group_size)

    @torch.no_grad()
    def whole():
        return response_logprobs(model, full, ro.temperature)[0]

    @torch.no_grad()
    def shared():
        ids, mask = _left_pad(distinct, tok.pad_token_id, "cpu")
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1)
        cache = out.past_key_values if getattr(out, "cache", None) is None else out.cache
        cache.batch_select_indices(rows)
        body = full.response_ids[:, :-1]
        body_mask = full.response_mask[:, :-1].long()
        body_pos = pos[rows, -1:] + 1 + torch.arange(body.shape[1])
        tail = model(input_ids=body, attention_mask=torch.cat([mask[rows], body_mask], 1), position_ids=body_pos,
                     use_cache=False, **{cache_kwarg(model): cache}).logits
        logits = torch.cat([out.logits[rows, -1:], tail], 1)
        lq = torch.log_softmax(logits.float() / ro.temperature, -1)
        return lq.gather(-1, full.response_ids.unsqueeze(-1)).squeeze(-1)

    a, b = whole(), shared()
    diff = float(((a - b).abs() * full.response_mask).max())
    t = {"whole": [], "shared": []}
    for i in range(reps):
        for name, fn in (("whole", whole), ("shared", shared)) if i % 2 == 0 else (("shared", shared), ("whole", whole)):
            c0 = time.process_time()
            fn()
            t[name].append(time.process_time() - c0)
    w, sh = statistics.median(t["whole"]), statistics.median(t["shared"])
    print(f"shared prompt prefix for the reference forward ({len(distinct)} distinct prompts of width "
          f"{full.input_ids.shape[1] - full.response_width}, {len(prompts)} rows, response width {full.response_width}): "
          f"{w * 1e3:.0f} ms -> {sh * 1e3:.0f} ms CPU ({w / sh:.2f}x), max |d log p| {diff:.1e}")

    # the update: policy forward + backward of the whole batch, as one forward, as the trainer's length-sorted
    # micro-batches, and with a shared prefix over micro-batches of whole groups (sorted by their longest response)
    from transformers import DynamicCache

    from rlvr_cli.train.packing import length_sorted_chunks

    chunks = r.optim.micro_batches
    lengths = [len(p) + len(q) for p, q in zip(prompts, resp)]
    g = ro.group_size

    def backward_whole(rows_of):
        pk = pack([prompts[i] for i in rows_of], [resp[i] for i in rows_of], tok.pad_token_id)
        lp, _ = response_logprobs(model, pk, ro.temperature)
        (lp * pk.response_mask).sum().backward()
        return lp.detach()

    def backward_shared(groups):
        rows_of = [k * g + j for k in groups for j in range(g)]
        pk = pack([prompts[i] for i in rows_of], [resp[i] for i in rows_of], tok.pad_token_id)
        ids, mask = _left_pad([distinct[k] for k in groups], tok.pad_token_id, "cpu")
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1)
        rep = torch.arange(len(groups)).repeat_interleave(g)
        cache = DynamicCache()  # the prefix's keys and values copied to each row, gradients flowing back
        for i, layer in enumerate((out.past_key_values if getattr(out, "cache", None) is None else out.cache).layers):
            cache.update(layer.keys.index_select(0, rep), layer.values.index_select(0, rep), i)
        body, body_mask = pk.response_ids[:, :-1], pk.response_mask[:, :-1].long()
        body_pos = pos[rep, -1:] + 1 + torch.arange(body.shape[1])
        tail = model(input_ids=body, attention_mask=torch.cat([mask[rep], body_mask], 1), position_ids=body_pos,
                     use_cache=False, **{cache_kwarg(model): cache}).logits
        logits = torch.cat([out.logits[rep, -1:], tail], 1)
        lp = torch.log_softmax(logits.float() / ro.temperature, -1).gather(-1, pk.response_ids.unsqueeze(-1)).squeeze(-1)
        (lp * pk.response_mask).sum().backward()
        return lp.detach()

    longest = [max(len(resp[k * g + j]) for j in range(g)) for k in range(len(distinct))]
    by_len = sorted(range(len(distinct)), key=lambda k: longest[k])
    per = max(1, -(-len(distinct) // chunks))
    variants = {
        "one forward": lambda: backward_whole(range(len(prompts))),
        f"{chunks} length-sorted micro-batches (the trainer)": lambda: [
            backward_whole(idx.tolist()) for idx in length_sorted_chunks(range(len(prompts)), lengths, chunks)],
        "shared prefix, one forward": lambda: backward_shared(list(range(len(distinct)))),
        f"shared prefix, {-(-len(distinct) // per)} micro-batches of whole groups": lambda: [
            backward_shared(by_len[c : c + per]) for c in range(0, len(distinct), per)],
    }
    model.train(False)
    model.zero_grad(set_to_none=True)
    lp_whole = backward_whole(range(len(prompts)))
    grads = [q.grad.clone() for q in model.parameters()]
    model.zero_grad(set_to_none=True)
    lp_shared = backward_shared(list(range(len(distinct))))
    d_lp = float(((lp_whole - lp_shared).abs() * full.response_mask).max())
    d_grad = max(float((a - q.grad).abs().max() / (a.abs().max() + 1e-30)) for a, q in zip(grads, model.parameters()))
    t = {k: [] for k in variants}
    for i in range(reps + 1):
        for name, fn in (list(variants.items()) if i % 2 == 0 else list(variants.items())[::-1]):
            model.zero_grad(set_to_none=True)
            c0 = time.process_time()
            fn()
            t[name].append(time.process_time() - c0)
    base = statistics.median(t["one forward"])
    print(f"the update's forward + backward (the same batch; shared prefix vs one forward: max |d log p| {d_lp:.1e}, "
          f"largest gradient difference {d_grad:.1e} of its tensor's largest entry):")
    for name, v in t.items():
        print(f"  {name:50s} {statistics.median(v) * 1e3:6.0f} ms CPU ({base / statistics.median(v):.2f}x one forward)")


def lever_drop_threshold(recipe: str, overrides: list[str], reps: int = 3) -> None:
    """The sampler's DROP_FINISHED_AT: finished rows leave the decoded batch once this fraction has finished."""
    import random

    import rlvr_cli.sampling as sampling
    from rlvr_cli.keyed_random import row_keys, stream_key
    from rlvr_cli.models import load_model
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.tasks import build_task, encode_prompt

    r = load_recipe(recipe, overrides)
    model, tok, _ = load_model(r.model.name)
    task, ro = build_task(r.task), r.rollout
    problems = task.train_problems(random.Random(1), ro.prompts_per_step)
    prompts = [encode_prompt(tok, task, p) for p in problems for _ in range(ro.group_size)]
    shipped = sampling.DROP_FINISHED_AT
    thresholds = [shipped, 0.125, 0.0625, 1e-9]
    rates: dict[float, list[float]] = {d: [] for d in thresholds}
    first: dict[int, object] = {}
    same = True
    try:
        for rep in range(reps):
            for d in thresholds if rep % 2 == 0 else thresholds[::-1]:
                sampling.DROP_FINISHED_AT = d
                c0, n = time.process_time(), 0
                for s in range(3):
                    keys = row_keys(stream_key(s, "drop"), [(i, 0) for i in range(len(prompts))])
                    options = sampling.SamplingOptions(ro.max_new_tokens, tok.eos_token_id, tok.pad_token_id, ro.temperature)
                    out = sampling.generate(model, prompts, options, row_keys=keys)
                    n += out.gen_tokens
                    ref = first.setdefault(s, out)
                    same &= out.response_ids == ref.response_ids and out.logprobs == ref.logprobs
                rates[d].append(n / (time.process_time() - c0))
    finally:
        sampling.DROP_FINISHED_AT = shipped
    print(f"finished rows leave the batch once this fraction has finished ({len(prompts)} rows, {ro.max_new_tokens} "
          f"new tokens, {reps} interleaved repetitions; the same samples at every threshold: {same}):")
    for d, v in rates.items():
        label = "every finishing row" if d < 1e-6 else f"{d:g}" + (" (shipped)" if d == shipped else "")
        print(f"  {label:22s} {statistics.median(v):8.0f} tokens per CPU second")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipe", default="dr_grpo")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--levers", action="store_true")
    ap.add_argument("--reps", type=int, default=2, help="interleaved repetitions of the kl.track A/B")
    args = ap.parse_args()
    torch.set_num_threads(1)
    r, rows, prof = run(args.recipe, args.steps, args.set, profile_from=2)
    ph = phases(rows)
    print(f"{args.recipe} on {r.model.name}: {ph['step_time_s']:.3f} s/step (median of steps 2..{args.steps}, "
          f"load average {os.getloadavg()[0]:.1f}), {ph['gen_tokens']:.0f} generated tokens/step")
    for k in ("time_sample_s", "time_ref_s", "time_update_s", "time_verify_s"):
        print(f"  {k[5:-2]:7s} {ph[k]:.3f} s ({ph[k] / ph['step_time_s']:.0%})")
    report_profile(prof, args.steps - 1, args.top)
    if args.levers:
        lever_kl_track(args.recipe, args.steps, args.set, args.reps)
        lever_shared_prefix(args.recipe, args.set)
        lever_drop_threshold(args.recipe, args.set)
        lever_compile_and_padding(args.recipe, args.set)


if __name__ == "__main__":
    main()
