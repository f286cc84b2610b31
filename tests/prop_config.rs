//! Property tests of `ConfigBuilder::build` (the proptest twin of the `config` fuzz
//! target; the property itself is in `fuzz/harness/config.rs`): arbitrary builder inputs
//! give `Ok` or a justified `ConfigError`, never a panic or an overflow; an `Ok` config's
//! sizes respect the budgets; starting a small `Ok` config allocates nothing larger.

#[path = "../fuzz/harness/config.rs"]
mod config;
#[path = "common/fuzz_twin.rs"]
mod fuzz_twin;

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use arbitrary::{Arbitrary, Unstructured};
use fuzz_twin::{assert_each_reached, seeds};
use pinring::{decode_fn, Config, Pipeline};
use proptest::prelude::*;

#[global_allocator]
static ALLOC: config::Tracking = config::Tracking;

/// The input the fuzz target makes of `data` (draws past its end read zeros: never fails).
fn input(data: &[u8]) -> config::ConfigInput {
    config::ConfigInput::arbitrary(&mut Unstructured::new(data)).expect("draws never fail")
}

/// The allocation check watches the whole process: tests of this file run one at a time
/// (each holds this for its body), so no other test allocates while one is measured.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Arbitrary builder inputs build or are rejected with a justified error. The whole run
/// holds [`serial`] (not each case): proptest's own work between cases (drawing, shrinking,
/// the regression file) allocates too, and must not land in another test's measurement.
#[test]
fn any_builder_input_builds_or_is_rejected_with_a_justified_error() {
    let _serial = serial();
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(1024));
    let result = runner.run(&proptest::collection::vec(any::<u8>(), 0..48), |data| {
        config::check(&input(&data)).map_err(TestCaseError::fail)?;
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// The byte decoding reaches every outcome often enough for the property to mean
/// something: rejections, accepted configs, and started pipelines.
#[test]
fn the_config_property_reaches_every_outcome() {
    let _serial = serial();
    assert_each_reached(
        0x2545_f491_4f6c_dd1d,
        400,
        |bytes| config::check(&input(&bytes.bytes(40))).unwrap(),
        &[
            (config::Reached::Rejected, 40),
            (config::Reached::Built, 5),
            (config::Reached::Started, 40),
        ],
    );
}

/// Found by the `config` fuzz target: `Pipeline`'s drop computed `now + shutdown_timeout`
/// and `pop` `now + pop_timeout` with `Instant + Duration`, which panics when the sum does
/// not fit (`Duration::MAX`); the drop's panic aborted the process. Such a timeout now
/// means no deadline.
#[test]
fn timeouts_too_long_for_an_instant_mean_no_deadline() {
    let _serial = serial();
    for (pop, shutdown) in [
        (Duration::MAX, Duration::MAX),
        (Duration::MAX, Duration::ZERO),
    ] {
        let config = Config::builder()
            .batch_size(2)
            .bytes_per_sample(8)
            .decode_threads(1)
            .pop_timeout(pop)
            .shutdown_timeout(shutdown)
            .build()
            .unwrap();
        let decoder = decode_fn(|id: u32, out: &mut [u8]| {
            out.fill(id as u8);
            Ok(())
        });
        let mut pipeline = Pipeline::new(config, decoder, 0..5u32).unwrap();
        let mut batches = 0;
        while let Some(batch) = pipeline.pop().unwrap() {
            assert_eq!(batch.bytes()[0], batch.seq() as u8 * 2);
            batches += 1;
        }
        assert_eq!(batches, 3);
        drop(pipeline);
    }
}

/// Found by the config property: `device_slots(16383)` with 5-byte batches passed every
/// budget (82 kB of device memory) and then took 512 kB of slot bookkeeping in one
/// allocation (about 250 bytes per slot that no budget counts; `device_slots(1 << 30)`
/// would have asked for hundreds of GB). Device slots are now capped.
#[test]
fn device_slots_are_capped_so_their_bookkeeping_stays_small() {
    let _serial = serial();
    let input = |n| config::ConfigInput {
        batch_size: Some(1),
        batch_bytes: Some(5),
        device_slots: Some(n),
        decode_threads: Some(1),
        ..Default::default()
    };
    assert_eq!(config::check(&input(16383)), Ok(config::Reached::Rejected));
    assert_eq!(
        config::check(&input(Config::MAX_DEVICE_SLOTS)),
        Ok(config::Reached::Started)
    );
    let over = Config::builder()
        .batch_size(1)
        .batch_bytes(5)
        .device_slots(Config::MAX_DEVICE_SLOTS + 1)
        .build();
    assert!(
        matches!(
            over,
            Err(pinring::ConfigError::TooMany {
                field: "device_slots",
                ..
            })
        ),
        "{over:?}"
    );
}

/// The harness's model agrees with a few hand-checked inputs, so the property cannot
/// pass by rejecting or accepting everything.
#[test]
fn the_config_model_accepts_and_rejects_known_inputs() {
    let _serial = serial();
    let ok = config::ConfigInput {
        batch_size: Some(4),
        bytes_per_sample: Some(100),
        ..Default::default()
    };
    config::check(&ok).unwrap();
    assert!(ok_builds(&ok));
    for bad in [
        config::ConfigInput {
            batch_size: None,
            ..ok.clone()
        },
        config::ConfigInput {
            batch_bytes: Some(400),
            ..ok.clone()
        },
        config::ConfigInput {
            bytes_per_sample: Some(usize::MAX),
            ..ok.clone()
        },
        config::ConfigInput {
            device_budget: Some(799),
            ..ok.clone()
        },
        config::ConfigInput {
            host_slots: Some(0),
            ..ok.clone()
        },
    ] {
        config::check(&bad).unwrap();
        assert!(!ok_builds(&bad), "{bad:?} must be rejected");
    }
}

fn ok_builds(input: &config::ConfigInput) -> bool {
    input.builder().build().is_ok()
}

/// The checked-in seeds of the fuzz target pass.
#[test]
fn the_fuzz_seeds_pass() {
    let _serial = serial();
    let mut reached = std::collections::HashSet::new();
    for (path, data) in seeds("config") {
        let input = input(&data);
        reached.insert(config::check(&input).unwrap_or_else(|e| panic!("{path:?}: {e}")));
    }
    assert!(reached.contains(&config::Reached::Started), "{reached:?}");
}
