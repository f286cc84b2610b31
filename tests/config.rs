//! Every invalid `Config` value gives its documented `ConfigError`; never a panic.

mod common;

use pinring::{Config, ConfigBuilder, ConfigError, Error, Pipeline};

fn base() -> ConfigBuilder {
    Config::builder().batch_size(4).bytes_per_sample(64)
}

fn err(b: ConfigBuilder) -> ConfigError {
    b.build().expect_err("config should be rejected")
}

#[test]
fn missing_values() {
    assert_eq!(
        err(Config::builder().bytes_per_sample(8)),
        ConfigError::Missing("batch_size")
    );
    assert_eq!(
        err(Config::builder().batch_size(8)),
        ConfigError::Missing("bytes_per_sample or batch_bytes")
    );
}

#[test]
fn zero_sizes_and_counts() {
    assert_eq!(err(base().batch_size(0)), ConfigError::Zero("batch_size"));
    assert_eq!(
        err(Config::builder().batch_size(4).bytes_per_sample(0)),
        ConfigError::Zero("bytes_per_sample")
    );
    assert_eq!(
        err(Config::builder().batch_size(4).batch_bytes(0)),
        ConfigError::Zero("batch_bytes")
    );
    assert_eq!(err(base().host_slots(0)), ConfigError::Zero("host_slots"));
    assert_eq!(
        err(base().device_slots(0)),
        ConfigError::Zero("device_slots")
    );
    assert_eq!(
        err(base().decode_threads(0)),
        ConfigError::Zero("decode_threads")
    );
}

#[test]
fn per_sample_and_per_batch_sizes_exclude_each_other_and_must_divide() {
    assert_eq!(
        err(base().batch_bytes(256)),
        ConfigError::Conflict("bytes_per_sample", "batch_bytes")
    );
    assert_eq!(
        err(Config::builder().batch_size(3).batch_bytes(100)),
        ConfigError::Indivisible {
            batch_bytes: 100,
            samples: 3
        }
    );
    let ok = Config::builder()
        .batch_size(3)
        .batch_bytes(300)
        .build()
        .unwrap();
    assert_eq!((ok.bytes_per_sample(), ok.batch_bytes()), (100, 300));
}

#[test]
fn size_products_that_overflow() {
    assert!(matches!(
        err(Config::builder()
            .batch_size(usize::MAX / 2)
            .bytes_per_sample(3)),
        ConfigError::Overflow(_)
    ));
    // The batch fits, rounding it up to the page does not.
    assert!(matches!(
        err(Config::builder()
            .batch_size(1)
            .bytes_per_sample(usize::MAX - 1)),
        ConfigError::Overflow(_)
    ));
    // The batch fits, host_slots of them do not.
    assert!(matches!(
        err(Config::builder()
            .batch_size(1)
            .bytes_per_sample(1 << 62)
            .host_slots(8)
            .host_budget(usize::MAX)),
        ConfigError::Overflow(_)
    ));
}

#[test]
fn budgets() {
    match err(base().bytes_per_sample(1 << 20).host_budget(1 << 20)) {
        ConfigError::OverBudget {
            what: "the host ring and the batch descriptions",
            bytes,
            budget,
            knob: "host_budget",
        } => {
            // The ring, and the descriptions of 4 host and 2 device slots: each a 64-byte
            // head and 14 bytes (id, length, source) per row, a row per sample.
            assert_eq!(
                (bytes, budget),
                (4 * (4 << 20) + 6 * (64 + 4 * 14), 1 << 20)
            )
        }
        other => panic!("{other:?}"),
    }
    match err(base().bytes_per_sample(1 << 20).device_budget(1 << 20)) {
        ConfigError::OverBudget {
            what: "the device slots",
            bytes,
            knob: "device_budget",
            ..
        } => {
            assert_eq!(bytes, 2 * (4 << 20))
        }
        other => panic!("{other:?}"),
    }
    // The default budgets reject a 64 GiB ring without anyone having to ask.
    assert!(matches!(
        err(base().bytes_per_sample(4 << 30)),
        ConfigError::OverBudget { .. }
    ));
}

#[test]
fn too_many_device_slots() {
    assert!(matches!(
        err(base().device_slots(Config::MAX_DEVICE_SLOTS + 1)),
        ConfigError::TooMany {
            field: "device_slots",
            ..
        }
    ));
}

#[test]
fn cores_that_do_not_exist() {
    match err(base().copy_core(100_000)) {
        ConfigError::NoSuchCore {
            field: "copy_core",
            core: 100_000,
            available,
        } => assert!(available >= 1),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        err(base().decode_cores([0, 100_001])),
        ConfigError::NoSuchCore {
            field: "decode_cores",
            core: 100_001,
            ..
        }
    ));
}

#[test]
fn errors_read_well_and_convert_into_pinring_error() {
    let e: Error = err(base().host_slots(0)).into();
    assert_eq!(
        e.to_string(),
        "invalid config: `host_slots` must be at least 1"
    );
    let e = err(base().bytes_per_sample(1 << 20).host_budget(1 << 20)).to_string();
    assert!(e.contains("raise it with `host_budget`"), "{e}");
    // Issue 29 item 6: a plural subject reads as one ("... descriptions would take").
    assert!(
        e.contains("the host ring and the batch descriptions would take "),
        "{e}"
    );
}

/// Issue 29 item 6: the README's sizing sample is what the config it describes prints.
#[test]
fn the_readme_sizing_sample_is_what_its_config_prints() {
    let readme = include_str!("../README.md");
    let sizing = readme.split("## Sizing").nth(1).expect("a Sizing section");
    let sample = sizing
        .split("```text\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("its sample output");
    let config = Config::builder()
        .batch_size(64)
        .bytes_per_sample(12288)
        .decode_threads(2)
        .build()
        .unwrap();
    assert_eq!(format!("{config}\n"), sample);
}

#[test]
fn defaults_are_documented_ones_and_a_valid_config_starts() {
    let c = base().build().unwrap();
    assert_eq!(
        (c.host_slots(), c.device_slots(), c.batch_bytes()),
        (4, 2, 256)
    );
    assert_eq!(c.host_stride() % 4096, 0);
    assert!(c.decode_threads() >= 1);
    let decoder = pinring::decode_fn(|_: u8, out: &mut [u8]| {
        out.fill(1);
        Ok(())
    });
    let mut p = Pipeline::new(c, decoder, [1u8; 8]).unwrap();
    assert_eq!(p.pop().unwrap().unwrap().bytes(), &[1; 256][..]);
}

/// Issue 19 item 5: `PINRING_POISON_RELEASED=1` turns the poison mode on for every config
/// built (other values leave it as the builder says). In processes of their own: the
/// environment is the whole process's.
#[test]
fn the_poison_environment_variable_turns_the_mode_on() {
    for (value, expect) in [("1", "true"), ("0", "false"), ("", "false")] {
        let (passed, text) =
            common::run_child("poison_env_child", &[("PINRING_POISON_RELEASED", value)]);
        assert!(passed, "{text}");
        assert!(
            text.contains(&format!("POISON_ENV_CHILD {expect}")),
            "PINRING_POISON_RELEASED={value:?}: {text}"
        );
    }
    if std::env::var_os("PINRING_POISON_RELEASED").is_none() {
        assert!(!base().build().unwrap().poison_released(), "off by default");
    }
}

#[test]
#[ignore = "run by the_poison_environment_variable_turns_the_mode_on"]
fn poison_env_child() {
    let config = base().build().unwrap();
    println!("POISON_ENV_CHILD {}", config.poison_released());
}
