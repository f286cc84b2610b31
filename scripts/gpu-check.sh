#!/usr/bin/env bash
# The cuda backend's GPU suite (examples/gpu_check.rs + kernels/gpu_check.cu).
#
#   scripts/gpu-check.sh --build   on a machine with Rust (no GPU needed): builds the suite
#                                  into .gpu/ (git-ignored through .git/info/exclude)
#   scripts/gpu-check.sh --run     on the GPU machine (no Rust needed; nvcc optional):
#                                  runs it and prints a pass/fail table last
#
# Build and run on the same architecture (x86-64 both). --run exits non-zero if a check
# fails or a suite process dies. With $OUT set, the full log and the PTX are copied there.
set -uo pipefail
cd "$(dirname "$0")/.."
DIR=.gpu

build() {
    cargo build --release --example gpu_check || exit 1
    mkdir -p "$DIR"
    cp target/release/examples/gpu_check "$DIR/"
    strip "$DIR/gpu_check" 2>/dev/null || true
    mkdir -p .git/info
    grep -qxF "/$DIR/" .git/info/exclude 2>/dev/null || echo "/$DIR/" >>.git/info/exclude
    echo "built $DIR/gpu_check ($(du -h "$DIR/gpu_check" | cut -f1)); next, on the GPU machine (with $DIR): scripts/gpu-check.sh --run"
}

run() {
    [ -x "$DIR/gpu_check" ] || { echo "no $DIR/gpu_check: run scripts/gpu-check.sh --build first"; exit 2; }
    local ptx="$DIR/gpu_check.ptx" log="$DIR/gpu_check.log"
    if command -v nvcc >/dev/null; then
        nvcc -ptx -arch=compute_75 kernels/gpu_check.cu -o "$ptx" || exit 1
    elif [ -f kernels/gpu_check.ptx ]; then
        cp kernels/gpu_check.ptx "$ptx"
    else
        echo "need nvcc or kernels/gpu_check.ptx"; exit 2
    fi
    : >"$log"
    nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current \
        --format=csv,noheader 2>&1 | sed 's/^/GPU: /' | tee -a "$log"
    local rc_all rc_fault rc_memlock
    timeout 400 "$DIR/gpu_check" all --ptx "$ptx" 2>&1 | tee -a "$log"; rc_all=${PIPESTATUS[0]}
    # Own process: the fault is sticky and kills the context.
    timeout 60 "$DIR/gpu_check" fault --ptx "$ptx" 2>&1 | tee -a "$log"; rc_fault=${PIPESTATUS[0]}
    # Own process: a 64 KiB locked-memory limit (informational).
    (ulimit -l 64 && timeout 60 "$DIR/gpu_check" memlock) 2>&1 | tee -a "$log"; rc_memlock=${PIPESTATUS[0]}
    if [ -n "${OUT:-}" ]; then cp "$log" "$ptx" "$OUT/" 2>/dev/null; fi

    echo
    echo "== pinring cuda backend: GPU suite =="
    grep '^GPU: ' "$log" | head -1
    awk -F'\t' '$1=="RESULT" { d=$4; if (length(d) > 110) d=substr(d,1,107) "..."; printf "%-30s %-4s  %s\n", $2, $3, d }' "$log"
    for p in "all:$rc_all" "fault:$rc_fault" "memlock:$rc_memlock"; do
        [ "${p#*:}" = 0 ] || printf "%-30s %-4s  %s\n" "process ${p%%:*}" FAIL "exit status ${p#*:}"
    done
    echo "H2D, decoder writing nothing (median of 3; GB = 1e9 B):"
    awk -F'\t' '$1=="BW" { printf "  %3s MiB batches: pipeline %5s GB/s, raw cuMemcpyHtoDAsync %5s GB/s, ratio %s\n", $2, $3, $4, $5 }' "$log"
    local pass fail
    pass=$(grep -c $'^RESULT\t[^\t]*\tPASS' "$log")
    fail=$(grep -c $'^RESULT\t[^\t]*\tFAIL' "$log")
    [ "$rc_all$rc_fault$rc_memlock" = 000 ] || fail=$((fail + 1))
    echo "passed $pass, failed $fail"
    [ "$fail" = 0 ]
}

case "${1:-}" in
--build) build ;;
--run) run ;;
*) echo "usage: scripts/gpu-check.sh --build | --run"; exit 2 ;;
esac
