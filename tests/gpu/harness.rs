//! Set-up shared by the GPU suite (`tests/gpu/`) and the GPU benchmark (`benches/gpu/`,
//! which includes this file with `#[path]`): the test's own view of the GPU (a context and
//! the kernels of `tests/gpu/kernels/gpu_check.cu`, loaded through cudarc from the
//! checked-in PTX), the content rule the kernels check, and the pipeline the suite drives.
#![allow(dead_code)] // each includer uses its own part

use std::sync::Arc;
use std::time::Duration;

use pinring::cudarc::driver::sys::{CUdevice_attribute, CUdeviceptr};
use pinring::cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig,
    PushKernelArg,
};
use pinring::cudarc::nvrtc::Ptx;
use pinring::{decode_fn, Batch, Config, Cuda, CudaOptions, Decode, Pipeline};

/// A check's result or why it failed.
pub type Res<T = ()> = Result<T, String>;

/// Any error, as text.
pub fn s<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// The suite's kernels (spin, check, fault), compiled to PTX for compute capability 7.5
/// and newer; `tests/gpu/kernels/gpu_check.cu` is the source.
pub const PTX: &str = include_str!("kernels/gpu_check.ptx");

/// Samples per batch and bytes per sample of the correctness runs (64 KiB batches).
pub const SAMPLES: usize = 16;
pub const SAMPLE_BYTES: usize = 4096;
pub const WORDS_PER_SAMPLE: u32 = (SAMPLE_BYTES / 4) as u32;
pub const BATCH_WORDS: u64 = (SAMPLES * SAMPLE_BYTES / 4) as u64;
/// Grid of the check kernel: each block adds one visit.
pub const GRID: u32 = 64;
pub const BLOCK: u32 = 256;
/// How long the consumer holds each batch on the device (much longer than the ~2 µs copy
/// of a 64 KiB batch).
pub const HOLD_US: u64 = 30;

/// Word `word` of sample `sample` (the check kernel's `pattern`).
pub fn pattern(sample: u64, word: u32) -> u32 {
    let x = ((sample.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32)
        ^ word.wrapping_mul(0x85EB_CA6B);
    x ^ (x >> 15)
}

/// Writes sample `id` as the check kernel expects it.
pub fn decoder() -> impl Decode<Sample = u64> {
    decode_fn(|sample: u64, out: &mut [u8]| {
        for (w, word) in out.chunks_exact_mut(4).enumerate() {
            word.copy_from_slice(&pattern(sample, w as u32).to_le_bytes());
        }
        Ok(())
    })
}

/// The suite's config: 64 KiB batches, 4 host slots, `device_slots` device slots.
pub fn config(options: CudaOptions, device_slots: usize) -> pinring::Result<Config<Cuda>> {
    Ok(Config::builder()
        .batch_size(SAMPLES)
        .bytes_per_sample(SAMPLE_BYTES)
        .host_slots(4)
        .device_slots(device_slots)
        .decode_threads(8)
        .pop_timeout(Duration::from_secs(20))
        .cuda(options)
        .build()?)
}

/// A pipeline of `batches` batches of the pattern.
pub fn pipeline(options: CudaOptions, device_slots: usize, batches: usize) -> Res<Pipeline<Cuda>> {
    let samples = 0..(batches * SAMPLES) as u64;
    Pipeline::new(
        config(options, device_slots).map_err(s)?,
        decoder(),
        samples,
    )
    .map_err(s)
}

/// The test's own view of one GPU: a context (as a cudarc user has one) and the kernels.
pub struct Gpu {
    pub ctx: Arc<CudaContext>,
    spin: CudaFunction,
    hold: CudaFunction,
    check: CudaFunction,
    fault: CudaFunction,
    clock_khz: u64,
}

impl Gpu {
    /// The kernels loaded on device `ordinal`.
    pub fn on(ordinal: usize) -> Res<Self> {
        // Through pinring first: cudarc itself panics when there is no driver.
        let devices = Cuda::device_count().map_err(s)?;
        if devices <= ordinal {
            return Err(format!("no CUDA device {ordinal} ({devices} devices)"));
        }
        let ctx = CudaContext::new(ordinal).map_err(s)?;
        let module = ctx.load_module(Ptx::from_src(PTX)).map_err(s)?;
        let clock_khz = ctx
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
            .map_err(s)? as u64;
        Ok(Gpu {
            spin: module.load_function("spin").map_err(s)?,
            hold: module.load_function("hold").map_err(s)?,
            check: module.load_function("check").map_err(s)?,
            fault: module.load_function("fault").map_err(s)?,
            ctx,
            clock_khz,
        })
    }

    /// Device 0.
    pub fn new() -> Res<Self> {
        Self::on(0)
    }

    /// Device 0, its context bound on the calling thread.
    pub fn bound() -> Res<Self> {
        let gpu = Self::new()?;
        gpu.bind()?;
        Ok(gpu)
    }

    /// Binds the context on the calling thread.
    pub fn bind(&self) -> Res {
        self.ctx.bind_to_thread().map_err(s)
    }

    /// A new stream of the context.
    pub fn stream(&self) -> Res<Arc<CudaStream>> {
        self.ctx.new_stream().map_err(s)
    }

    /// Launches `f` on `stream` as one block of one thread, with `arg` as its argument.
    ///
    /// # Safety
    ///
    /// `f` takes exactly one parameter, of `arg`'s type.
    unsafe fn one_thread<T: DeviceRepr>(
        &self,
        stream: &CudaStream,
        f: &CudaFunction,
        arg: &T,
    ) -> Res {
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = stream.launch_builder(f);
        launch.arg(arg);
        // SAFETY: the caller's: `f` takes one parameter of `arg`'s type.
        unsafe { launch.launch(cfg) }.map(drop).map_err(s)
    }

    /// Holds `stream` for about `micros` µs: one thread spinning for that many SM clock
    /// cycles at the device's rated clock (longer while the clock runs lower).
    pub fn spin(&self, stream: &CudaStream, micros: u64) -> Res {
        let cycles = (micros * self.clock_khz / 1000) as i64;
        // SAFETY: `spin` takes one `long long`.
        unsafe { self.one_thread(stream, &self.spin, &cycles) }
    }

    /// One thread holding `stream` for `ns` ns of the GPU's global timer: a length that,
    /// unlike `spin`'s, does not follow the SM clock.
    pub fn hold(&self, stream: &CudaStream, ns: u64) -> Res {
        // SAFETY: `hold` takes one `unsigned long long`.
        unsafe { self.one_thread(stream, &self.hold, &ns) }
    }

    /// Counts, on `stream`, the words of `words` at `data` that differ from the pattern of
    /// samples from `first_sample` into `errors`, and one visit per block into `visits`.
    pub fn check(
        &self,
        stream: &CudaStream,
        data: CUdeviceptr,
        first_sample: u64,
        words: u64,
        (errors, visits): (CUdeviceptr, CUdeviceptr),
    ) -> Res {
        let cfg = LaunchConfig {
            grid_dim: (GRID, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = stream.launch_builder(&self.check);
        launch
            .arg(&data)
            .arg(&first_sample)
            .arg(&WORDS_PER_SAMPLE)
            .arg(&words)
            .arg(&errors)
            .arg(&visits);
        // SAFETY: the arguments match `check`'s parameters (pointer, u64, u32, u64, pointer,
        // pointer); `data..data + 4 words` is device memory the caller keeps alive (a
        // leased batch), and the counters are a live `Tally`'s.
        unsafe { launch.launch(cfg) }.map(drop).map_err(s)
    }

    /// Counts, on `stream`, the words of leased `batch` that differ from its samples'
    /// pattern, into `tally`'s counters of that batch.
    pub fn check_batch(&self, stream: &CudaStream, batch: &Batch<Cuda>, tally: &Tally) -> Res {
        let k = batch.seq();
        let words = batch.len() as u64 / 4;
        self.check(
            stream,
            batch.device_ptr(),
            k * SAMPLES as u64,
            words,
            tally.at(k),
        )
    }

    /// A kernel that faults the context (a sticky error).
    pub fn fault(&self, stream: &CudaStream) -> Res {
        let cfg = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (1, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: `fault` takes no parameters.
        unsafe { stream.launch_builder(&self.fault).launch(cfg) }
            .map(drop)
            .map_err(s)
    }
}

/// Per-batch error and visit counters on the device.
pub struct Tally {
    errors: CudaSlice<u32>,
    visits: CudaSlice<u32>,
    errors_ptr: CUdeviceptr,
    visits_ptr: CUdeviceptr,
    stream: Arc<CudaStream>,
}

impl Tally {
    pub fn new(stream: &Arc<CudaStream>, n: usize) -> Res<Self> {
        let errors = stream.alloc_zeros::<u32>(n).map_err(s)?;
        let visits = stream.alloc_zeros::<u32>(n).map_err(s)?;
        let errors_ptr = errors.device_ptr(stream).0;
        let visits_ptr = visits.device_ptr(stream).0;
        stream.synchronize().map_err(s)?;
        Ok(Tally {
            errors,
            visits,
            errors_ptr,
            visits_ptr,
            stream: stream.clone(),
        })
    }

    /// The counters of batch `k`.
    pub fn at(&self, k: u64) -> (CUdeviceptr, CUdeviceptr) {
        (self.errors_ptr + 4 * k, self.visits_ptr + 4 * k)
    }

    /// (words wrong, batches checked `times` times), after synchronizing the device.
    pub fn read(&self, times: u32) -> Res<(u64, usize)> {
        self.stream.context().synchronize().map_err(s)?;
        let errors = self.stream.clone_dtoh(&self.errors).map_err(s)?;
        let visits = self.stream.clone_dtoh(&self.visits).map_err(s)?;
        let wrong = errors.iter().map(|&e| u64::from(e)).sum();
        let checked = visits.iter().filter(|&&v| v == GRID * times).count();
        Ok((wrong, checked))
    }
}

/// "`n` batches checked on the device, 0 words wrong", or why not.
pub fn clean(wrong: u64, checked: usize, n: usize) -> Res<String> {
    if wrong == 0 && checked == n {
        Ok(format!("{n} batches checked on the device, 0 words wrong"))
    } else {
        Err(format!(
            "{wrong} words wrong; {checked} of {n} batches checked"
        ))
    }
}
