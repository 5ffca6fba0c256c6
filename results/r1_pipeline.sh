#!/usr/bin/env bash
# R1-style multi-stage pipeline on the built-in task, end to end:
#   cold-start SFT -> RL -> rejection sampling (sample + verify --keep correct) -> SFT -> RL
#   and the RL and SFT stages again on an unseen training seed (step 6)
# Run from the repository root: bash results/r1_pipeline.sh   (about 20 minutes on one core)
set -euo pipefail
OUT=runs/experiments/r1
mkdir -p "$OUT"
step() { [ "$(python -c "import json,sys; print(json.load(open(sys.argv[1]))['status'])" "$2/run.json" 2>/dev/null)" = finished ] \
         && echo "[skip] $2" || rlvr train "$1" --out "$2" "${@:3}" $([ -f "$2/recipe.yaml" ] && echo --resume); }

# 1. cold-start SFT of the untrained model
step recipes/experiments/r1/cold_start.yaml "$OUT/1_cold_start"
# 2. reasoning RL (GRPO) from the cold start
step recipes/experiments/r1/rl_stage1.yaml "$OUT/2_rl"
# 3. rejection sampling: 4 samples for each of 1024 training prompts, keep the correct ones
rlvr sample "$OUT/2_rl" --task arithmetic --split train --num-prompts 1024 --n 4 --seed 7 --out "$OUT/3_samples.jsonl"
rlvr verify "$OUT/3_samples.jsonl" --out "$OUT/3_correct.jsonl" --keep correct
# 4. SFT on the kept responses
step recipes/experiments/r1/sft_stage2.yaml "$OUT/4_sft"
# 5. RL again
step recipes/experiments/r1/rl_stage2.yaml "$OUT/5_rl"
# 6. the RL stages and the SFT stage again on training seed 3 (the stages above train with seed 0), from the
#    same models and data: does each stage's verdict against the stage before it hold on a seed no stage used?
step recipes/experiments/r1/rl_stage1.yaml "$OUT/2_rl-seed3" --seed 3
step recipes/experiments/r1/sft_stage2.yaml "$OUT/4_sft-seed3" --seed 3
step recipes/experiments/r1/rl_stage2.yaml "$OUT/5_rl-seed3" --seed 3
# every stage's last checkpoint on the same held-out prompts and seed
python results/r1_summary.py "$OUT" results/r1
