//! The cuda backend on a machine without a usable CUDA driver: creating a pipeline is a
//! clear `Error::Backend`, never a panic or a crash. Where a driver and a device exist
//! (the GPU suite's machine), the no-driver checks are skipped and an invalid ordinal is
//! checked instead.
#![cfg(feature = "cuda")]

use pinring::{decode_fn, Config, Cuda, CudaOptions, Error, Pipeline};

fn pipeline(options: CudaOptions) -> pinring::Result<Pipeline<Cuda>> {
    let config = Config::builder()
        .batch_size(4)
        .bytes_per_sample(64)
        .decode_threads(1)
        .cuda(options)
        .build()?;
    let decoder = decode_fn(|_: u32, out: &mut [u8]| {
        out.fill(0);
        Ok(())
    });
    Pipeline::new(config, decoder, 0..100u32)
}

fn no_device() -> bool {
    match Cuda::device_count() {
        Ok(0) | Err(_) => true,
        Ok(_) => false,
    }
}

#[test]
fn device_count_reports_a_missing_driver_as_an_error() {
    match Cuda::device_count() {
        Ok(n) => eprintln!("a CUDA driver is present ({n} devices)"),
        Err(Error::Backend { call, message, .. }) => {
            assert!(!call.is_empty());
            assert!(!message.is_empty());
            eprintln!("no CUDA: {call} failed: {message}");
        }
        Err(other) => panic!("expected Error::Backend, got {other:?}"),
    }
}

#[test]
fn creating_a_cuda_pipeline_without_a_driver_is_an_error() {
    if !no_device() {
        eprintln!("skipped: this machine has a CUDA device");
        return;
    }
    for options in [
        CudaOptions::default(),
        CudaOptions::ordinal(3),
        CudaOptions::current(),
    ] {
        match pipeline(options.clone()) {
            Ok(_) => panic!("a CUDA pipeline opened with no CUDA device ({options:?})"),
            Err(Error::Backend { call, message, .. }) => {
                let text = format!("{call} failed: {message}");
                eprintln!("{options:?}: {text}");
                if Cuda::device_count().is_err() {
                    // No driver library at all: the message says what to install.
                    assert!(text.contains("libcuda") || text.contains("CUDA"), "{text}");
                }
            }
            Err(other) => panic!("expected Error::Backend, got {other:?}"),
        }
    }
}

#[test]
fn the_error_displays_the_driver_call() {
    if !no_device() {
        return;
    }
    let error = pipeline(CudaOptions::default()).expect_err("no CUDA device here");
    let text = error.to_string();
    assert!(text.contains("failed"), "{text}");
}

#[test]
fn an_invalid_ordinal_is_an_error() {
    let Ok(count) = Cuda::device_count() else {
        return; // covered by the no-driver tests above
    };
    match pipeline(CudaOptions::ordinal(count + 7)) {
        Ok(_) => panic!("device {} does not exist", count + 7),
        Err(e @ Error::Backend { .. }) => {
            let Error::Backend { call, .. } = &e else {
                unreachable!()
            };
            assert_eq!(*call, "cuDeviceGet");
            // The driver's error travels as the source: CUDA_ERROR_INVALID_DEVICE.
            let driver = e.driver_error().expect("a driver error as the source");
            assert_eq!(driver.0 as i32, 101);
            let source = std::error::Error::source(&e).expect("a source");
            assert!(source.to_string().contains("INVALID_DEVICE"), "{source}");
        }
        Err(other) => panic!("expected Error::Backend, got {other:?}"),
    }
}
