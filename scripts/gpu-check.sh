#!/usr/bin/env bash
# The GPU checks, built here and run on the GPU machine in one call:
#   - the cuda backend's GPU suite (tests/gpu, a cargo test target; every check is
#     #[ignore]d without a GPU and run here with --include-ignored);
#   - the GPU benchmark (benches/gpu/, with PyTorch peers from benches/torch_dataloader.py);
#   - the Python package's GPU tests, benchmark and example (scripts/python-gpu.sh).
#
#   scripts/gpu-check.sh --build   on a machine with Rust (no GPU needed): builds the suite,
#                                  the benchmark, make_shard and the Python wheels into .gpu/
#                                  (git-ignored through .git/info/exclude)
#   scripts/gpu-check.sh --run     on the GPU machine (no Rust needed), from the repo root
#                                  with .gpu/ carried: the suite, the benchmark, the Python
#                                  part; one table last
#   scripts/gpu-check.sh --suite | --bench | --python   one part alone, same table
#
# Build and run on the same architecture (x86-64 both). --run exits non-zero if a check
# fails or a process dies (benchmark targets missed are reported, not failures). With $OUT
# set, the logs are copied there. The benchmark writes a 100 Mi-token shard (200 MB) under
# $BENCH_DIR (default /tmp/pinring-bench).
set -uo pipefail
cd "$(dirname "$0")/.."
DIR=.gpu
LOG="$DIR/gpu_check.log"
BENCH_DIR=${BENCH_DIR:-/tmp/pinring-bench}

# The executable cargo built for `$@` (a --no-run build with JSON messages).
built() {
    cargo "$@" --no-run --message-format=json 2>/dev/null |
        python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable"):
        print(m["executable"])' | tail -1
}

build() {
    set -e
    mkdir -p "$DIR"
    cargo build --release -p pinring-examples --example make_shard
    cp target/release/examples/make_shard "$DIR/"
    cp "$(built test --release --test gpu)" "$DIR/gpu_suite"
    cp "$(built bench -p pinring-benches --bench gpu)" "$DIR/gpu_bench"
    strip "$DIR/gpu_suite" "$DIR/gpu_bench" "$DIR/make_shard" 2>/dev/null || true
    local exclude
    exclude=$(git rev-parse --git-path info/exclude)
    mkdir -p "$(dirname "$exclude")"
    grep -qxF "/$DIR/" "$exclude" 2>/dev/null || echo "/$DIR/" >>"$exclude"
    scripts/python-gpu.sh --build
    echo "built $DIR/ ($(du -sh "$DIR" | cut -f1)); next, on the GPU machine (with $DIR): scripts/gpu-check.sh --run"
}

RCS=""
suite() {
    [ -x "$DIR/gpu_suite" ] || { echo "no $DIR/gpu_suite: run scripts/gpu-check.sh --build first"; exit 2; }
    timeout 540 "$DIR/gpu_suite" --include-ignored --skip _child --test-threads=1 --nocapture 2>&1 | tee -a "$LOG"
    RCS="$RCS suite:${PIPESTATUS[0]}"
}

bench() {
    [ -x "$DIR/gpu_bench" ] && [ -x "$DIR/make_shard" ] || { echo "no $DIR/gpu_bench: run scripts/gpu-check.sh --build first"; exit 2; }
    local shard="$BENCH_DIR/train_000.bin" torch="$BENCH_DIR/torch.tsv" rc
    mkdir -p "$BENCH_DIR"
    : >"$torch"
    timeout 120 "$DIR/make_shard" "$shard" 104857600 7 2>&1 | tee -a "$LOG"
    RCS="$RCS make_shard:${PIPESTATUS[0]}"
    if python3 -c 'import torch' 2>/dev/null; then
        # The peers first, in their own process; the benchmark puts them in its rows.
        timeout 300 python3 benches/torch_dataloader.py --shard "$shard" 2>&1 | tee -a "$LOG" "$torch"
        RCS="$RCS torch:${PIPESTATUS[0]}"
    else
        echo "RESULT	torch_peers	INFO	python3 has no torch: PyTorch peers not measured" | tee -a "$LOG"
    fi
    timeout 420 "$DIR/gpu_bench" --shard "$shard" --torch "$torch" 2>&1 | tee -a "$LOG"
    rc=${PIPESTATUS[0]}
    RCS="$RCS gpu_bench:$rc"
    rm -f "$shard"
}

python_part() {
    scripts/python-gpu.sh --run 2>&1 | tee "$DIR/python.log"
    RCS="$RCS python:${PIPESTATUS[0]}"
}

# The one table, last.
report() {
    [ -n "${OUT:-}" ] && cp "$LOG" "$DIR"/python.log "$OUT/" 2>/dev/null
    echo
    echo "== pinring on the GPU: suite, benchmark, Python =="
    grep '^GPU: ' "$LOG" | head -1
    # Each check's RESULT line (printed on success), then the checks libtest says failed.
    awk -F'\t' '$1=="RESULT" { d=$4; if (length(d) > 110) d=substr(d,1,107) "..."; printf "%-46s %-4s  %s\n", $2, $3, d }' "$LOG"
    sed -n '/^failures:$/,/^test result/p' "$LOG" | grep -E '^    [a-z_]+::' | sed 's/^ *//; s/.*:://' |
        while read -r name; do printf "%-46s FAIL  (see the log)\n" "$name"; done
    if grep -q $'^ROW\t' "$LOG"; then
        echo "benchmark (one process; GB = 1e9 B, GiB = 2^30 B):"
        awk -F'\t' '$1=="ROW" { printf "  %-40s %-28s %-58s %-16s %s\n", $2, $3, $4, $5, $6 }' "$LOG"
    fi
    if [ -f "$DIR/python.log" ]; then
        sed -n '/^== pinring Python package on the GPU ==/,$p' "$DIR/python.log"
    fi
    local p fail=0
    for p in $RCS; do [ "${p#*:}" = 0 ] || { echo "process ${p%%:*}: exit status ${p#*:}"; fail=1; }; done
    echo "checks: $(grep -cE $'^RESULT\t[^\t]*\tPASS' "$LOG") passed, $(grep -cE '^test result: .*[1-9][0-9]* failed' "$LOG") suite runs with failures; benchmark targets met $(grep -c $'^ROW\t.*\tyes$' "$LOG"), missed $(grep -c $'^ROW\t.*\tNO$' "$LOG")"
    [ "$fail" = 0 ]
}

start() {
    mkdir -p "$DIR"
    : >"$LOG"
    nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current \
        --format=csv,noheader 2>&1 | sed 's/^/GPU: /' | tee -a "$LOG"
}

case "${1:-}" in
--build) build ;;
--run) start; suite; bench; python_part; report ;;
--suite) start; suite; report ;;
--bench) start; bench; report ;;
--python) start; python_part; report ;;
*) echo "usage: scripts/gpu-check.sh --build | --run | --suite | --bench | --python"; exit 2 ;;
esac
