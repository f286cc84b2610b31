#!/usr/bin/env bash
# The Python package on the GPU machine: its GPU tests, its benchmark and the GPT example.
#
#   scripts/python-gpu.sh --build   here (Rust, PyPI): the pinring wheel (release) and
#                                   pytest's wheels into .gpu/python/ (git-ignored through
#                                   .git/info/exclude, like scripts/gpu-check.sh's .gpu/)
#   scripts/python-gpu.sh --run     on the GPU machine, from the repo root with .gpu/ copied
#                                   along (no Rust, no network, no pip needed): the wheels
#                                   unpacked onto PYTHONPATH of the machine's python3 (with
#                                   its torch, numpy, cupy), then python/tests (GPU tests
#                                   included), python/benches/bench_loader.py,
#                                   python/benches/bench_documents.py,
#                                   python/examples/train_gpt.py --synthetic --check and
#                                   its --packed run against --reference (the losses step
#                                   for step), the same pair with --bigram (a bigram
#                                   embedding fed by bigram_inputs),
#                                   python/examples/cuda_graphs.py (a CUDA graph per
#                                   device slot against static.copy_, checked on the
#                                   device); the summary table last.
#
# PYTHON (default python3) is the interpreter whose site-packages hold torch (and cupy).
# The wheel is abi3 (CPython >= 3.10) for the architecture it is built on. --run exits
# non-zero if a test or the example fails (benchmark targets missed are reported, not
# failures). With $OUT set, the log is copied there. gpu_bench's rows, when
# .gpu/gpu_check.log has them (scripts/gpu-check.sh --run in the same session), are quoted
# beside the Python benchmark's.
set -uo pipefail
cd "$(dirname "$0")/.."
DIR=.gpu/python
LOG="$DIR/python_gpu.log"

build() {
    set -e
    mkdir -p "$DIR"
    local venv=target/python-build-venv
    [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "maturin>=1.9.4,<2"
    rm -f "$DIR"/pinring-*.whl
    # The `wheel` profile, as `pip install ./python` builds it (python/pyproject.toml).
    "$venv/bin/maturin" build --profile wheel --strip --manifest-path python/Cargo.toml --out "$DIR"
    # pytest and its dependencies, pure-Python wheels for the GPU machine's Python.
    "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
        --python-version 3.12 --dest "$DIR" pytest
    local exclude
    exclude=$(git rev-parse --git-path info/exclude)
    mkdir -p "$(dirname "$exclude")"
    grep -qxF "/.gpu/" "$exclude" 2>/dev/null || echo "/.gpu/" >>"$exclude"
    echo "built $(ls "$DIR"/*.whl | wc -l) wheels in $DIR; next, on the GPU machine (with .gpu/): scripts/python-gpu.sh --run"
}

run() {
    [ -n "$(ls "$DIR"/pinring-*.whl 2>/dev/null)" ] || { echo "no wheel in $DIR: run scripts/python-gpu.sh --build first"; exit 2; }
    : >"$LOG"
    local py=${PYTHON:-python3} site="$PWD/$DIR/site" rc_tests rc_bench rc_docbench rc_example rc_packed rc_graphs rows="" w
    # Wheels are zip files: unpacked onto PYTHONPATH, they need neither pip nor a venv, and
    # the interpreter keeps its own torch, numpy and cupy.
    rm -rf "$site" && mkdir -p "$site"
    "$py" -m zipfile -e "$DIR"/pinring-*.whl "$site" || exit 1
    if ! "$py" -c 'import pytest' 2>/dev/null; then
        for w in "$DIR"/*.whl; do
            case "$w" in */pinring-*) ;; *) "$py" -m zipfile -e "$w" "$site" || exit 1 ;; esac
        done
    fi
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
    "$py" -c 'import torch, pinring; print("GPU:", torch.cuda.get_device_name(0), "| torch", torch.__version__, "| pinring", pinring.__version__, pinring.__file__)' 2>&1 | tee -a "$LOG"
    timeout 900 "$py" -m pytest -v -s -rs python/tests 2>&1 | tee -a "$LOG"
    rc_tests=${PIPESTATUS[0]}
    [ -f .gpu/gpu_check.log ] && rows="--rust-rows .gpu/gpu_check.log"
    # shellcheck disable=SC2086
    timeout 600 "$py" python/benches/bench_loader.py $rows 2>&1 | tee -a "$LOG"
    rc_bench=${PIPESTATUS[0]}
    timeout 600 "$py" python/benches/bench_documents.py 2>&1 | tee -a "$LOG"
    rc_docbench=${PIPESTATUS[0]}
    timeout 600 "$py" python/examples/train_gpt.py --synthetic /tmp/pinring-gpt-syn --check 2>&1 | tee -a "$LOG"
    rc_example=${PIPESTATUS[0]}
    # Packed documents: pinring, then the faithful generator on the same model; the second
    # run compares its losses with the first's, step for step.
    rm -f /tmp/pinring-gpt-packed.npy
    timeout 600 "$py" python/examples/train_gpt.py --packed --synthetic /tmp/pinring-gpt-docs --steps 300 \
        --tokens-per-batch 4096 --max-seq-len 512 --schedule 150:8192:1024 --check --losses-out /tmp/pinring-gpt-packed.npy 2>&1 | tee -a "$LOG"
    rc_packed=${PIPESTATUS[0]}
    timeout 600 "$py" python/examples/train_gpt.py --packed --synthetic /tmp/pinring-gpt-docs --steps 300 \
        --tokens-per-batch 4096 --max-seq-len 512 --schedule 150:8192:1024 --reference --compare /tmp/pinring-gpt-packed.npy 2>&1 | tee -a "$LOG"
    [ "$rc_packed" = 0 ] && rc_packed=${PIPESTATUS[0]}
    # The same pair with a bigram embedding (issue 31): pinring's bigram_inputs field against
    # master's get_bigram_hash of the generator's inputs, the losses step for step.
    rm -f /tmp/pinring-gpt-bigram.npy
    timeout 600 "$py" python/examples/train_gpt.py --packed --bigram --synthetic /tmp/pinring-gpt-docs --steps 300 \
        --tokens-per-batch 4096 --max-seq-len 512 --schedule 150:8192:1024 --check --losses-out /tmp/pinring-gpt-bigram.npy 2>&1 | tee -a "$LOG"
    [ "$rc_packed" = 0 ] && rc_packed=${PIPESTATUS[0]}
    timeout 600 "$py" python/examples/train_gpt.py --packed --bigram --synthetic /tmp/pinring-gpt-docs --steps 300 \
        --tokens-per-batch 4096 --max-seq-len 512 --schedule 150:8192:1024 --reference --compare /tmp/pinring-gpt-bigram.npy 2>&1 | tee -a "$LOG"
    [ "$rc_packed" = 0 ] && rc_packed=${PIPESTATUS[0]}
    # CUDA graphs over the fixed device slots (issue 23): RESULT and ROW lines.
    timeout 600 "$py" python/examples/cuda_graphs.py 2>&1 | tee -a "$LOG"
    rc_graphs=${PIPESTATUS[0]}
    [ -n "${OUT:-}" ] && cp "$LOG" "$OUT/" 2>/dev/null

    echo
    echo "== pinring Python package on the GPU =="
    grep '^GPU: ' "$LOG" | head -1
    grep -E '(PASSED|FAILED|SKIPPED|ERROR)' "$LOG" | grep -E '^python/tests/' | sed 's/^/  /' | cut -c1-150
    grep -E '^(FAILED|ERROR) ' "$LOG" | sed 's/^/  /'
    grep -E '^=+ .*(passed|failed).* =+$' "$LOG" | tail -1
    if grep -q $'^ROW\t' "$LOG"; then
        echo "benchmark:"
        awk -F'\t' '$1=="ROW" { printf "  %-42s %-10s %-70s %-34s %s\n", $2, $3, $4, $5, $6 }' "$LOG"
    fi
    grep -E '^loss ' "$LOG" | tail -5
    grep -E '^compared with ' "$LOG" | tail -2
    grep -E $'^RESULT\tcuda_graphs\t' "$LOG" | tail -1
    echo "exit status: tests $rc_tests, benchmark $rc_bench, documents benchmark $rc_docbench, example $rc_example, packed example $rc_packed, cuda graphs $rc_graphs"
    [ "$rc_tests" = 0 ] && [ "$rc_example" = 0 ] && [ "$rc_packed" = 0 ] && [ "$rc_graphs" = 0 ]
}

case "${1:-}" in
--build) build ;;
--run) run ;;
*) echo "usage: scripts/python-gpu.sh --build | --run"; exit 2 ;;
esac
