#!/usr/bin/env bash
# The cuda backend's GPU suite (examples/gpu_check.rs + kernels/gpu_check.cu) and the GPU
# benchmark (examples/gpu_bench.rs + benches/torch_dataloader.py).
#
#   scripts/gpu-check.sh --build   on a machine with Rust (no GPU needed): builds the suite,
#                                  the benchmark and make_shard into .gpu/ (git-ignored
#                                  through .git/info/exclude)
#   scripts/gpu-check.sh --run     on the GPU machine (no Rust needed; nvcc optional): runs
#                                  the suite, then the benchmark, and prints one table last
#   scripts/gpu-check.sh --bench   on the GPU machine: the benchmark alone, same table
#
# Build and run on the same architecture (x86-64 both). --run exits non-zero if a check
# fails or a suite process dies (benchmark targets missed are reported, not failures; a
# benchmark that cannot run is). With $OUT set, the full log and the PTX are copied there.
# The benchmark writes a 100 Mi-token shard (200 MB) under $BENCH_DIR (default
# /tmp/pinring-bench) and compares with PyTorch when python3 has torch.
set -uo pipefail
cd "$(dirname "$0")/.."
DIR=.gpu
LOG="$DIR/gpu_check.log"
PTX="$DIR/gpu_check.ptx"
BENCH_DIR=${BENCH_DIR:-/tmp/pinring-bench}

build() {
    cargo build --release --example gpu_check --example gpu_bench --example make_shard || exit 1
    mkdir -p "$DIR"
    for exe in gpu_check gpu_bench make_shard; do
        cp "target/release/examples/$exe" "$DIR/"
        strip "$DIR/$exe" 2>/dev/null || true
    done
    mkdir -p .git/info
    grep -qxF "/$DIR/" .git/info/exclude 2>/dev/null || echo "/$DIR/" >>.git/info/exclude
    echo "built $DIR/{gpu_check,gpu_bench,make_shard} ($(du -ch "$DIR"/gpu_check "$DIR"/gpu_bench "$DIR"/make_shard | tail -1 | cut -f1)); next, on the GPU machine (with $DIR): scripts/gpu-check.sh --run"
}

ptx() {
    if command -v nvcc >/dev/null; then
        nvcc -ptx -arch=compute_75 kernels/gpu_check.cu -o "$PTX" || exit 1
    elif [ -f kernels/gpu_check.ptx ]; then
        cp kernels/gpu_check.ptx "$PTX"
    else
        echo "need nvcc or kernels/gpu_check.ptx"; exit 2
    fi
}

RC_SUITE=""
suite() {
    [ -x "$DIR/gpu_check" ] || { echo "no $DIR/gpu_check: run scripts/gpu-check.sh --build first"; exit 2; }
    local rc_all rc_fault rc_memlock
    timeout 400 "$DIR/gpu_check" all --ptx "$PTX" 2>&1 | tee -a "$LOG"; rc_all=${PIPESTATUS[0]}
    # Own process: the fault is sticky and kills the context.
    timeout 60 "$DIR/gpu_check" fault --ptx "$PTX" 2>&1 | tee -a "$LOG"; rc_fault=${PIPESTATUS[0]}
    # Own process: a 64 KiB locked-memory limit (informational).
    (ulimit -l 64 && timeout 60 "$DIR/gpu_check" memlock) 2>&1 | tee -a "$LOG"; rc_memlock=${PIPESTATUS[0]}
    RC_SUITE="all:$rc_all fault:$rc_fault memlock:$rc_memlock"
}

RC_BENCH=""
bench() {
    [ -x "$DIR/gpu_bench" ] && [ -x "$DIR/make_shard" ] || { echo "no $DIR/gpu_bench: run scripts/gpu-check.sh --build first"; exit 2; }
    local shard="$BENCH_DIR/train_000.bin" torch="$BENCH_DIR/torch.tsv" rc_shard rc_torch rc_bench
    mkdir -p "$BENCH_DIR"
    : >"$torch"
    timeout 120 "$DIR/make_shard" "$shard" 104857600 7 2>&1 | tee -a "$LOG"; rc_shard=${PIPESTATUS[0]}
    if python3 -c 'import torch' 2>/dev/null; then
        # The peers first, in their own process; gpu_bench puts them in its rows.
        timeout 300 python3 benches/torch_dataloader.py --shard "$shard" 2>&1 | tee -a "$LOG" "$torch"
        rc_torch=${PIPESTATUS[0]}
    else
        echo "RESULT	torch_peers	INFO	python3 has no torch: PyTorch peers not measured" | tee -a "$LOG"
        rc_torch=0
    fi
    timeout 300 "$DIR/gpu_bench" --ptx "$PTX" --shard "$shard" --torch "$torch" 2>&1 | tee -a "$LOG"
    rc_bench=${PIPESTATUS[0]}
    rm -f "$shard"
    RC_BENCH="make_shard:$rc_shard torch:$rc_torch gpu_bench:$rc_bench"
}

# The one table, last: the suite's checks, then the benchmark's rows.
report() {
    [ -n "${OUT:-}" ] && cp "$LOG" "$PTX" "$OUT/" 2>/dev/null
    echo
    echo "== pinring cuda backend: GPU suite and benchmark =="
    grep '^GPU: ' "$LOG" | head -1
    awk -F'\t' '$1=="RESULT" { d=$4; if (length(d) > 100) d=substr(d,1,97) "..."; printf "%-34s %-4s  %s\n", $2, $3, d }' "$LOG"
    local p
    for p in $RC_SUITE $RC_BENCH; do
        [ "${p#*:}" = 0 ] || printf "%-34s %-4s  %s\n" "process ${p%%:*}" FAIL "exit status ${p#*:}"
    done
    if grep -q $'^ROW\t' "$LOG"; then
        echo "benchmark (one process; GB = 1e9 B, GiB = 2^30 B; anchors: earlier runs on the lent H100):"
        awk -F'\t' '$1=="ROW" { printf "  %-34s %-26s %-54s %-14s %s\n", $2, $3, $4, $5, $6 }' "$LOG"
    fi
    local pass fail met missed
    pass=$(grep -c $'^RESULT\t[^\t]*\tPASS' "$LOG")
    fail=$(grep -c $'^RESULT\t[^\t]*\tFAIL' "$LOG")
    met=$(grep -c $'^ROW\t.*\tyes$' "$LOG")
    missed=$(grep -c $'^ROW\t.*\tNO$' "$LOG")
    for p in $RC_SUITE $RC_BENCH; do [ "${p#*:}" = 0 ] || fail=$((fail + 1)); done
    echo "passed $pass, failed $fail; benchmark targets met $met, missed $missed"
    [ "$fail" = 0 ]
}

start() {
    mkdir -p "$DIR"
    : >"$LOG"
    ptx
    nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current \
        --format=csv,noheader 2>&1 | sed 's/^/GPU: /' | tee -a "$LOG"
}

case "${1:-}" in
--build) build ;;
--run) start; suite; bench; report ;;
--bench) start; bench; report ;;
*) echo "usage: scripts/gpu-check.sh --build | --run | --bench"; exit 2 ;;
esac
