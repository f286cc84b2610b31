#!/usr/bin/env bash
# Model-checks the slot protocol with loom, exactly as CI runs it.
#
# The models (loom-tests/, a workspace member) run pinring's own feeder, decode workers,
# copy thread, consumer and Batch::release/drop on loom threads against the model device,
# at LOOM_MAX_PREEMPTIONS (2 unless set; a model may cap it, see MODELS in
# loom-tests/src/models.rs), and once more with each seeded protocol bug, which must fail
# with its invariant. Every model runs in a process of its own (loom-tests/tests/models.rs);
# LOOM_JOBS of them at once (2 unless set). Each prints a MODEL line with the interleavings
# it explored and its time. Builds into target/loom so that the cfg does not invalidate
# the normal build. Arguments go to the test binary (a filter such as model_6).
set -euo pipefail
cd "$(dirname "$0")/.."

export RUSTFLAGS="--cfg pinring_loom"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-target/loom}"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
export RUST_BACKTRACE=0

# The full output goes to loom.log; tee needs its folder before cargo makes it.
mkdir -p "$CARGO_TARGET_DIR"
start=$(date +%s)
# The summary line comes also when a model fails: the status is cargo's, taken after.
set +e
cargo test --release --locked -p pinring-loom-tests --test models -- \
    --test-threads="${LOOM_JOBS:-2}" --nocapture "$@" 2>&1 | tee "${CARGO_TARGET_DIR}/loom.log" |
    grep -E '^(MODEL|test |failures|---- |thread |model .* (failed|accepted))|test result'
status=${PIPESTATUS[0]}
set -e
echo "loom: LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS, $(($(date +%s) - start)) s in all (build included)"
exit "$status"
