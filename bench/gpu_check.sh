#!/usr/bin/env bash
# The speed comparison on a GPU, as one prepared command: rlvr against TRL's GRPOTrainer and
# `model.generate` on the 0.5B-class model of bench/bench_config.py (`--shape 0.5b`: Qwen2.5-0.5B's
# dimensions in a Llama built from a config, 494M parameters), float32 weights under bf16 autocast
# on both sides, interleaved A/B (bench/bench_vs_trl.py --device cuda).
#
#   bash bench/gpu_check.sh --wheels    # here, where pip reaches the registry: fetch the wheels the GPU
#                                       # machine lacks into .whl/ (ignored through .git/info/exclude)
#   bash bench/gpu_check.sh             # there (the device tool: carry .whl): installs .whl/ into
#                                       # /tmp/site, then runs the two stages below, each cut at its
#                                       # timeout (170 s, 330 s), so the whole stays under 10 minutes
#
# The GPU image has torch, transformers, accelerate, tokenizers and pyarrow, but not pydantic, TRL,
# datasets; the wheels pin the versions this repository is tested with (transformers
# too, so both sides run the same model code as on the CPU). Each stage writes its own JSON and log
# under $OUT (or /tmp/bench-gpu-out without it), so one that fails leaves the others' figures:
#   1. floor + sampler: the bf16 GEMM rate on the step's shapes, and rlvr's sampler against
#      `model.generate` on the same 64-row batch (needs neither TRL nor datasets);
#   2. step: seconds per GRPO step, TRL / rlvr (needs datasets for rlvr's task, TRL for its side:
#      without TRL the script says so and times rlvr alone).
# Not a test; run it once per lease and quote its medians and ranges with the date and the GPU.
set -uo pipefail
cd "$(dirname "$0")/.."

WHEELS=(
  pydantic==2.13.4 pydantic_core==2.46.4 annotated-types==0.7.0 typing-inspection==0.4.2
  transformers==5.24.0 trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
)  # math-verify is imported only by the math verifier, which the bench does not use

if [[ "${1:-}" == "--wheels" ]]; then
  grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
  mkdir -p .whl
  for w in "${WHEELS[@]}"; do
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --platform any -d .whl "$w" || { echo "error: could not download $w" >&2; exit 2; }
  done
  du -sh .whl
  exit 0
fi

out="${OUT:-/tmp/bench-gpu-out}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 RLVR_EVAL_CACHE=0
if compgen -G ".whl/*.whl" > /dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "error: installing .whl/ failed" >&2; exit 2; }
  export PYTHONPATH="/tmp/site:$PWD"
else
  echo "no .whl/ here: using the packages installed (run 'bash bench/gpu_check.sh --wheels' where pip works)"
  export PYTHONPATH="$PWD"
fi

{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import sys, torch; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  python3 - <<'EOF'
from importlib import metadata
for n in ("transformers", "trl", "accelerate", "datasets", "pyarrow", "pydantic", "tokenizers"):
    try:
        print(n, metadata.version(n))
    except metadata.PackageNotFoundError:
        print(n, "missing")
EOF
} 2>&1 | tee "$out/versions.txt"

status=0
stage() {  # stage NAME SECONDS COMMAND...: one stage, its log under $out
  local name=$1 limit=$2; shift 2
  echo "== $name: $* (at most $limit s)"
  timeout "$limit" "$@" 2>&1 | tee "$out/$name.log" | grep -v -E '^\{"steps"'
  local rc=${PIPESTATUS[0]}
  [[ $rc == 0 ]] || { echo "== $name exited $rc"; status=1; }
}
vs_trl() {  # vs_trl NAME SECONDS ARGS...: a stage of bench/bench_vs_trl.py on the 0.5B shape, with its JSON
  local name=$1 limit=$2; shift 2
  stage "$name" "$limit" python3 bench/bench_vs_trl.py --device cuda --shape 0.5b --json "$out/$name.json" "$@"
}
vs_trl sample 170 --only floor sample --reps 3 --calls 3 --modes default fixed
vs_trl step 330 --only step --reps 2 --steps 4 --modes default  # 2: the fewest that interleave A/B
exit $status
