//! The token decoders alone, the decode pool's way: how fast windows of a `u16` shard become
//! samples in memory, read by position as pinring reads them, side by side with the same
//! decode reading a memory mapping of the shard (the way that cannot be made safe in a
//! library: a lost page is a SIGBUS; here only the benchmark maps). A small timing harness,
//! not criterion: it reports throughput by this process's CPU time as well as by wall time,
//! since on a shared machine other processes' load moves wall time far more than CPU time,
//! and it alternates the two ways pass by pass, so that they meet the same load.
//!
//! ```text
//! cargo bench -p pinring-benches --bench decode              # every row
//! cargo bench -p pinring-benches --bench decode -- read/     # the side-by-side rows
//! cargo bench -p pinring-benches --bench decode -- 256K      # rows whose name holds "256K"
//! ```
//!
//! A synthetic `u16` shard of 32 Mi tokens (64 MiB: more than the last-level cache; written
//! to the temp dir and read once, so that it sits in the page cache). One iteration decodes
//! a batch of 4 MiB of the shard's bytes into the next of four buffers (ordinary memory, not
//! pinned; 16 or 32 MiB in all, as the pipeline's four host slots), cut into work items of
//! 512 KiB of output as the pipeline cuts a batch, each item
//! decoded as the decode pool does it: its reads one run, the shard checked once at its end
//! ([`with_checks_at_end`]). With more than one thread the items are shared out on a rayon
//! pool of that many threads.
//!
//! - `read/{u16,i32}/{2K,16K,256K}/{seq,shuf}/{1,N}t`: windows of 1 Ki, 8 Ki and 128 Ki
//!   tokens and one (2, 16 and 256 KiB of the shard; at the sampler's default stride, one
//!   token less) in sequential or shuffled order, decoded by
//!   [`Tokens`] as `u16` (nothing widens: read straight into the sample) or `i32` (widened
//!   through the per-thread chunk); `new` is pinring, `mapped` the same decode from a map,
//!   `ratio` new / mapped.
//! - `decode/{large,small}/...`: the rows of earlier sessions (batches of 64 windows of
//!   131,073 tokens and 16 of 4,097 at random offsets, [`Tokens`] as `i32`/`i64` and
//!   [`NextToken`] as `i32`, and a `u32` shard's windows as `i32`), pinring's reads only.
//!
//! Each row runs for `PINRING_BENCH_SECONDS` (default 1) `PINRING_BENCH_REPEATS` times
//! (default 5) a way; the medians are printed, in GiB/s of bytes written per CPU second and
//! per wall second.

use std::hint::black_box;
use std::time::Instant;

use memmap2::Mmap;
use pinring::source::{
    with_checks_at_end, NextToken, Order, ShardToken, SplitMix64, TokenShard, TokenShards,
    TokenType, Tokens, Window,
};
use pinring::{Decode, DecodeError};
use pinring_benches::{cores, median, process_cpu_time, TempShard};

const SHARD_TOKENS: u64 = 32 << 20;
/// Shard bytes a batch of the side-by-side rows reads.
const BATCH_BYTES: usize = 4 << 20;
/// Output bytes of a work item (the pipeline's item size).
const ITEM_BYTES: usize = 512 << 10;
/// Batches a way decodes into in turn (the pipeline's default host slots).
const HOST_SLOTS: usize = 4;

/// A shard of random `T` tokens below `vocab` (which `T` holds), in the page cache.
fn shard<T: ShardToken + TryFrom<u64>>(vocab: u64) -> TempShard {
    let mut rng = SplitMix64::new(7);
    TempShard::write(&format!("decode-{vocab}"), SHARD_TOKENS, || {
        T::try_from(rng.below(vocab))
            .ok()
            .expect("a token below the vocabulary")
    })
    .cached()
}

/// The medians of a way's passes: GiB written per CPU second and per wall second.
#[derive(Debug, Clone, Copy)]
struct Rate {
    cpu: f64,
    wall: f64,
}

/// A way to decode a batch, timed pass by pass.
struct Way<'a> {
    passes: (Vec<f64>, Vec<f64>),
    batch: Box<dyn FnMut() + 'a>,
}

impl<'a> Way<'a> {
    fn new(batch: impl FnMut() + 'a) -> Self {
        Way {
            passes: (Vec::new(), Vec::new()),
            batch: Box::new(batch),
        }
    }

    /// One pass of `seconds`: batches of `bytes` until the time is up.
    fn pass(&mut self, bytes: usize, seconds: f64) {
        let (c0, t0) = (process_cpu_time(), Instant::now());
        let mut n = 0u64;
        while t0.elapsed().as_secs_f64() < seconds {
            (self.batch)();
            n += 1;
        }
        let (c1, t1) = (process_cpu_time(), t0.elapsed());
        let gib = (n as f64 * bytes as f64) / f64::from(1u32 << 30);
        let cpu_s = match (c0, c1) {
            (Some(a), Some(b)) if b > a => (b - a).as_secs_f64(),
            _ => f64::NAN,
        };
        self.passes.0.push(gib / cpu_s);
        self.passes.1.push(gib / t1.as_secs_f64());
    }

    fn rate(&mut self) -> Rate {
        Rate {
            cpu: median(&mut self.passes.0),
            wall: median(&mut self.passes.1),
        }
    }
}

/// Runs the ways `repeats` times each, alternating, after warming each up.
fn measure(ways: &mut [Way<'_>], bytes: usize, seconds: f64, repeats: usize) -> Vec<Rate> {
    for way in ways.iter_mut() {
        for _ in 0..3 {
            (way.batch)();
        }
    }
    for _ in 0..repeats {
        for way in ways.iter_mut() {
            way.pass(bytes, seconds);
        }
    }
    ways.iter_mut().map(Way::rate).collect()
}

/// The same decode as [`Tokens`], from a map of the shard: the tokens copied (`u16`) or
/// widened (`i32`, the library's loop) straight from the mapped page cache.
struct Mapped {
    /// Each shard (its address) and its map.
    maps: Vec<(*const TokenShard, Mmap)>,
    ty: TokenType,
}

// SAFETY: the shard addresses are only compared, never dereferenced; the maps are
// read-only memory.
unsafe impl Sync for Mapped {}

impl Mapped {
    fn new(shards: &TokenShards, ty: TokenType) -> Self {
        let maps = shards
            .shards()
            .iter()
            .map(|s| {
                let file = std::fs::File::open(s.path()).expect("open the shard");
                // SAFETY: a read-only map of the benchmark's own shard, which nothing
                // changes while it runs.
                let map = unsafe { Mmap::map(&file) }.expect("map the shard");
                (std::sync::Arc::as_ptr(s), map)
            })
            .collect();
        Mapped { maps, ty }
    }

    fn decode(&self, w: &Window<TokenShard>, out: &mut [u8]) {
        let shard = std::sync::Arc::as_ptr(w.shard());
        let Some((_, map)) = self.maps.iter().find(|(s, _)| *s == shard) else {
            panic!("a window of another shard");
        };
        let from = 1024 + 2 * w.start();
        let raw = &map[from..from + 2 * w.len()];
        match self.ty {
            TokenType::U16 => out.copy_from_slice(raw),
            _ => {
                for (o, t) in out.chunks_exact_mut(4).zip(raw.chunks_exact(2)) {
                    o.copy_from_slice(&i32::from(u16::from_le_bytes([t[0], t[1]])).to_le_bytes());
                }
            }
        }
    }
}

/// Decodes `windows` into `out` (samples of `sample` bytes) in items of [`ITEM_BYTES`], on
/// `pool` (or this thread), each item by `item(windows, out)`.
fn by_items<'w>(
    pool: Option<&rayon::ThreadPool>,
    windows: &'w [Window<TokenShard>],
    out: &mut [u8],
    sample: usize,
    item: &(impl Fn(&'w [Window<TokenShard>], &mut [u8]) + Sync),
) {
    let per_item = (ITEM_BYTES / sample).max(1);
    let items = windows
        .chunks(per_item)
        .zip(out.chunks_mut(per_item * sample));
    match pool {
        None => items.for_each(|(w, o)| item(w, o)),
        Some(pool) => pool.scope(|s| {
            for (w, o) in items {
                s.spawn(move |_| item(w, o));
            }
        }),
    }
}

/// One item pinring's way: the decoder on each window, the item's reads one run.
fn decode_item<D: Decode<Sample = Window<TokenShard>>>(
    decoder: &D,
    windows: &[Window<TokenShard>],
    out: &mut [u8],
    sample: usize,
) {
    with_checks_at_end(|| {
        for (w, o) in windows.iter().zip(out.chunks_exact_mut(sample)) {
            decoder.decode(w.clone(), o)?;
        }
        Ok::<(), DecodeError>(())
    })
    .expect("the shard is unchanged")
    .expect("decode");
}

/// The side-by-side rows.
fn read_rows(gpt2: &TempShard, wanted: &dyn Fn(&str) -> bool, seconds: f64, repeats: usize) {
    let shards = TokenShards::open([gpt2.path()]).expect("open the shard");
    let all = cores();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(all)
        .build()
        .expect("a pool");
    println!(
        "{:<34} {:>19} {:>22} {:>17}",
        "row (GiB/s: per CPU s | wall s)", "new", "mapped", "new / mapped"
    );
    // What bounds the rows: the kernel's copy out of the page cache (a plain `pread` into
    // a buffer in cache) against a copy from a map of the same bytes.
    for (size, bytes) in [("16K", 16usize << 10), ("256K", 256 << 10)] {
        let row = format!("read/ceiling/pread-vs-memcpy/{size}");
        if !wanted(&row) {
            continue;
        }
        let file = std::fs::File::open(gpt2.path()).expect("open the shard");
        // SAFETY: a read-only map of the benchmark's own shard, which nothing changes.
        let map = unsafe { Mmap::map(&file) }.expect("map the shard");
        let spots = (map.len() - 1024) / bytes;
        let (mut buf_a, mut buf_b) = (vec![0u8; bytes], vec![0u8; bytes]);
        let (mut k_a, mut k_b) = (0, 0);
        let pread = Way::new(|| {
            let at = 1024 + (k_a % spots) * bytes;
            k_a += 1;
            std::os::unix::fs::FileExt::read_exact_at(&file, &mut buf_a, at as u64).expect("read");
            black_box(&buf_a);
        });
        let map = &map;
        let memcpy = Way::new(|| {
            let at = 1024 + (k_b % spots) * bytes;
            k_b += 1;
            buf_b.copy_from_slice(&map[at..at + bytes]);
            black_box(&buf_b);
        });
        let rates = measure(&mut [pread, memcpy], bytes, seconds, repeats);
        print_row(&row, rates[0], rates[1]);
    }
    for ty in [TokenType::U16, TokenType::I32] {
        for (size, window) in [("2K", 1025u64), ("16K", 8193), ("256K", 131_073)] {
            for (order, name) in [
                (Order::Sequential, "seq"),
                (Order::Shuffled { seed: 5 }, "shuf"),
            ] {
                for threads in if all > 1 { vec![1, all] } else { vec![1] } {
                    let row = format!("read/{ty}/{size}/{name}/{threads}t");
                    if !wanted(&row) {
                        continue;
                    }
                    let sampler = shards
                        .clone()
                        .windows(window)
                        .order(order)
                        .build()
                        .expect("a sampler");
                    let epoch: Vec<_> = sampler.epoch(0).collect();
                    let per_batch = BATCH_BYTES / (2 * window as usize);
                    let batches = epoch.len() / per_batch;
                    let decoder = Tokens::new(ty);
                    let sample = decoder.sample_bytes(window);
                    let mapped = Mapped::new(&shards, ty);
                    let pool = (threads > 1).then_some(&pool);
                    // Each way decodes into slots of its own, in turn, as the decode pool
                    // into the host ring's: in memory, not in the last-level cache.
                    let slots = || -> Vec<Vec<u8>> {
                        (0..HOST_SLOTS)
                            .map(|_| vec![0u8; per_batch * sample])
                            .collect()
                    };
                    let (mut out_a, mut out_b) = (slots(), slots());
                    let (mut k_a, mut k_b) = (0, 0);
                    let epoch = &epoch;
                    let new = Way::new(|| {
                        let ws = &epoch[(k_a % batches) * per_batch..][..per_batch];
                        let out = &mut out_a[k_a % HOST_SLOTS];
                        k_a += 1;
                        by_items(pool, ws, out, sample, &|w, o| {
                            decode_item(&decoder, w, o, sample)
                        });
                        black_box(out);
                    });
                    let mapped = &mapped;
                    let map = Way::new(|| {
                        let ws = &epoch[(k_b % batches) * per_batch..][..per_batch];
                        let out = &mut out_b[k_b % HOST_SLOTS];
                        k_b += 1;
                        by_items(pool, ws, out, sample, &|w, o| {
                            for (w, o) in w.iter().zip(o.chunks_exact_mut(sample)) {
                                mapped.decode(w, o);
                            }
                        });
                        black_box(out);
                    });
                    let rates = measure(&mut [new, map], per_batch * sample, seconds, repeats);
                    print_row(&row, rates[0], rates[1]);
                }
            }
        }
    }
}

/// Prints a side-by-side row: `a` (pinring's way), `b` (from a map), and `a / b`.
fn print_row(row: &str, a: Rate, b: Rate) {
    println!(
        "{row:<34} {:>8.2} | {:>8.2}   {:>8.2} | {:>8.2}   {:>5.0}% | {:>5.0}%",
        a.cpu,
        a.wall,
        b.cpu,
        b.wall,
        100.0 * a.cpu / b.cpu,
        100.0 * a.wall / b.wall
    );
}

/// The row of `decoder` decoding `windows` into one reused buffer of `batch` samples of
/// `sample` bytes, the pool's way (one thread).
fn decode_row<D: Decode<Sample = Window<TokenShard>>>(
    name: &str,
    decoder: &D,
    windows: &[Window<TokenShard>],
    sample: usize,
    (seconds, repeats): (f64, usize),
) {
    let mut out = vec![0u8; windows.len() * sample];
    let bytes = out.len();
    let way = Way::new(|| {
        by_items(None, windows, &mut out, sample, &|w, o| {
            decode_item(decoder, w, o, sample)
        });
        black_box(&out);
    });
    let rate = measure(&mut [way], bytes, seconds, repeats)[0];
    println!(
        "{name:<32} {:>6.2} GiB/s per CPU second  {:>6.2} GiB/s per wall second",
        rate.cpu, rate.wall
    );
}

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let env = |name: &str| std::env::var(name).ok().and_then(|s| s.parse::<f64>().ok());
    let seconds = env("PINRING_BENCH_SECONDS").unwrap_or(1.0);
    let repeats = env("PINRING_BENCH_REPEATS").map_or(5, |r| r.max(1.0) as usize);
    let wanted = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f));
    let gpt2 = shard::<u16>(50257);
    read_rows(&gpt2, &wanted, seconds, repeats);
    let llama = shard::<u32>(128_256);
    let rows = [
        ("large", &gpt2, 64usize, 131_073u64),
        ("small", &gpt2, 16, 4097),
        ("u32/large", &llama, 64, 131_073),
        ("u32/small", &llama, 16, 4097),
    ];
    for (size, shard, batch, window) in rows {
        let shards = TokenShards::open([shard.path()]).expect("open the shard");
        let types: &[TokenType] = if size.starts_with("u32") {
            &[TokenType::I32]
        } else {
            &[TokenType::I32, TokenType::I64]
        };
        let windows: Vec<_> = shards
            .clone()
            .windows(window)
            .order(Order::Random { seed: 3 })
            .build()
            .expect("a sampler")
            .iter()
            .take(batch)
            .collect();
        for &ty in types {
            let name = format!("decode/{size}/Tokens/{ty}");
            if wanted(&name) {
                let decoder = Tokens::new(ty);
                let sample = decoder.sample_bytes(window);
                decode_row(&name, &decoder, &windows, sample, (seconds, repeats));
            }
        }
        let name = format!("decode/{size}/NextToken/i32");
        if wanted(&name) {
            let decoder = NextToken::new(TokenType::I32);
            let sample = decoder.sample_bytes(window);
            decode_row(&name, &decoder, &windows, sample, (seconds, repeats));
        }
    }
}
