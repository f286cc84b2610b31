#!/usr/bin/env bash
# candle on cuda fed by pinring (feature `candle-cuda`): built here, run on the GPU machine.
#
#   scripts/candle-cuda.sh --toolkit   here: the CUDA 13.0 pieces candle's build needs, from
#                                      PyPI (nvcc, nvvm, crt, cudart, cuBLAS, cuRAND, NVRTC,
#                                      cccl), into $CUDA_TOOLKIT (default target/cuda-13.0),
#                                      with a link stub of libcuda (its soname libcuda.so.1:
#                                      the driver's own is loaded at run time)
#   scripts/candle-cuda.sh --build     here: candle_train built with --features candle-cuda
#                                      into .gpu/candle/
#   scripts/candle-cuda.sh --run       on the GPU machine, with .gpu/ carried: trains on cuda,
#                                      stops, resumes, compares with the uninterrupted run and
#                                      with candle's llama2-c data path; exits non-zero if a
#                                      check fails
#
# candle's cuda build compiles its kernels with nvcc (candle-kernels) and links cuBLAS,
# cuRAND, NVRTC and cudart (cudarc's `dynamic-linking`), so a machine without the CUDA
# toolkit cannot build it; PyPI carries every piece of it. At run time the libraries come
# from the GPU machine: PyTorch's own nvidia-* packages (the same CUDA 13 sonames), or
# $CANDLE_CUDA_LIBS.
set -euo pipefail
cd "$(dirname "$0")/.."
TK=${CUDA_TOOLKIT:-$PWD/target/cuda-13.0}
OUTDIR=.gpu/candle

toolkit() {
    local wheels="$TK/wheels"
    mkdir -p "$wheels"
    python3 -m pip download --quiet --disable-pip-version-check --no-deps -d "$wheels" \
        "nvidia-cuda-nvcc==13.0.*" "nvidia-nvvm==13.0.*" "nvidia-cuda-crt==13.0.*" \
        "nvidia-cuda-runtime==13.0.*" "nvidia-cublas==13.0.*" "nvidia-cuda-nvrtc==13.0.*" \
        "nvidia-curand==10.4.*" "nvidia-cuda-cccl==13.0.*"
    for w in "$wheels"/*.whl; do python3 -m zipfile -e "$w" "$TK/unpacked"; done
    local root="$TK/unpacked/nvidia/cu13"
    chmod +x "$root"/bin/* "$root"/nvvm/bin/*
    for lib in cublas cublasLt cudart nvrtc; do ln -sf "lib$lib.so.13" "$root/lib/lib$lib.so"; done
    ln -sf libcurand.so.10 "$root/lib/libcurand.so"
    # A link stub: every entry point cudarc's driver bindings name, as empty functions.
    local cudarc
    cudarc=$(cargo metadata --format-version 1 --features candle-cuda 2>/dev/null |
        python3 -c 'import json,sys
m = json.load(sys.stdin)
print(next(p["manifest_path"] for p in m["packages"] if p["name"] == "cudarc" and p["version"].startswith("0.19")))')
    mkdir -p "$TK/stubs"
    grep -o 'fn cu[A-Za-z0-9_]*' "$(dirname "$cudarc")/src/driver/sys/mod.rs" | sort -u |
        sed 's/^fn \(.*\)/void \1(void) {}/' >"$TK/stubs/stub.c"
    gcc -shared -fPIC -o "$TK/stubs/libcuda.so" -Wl,-soname,libcuda.so.1 "$TK/stubs/stub.c"
    echo "toolkit in $TK ($(du -sh "$TK/unpacked" | cut -f1)); next: scripts/candle-cuda.sh --build"
}

build() {
    local root="$TK/unpacked/nvidia/cu13"
    [ -x "$root/bin/nvcc" ] || { echo "no toolkit in $TK: run scripts/candle-cuda.sh --toolkit first"; exit 2; }
    export CUDA_ROOT="$root" PATH="$root/bin:$PATH" CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
    export LIBRARY_PATH="$TK/stubs:$root/lib"
    export CARGO_TARGET_DIR=target/candle-cuda
    cargo build --locked --release -p pinring-examples --features candle-cuda \
        --example candle_train
    mkdir -p "$OUTDIR"
    cp "$CARGO_TARGET_DIR/release/examples/candle_train" "$OUTDIR/"
    strip "$OUTDIR/candle_train" 2>/dev/null || true
    local exclude
    exclude=$(git rev-parse --git-path info/exclude)
    grep -qxF "/.gpu/" "$exclude" 2>/dev/null || echo "/.gpu/" >>"$exclude"
    echo "built $OUTDIR ($(du -sh "$OUTDIR" | cut -f1)); next, on the GPU machine: scripts/candle-cuda.sh --run"
}

# The `step K loss L` lines of a run's output.
losses() { grep -E '^step [0-9]+ loss ' "$1" || true; }

run() {
    [ -x "$OUTDIR/candle_train" ] || { echo "no $OUTDIR/candle_train: run scripts/candle-cuda.sh --build first"; exit 2; }
    local libs=${CANDLE_CUDA_LIBS:-}
    if [ -z "$libs" ]; then
        libs=$(python3 -c 'import nvidia, os
print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))' 2>/dev/null || true)
    fi
    export LD_LIBRARY_PATH="${libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    WORK=$(mktemp -d)
    trap 'rm -rf "$WORK"' EXIT
    local work=$WORK
    # The candle test's data (examples/tests/candle.rs): x -> 5x + 3 mod 64, one step in ten
    # off by one, 30,000 tokens, as an llm.c shard.
    python3 - "$work/train_000.bin" <<'EOF'
import struct, sys
x, tokens = 1, []
for i in range(30000):
    x = (x * 5 + 3 + (1 if (i * 2654435761) % (1 << 32) % 10 == 0 else 0)) % 64
    tokens.append(x)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<256i", 20240520, 1, len(tokens), *([0] * 253)))
    f.write(struct.pack(f"<{len(tokens)}H", *tokens))
EOF
    local t="$OUTDIR/candle_train" data="$work/train_000.bin"
    failed=0
    local common=(--steps "${STEPS:-200}" --batch-size "${BATCH:-32}" --seq-len "${SEQ:-64}" --dim "${DIM:-64}")
    "$t" "${common[@]}" --device cuda --ids "$work/a.ids" --compare-llama2c "$data" >"$work/whole.out" || failed=1
    grep -v '^step' "$work/whole.out" || true
    "$t" "${common[@]}" --device cuda --ids "$work/b.ids" --stop-after 70 --save "$work/ckpt" "$data" >"$work/first.out" || failed=1
    "$t" "${common[@]}" --device cuda --ids "$work/b.ids" --save "$work/ckpt" --resume "$data" >"$work/second.out" || failed=1
    if [ "${CPU:-1}" = 0 ]; then
        echo "the cpu run skipped (CPU=0)"
    else
        "$t" "${common[@]}" --device cpu --ids "$work/c.ids" "$data" >"$work/cpu.out" || failed=1
    fi
    if cmp -s "$work/a.ids" "$work/b.ids"; then
        echo "resume on cuda: the batches are the uninterrupted run's ($(wc -l <"$work/a.ids") steps)"
    else
        echo "FAIL: resumed on cuda, other batches"; failed=1
    fi
    if diff <(losses "$work/whole.out") <(cat <(losses "$work/first.out") <(losses "$work/second.out")) >/dev/null; then
        echo "resume on cuda: every loss is the uninterrupted run's, bit for bit"
    else
        echo "FAIL: resumed on cuda, other losses"; failed=1
    fi
    if [ "${CPU:-1}" = 0 ]; then
        :
    elif cmp -s "$work/a.ids" "$work/c.ids"; then
        echo "cuda and cpu runs popped the same batches"
    else
        echo "FAIL: the cuda run popped other batches than the cpu run"; failed=1
    fi
    echo "losses, cuda then cpu, steps 1, 50, 100, 150, 200:"
    for f in whole $([ "${CPU:-1}" = 0 ] || echo cpu); do
        losses "$work/$f.out" | awk 'NR == 1 || NR % 50 == 0 { printf "%s ", $4 } END { print "" }'
    done
    cp "$work"/*.out "${OUT:-$work}/" 2>/dev/null || true
    return $failed
}

case "${1:-}" in
    --toolkit) toolkit ;;
    --build) build ;;
    --run) run ;;
    *) sed -n '2,20p' "$0"; exit 2 ;;
esac
