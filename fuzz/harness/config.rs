//! The `config` property: arbitrary builder inputs give `Ok` or a documented, justified
//! `ConfigError` (never a panic or an overflow), an `Ok` config's sizes respect the budgets
//! it was given, and starting a pipeline from a small `Ok` config makes no allocation
//! larger than those budgets (plus a small fixed allowance).
//!
//! Shared by `fuzz/fuzz_targets/config.rs` and `tests/prop_config.rs` through `#[path]`.
//! The binary that includes it must register [`Tracking`] as its global allocator for the
//! allocation check to see anything (it checks that it does).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use arbitrary::{Arbitrary, Unstructured};
use pinring::{decode_fn, Config, ConfigBuilder, ConfigError, LastBatch, Pipeline};

/// Builder defaults, as documented on `Config::builder` and the builder methods.
const DEFAULT_HOST_SLOTS: usize = 4;
const DEFAULT_DEVICE_SLOTS: usize = 2;
const DEFAULT_BUDGET: usize = 16 << 30;
const DEFAULT_SPIN: Duration = Config::DEFAULT_SPIN;
/// Device slots start on page boundaries.
const DEVICE_ALIGN: usize = 4096;
const DEFAULT_SHUTDOWN: Duration = Duration::from_secs(5);
const PAGE: usize = 4096;
const HUGE_PAGE: usize = 2 << 20;

/// A pipeline is started (and dropped) only for configs whose ring and device slots
/// together take at most this much, to keep each case fast.
const START_LIMIT: usize = 8 << 20;
/// Fixed allowance for one allocation made while starting and stopping a pipeline: thread
/// bookkeeping, the rayon registry, the ready ring of a few slots.
const FIXED_ALLOWANCE: usize = 64 << 10;

/// Every builder input; `None` leaves the builder's default.
#[derive(Debug, Clone, Default)]
pub struct ConfigInput {
    pub batch_size: Option<usize>,
    pub bytes_per_sample: Option<usize>,
    pub batch_bytes: Option<usize>,
    pub host_slots: Option<usize>,
    pub device_slots: Option<usize>,
    pub decode_threads: Option<usize>,
    pub copy_core: Option<usize>,
    pub decode_cores: Option<Vec<usize>>,
    pub spin: Option<Duration>,
    pub last_batch: Option<LastBatch>,
    pub huge_pages: Option<bool>,
    pub pop_timeout: Option<Duration>,
    pub shutdown_timeout: Option<Duration>,
    pub host_budget: Option<usize>,
    pub device_budget: Option<usize>,
}

/// Every field is optional; sizes hit edges often. Each draw takes the input's next bytes
/// (integers little-endian, zeros past the end), so a seed means what it meant when it was
/// written.
impl<'a> Arbitrary<'a> for ConfigInput {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        let present = u16::arbitrary(u)?;
        let on = |bit: u32| present & (1 << bit) != 0;
        let mut input = ConfigInput::default();
        if !on(0) {
            input.batch_size = Some(small(u, 16)?);
        }
        match u8::arbitrary(u)? % 8 {
            0 => input.batch_bytes = Some(small(u, 1 << 14)?),
            2 => {
                let per = input.batch_size.unwrap_or(1);
                input.batch_bytes = Some(per.wrapping_mul(small(u, 1024)?));
            }
            1 => {
                input.bytes_per_sample = opt_size(u)?;
                input.batch_bytes = opt_size(u)?;
            }
            _ => input.bytes_per_sample = Some(small(u, 4096)?),
        }
        if on(1) {
            input.host_slots = Some(small(u, 8)?);
        }
        if on(2) {
            input.device_slots = Some(small(u, 8)?);
        }
        if on(3) {
            input.decode_threads = Some(small(u, 4)?);
        }
        // Pinning is rarely valid for arbitrary cores: asked for less often.
        if on(4) && on(13) {
            input.copy_core = Some(small(u, 4)?.wrapping_sub(1));
        }
        if on(5) && on(14) {
            let n = u8::arbitrary(u)? % 5;
            let cores = (0..n).map(|_| Ok(small(u, 4)?.wrapping_sub(1)));
            input.decode_cores = Some(cores.collect::<arbitrary::Result<_>>()?);
        }
        if on(6) {
            input.spin = Some(Duration::from_nanos(u32::arbitrary(u)?.into()));
        }
        if on(7) {
            input.last_batch = Some(if u8::arbitrary(u)? & 1 == 0 {
                LastBatch::Partial
            } else {
                LastBatch::Drop
            });
        }
        if on(8) {
            input.huge_pages = Some(u8::arbitrary(u)? & 1 == 1);
        }
        if on(9) {
            input.pop_timeout = Some(duration(u)?);
        }
        if on(10) {
            input.shutdown_timeout = Some(duration(u)?);
        }
        // Budgets small enough to matter, less often (they reject most of what they meet).
        if on(11) && on(15) {
            input.host_budget = Some(small(u, 1 << 18)?);
        }
        if on(12) && on(15) {
            input.device_budget = Some(small(u, 1 << 18)?);
        }
        Ok(input)
    }
}

/// A size, mostly sensible (from 1 to `max`, so that most inputs reach the later checks),
/// else one of [`size`]'s edges.
fn small(u: &mut Unstructured<'_>, max: u64) -> arbitrary::Result<usize> {
    Ok(if u8::arbitrary(u)? < 224 {
        (1 + u64::from(u16::arbitrary(u)?) % max) as usize
    } else {
        size(u)?
    })
}

/// A `usize` drawn to hit edges often: zero, small values, powers of two and their
/// neighbours, values next to `usize::MAX`, and raw 16-, 32- and 64-bit values.
fn size(u: &mut Unstructured<'_>) -> arbitrary::Result<usize> {
    Ok(match u8::arbitrary(u)? % 8 {
        0 => 0,
        1 | 2 => usize::from(u8::arbitrary(u)? % 17),
        3 => {
            let shift = u32::from(u8::arbitrary(u)?) % usize::BITS;
            let base = 1usize << shift;
            match u8::arbitrary(u)? % 3 {
                0 => base,
                1 => base.wrapping_sub(1),
                _ => base.wrapping_add(1),
            }
        }
        4 => usize::MAX - usize::from(u8::arbitrary(u)? % 4),
        5 => usize::from(u16::arbitrary(u)?),
        6 => u32::arbitrary(u)? as usize,
        _ => u64::arbitrary(u)? as usize,
    })
}

/// `Some(size(u))` or `None`, one byte deciding.
fn opt_size(u: &mut Unstructured<'_>) -> arbitrary::Result<Option<usize>> {
    Ok(if u8::arbitrary(u)? & 1 == 1 {
        Some(size(u)?)
    } else {
        None
    })
}

impl ConfigInput {
    /// A builder given every input that is set (and left at its default otherwise).
    pub fn builder(&self) -> ConfigBuilder {
        let mut c = Config::builder();
        // Each `Some(value)` field as the builder method of the same name.
        macro_rules! set {
            ($($field:ident),* $(,)?) => {
                $(
                    if let Some(value) = self.$field {
                        c = c.$field(value);
                    }
                )*
            };
        }
        set!(
            batch_size,
            bytes_per_sample,
            batch_bytes,
            host_slots,
            device_slots,
            decode_threads,
            copy_core,
            spin,
            last_batch,
            huge_pages,
            pop_timeout,
            shutdown_timeout,
            host_budget,
            device_budget,
        );
        if let Some(cores) = &self.decode_cores {
            c = c.decode_cores(cores.iter().copied());
        }
        c
    }
}

/// Durations from zero to `Duration::MAX`, edges often.
fn duration(u: &mut Unstructured<'_>) -> arbitrary::Result<Duration> {
    Ok(match u8::arbitrary(u)? % 4 {
        0 => Duration::ZERO,
        1 => Duration::from_millis(u16::arbitrary(u)?.into()),
        2 => Duration::MAX,
        _ => Duration::new(u64::arbitrary(u)?, u32::arbitrary(u)? % 1_000_000_000),
    })
}

/// The cores this thread may run on (what `core_affinity` reports), from
/// `/proc/thread-self/status`; `None` where that cannot be read.
pub fn allowed_cores() -> Option<Vec<usize>> {
    let status = std::fs::read_to_string("/proc/thread-self/status").ok()?;
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
        .trim();
    let mut cores = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => cores.extend(a.parse::<usize>().ok()?..=b.parse::<usize>().ok()?),
            None => cores.push(part.parse().ok()?),
        }
    }
    Some(cores)
}

/// What a correct `build` must conclude about `input`, computed from the builder's docs.
struct Model {
    /// Every condition the input violates (empty: `build` must succeed).
    violations: Vec<Violation>,
    samples: usize,
    sample_bytes: usize,
    batch_bytes: usize,
    host_slots: usize,
    device_slots: usize,
    host_budget: usize,
    device_budget: usize,
    align: usize,
}

#[derive(Debug, PartialEq)]
enum Violation {
    Missing(&'static str),
    Zero(&'static str),
    Conflict,
    Overflow,
    Indivisible,
    OverBudget(&'static str),
    TooMany(&'static str),
    NoSuchCore(&'static str, usize),
}

fn model(input: &ConfigInput, cores: Option<&[usize]>) -> Model {
    let mut v = Vec::new();
    let samples = input.batch_size.unwrap_or(0);
    match input.batch_size {
        None => v.push(Violation::Missing("batch_size")),
        Some(0) => v.push(Violation::Zero("batch_size")),
        Some(_) => {}
    }
    let (mut sample_bytes, mut batch_bytes) = (0, 0);
    match (input.bytes_per_sample, input.batch_bytes) {
        (Some(_), Some(_)) => v.push(Violation::Conflict),
        (None, None) => v.push(Violation::Missing("bytes_per_sample or batch_bytes")),
        (Some(0), None) => v.push(Violation::Zero("bytes_per_sample")),
        (None, Some(0)) => v.push(Violation::Zero("batch_bytes")),
        (Some(per), None) => match per.checked_mul(samples) {
            Some(batch) => (sample_bytes, batch_bytes) = (per, batch),
            None => v.push(Violation::Overflow),
        },
        (None, Some(batch)) => match (batch.checked_div(samples), batch.checked_rem(samples)) {
            (Some(per), Some(0)) => (sample_bytes, batch_bytes) = (per, batch),
            (Some(_), Some(_)) => v.push(Violation::Indivisible),
            // `batch_size` is 0 or missing: reported above.
            _ => {}
        },
    }
    let host_slots = input.host_slots.unwrap_or(DEFAULT_HOST_SLOTS);
    let device_slots = input.device_slots.unwrap_or(DEFAULT_DEVICE_SLOTS);
    for (n, name) in [
        (host_slots, "host_slots"),
        (device_slots, "device_slots"),
        (input.decode_threads.unwrap_or(1), "decode_threads"),
    ] {
        if n == 0 {
            v.push(Violation::Zero(name));
        }
    }
    if device_slots > Config::MAX_DEVICE_SLOTS {
        v.push(Violation::TooMany("device_slots"));
    }
    if input
        .decode_threads
        .is_some_and(|n| n > Config::MAX_DECODE_THREADS)
    {
        v.push(Violation::TooMany("decode_threads"));
    }
    let align = if input.huge_pages == Some(true) {
        HUGE_PAGE
    } else {
        PAGE
    };
    let host_budget = input.host_budget.unwrap_or(DEFAULT_BUDGET);
    let device_budget = input.device_budget.unwrap_or(DEFAULT_BUDGET);
    if batch_bytes != 0 {
        match host_bytes(batch_bytes, align, host_slots, device_slots, samples) {
            None => v.push(Violation::Overflow),
            Some(bytes) if bytes > host_budget => v.push(Violation::OverBudget("host_budget")),
            Some(_) => {}
        }
        match batch_bytes
            .checked_next_multiple_of(DEVICE_ALIGN)
            .and_then(|s| s.checked_mul(device_slots))
        {
            None => v.push(Violation::Overflow),
            Some(bytes) if bytes > device_budget => v.push(Violation::OverBudget("device_budget")),
            Some(_) => {}
        }
    }
    if let Some(cores) = cores {
        let missing = |c: &usize| !cores.contains(c);
        if let Some(c) = input.copy_core.filter(missing) {
            v.push(Violation::NoSuchCore("copy_core", c));
        }
        for &c in input.decode_cores.iter().flatten().filter(|c| missing(c)) {
            v.push(Violation::NoSuchCore("decode_cores", c));
        }
    }
    Model {
        violations: v,
        samples,
        sample_bytes,
        batch_bytes,
        host_slots,
        device_slots,
        host_budget,
        device_budget,
        align,
    }
}

/// Host memory a config counts in its host budget: the ring, and the batch description of
/// every host and device slot: a 64-byte head and 14 bytes a row (id, length, source), a row
/// per sample.
fn host_bytes(
    batch_bytes: usize,
    align: usize,
    host_slots: usize,
    device_slots: usize,
    samples: usize,
) -> Option<usize> {
    let ring = batch_bytes
        .checked_next_multiple_of(align)?
        .checked_mul(host_slots)?;
    let ids = samples
        .checked_mul(14)?
        .checked_add(64)?
        .checked_mul(host_slots.checked_add(device_slots)?)?;
    ring.checked_add(ids)
}

/// Whether `error` is justified by the input: it names a violation the model found.
fn justified(error: &ConfigError, m: &Model, input: &ConfigInput, cores: Option<&[usize]>) -> bool {
    let has = |x: Violation| m.violations.contains(&x);
    match error {
        ConfigError::Missing(what) => has(Violation::Missing(what)),
        ConfigError::Zero(what) => has(Violation::Zero(what)),
        ConfigError::Conflict("bytes_per_sample", "batch_bytes") => has(Violation::Conflict),
        ConfigError::Overflow(_) => has(Violation::Overflow),
        ConfigError::TooMany { field, n, max } => {
            has(Violation::TooMany(field))
                && match *field {
                    "device_slots" => *n == m.device_slots && *max == Config::MAX_DEVICE_SLOTS,
                    "decode_threads" => {
                        Some(*n) == input.decode_threads && *max == Config::MAX_DECODE_THREADS
                    }
                    _ => false,
                }
        }
        ConfigError::Indivisible {
            batch_bytes,
            samples,
        } => {
            has(Violation::Indivisible)
                && Some(*batch_bytes) == input.batch_bytes
                && *samples == m.samples
        }
        ConfigError::NoSuchCore {
            field,
            core,
            available,
        } => {
            // Without the core list the claim cannot be checked beyond its shape.
            cores.is_none_or(|c| has(Violation::NoSuchCore(field, *core)) && c.len() == *available)
        }
        ConfigError::OverBudget {
            bytes,
            budget,
            knob,
            ..
        } => {
            let (actual, given) = match *knob {
                "host_budget" => (
                    host_bytes(
                        m.batch_bytes,
                        m.align,
                        m.host_slots,
                        m.device_slots,
                        m.samples,
                    ),
                    m.host_budget,
                ),
                "device_budget" => (
                    m.batch_bytes
                        .checked_next_multiple_of(DEVICE_ALIGN)
                        .and_then(|s| s.checked_mul(m.device_slots)),
                    m.device_budget,
                ),
                _ => return false,
            };
            has(Violation::OverBudget(knob))
                && actual == Some(*bytes)
                && *budget == given
                && bytes > budget
        }
        _ => false,
    }
}

/// How far a passing check went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reached {
    /// `build` rejected the input, with a justified error.
    Rejected,
    /// `build` accepted it; the config was too large to start.
    Built,
    /// A pipeline was started from it, popped and dropped.
    Started,
}

/// Checks one input. Returns how far it went, or a description of the first property
/// that fails.
pub fn check(input: &ConfigInput) -> Result<Reached, String> {
    let cores = allowed_cores();
    let m = model(input, cores.as_deref());
    let built = input.builder().build();
    let config = match built {
        Err(e) => {
            // Both renderings must work (and not panic).
            let shown = format!("{e} / {}", pinring::Error::from(e.clone()));
            if m.violations.is_empty() {
                return Err(format!("valid input rejected: {shown} for {input:?}"));
            }
            if !justified(&e, &m, input, cores.as_deref()) {
                return Err(format!(
                    "error {e:?} not justified; violations {:?} for {input:?}",
                    m.violations
                ));
            }
            return Ok(Reached::Rejected);
        }
        Ok(config) => config,
    };
    if !m.violations.is_empty() {
        return Err(format!(
            "accepted an input that violates {:?}: {input:?}",
            m.violations
        ));
    }
    check_ok(&config, &m, input)?;
    let host_bytes = config.host_stride() * config.host_slots();
    let device_bytes = config.device_stride() * config.device_slots();
    if host_bytes.saturating_add(device_bytes) <= START_LIMIT && config.decode_threads() <= 4 {
        check_start(config, input)?;
        return Ok(Reached::Started);
    }
    Ok(Reached::Built)
}

/// An `Ok` config: every getter agrees with the input and the sizes respect the budgets.
fn check_ok(c: &Config, m: &Model, input: &ConfigInput) -> Result<(), String> {
    let fail = |what: &str| Err(format!("{what}: {c:?} from {input:?}"));
    if c.batch_size() != m.samples
        || c.bytes_per_sample() != m.sample_bytes
        || c.batch_bytes() != m.batch_bytes
        || c.bytes_per_sample().checked_mul(c.batch_size()) != Some(c.batch_bytes())
    {
        return fail("sizes disagree with the input");
    }
    if (c.host_slots(), c.device_slots()) != (m.host_slots, m.device_slots) {
        return fail("slot counts disagree with the input");
    }
    let stride = c.host_stride();
    if stride % m.align != 0 || stride < c.batch_bytes() || stride - c.batch_bytes() >= m.align {
        return fail("host stride is not the batch rounded up to the page");
    }
    match host_bytes(
        c.batch_bytes(),
        m.align,
        c.host_slots(),
        c.device_slots(),
        m.samples,
    ) {
        Some(bytes)
            if bytes <= m.host_budget
                && bytes == stride * c.host_slots() + c.bookkeeping_bytes() => {}
        _ => return fail("host ring and batch descriptions over their budget"),
    }
    if c.device_stride() != c.batch_bytes().next_multiple_of(DEVICE_ALIGN) {
        return fail("device stride is not the batch rounded up to the page");
    }
    match c.device_stride().checked_mul(c.device_slots()) {
        Some(bytes) if bytes <= m.device_budget => {}
        _ => return fail("device slots over their budget"),
    }
    let threads_ok = match input.decode_threads {
        Some(n) => c.decode_threads() == n,
        None => c.decode_threads() >= 1,
    };
    if !threads_ok
        || c.copy_core() != input.copy_core
        || c.decode_cores() != input.decode_cores.as_deref().unwrap_or(&[])
        || c.spin() != input.spin.unwrap_or(DEFAULT_SPIN)
        || c.last_batch() != input.last_batch.unwrap_or_default()
        || c.huge_pages() != input.huge_pages.unwrap_or(false)
        || c.pop_timeout() != input.pop_timeout
        || c.shutdown_timeout() != input.shutdown_timeout.unwrap_or(DEFAULT_SHUTDOWN)
    {
        return fail("a setting disagrees with the input");
    }
    Ok(())
}

/// Starts a pipeline from a small `Ok` config, pops once and drops it, watching every
/// heap allocation the process makes meanwhile.
fn check_start(config: Config, input: &ConfigInput) -> Result<(), String> {
    // One start at a time: the tracker is process-wide.
    static ONE: Mutex<()> = Mutex::new(());
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let budget = config
        .host_stride()
        .saturating_mul(config.host_slots())
        .max(config.device_stride().saturating_mul(config.device_slots()));
    // Each host slot keeps `batch_size` samples of the caller's sample type (here
    // `u32`), all in one buffer: the caller's data, sized by its type rather than by a
    // budget.
    let sample_buffer = config
        .batch_size()
        .saturating_mul(config.host_slots())
        .saturating_mul(std::mem::size_of::<Option<u32>>());
    // Each host and each device slot keeps one id (u64) per sample (`Batch::sample_ids`),
    // in one buffer per side (the rows' lengths and sources, in buffers beside it, are
    // smaller).
    let id_buffer = config
        .batch_size()
        .saturating_mul(config.host_slots().max(config.device_slots()))
        .saturating_mul(std::mem::size_of::<u64>());
    let allowed = budget
        .max(sample_buffer)
        .max(id_buffer)
        .saturating_add(FIXED_ALLOWANCE);
    let samples = config.batch_size().saturating_mul(2).min(64) as u32;
    LARGEST.store(0, Ordering::SeqCst);
    TRACKING.store(true, Ordering::SeqCst);
    let began = Instant::now();
    let result = (|| {
        let decoder = decode_fn(|id: u32, out: &mut [u8]| {
            out.fill(id as u8);
            Ok(())
        });
        let cells = (config.host_slots() * config.batch_size())
            .saturating_mul(std::mem::size_of::<Option<u32>>());
        let counted = (config.host_stride() * config.host_slots())
            .saturating_add(config.bookkeeping_bytes())
            .saturating_add(cells);
        let mut pipeline = match Pipeline::new(config, decoder, 0..samples) {
            Ok(pipeline) => pipeline,
            // The sample cells (sized by the sample type, known only here) count in the
            // host budget too: a start over it is refused before anything is allocated.
            Err(pinring::Error::Config(ConfigError::OverBudget {
                knob: "host_budget",
                bytes,
                budget,
                ..
            })) if bytes > budget && bytes >= counted => return Ok(false),
            Err(e) => return Err(format!("start: {e}")),
        };
        match pipeline.pop() {
            Ok(Some(batch)) => drop(batch),
            Ok(None) => {}
            // A zero pop timeout may run out; nothing else may go wrong.
            Err(pinring::Error::PopTimeout { .. }) => {}
            Err(e) => return Err(format!("pop: {e}")),
        }
        drop(pipeline);
        Ok(true)
    })();
    TRACKING.store(false, Ordering::SeqCst);
    let started = result.map_err(|e| format!("{e} for {input:?}"))?;
    if !started {
        // Refused over the budget before anything was allocated: nothing to measure.
        return Ok(());
    }
    let largest = LARGEST.load(Ordering::SeqCst);
    if largest == 0 {
        return Err("the Tracking allocator is not registered: no allocation seen".into());
    }
    if largest > allowed {
        return Err(format!(
            "starting a pipeline made a {largest}-byte allocation; the budgets allow \
             {budget}, the sample buffers {sample_buffer}, the id buffers {id_buffer} \
             (+{FIXED_ALLOWANCE}) for {input:?}"
        ));
    }
    if began.elapsed() > Duration::from_secs(10) {
        return Err(format!(
            "start, pop and drop took {:?} for {input:?}",
            began.elapsed()
        ));
    }
    Ok(())
}

static TRACKING: AtomicBool = AtomicBool::new(false);
static LARGEST: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, recording the largest single request while tracking is on.
pub struct Tracking;

impl Tracking {
    fn note(size: usize) {
        if TRACKING.load(Ordering::Relaxed) {
            LARGEST.fetch_max(size, Ordering::Relaxed);
        }
    }
}

// SAFETY: every call is forwarded unchanged to `System`, which upholds the GlobalAlloc
// contract; the bookkeeping only reads sizes and touches two atomics (no allocation).
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::note(layout.size());
        // SAFETY: forwarded with the caller's layout, under the caller's contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::note(layout.size());
        // SAFETY: as in `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` (every allocation here is forwarded to it).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::note(new_size);
        // SAFETY: as in `dealloc`; `new_size` is the caller's, under its contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}
