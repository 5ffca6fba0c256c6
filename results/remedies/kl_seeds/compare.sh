# The remedies' control against KL in the loss on 8 paired seeds, from the committed records: seeds 0-2
# (results/remedies), 3 (results/remedies/seed3) and 4-7 (here). Run from the repository root:
#   bash results/remedies/kl_seeds/compare.sh
set -e
runs=""
for arm in baseline kl_loss; do
  for s in 0 1 2; do runs="$runs results/remedies/records/$arm-seed$s"; done
  runs="$runs results/remedies/seed3/records/$arm-seed3"
  for s in 4 5 6 7; do runs="$runs results/remedies/kl_seeds/records/$arm-seed$s"; done
done
rlvr compare $runs --label-by changed --control results/remedies/records/baseline-seed0 --out results/remedies/kl_seeds
