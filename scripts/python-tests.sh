#!/usr/bin/env bash
# The Python package's tests (python/tests, cpu backend; the GPU tests skip without torch
# and CUDA). Needs only Rust, gcc and python3 (3.10+) with pip and venv: it makes its own
# virtual environment, installs maturin, pytest, numpy, mfusepy and datatrove from PyPI, builds and
# installs the package with `pip install ./python`, checks the type stubs against the code,
# and runs pytest.
#
#   scripts/python-tests.sh [pytest args...]
#
# PINRING_VENV picks the environment's folder (default target/python-venv, reused between
# runs); PINRING_PY_PROFILE=release builds the extension optimized (default: dev, which
# compiles in about half the time and is what the tests need).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${PINRING_VENV:-target/python-venv}
PROFILE=${PINRING_PY_PROFILE:-dev}

if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
fi
VENV=$(cd "$VENV" && pwd)
PY="$VENV/bin/python"
# maturin's build backend runs the `maturin` it finds on PATH.
export PATH="$VENV/bin:$PATH"
"$PY" -m pip install --quiet --disable-pip-version-check "maturin>=1.9.4,<2" pytest numpy
# The FUSE file system that fails reads (python/tests/eio_fs.py; it also needs libfuse3 and
# /dev/fuse, and its tests skip with the reason without them).
"$PY" -m pip install --quiet --disable-pip-version-check "mfusepy>=3,<4" \
    || echo "mfusepy could not be installed: the tests of reads that fail will skip" >&2
# datatrove's own writer of `.ds` files (python/tests/test_formats.py checks pinring reads
# what it writes; torch-free: datatrove's core, tokenizers and huggingface-hub wheels).
"$PY" -m pip install --quiet --disable-pip-version-check "datatrove>=0.4" tokenizers \
    || echo "datatrove could not be installed: the test of its own writer will skip" >&2
# The build uses the environment's maturin (no isolated build env to download again).
"$PY" -m pip install --quiet --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps \
    --config-settings=build-args="--profile $PROFILE" ./python
"$PY" -c 'import pinring; print("pinring", pinring.__version__, "from", pinring.__file__)'
# The stand-ins of the stub attributes that the install above builds with (python/stub-attrs).
cargo test --quiet --locked -p pinring-stub-attrs
# The type stubs python/pinring/_pinring.pyi must be what the code generates
# (python/src/bin/stub_gen.rs, built with the `stubs` feature, which the install above
# leaves off; it links the interpreter's libpython).
LD_LIBRARY_PATH="$("$PY" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR") or "")')${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    PYO3_PYTHON="$PY" CARGO_TARGET_DIR=target/stub-gen \
    cargo run --quiet --locked --manifest-path python/Cargo.toml --features stubs --bin stub_gen -- --check
# From the repository root, so that python/pinring (the sources, without the compiled
# module) is not what `import pinring` finds.
exec "$PY" -m pytest -q python/tests "$@"
