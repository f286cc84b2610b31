//! The criterion settings the cpu-backend criterion benches share (each includes this file
//! as a module): ten samples, a warm-up and measurement time of the bench's own, and the
//! command line's overrides on top.

use std::time::Duration;

use criterion::Criterion;

/// Ten samples, after `warm_up`, measured over `measurement`; then the command line's
/// settings (`cargo bench -- --sample-size ...`) over these.
pub fn ten_samples(warm_up: Duration, measurement: Duration) -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(warm_up)
        .measurement_time(measurement)
        .configure_from_args()
}
