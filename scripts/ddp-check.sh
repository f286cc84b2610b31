#!/usr/bin/env bash
# Data-parallel training fed by pinring (torchrun, DDP), stopped with a checkpoint, resumed
# on one process, with exactly-once checked from what the runs logged.
#
#   scripts/python-gpu.sh --build      here: the pinring wheel into .gpu/python/
#   scripts/ddp-check.sh               on the 2-GPU machine, from the repo root with .gpu/
#                                      carried (no Rust, no pip): both parts, then a summary
#   scripts/ddp-check.sh --packed      the packed-mixture part only (issue 24)
#   scripts/ddp-check.sh --windows     the token-window part only
#   scripts/ddp-check.sh --gloo        the packed-mixture part on cpu: two processes over
#                                      gloo, small sizes (no GPU needed; the pinring found
#                                      by $PYTHON, or the wheel)
#   scripts/ddp-check.sh --one-gpu     the packed-mixture part on one GPU: two processes
#                                      sharing it over gloo (the same code path as one rank
#                                      per GPU over NCCL), then one
#   scripts/ddp-check.sh --cpu         many ranks (issue 33), no GPU: torchrun --standalone
#                                      --nproc_per_node=4 over gloo, a Mixture of Documents
#                                      (python/examples/ddp_guard_reshard.py): RankGuard
#                                      stopping a run whose rank 2's data ends early, naming
#                                      it, before any collective hangs; a live reshard 4 -> 3
#                                      (one rank leaves) checked exactly-once from the logged
#                                      ids. PYTHON defaults to target/ddp-venv/bin/python (a
#                                      venv with torch); pinring from the wheel in
#                                      .gpu/python/, or the one scripts/python-tests.sh
#                                      installed in target/python-venv
#
# Windows part. Run 1: torchrun --nproc_per_node=2 train_gpt.py --ddp, one epoch of a
# learnable synthetic shard, stopped after STOP_AFTER steps (default 300) with model,
# optimizer and the merged loader state saved. Run 2: --nproc_per_node=1 resumes it and
# finishes the epoch; --verify checks that the sample ids of both runs are disjoint and
# together exactly the windows the epoch delivers.
#
# Packed-mixture part (issue 24). Run 3: torchrun --nproc_per_node=2 train_gpt.py --ddp
# --packed: a pinring.Mixture of two pinring.Documents sources (weights 0.7 / 0.3, two
# synthetic corpora of learnable documents), one loader per rank, stopped after
# PACKED_STOP_AFTER steps (default 300; 60 with --gloo) with model, optimizer and merged
# loader state; every rank logs each step's loss and the (source, document id) of every
# document it consumed. Run 4: --nproc_per_node=1 resumes it to the end of the mixture
# (stop "first": the end of the smaller source's epoch). Then
# python/examples/check_ddp_run.py over the logs: no document twice, every document of each
# source's walk up to the end delivered, equal steps per rank, each source's share within
# one document of its weight at every step, the loss falling across the resume.
#
# NVLink multicast (NVLS) stays off. Exits non-zero if a run or a check fails. With $OUT
# set, the log is copied there. PYTHON (default python3) is the interpreter with torch.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--cpu" ]; then
    py=${PYTHON:-target/ddp-venv/bin/python}
    WORK=${DDP_DIR:-/tmp/pinring-ddp-cpu}
    LOG="$WORK/ddp_cpu.log"
    rm -rf "$WORK" && mkdir -p "$WORK/site" "$WORK/guard" "$WORK/reshard"
    if ! "$py" -c 'import torch.distributed' 2>/dev/null; then
        echo "no torch for $py: make a venv with it (python3 -m venv target/ddp-venv &&"
        echo "target/ddp-venv/bin/pip install torch numpy), or set PYTHON"
        exit 2
    fi
    if ls .gpu/python/pinring-*.whl >/dev/null 2>&1; then
        "$py" -m zipfile -e .gpu/python/pinring-*.whl "$WORK/site" || exit 1
    elif [ -x target/python-venv/bin/python ]; then
        # The package alone (abi3: any CPython 3.10+ loads it), not that venv's numpy.
        cp -r "$(target/python-venv/bin/python -c 'import os, pinring; print(os.path.dirname(pinring.__file__))')" "$WORK/site/" || exit 1
    elif ! "$py" -c 'import pinring' 2>/dev/null; then
        echo "no pinring: run scripts/python-tests.sh (or scripts/python-gpu.sh --build) first"
        exit 2
    fi
    export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
    run=("$py" -m torch.distributed.run --standalone --nproc_per_node=4 python/examples/ddp_guard_reshard.py)
    echo "=== many ranks on cpu: $(nproc) core(s), $("$py" -c 'import torch; print("torch", torch.__version__)'), gloo" | tee "$LOG"
    echo "=== run 1: 4 ranks, rank 2's data ends early: RankGuard names it before a collective hangs" | tee -a "$LOG"
    start=$(date +%s)
    timeout 600 "${run[@]}" --guard --work "$WORK/guard" 2>&1 | tee -a "$LOG"
    rc1=${PIPESTATUS[0]}
    mid=$(date +%s)
    echo "=== run 2: 4 ranks, resharded to 3 at a step boundary (rank 3 leaves), ids logged" | tee -a "$LOG"
    timeout 600 "${run[@]}" --reshard --work "$WORK/reshard" 2>&1 | tee -a "$LOG"
    rc2=${PIPESTATUS[0]}
    end=$(date +%s)
    "$py" python/examples/ddp_guard_reshard.py --verify --work "$WORK/reshard" 2>&1 | tee -a "$LOG"
    rc3=${PIPESTATUS[0]}
    {
        echo "=== summary"
        grep -E "^(guard|reshard): |RankGuard: |RankError at|resharded to|leaves after|ran out of data" "$LOG"
        echo "run 1 (guard): exit $rc1, $((mid - start)) s wall; run 2 (reshard): exit $rc2, $((end - mid)) s wall; check: exit $rc3"
    } | tee "$LOG.summary"
    cat "$LOG.summary" >>"$LOG"
    [ -n "${OUT:-}" ] && cp "$LOG" "$OUT/"
    [ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] && [ "$rc3" -eq 0 ]
    exit
fi
DIR=.gpu/python
WORK=${DDP_DIR:-/tmp/pinring-ddp}
LOG="$WORK/ddp_check.log"
STOP_AFTER=${STOP_AFTER:-300}
py=${PYTHON:-python3}
part=all gloo=0 one=0
case "${1:-}" in
    --packed) part=packed ;;
    --windows) part=windows ;;
    --gloo) part=packed gloo=1 ;;
    --one-gpu) part=packed one=1 ;;
    "") ;;
    *) echo "usage: scripts/ddp-check.sh [--packed | --windows | --gloo | --one-gpu | --cpu]"; exit 2 ;;
esac
PACKED_STOP_AFTER=${PACKED_STOP_AFTER:-$([ "$gloo" = 1 ] && echo 60 || echo 300)}
torchrun=("$py" -m torch.distributed.run --standalone)

rm -rf "$WORK" && mkdir -p "$WORK/site"
if ls "$DIR"/pinring-*.whl >/dev/null 2>&1; then
    "$py" -m zipfile -e "$DIR"/pinring-*.whl "$WORK/site" || exit 1
    export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"
elif ! "$py" -c 'import pinring' 2>/dev/null; then
    echo "no wheel in $DIR and no pinring for $py: run scripts/python-gpu.sh --build first"
    exit 2
fi
export NCCL_NVLS_ENABLE=0
: >"$LOG"
if [ "$gloo" = 1 ]; then
    echo "=== gloo on cpu: $(nproc) core(s), $("$py" -c 'import torch; print("torch", torch.__version__)')" | tee -a "$LOG"
else
    nvidia-smi --query-gpu=index,name --format=csv,noheader 2>&1 | tee -a "$LOG"
fi
rc=0
t() { date +%s; }

if [ "$part" != packed ]; then
    common=(--ddp --synthetic "$WORK/data" --epochs 1 --batch 32 --seq-len 256 --log-every 100)
    start=$(t)
    echo "=== run 1: 2 GPUs, stop after $STOP_AFTER steps, save" | tee -a "$LOG"
    "${torchrun[@]}" --nproc_per_node=2 python/examples/train_gpt.py "${common[@]}" \
        --check --stop-after "$STOP_AFTER" --save "$WORK/ckpt.pt" --ids-out "$WORK/ids-run1.npy" 2>&1 | tee -a "$LOG"
    rc1=${PIPESTATUS[0]}
    mid=$(t)
    echo "=== run 2: 1 GPU, resume, finish the epoch, verify exactly-once" | tee -a "$LOG"
    "${torchrun[@]}" --nproc_per_node=1 python/examples/train_gpt.py "${common[@]}" \
        --resume "$WORK/ckpt.pt" --ids-out "$WORK/ids-run2.npy" --verify "$WORK/ids-run1.npy" 2>&1 | tee -a "$LOG"
    rc2=${PIPESTATUS[0]}
    echo "windows: run 1 (2 GPUs): exit $rc1, $((mid - start)) s wall; run 2 (1 GPU): exit $rc2, $(($(t) - mid)) s wall" >>"$LOG.runs"
    [ "$rc1" -eq 0 ] && [ "$rc2" -eq 0 ] || rc=1
fi

if [ "$part" != windows ]; then
    if [ "$gloo" = 1 ]; then
        packed=(--ddp --packed --backend gloo --device cpu --synthetic "$WORK/mix" --synthetic-shards 2
            --synthetic-tokens-per-shard 160000 --tokens-per-batch 256 --max-seq-len 128 --layers 2 --d-model 64
            --threads 1 --lr 3e-3 --log-every 20 --ids-out "$WORK/ids")
        where=("2 processes (gloo, cpu)" "1 process (gloo, cpu)")
    elif [ "$one" = 1 ]; then
        packed=(--ddp --packed --backend gloo --synthetic "$WORK/mix" --tokens-per-batch 1024
            --max-seq-len 256 --lr 3e-3 --log-every 50 --ids-out "$WORK/ids")
        where=("2 processes on 1 GPU (gloo)" "1 process on 1 GPU (gloo)")
    else
        packed=(--ddp --packed --synthetic "$WORK/mix" --tokens-per-batch 1024 --max-seq-len 256 --lr 3e-3
            --log-every 50 --ids-out "$WORK/ids")
        where=("2 GPUs (NCCL)" "1 GPU")
    fi
    start=$(t)
    echo "=== run 3: packed mixture on ${where[0]}, stop after $PACKED_STOP_AFTER steps, save" | tee -a "$LOG"
    "${torchrun[@]}" --nproc_per_node=2 python/examples/train_gpt.py "${packed[@]}" --run-name 1 \
        --stop-after "$PACKED_STOP_AFTER" --save "$WORK/mix.pt" 2>&1 | tee -a "$LOG"
    rc3=${PIPESTATUS[0]}
    mid=$(t)
    echo "=== run 4: packed mixture on ${where[1]}, resume to the end of the smaller source's epoch" | tee -a "$LOG"
    "${torchrun[@]}" --nproc_per_node=1 python/examples/train_gpt.py "${packed[@]}" --run-name 2 \
        --resume "$WORK/mix.pt" 2>&1 | tee -a "$LOG"
    rc4=${PIPESTATUS[0]}
    end=$(t)
    echo "=== exactly-once over the logged document ids" | tee -a "$LOG"
    "$py" python/examples/check_ddp_run.py --ids "$WORK/ids" --weights 0.7 0.3 \
        --data "$WORK/mix/a/train_*.bin" "$WORK/mix/b/train_*.bin" 2>&1 | tee -a "$LOG"
    rc5=${PIPESTATUS[0]}
    echo "packed mixture: run 3 (${where[0]}): exit $rc3, $((mid - start)) s wall; run 4 (${where[1]}): exit $rc4, $((end - mid)) s wall; check: exit $rc5" >>"$LOG.runs"
    [ "$rc3" -eq 0 ] && [ "$rc4" -eq 0 ] && [ "$rc5" -eq 0 ] || rc=1
fi

{
    echo "=== summary"
    grep -E "^(per-rank (batches|steps)|loader state|exactly-once|loss |resumed from|  (ok  |FAIL)|documents delivered|runs:)" "$LOG"
    cat "$LOG.runs"
} | tee "$LOG.summary"
cat "$LOG.summary" >>"$LOG"
[ -n "${OUT:-}" ] && cp "$LOG" "$OUT/"
exit "$rc"
