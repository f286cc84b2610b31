#!/usr/bin/env bash
# Data-parallel training fed by pinring, on a machine with two GPUs (torchrun, DDP over
# NCCL), then resumed on one GPU from the checkpoint, with exactly-once checked.
#
#   scripts/python-gpu.sh --build    here: the pinring wheel into .gpu/python/
#   scripts/ddp-check.sh             on the 2-GPU machine, from the repo root with .gpu/
#                                    carried (no Rust, no pip): both runs, then a summary
#
# Run 1: torchrun --nproc_per_node=2 python/examples/train_gpt.py --ddp, one epoch of a
# learnable synthetic shard, stopped after STOP_AFTER steps (default 300) with model,
# optimizer and the merged loader state saved. Run 2: torchrun --nproc_per_node=1 resumes
# the checkpoint and finishes the epoch; --verify checks that the sample ids of both runs
# are disjoint and together exactly the windows the epoch delivers. NVLink multicast
# (NVLS) stays off. Exits non-zero if a run or a check fails. With $OUT set, the log is
# copied there.
set -uo pipefail
cd "$(dirname "$0")/.."
DIR=.gpu/python
WORK=${DDP_DIR:-/tmp/pinring-ddp}
LOG="$WORK/ddp_check.log"
STOP_AFTER=${STOP_AFTER:-300}
py=${PYTHON:-python3}

[ -n "$(ls "$DIR"/pinring-*.whl 2>/dev/null)" ] || { echo "no wheel in $DIR: run scripts/python-gpu.sh --build first"; exit 2; }
rm -rf "$WORK" && mkdir -p "$WORK/site"
"$py" -m zipfile -e "$DIR"/pinring-*.whl "$WORK/site" || exit 1
export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
export NCCL_NVLS_ENABLE=0
common=(--ddp --synthetic "$WORK/data" --epochs 1 --batch 32 --seq-len 256 --log-every 100)

nvidia-smi --query-gpu=index,name --format=csv,noheader 2>&1 | tee "$LOG"
start=$(date +%s)
echo "=== run 1: 2 GPUs, stop after $STOP_AFTER steps, save" | tee -a "$LOG"
torchrun --standalone --nproc_per_node=2 python/examples/train_gpt.py "${common[@]}" \
    --check --stop-after "$STOP_AFTER" --save "$WORK/ckpt.pt" --ids-out "$WORK/ids-run1.npy" 2>&1 | tee -a "$LOG"
rc1=${PIPESTATUS[0]}
mid=$(date +%s)
echo "=== run 2: 1 GPU, resume, finish the epoch, verify exactly-once" | tee -a "$LOG"
torchrun --standalone --nproc_per_node=1 python/examples/train_gpt.py "${common[@]}" \
    --resume "$WORK/ckpt.pt" --ids-out "$WORK/ids-run2.npy" --verify "$WORK/ids-run1.npy" 2>&1 | tee -a "$LOG"
rc2=${PIPESTATUS[0]}
end=$(date +%s)
{
    echo "=== summary"
    grep -E "^(per-rank batches|loader state|exactly-once|loss |resumed from)" "$LOG"
    echo "run 1 (2 GPUs): exit $rc1, $((mid - start)) s wall; run 2 (1 GPU): exit $rc2, $((end - mid)) s wall"
} | tee -a "$LOG.summary"
cat "$LOG.summary" >>"$LOG"
[ -n "${OUT:-}" ] && cp "$LOG" "$OUT/"
[ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ]
