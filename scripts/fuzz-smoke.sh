#!/usr/bin/env bash
# Fuzz smoke run: builds the cargo-fuzz targets in fuzz/ and runs each for about a minute
# from its checked-in seeds (fuzz/corpus/<target>/). A crash, a failed property, a
# timeout or an out-of-memory fails the run and leaves the reproducer in
# fuzz/artifacts/<target>/ (replay: cd fuzz && cargo +nightly fuzz run -O -a -s none
# <target> artifacts/<target>/<file>). New inputs a run finds go to fuzz/work/<target>/
# (ignored by git), never into the seeds.
#
# Settings (environment):
#   FUZZ_SECONDS    seconds per target (default 55: with a fresh build, ~4 minutes in all
#                   on 2 cores)
#   FUZZ_TARGETS    targets to run (default: every target in fuzz/Cargo.toml)
#   FUZZ_SANITIZER  cargo-fuzz sanitizer (default none: the protocol target spawns
#                   threads per input and runs ~10x faster without ASan; use `address`
#                   for a slower, deeper run)
#
# Needs nightly (libFuzzer's instrumentation flags); where the machine has no nightly
# toolchain, stable is used with RUSTC_BOOTSTRAP=1. Installs cargo-fuzz if absent.
set -euo pipefail

cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-55}
sanitizer=${FUZZ_SANITIZER:-none}
targets=${FUZZ_TARGETS:-$(sed -n 's/^name = "\([a-z_]*\)"$/\1/p' fuzz/Cargo.toml | grep -v '^pinring-fuzz$')}

if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    cargo=(cargo +nightly)
else
    echo "fuzz-smoke: no nightly toolchain; using stable with RUSTC_BOOTSTRAP=1"
    export RUSTC_BOOTSTRAP=1
    cargo=(cargo)
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz-smoke: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

cd fuzz
# Release code with debug assertions and overflow checks (-O -a): fast, and an overflow
# or a failed debug_assert! in the crate is a crash.
flags=(-O -a -s "$sanitizer")
started=$(date +%s)
"${cargo[@]}" fuzz build "${flags[@]}"
echo "fuzz-smoke: built in $(($(date +%s) - started)) s"

# Input size limits per target (libFuzzer's default is 4096).
max_len() {
    case $1 in
        config) echo 64 ;;
        protocol) echo 256 ;;
        *) echo 4096 ;;
    esac
}

# -detect_leaks=0: with ASan, LeakSanitizer checks right after each input, while the
# pipeline's detached threads (rayon workers, cpu streams) may still be exiting; the
# memory their thread-locals hold is reported as leaked though it is freed moments later.
extra=()
[ "$sanitizer" = none ] || extra+=(-detect_leaks=0)

mkdir -p logs
summary=()
for target in $targets; do
    mkdir -p "work/$target" "corpus/$target"
    log="logs/$target.log"
    echo "fuzz-smoke: $target for ${seconds} s"
    status=0
    "${cargo[@]}" fuzz run "${flags[@]}" "$target" "work/$target" "corpus/$target" -- \
        -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
        -max_len="$(max_len "$target")" -len_control=0 -print_final_stats=1 ${extra[@]+"${extra[@]}"} \
        >"$log" 2>&1 || status=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    if [ "$status" -ne 0 ]; then
        echo "fuzz-smoke: $target FAILED (exit $status); from $log:"
        grep -v '^#[0-9]' "$log" | grep -m1 -A12 -E 'panicked|ERROR: libFuzzer|==ERROR' || true
        grep -E '^stat::|Test unit written' "$log" || true
        echo "fuzz-smoke: reproducer(s) in fuzz/artifacts/$target/:"
        ls -l "artifacts/$target" 2>/dev/null || true
        exit 1
    fi
    summary+=("$target: ${execs:-?} executions in ${seconds} s (${rate:-?}/s), no crash")
    echo "fuzz-smoke: ${summary[-1]}"
done
echo "fuzz-smoke: all passed in $(($(date +%s) - started)) s"
printf '  %s\n' "${summary[@]}"
