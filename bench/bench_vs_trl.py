"""rlvr against TRL's GRPOTrainer and `model.generate`, side by side in one process, interleaved A/B.

    python bench/bench_vs_trl.py                     # 6 repetitions, default EOS and fixed length
    python bench/bench_vs_trl.py --reps 3 --steps 4 --beta 0 --only step
    python bench/bench_vs_trl.py --model smollm2-135m-instruct --reps 1 --steps 2   # a real model (docs/real.md)

The work is the bench config (bench/bench_config.py): a 1.06M-parameter Llama from a config, 8
prompts x 8 responses, at most 32 new tokens, GRPO (group-std advantages, token ratio clipped at
0.2, k3 KL in the loss with beta 0.04, mean over each sequence's tokens then over sequences), AdamW
lr 1e-5, gradient clipping 1.0, float32, 1 thread. The update's forward/backward is split into
--micro-batches passes on both sides (default 4, the value rlvr's presets ship): rlvr's
`optim.micro_batches` (rows sorted by length, so each pass pads less), TRL's
`gradient_accumulation_steps` with `per_device_train_batch_size` = 64 / that (rows in order; TRL
pads every completion to the batch's longest). The gradient is the same either way. rlvr runs bench_config.GRPO_RECIPE on the
exported model; TRL 1.16 builds the identical model in memory (checked weight for weight).

Three measurements, each repeated --reps times with the order of A and B swapped every repetition
(the machine may be shared: paired ratios within a repetition cancel most of the load):

1. step: seconds per GRPO step (generation, reward, reference forward, policy forward/backward,
   clipping, AdamW), the median of steps 2..N of a fresh run, TRL / rlvr. TRL times from
   `on_step_begin` to `on_step_end`; rlvr is its own `step_time_s` metric.
2. sample: rlvr's sampler against `model.generate` (do_sample, temperature 1, top-k off, top-p 1,
   KV cache) on the same 64-row batch and model: valid completion tokens (up to and including the
   first EOS) per second, rlvr / generate; also per second of this process's CPU time, which other
   processes on a shared machine disturb less than wall time. rlvr samples as its trainer does
   (keyed draws, `row_keys`); the same sampler with one `torch.Generator` for the batch is timed too.
3. floor: the GEMM rate this machine reaches on the step's own matmul shapes (forward and both
   backward products at 64 x 42 rows, decode at 64 rows), the model FLOPs of a step, and the step
   time against FLOPs / rate (an MFU-style ratio; 1.0 would be matmuls only).

Each comes twice: "default" (a response stops at its first EOS) and "fixed" (every response has
exactly 32 tokens: `min_new_tokens=32` for TRL and `model.generate`, `rollout.ignore_eos` for rlvr),
which makes the compute per step identical whatever the random streams draw.

On a GPU (`--device cuda`, see bench/gpu_check.sh): both trainers keep float32 weights under bf16
autocast (rlvr's `model.dtype: auto`, TRL's `bf16=True`), `model.generate` and rlvr's sampler run
under the same autocast, GEMM rates are bf16, and timings wait for the device (each side's numbers
are read back to the host before its clock stops). `--shape 0.5b` is the 0.5B-class model of
bench/bench_config.py (`--layers N` shrinks it, to check the script on a CPU in seconds).

TRL is optional (`pip install -e ".[trl]"`, or `pip install --no-deps trl==1.16.0 accelerate` plus
psutil): without it the step comparison is skipped with a message and the rest runs. Not a test;
the figures depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

for _k, _v in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("HF_DATASETS_OFFLINE", "1"),
               ("TOKENIZERS_PARALLELISM", "false"), ("OMP_NUM_THREADS", "1"), ("MKL_NUM_THREADS", "1"),
               ("WANDB_DISABLED", "true"), ("TRL_EXPERIMENTAL_SILENCE", "1"), ("HF_HUB_DISABLE_PROGRESS_BARS", "1")):
    os.environ.setdefault(_k, _v)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import torch  # noqa: E402

import bench_config as bc  # noqa: E402

P, G, NEW = 8, 8, 32


@dataclass(frozen=True)
class Target:
    """Where the comparison runs: the device ("cpu" or "cuda") and the model's dimensions (bench_config.SHAPES)."""

    device: str = "cpu"
    dims: dict = field(default_factory=lambda: dict(bc.SHAPE))

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    def autocast(self):
        """bf16 autocast on CUDA (what both trainers train under there), nothing on the CPU."""
        return torch.autocast("cuda", dtype=torch.bfloat16) if self.cuda else contextlib.nullcontext()

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


def have_trl() -> str | None:
    try:
        import trl  # noqa: F401
    except ImportError as e:
        return f"TRL is not installed ({e}); install the `bench` extra to compare steps"
    return None


# --- TRL ---------------------------------------------------------------------------------------------
def trl_run(steps: int, beta: float, fixed: bool, seed: int, work: Path, micro: int = 1, at: Target = Target()) -> dict:
    """A fresh GRPOTrainer on the bench config; seconds of each step and valid completion tokens."""
    import transformers
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOConfig, GRPOTrainer
    from datasets import Dataset

    transformers.logging.set_verbosity_error()
    tok, model = bc.tokenizer(at.dims["vocab_size"]), bc.model(seed, at.dims)
    data = bc.rows(steps * P, seed)
    ds = Dataset.from_dict({"prompt": [r["prompt"] for r in data], "answer": [r["answer"] for r in data]})
    init = work / "trl_init"
    model.save_pretrained(init)  # TRL loads its reference from config._name_or_path
    tok.save_pretrained(init)
    model.config._name_or_path = str(init)
    cfg = GRPOConfig(
        output_dir=str(work / "trl_out"), use_cpu=not at.cuda, bf16=at.cuda, fp16=False,
        gradient_checkpointing=False, activation_checkpointing=False, use_vllm=False,
        per_device_train_batch_size=P * G // micro, gradient_accumulation_steps=micro, num_generations=G,
        num_iterations=1,
        max_completion_length=NEW, shuffle_dataset=False, temperature=1.0, top_p=1.0, top_k=0,
        generation_kwargs={"min_new_tokens": NEW} if fixed else None,
        beta=beta, loss_type="grpo", epsilon=0.2, scale_rewards="group",
        learning_rate=1e-5, lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0,
        optim="adamw_torch", max_steps=steps, seed=seed, data_seed=seed, report_to="none", logging_steps=1,
        save_strategy="no", disable_tqdm=True, dataloader_num_workers=0, log_completions=False,
    )
    times: list[float] = []
    tokens: list[int] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            at.sync()
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            at.sync()
            times.append(time.perf_counter() - self.t0)

    trainer = GRPOTrainer(model=model, reward_funcs=bc.reward, args=cfg, train_dataset=ds, processing_class=tok,
                          callbacks=[Timer()])
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    assert trainer.args.device.type == at.device and trainer.args.bf16 == at.cuda
    assert trainer.args.generation_batch_size == P * G
    policy = trainer.accelerator.unwrap_model(trainer.model_wrapped)
    real = policy.generate

    def counting_generate(*a, **k):  # passes everything through; counts valid completion tokens
        out = real(*a, **k)
        width = k["input_ids"].shape[1] if "input_ids" in k else a[0].shape[1]
        tokens.append(valid_tokens(out[:, width:]))
        return out

    policy.generate = counting_generate
    with contextlib.redirect_stdout(sys.stderr):
        trainer.train()
    return {"step_s": times, "tokens": tokens}


def valid_tokens(gen: torch.Tensor) -> int:
    """Tokens up to and including each row's first EOS (all of them when there is none)."""
    is_eos = gen == bc.EOS
    first = torch.where(is_eos.any(1), is_eos.int().argmax(1) + 1, torch.full_like(is_eos[:, 0], gen.shape[1],
                                                                                    dtype=torch.long))
    return int(first.sum())


# --- rlvr --------------------------------------------------------------------------------------------
def rlvr_run(steps: int, beta: float, fixed: bool, seed: int, work: Path, model_dir: Path, data: tuple,
             micro: int = 1, at: Target = Target()) -> dict:
    """A fresh rlvr run of bench_config.GRPO_RECIPE; its step_time_s and gen_tokens per step."""
    import rlvr_cli.train.rl as rl
    from rlvr_cli.recipe.load import load_recipe
    from rlvr_cli.train.run_writer import RunDir

    over = [f"model.name={model_dir}", f"task.path={data[0]}", f"task.eval_path={data[1]}", f"steps={steps}",
            f"seed={seed}", f"kl.beta={beta}", f"rollout.ignore_eos={str(fixed).lower()}", f"optim.micro_batches={micro}"]
    if beta == 0:
        over.append("kl.track=false")  # TRL loads no reference model at beta 0
    if at.cuda:  # float32 weights under bf16 autocast, as TRL's bf16=True
        over += ["device=cuda", "model.dtype=auto"]
    recipe = load_recipe(bc.write_recipe(work / "bench_grpo.yaml"), over)
    out = work / f"rlvr-{time.monotonic_ns()}"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rl.train_rl(recipe, out)  # step_time_s excludes the final evaluation
    rows = RunDir(out).read_metrics()
    return {"step_s": [r["step_time_s"] for r in rows], "tokens": [r["gen_tokens"] for r in rows]}


# --- sampler against model.generate ----------------------------------------------------------------------
def sample_pair(model, tok, fixed: bool, seed: int, calls: int, rlvr_first: bool, at: Target = Target()) -> dict:
    from rlvr_cli.keyed_random import row_keys, stream_key
    from rlvr_cli.sampling import SamplingOptions, generate

    problems = bc.rows(P, 0)
    ids = [tok(r["prompt"])["input_ids"] for r in problems for _ in range(G)]
    enc = tok([r["prompt"] for r in problems for _ in range(G)], return_tensors="pt", padding=True).to(at.device)
    amp = {"autocast_dtype": torch.bfloat16} if at.cuda else {}

    def ours(s):  # as the trainer samples: each row's draws keyed by its identity
        keys = row_keys(stream_key(s, "bench"), [(i, j) for i in range(P) for j in range(G)])
        out = generate(model, ids, SamplingOptions(NEW, bc.EOS, bc.PAD, ignore_eos=fixed, **amp), row_keys=keys)
        return out.gen_tokens

    def ours_generator(s):  # one torch.Generator for the batch, as model.generate draws
        out = generate(model, ids, SamplingOptions(NEW, bc.EOS, bc.PAD, ignore_eos=fixed, **amp),
                       generator=torch.Generator(at.device).manual_seed(s))
        return out.gen_tokens

    def theirs(s):
        torch.manual_seed(s)
        with torch.no_grad(), at.autocast():
            out = model.generate(**enc, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=NEW,
                                 eos_token_id=bc.EOS, pad_token_id=bc.PAD, **({"min_new_tokens": NEW} if fixed else {}))
        return valid_tokens(out[:, enc["input_ids"].shape[1]:])

    rate: dict = {k: [] for k in ("rlvr", "rlvr_generator", "generate", "rlvr_cpu", "rlvr_generator_cpu",
                                  "generate_cpu")}
    order = [("rlvr", ours), ("rlvr_generator", ours_generator), ("generate", theirs)]
    for i in range(calls):
        for name, fn in order if (rlvr_first ^ bool(i % 2)) else order[::-1]:
            at.sync()
            t0, c0 = time.perf_counter(), time.process_time()
            n = fn(seed * 1000 + i)  # returns a host number: the device has finished
            rate[name].append(n / (time.perf_counter() - t0))
            rate[f"{name}_cpu"].append(n / (time.process_time() - c0))
    return {k: statistics.median(v) for k, v in rate.items()}


# --- the compute floor -------------------------------------------------------------------------------------
def gemm_rate(m: int, k: int, n: int, seconds: float = 0.15, at: Target = Target()) -> float:
    """GFLOP/s of [m,k] @ [k,n] (float32 on the CPU, bf16 on CUDA; the median of 5 timed batches after a warm-up)."""
    dtype = torch.bfloat16 if at.cuda else torch.float32
    a, b = torch.randn(m, k, device=at.device, dtype=dtype), torch.randn(k, n, device=at.device, dtype=dtype)
    torch.mm(a, b)
    reps = max(1, int(seconds / max(1e-6, _time(lambda: torch.mm(a, b), 3, at))))
    best = statistics.median(_time(lambda: torch.mm(a, b), reps, at) for _ in range(5))
    return 2 * m * k * n / best / 1e9


def _time(fn, reps: int, at: Target = Target()) -> float:
    at.sync()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    at.sync()
    return (time.perf_counter() - t0) / reps


def floor_probe(prompt: int = 10, at: Target = Target()) -> dict:
    """The GEMM rate on the step's shapes, weighted by their FLOPs, and the matmul-only time of a fixed-length step."""
    m_train, m_decode = P * G * (prompt + NEW), P * G
    train_s = decode_s = train_f = decode_f = 0.0
    for i, o, count in bc.linear_shapes(at.dims):
        for m, k, n in ((m_train, i, o), (m_train, o, i), (i, m_train, o)):  # forward, grad input, grad weight
            f = 2.0 * m * k * n * count
            train_f, train_s = train_f + f, train_s + f / (gemm_rate(m, k, n, at=at) * 1e9)
        f = 2.0 * m_decode * i * o * count
        decode_f, decode_s = decode_f + f, decode_s + f / (gemm_rate(m_decode, i, o, at=at) * 1e9)
    train_rate, decode_rate = train_f / train_s / 1e9, decode_f / decode_s / 1e9
    flops = bc.step_flops(P * G, prompt, NEW, at.dims)
    floor = flops["sample"] / (decode_rate * 1e9) + (flops["reference"] + flops["policy"]) / (train_rate * 1e9)
    return {"gemm_gflops_train_shapes": round(train_rate, 1), "gemm_gflops_decode_shapes": round(decode_rate, 1),
            "step_gflop": round(flops["total"] / 1e9, 2), "matmul_floor_s": round(floor, 4)}


# --- a real model: SmolLM2-135M-Instruct (recipes/smollm2_dr_grpo.yaml) ---------------------------------------
REAL_NEW = 48


def real_recipe(model: str, lora: bool, steps: int):
    """The preset on ``model``: 4 prompts x 8 responses of exactly 48 tokens (fixed work), no KL, no evaluation
    to speak of; full fine-tuning at lr 1e-6 or the preset's LoRA."""
    from rlvr_cli.recipe.load import load_recipe

    over = [f"model.name={model}", f"steps={steps}", "rollout.ignore_eos=true", f"rollout.max_new_tokens={REAL_NEW}",
            "kl.track=false", "eval.at_start=false", "eval.every=0", "eval.n=1", "eval.num_prompts=1",
            "checkpoint.every=0", "threads=1"]
    over += [] if lora else ["model.lora=null", "optim.lr=1e-6"]
    return load_recipe("smollm2_dr_grpo", over)


def real_rlvr(model: str, lora: bool, steps: int, work: Path) -> dict:
    """rlvr's step on the preset: step seconds and where they go (sample / reference / update), per step."""
    import rlvr_cli.train.rl as rl
    from rlvr_cli.train.run_writer import RunDir

    out = work / f"rlvr-{time.monotonic_ns()}"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rl.train_rl(real_recipe(model, lora, steps), out)
    rows = RunDir(out).read_metrics()
    return {k: [r[k] for r in rows] for k in ("step_time_s", "time_sample_s", "time_ref_s", "time_update_s", "gen_tokens")}


def real_trl(model: str, lora: bool, steps: int, work: Path) -> dict:
    """TRL's GRPOTrainer on the same weights, prompts, reward, batch and length: the preset exported by
    `rlvr export` (rlvr_cli.bridges) with fixed-length completions; step seconds from its callbacks."""
    import transformers
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import GRPOConfig, GRPOTrainer

    from rlvr_cli.bridges import export_recipe
    from rlvr_cli.bridges.trl_reward import trainer_inputs

    transformers.logging.set_verbosity_error()
    r = real_recipe(model, lora, steps)
    settings = {**export_recipe(r, "trl").settings, "output_dir": str(work / "trl_out"), "save_strategy": "no",
                "use_cpu": True, "disable_tqdm": True, "log_completions": False, "dataloader_num_workers": 0,
                "generation_kwargs": {"min_new_tokens": REAL_NEW}}
    times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.t0)

    trainer = GRPOTrainer(args=GRPOConfig(**settings), callbacks=[Timer()], **trainer_inputs(r, num_prompts=steps * 4))
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    with contextlib.redirect_stdout(sys.stderr):
        trainer.train()
    # TRL counts an optimiser update as a step: one rlvr step is micro_batches of them with one generation
    per = len(times) // steps
    return {"step_time_s": [sum(times[i * per:(i + 1) * per]) for i in range(steps)]}


def real_bench(args) -> None:
    """rlvr vs TRL (full fine-tuning and LoRA) on a real model, interleaved; one line per run, then a summary."""
    from rlvr_cli.models import resolve_model_ref

    path = resolve_model_ref(args.model).path  # converted once (a GGUF) and cached
    print(f"model {args.model}: {path}", flush=True)
    sides = [(who, kind) for kind in args.kinds for who in ("rlvr", "trl")]  # A B per kind, reversed every other rep
    if have_trl():
        print(f"skipping TRL: {have_trl()}")
        sides = [s for s in sides if s[0] == "rlvr"]
    got: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench_real_") as tmp:
        for rep in range(args.reps):
            for who, kind in sides if rep % 2 == 0 else sides[::-1]:
                fn = real_rlvr if who == "rlvr" else real_trl
                t0 = time.perf_counter()
                run = fn(args.model, kind == "lora", args.steps, Path(tmp))
                timed = {k: statistics.median(v[1:] or v) for k, v in run.items()}  # the first step warms up
                got.setdefault(f"{who}_{kind}", []).append(timed)
                print(f"rep {rep + 1} {who:4s} {kind:4s}: " + "  ".join(f"{k} {v:.1f}" for k, v in timed.items())
                      + f"  (run {time.perf_counter() - t0:.0f} s, load {os.getloadavg()[0]:.1f})", flush=True)
    print(json.dumps(got))


# --- driver ------------------------------------------------------------------------------------------------
def summary(xs: list[float]) -> str:
    return f"median {statistics.median(xs):.2f}x  range {min(xs):.2f}-{max(xs):.2f}x  (n={len(xs)})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=6, help="interleaved repetitions (default 6)")
    ap.add_argument("--steps", type=int, default=4, help="steps per run; the first is a warm-up (default 4)")
    ap.add_argument("--calls", type=int, default=3, help="sampler calls per side per repetition (default 3)")
    ap.add_argument("--beta", type=float, default=0.04)
    ap.add_argument("--modes", nargs="+", default=["default", "fixed"], choices=["default", "fixed"])
    ap.add_argument("--only", nargs="+", default=["step", "sample", "floor"], choices=["step", "sample", "floor"])
    ap.add_argument("--micro-batches", type=int, default=4, choices=[1, 2, 4, 8],
                    help="forward/backward passes per update on both sides (default 4, the rlvr presets' value): "
                         "rlvr's optim.micro_batches (length-sorted), TRL's gradient_accumulation_steps (in order)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                    help="cpu (float32, 1 thread) or cuda (float32 weights under bf16 autocast on both sides)")
    ap.add_argument("--shape", default="bench", choices=sorted(bc.SHAPES),
                    help="the model: the 1.06M bench config, or 0.5b (bench/bench_config.py)")
    ap.add_argument("--layers", type=int, help="override the shape's decoder layers (e.g. 1: a quick check of the script)")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--kinds", nargs="+", default=["full", "lora"], choices=["full", "lora"],
                    help="with --model: full fine-tuning and/or the preset's LoRA (default both)")
    ap.add_argument("--model", help="a real model instead (e.g. smollm2-135m-instruct): rlvr's step against TRL's, "
                                    "full fine-tuning and LoRA, on recipes/smollm2_dr_grpo.yaml's task and batch")
    args = ap.parse_args()
    if args.model:
        torch.set_num_threads(1)
        warnings.filterwarnings("ignore")
        return real_bench(args)
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda: torch sees no CUDA device")
    if args.layers is not None and args.layers < 1:
        ap.error(f"--layers {args.layers}: at least 1")
    if min(args.reps, args.steps, args.calls) < 1 and args.only != ["floor"]:
        ap.error("--reps, --steps and --calls: at least 1 each")
    at = Target(args.device, bc.shape(args.shape, args.layers))
    torch.set_num_threads(1)
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)
    warnings.filterwarnings("ignore")
    from rlvr_cli.models import load_model

    results: dict = {"config": vars(args), "dims": at.dims, "load_avg_start": os.getloadavg(),
                     "versions": {"torch": torch.__version__}}
    if at.cuda:
        results["versions"]["gpu"] = torch.cuda.get_device_name()
    trl_missing = have_trl() if "step" in args.only else None
    if trl_missing:
        print(f"skipping the step comparison: {trl_missing}")
    with tempfile.TemporaryDirectory(prefix="bench_vs_trl_") as tmp:
        work = Path(tmp)
        model_dir = bc.export(work / "model", dims=at.dims)
        data = bc.write_task_files(work / "data", train=max(64, args.steps * P))
        model, tok, _ = load_model(str(model_dir))
        reference = bc.model(0, at.dims).state_dict()
        assert all(torch.equal(v, reference[k]) for k, v in model.state_dict().items()), "exported weights differ"
        del reference
        model = model.to(at.device)
        print(f"model: {sum(p.numel() for p in model.parameters()):,} parameters on {at.device}", flush=True)
        if "floor" in args.only:
            results["floor_start"] = floor_probe(at=at)
            print("compute floor:", json.dumps(results["floor_start"]))
        steps: dict = {m: {"trl": [], "rlvr": [], "ratio": []} for m in args.modes}
        samples: dict = {m: {"rlvr": [], "rlvr_generator": [], "generate": [], "ratio": [], "ratio_cpu": [],
                             "ratio_generator": []} for m in args.modes}
        for rep in range(args.reps):
            for mode in args.modes:
                fixed = mode == "fixed"
                if "step" in args.only and not trl_missing:
                    got = {}
                    for who in (("trl", "rlvr") if rep % 2 == 0 else ("rlvr", "trl")):
                        run = (trl_run(args.steps, args.beta, fixed, 0, work, args.micro_batches, at) if who == "trl"
                               else rlvr_run(args.steps, args.beta, fixed, 0, work, model_dir, data, args.micro_batches,
                                             at))
                        got[who] = statistics.median(run["step_s"][1:] or run["step_s"])
                        steps[mode][who].append(got[who])
                        steps[mode].setdefault(f"{who}_tokens", []).append(statistics.median(run["tokens"]))
                    steps[mode]["ratio"].append(got["trl"] / got["rlvr"])
                    print(f"rep {rep + 1} step {mode:7s}: TRL {got['trl']:.3f} s  rlvr {got['rlvr']:.3f} s  "
                          f"TRL/rlvr {got['trl'] / got['rlvr']:.2f}x", flush=True)
                if "sample" in args.only:
                    r = sample_pair(model, tok, fixed, rep, args.calls, rlvr_first=rep % 2 == 0, at=at)
                    for k in ("rlvr", "rlvr_generator", "generate"):
                        samples[mode][k].append(r[k])
                    samples[mode]["ratio"].append(r["rlvr"] / r["generate"])
                    samples[mode]["ratio_cpu"].append(r["rlvr_cpu"] / r["generate_cpu"])
                    samples[mode]["ratio_generator"].append(r["rlvr_generator"] / r["generate"])
                    print(f"rep {rep + 1} sample {mode:7s}: rlvr {r['rlvr']:.0f} tok/s (one generator "
                          f"{r['rlvr_generator']:.0f})  generate {r['generate']:.0f} tok/s  rlvr/generate "
                          f"{r['rlvr'] / r['generate']:.2f}x (CPU time {r['rlvr_cpu'] / r['generate_cpu']:.2f}x; "
                          f"one generator {r['rlvr_generator'] / r['generate']:.2f}x)", flush=True)
        if "floor" in args.only:
            results["floor_end"] = floor_probe(at=at)
            print("compute floor (end):", json.dumps(results["floor_end"]))
    results["load_avg_end"] = os.getloadavg()
    print(f"\n== summary ({args.reps} interleaved repetitions, load average {results['load_avg_start'][0]:.1f} at the "
          f"start, {results['load_avg_end'][0]:.1f} at the end)")
    for mode in args.modes:
        if steps[mode]["ratio"]:
            print(f"step   {mode:7s} TRL/rlvr:      {summary(steps[mode]['ratio'])}; median s/step TRL "
                  f"{statistics.median(steps[mode]['trl']):.3f}, rlvr {statistics.median(steps[mode]['rlvr']):.3f}")
        if samples[mode]["ratio"]:
            print(f"sample {mode:7s} rlvr/generate: {summary(samples[mode]['ratio'])}; median tok/s rlvr "
                  f"{statistics.median(samples[mode]['rlvr']):.0f}, generate {statistics.median(samples[mode]['generate']):.0f}")
            print(f"sample {mode:7s} same, CPU time:  {summary(samples[mode]['ratio_cpu'])}")
            print(f"sample {mode:7s} one generator:   {summary(samples[mode]['ratio_generator'])}")
    if "floor" in args.only:
        floor = statistics.mean([results["floor_start"]["matmul_floor_s"], results["floor_end"]["matmul_floor_s"]])
        results["floor_s_mean"] = floor
        for mode in [m for m in args.modes if m == "fixed"]:  # the floor counts fixed-length work
            for who in ("trl", "rlvr"):
                if steps[mode][who]:
                    s = statistics.median(steps[mode][who])
                    print(f"floor  {mode:7s} {who:4s}: {s:.3f} s/step = {s / floor:.2f}x the matmul floor "
                          f"({floor:.3f} s); MFU-style {floor / s:.0%}")
    results["steps"], results["samples"] = steps, samples
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print(json.dumps({"steps": {m: {k: [round(x, 4) for x in v] for k, v in d.items()} for m, d in steps.items()},
                      "samples": {m: {k: [round(x, 3) for x in v] for k, v in d.items()} for m, d in samples.items()}}))


if __name__ == "__main__":
    main()
