#!/usr/bin/env bash
# Model-checks the slot protocol with loom (loom-tests/), exactly as CI runs it.
#
# Every model runs pinring's own feeder, decode dispatcher, copy thread, consumer and
# Batch::release/drop on loom threads against the model device, at LOOM_MAX_PREEMPTIONS
# (3 unless set), and once more with a seeded protocol bug that loom must reject. Each model
# prints the interleavings it explored and its time. Builds into target/loom so that the
# cfg does not invalidate the normal build.
set -euo pipefail
cd "$(dirname "$0")/.."

export RUSTFLAGS="--cfg pinring_loom"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/loom}"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
export RUST_BACKTRACE=0

start=$(date +%s)
cargo test -p loom-tests --release --locked -- --nocapture "$@"
echo "loom: LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS, $(($(date +%s) - start)) s in all (build included)"
