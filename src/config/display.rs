//! [`Config`]'s `Display`: what the pipeline will take, in a few lines.

use super::Config;
use crate::backend::contract::Backend;

/// What the pipeline will take, in a few lines:
///
/// ```
/// let config = pinring::Config::builder()
///     .batch_size(16)
///     .bytes_per_sample(4 * 4097)
///     .build()?;
/// let summary = config.to_string();
/// assert!(summary.starts_with("this pipeline pins 1.0 MiB of host memory and 0.5 MiB of device memory"));
/// # Ok::<(), pinring::Error>(())
/// ```
impl<B: Backend> std::fmt::Display for Config<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mib = |bytes: usize| bytes as f64 / (1u64 << 20) as f64;
        let kib = |bytes: usize| bytes as f64 / 1024.0;
        writeln!(
            f,
            "this pipeline pins {:.1} MiB of host memory and {:.1} MiB of device memory",
            mib(self.pinned_bytes()),
            mib(self.device_bytes())
        )?;
        writeln!(
            f,
            "  batch: {} samples x {} bytes = {:.1} KiB",
            self.batch_size,
            self.sample_bytes,
            kib(self.batch_bytes)
        )?;
        writeln!(
            f,
            "  host ring: {} slots x {:.1} KiB (decode fills up to {} batches ahead)",
            self.settings.host_slots,
            kib(self.host_stride),
            self.settings.host_slots
        )?;
        writeln!(
            f,
            "  device slots: {} x {:.1} KiB (up to {} batches on the device, leased ones included)",
            self.settings.device_slots,
            kib(self.device_stride),
            self.settings.device_slots
        )?;
        writeln!(
            f,
            "  bookkeeping: {:.1} MiB of batch descriptions (rows), plus {} sample cells (each the size of \
             the decoder's sample), in the host budget",
            mib(self.id_bytes),
            self.settings.host_slots.saturating_mul(self.batch_size)
        )?;
        write!(
            f,
            "  decode threads: {}; spin {} us; trace {}{}",
            self.decode_threads,
            self.settings.spin.as_micros(),
            if self.settings.trace == 0 {
                "off".to_string()
            } else {
                format!(
                    "{} spans ({:.1} MiB)",
                    self.settings.trace,
                    mib(self.settings.trace * 40)
                )
            },
            if self.settings.poison_released {
                "; released slots poisoned"
            } else {
                ""
            }
        )
    }
}
