//! The `shard` property: arbitrary bytes as a token-shard file (of either format: `u16`
//! or `u32` tokens) give either the error the format's documented checks name (a
//! `SourceError::File` for this file with the right `FileProblem`, or the token format's
//! `ShardProblem` inside it) or a shard whose every
//! token reads back as the file's bytes; samplers over it yield only windows inside it,
//! with the file's tokens and the id and epoch that name them; the token decoders write
//! exactly those tokens, refuse a type that cannot hold one (u16 from a u32 shard, i32
//! for a token above `i32::MAX`) and reject a wrong sample size instead of panicking.
//!
//! Shared by `fuzz/fuzz_targets/shard.rs` and `tests/prop_shard.rs` through `#[path]`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arbitrary::{Arbitrary, Unstructured};
use pinring::source::{
    FileProblem, NextToken, Order, Sampler, ShardFormat, ShardProblem, SourceError, TokenShard,
    TokenShards, TokenType, Tokens, Window, SHARD_HEADER_BYTES, SHARD_MAGIC,
};
use pinring::{Decode, Error};

/// Most samples of an epoch that are checked one by one.
const MAX_CHECKED: usize = 2048;

/// A shard file's bytes and a sampler set-up to read it with.
#[derive(Debug, Clone)]
pub struct ShardInput {
    pub file: Vec<u8>,
    pub window: u64,
    pub stride: Option<u64>,
    pub order: Order,
    pub rank: u64,
    pub world_size: u64,
    pub even_ranks: bool,
}

impl ShardInput {
    /// Reads an input from fuzz bytes: the sampler set-up, then the file — raw bytes, or
    /// (mostly) a header built from the input with its fields often right, so that the
    /// later checks are reached, followed by the rest of the input as tokens. Each draw
    /// takes the input's next bytes (integers little-endian, zeros past the end).
    pub fn decode(u: &mut Unstructured<'_>) -> arbitrary::Result<Self> {
        let x = u8::arbitrary(u)?;
        let window = match x % 8 {
            0 => 0,
            7 => u64::arbitrary(u)?,
            _ => 1 + u64::from(u8::arbitrary(u)? % 24),
        };
        let stride = if x & 0x08 != 0 {
            Some(u64::from(u8::arbitrary(u)? % 24))
        } else {
            None
        };
        let order = match (x >> 4) % 3 {
            0 => Order::Sequential,
            1 => Order::Shuffled {
                seed: u64::from(u16::arbitrary(u)?),
            },
            _ => Order::Random {
                seed: u64::from(u16::arbitrary(u)?),
            },
        };
        let y = u8::arbitrary(u)?;
        let world_size = match y % 8 {
            0 => 0,
            1..=4 => 1,
            5 | 6 => 2,
            _ => 3,
        };
        let rank = if y & 0x40 != 0 {
            u64::from((y >> 4) % 4)
        } else {
            0
        };
        let even_ranks = y & 0x80 != 0;
        let mode = u8::arbitrary(u)?;
        let file = if mode < 32 {
            // Raw: the rest of the input is the file.
            let mut file = Vec::new();
            while !u.is_empty() {
                file.push(u8::arbitrary(u)?);
            }
            file
        } else {
            // One fault at most, chosen by `mode % 8`; 0, 6, 7 and half the 5s build a
            // valid file.
            // Bit 0x20 picks the format: u32 tokens (LLaMA-3) or u16 (GPT-2).
            let fault = mode % 8;
            let format = if mode & 0x20 != 0 {
                ShardFormat::U32
            } else {
                ShardFormat::U16
            };
            let other = match format {
                ShardFormat::U16 => ShardFormat::U32,
                _ => ShardFormat::U16,
            };
            let magic = if fault == 1 {
                u32::arbitrary(u)? as i32
            } else {
                format.magic()
            };
            let version = match fault {
                // The other format's version half the time: a header mixing the two.
                2 if mode & 0x40 != 0 => other.version(),
                2 => u32::arbitrary(u)? as i32,
                _ => format.version(),
            };
            let mut header = vec![0u8; SHARD_HEADER_BYTES];
            if mode & 0x10 != 0 {
                // Junk in the header's unused words (readers must ignore it).
                let at = 12 + usize::from(u8::arbitrary(u)?) * 4 % (SHARD_HEADER_BYTES - 12);
                header[at] = u8::arbitrary(u)?;
            }
            let count_mode = u8::arbitrary(u)?;
            let mut tokens = Vec::new();
            while !u.is_empty() {
                tokens.push(u8::arbitrary(u)?);
            }
            // Fault 5 with bit 0x40: the tokens are written at the other format's width,
            // and the count is the number of those tokens (a u32 shard behind a u16
            // header, or the reverse).
            let wrong_width = fault == 5 && mode & 0x40 != 0;
            let width = if wrong_width { other } else { format }.token_bytes();
            if fault != 3 {
                tokens.truncate(tokens.len() / width * width);
            }
            let whole = (tokens.len() / width) as i64;
            let count = match (fault, count_mode % 5) {
                (4, 0) => 0,
                (4, 1) => -1 - i64::from(count_mode >> 3),
                (4, 2) => i64::from(i32::MAX),
                (4, 3) => whole + 1 + i64::from(count_mode >> 3),
                (4, _) => (whole - 1 - i64::from(count_mode >> 3)).max(1),
                _ => whole,
            } as i32;
            for (i, word) in [magic, version, count].into_iter().enumerate() {
                header[i * 4..i * 4 + 4].copy_from_slice(&word.to_le_bytes());
            }
            let mut file = header;
            file.extend_from_slice(&tokens);
            if fault == 3 {
                // Cut the file short, possibly into the header.
                let cut = usize::from(mode >> 4) * 70;
                file.truncate(file.len().saturating_sub(cut));
            }
            file
        };
        Ok(ShardInput {
            file,
            window,
            stride,
            order,
            rank,
            world_size,
            even_ranks,
        })
    }
}

impl<'a> Arbitrary<'a> for ShardInput {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        ShardInput::decode(u)
    }
}

/// What the documented checks of `TokenShard::open` say about `file`.
#[derive(Debug)]
enum Expected {
    /// A problem of any file.
    Empty,
    /// A problem of a token shard.
    Shard(ShardProblem),
}

/// What the documented checks of `TokenShard::open` say about `file`.
fn expected_problem(file: &[u8]) -> Option<Expected> {
    let len = file.len() as u64;
    let header = SHARD_HEADER_BYTES as u64;
    if len == 0 {
        return Some(Expected::Empty);
    }
    let shard = |p| Some(Expected::Shard(p));
    if len < header {
        return shard(ShardProblem::TruncatedHeader {
            len,
            needed: header,
        });
    }
    let word = |i: usize| i32::from_le_bytes(file[i * 4..i * 4 + 4].try_into().unwrap());
    let Some(format) = ShardFormat::from_magic(word(0)) else {
        return shard(ShardProblem::BadMagic {
            found: word(0),
            expected: SHARD_MAGIC,
        });
    };
    if word(1) != format.version() {
        return shard(ShardProblem::BadVersion {
            found: word(1),
            expected: format.version(),
        });
    }
    let count = word(2);
    if count <= 0 {
        return shard(ShardProblem::BadTokenCount {
            count: i64::from(count),
        });
    }
    let count = count as u64;
    let width = format.token_bytes() as u64;
    let needed = header + width * count;
    if needed > len {
        return shard(ShardProblem::TokensBeyondFile { count, needed, len });
    }
    if len > needed {
        return shard(ShardProblem::TrailingBytes {
            count,
            extra: len - needed,
            token_bytes: width,
        });
    }
    None
}

fn same_problem(got: &FileProblem, want: &Expected) -> bool {
    match want {
        Expected::Empty => matches!(got, FileProblem::Empty),
        Expected::Shard(want) => got.format_problem::<ShardProblem>() == Some(want),
    }
}

/// A file in the temp directory for this process (and thread), removed on drop.
pub struct TempFile(PathBuf);

impl TempFile {
    /// A fresh path for `tag` in this process and thread.
    pub fn new(tag: &str) -> Self {
        let thread = format!("{:?}", std::thread::current().id());
        let thread: String = thread.chars().filter(char::is_ascii_digit).collect();
        TempFile(std::env::temp_dir().join(format!(
            "pinring-fuzz-{tag}-{}-{thread}.bin",
            std::process::id()
        )))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// How far a passing check went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reached {
    /// The file was rejected with the problem the format's checks name.
    Rejected,
    /// The shard opened; the sampler set-up was rejected with a justified error.
    Opened,
    /// The shard opened and a sampler's windows were checked.
    Sampled,
}

/// Checks one input, writing its file at `file`'s path. `Err` describes the first
/// violation.
pub fn check(input: &ShardInput, file: &TempFile) -> Result<Reached, String> {
    let path = file.path();
    std::fs::write(path, &input.file).map_err(|e| format!("writing the test file: {e}"))?;
    let expected = expected_problem(&input.file);
    let shard = match (TokenShard::open(path), &expected) {
        (Ok(shard), None) => shard,
        (Ok(shard), Some(p)) => {
            return Err(format!("opened a malformed file ({p:?}) as {shard:?}"));
        }
        (Err(e), expected) => {
            let shown = e.to_string();
            return match (&e, expected) {
                (Error::Source(SourceError::File { path: p, problem }), Some(want))
                    if p == path && same_problem(problem, want) =>
                {
                    Ok(Reached::Rejected)
                }
                _ => Err(format!(
                    "open gave {e:?} ({shown}); the format's checks say {expected:?}"
                )),
            };
        }
    };
    let format = ShardFormat::from_magic(i32::from_le_bytes(
        input.file[..4].try_into().expect("a header"),
    ))
    .ok_or("opened a file of neither magic")?;
    if shard.format() != format {
        return Err(format!(
            "opened as {:?}, the magic says {format:?}",
            shard.format()
        ));
    }
    let tokens: Vec<u32> = input.file[SHARD_HEADER_BYTES..]
        .chunks_exact(format.token_bytes())
        .map(|b| match *b {
            [b0, b1] => u32::from(u16::from_le_bytes([b0, b1])),
            [b0, b1, b2, b3] => u32::from_le_bytes([b0, b1, b2, b3]),
            _ => unreachable!("widths are 2 and 4"),
        })
        .collect();
    if shard.len() != tokens.len() || shard.is_empty() {
        return Err(format!(
            "{} tokens, the file holds {}",
            shard.len(),
            tokens.len()
        ));
    }
    let shard = Arc::new(shard);
    let whole =
        Window::new(shard.clone(), 0, tokens.len()).ok_or("no window of the whole shard")?;
    match whole.read_bytes() {
        Ok(bytes) if bytes == input.file[SHARD_HEADER_BYTES..] => {}
        other => {
            return Err(format!(
                "the whole shard reads {other:?}, not the file's tokens"
            ))
        }
    }
    for (i, &t) in tokens.iter().enumerate() {
        let got = shard.token(i).map_err(|e| format!("token {i}: {e}"))?;
        if got != Some(t) {
            return Err(format!("token {i} reads {got:?}, the file has {t}"));
        }
    }
    for i in [
        tokens.len(),
        tokens.len() + 1,
        usize::MAX / 2 + 1,
        usize::MAX,
    ] {
        let got = shard.token(i).map_err(|e| format!("token {i}: {e}"))?;
        if got.is_some() {
            return Err(format!("token {i} past the end reads {got:?}"));
        }
    }
    check_sampler(input, shard, &tokens)
}

/// Builds the input's sampler over the shard; checks its verdict and its windows.
fn check_sampler(
    input: &ShardInput,
    shard: Arc<TokenShard>,
    tokens: &[u32],
) -> Result<Reached, String> {
    let file_path = shard.path().to_path_buf();
    let file_path = file_path.as_path();
    let shards = TokenShards::from_shards([shard]).map_err(|e| format!("from_shards: {e}"))?;
    let mut builder = Sampler::builder(shards)
        .window(input.window)
        .order(input.order)
        .shard(input.rank, input.world_size)
        .even_ranks(input.even_ranks);
    if let Some(stride) = input.stride {
        builder = builder.stride(stride);
    }
    let w = input.window;
    let stride = input.stride.unwrap_or(w);
    let n = tokens.len() as u64;
    let sampler = match builder.build() {
        Ok(s) => s,
        Err(e) => {
            let justified = match &e {
                Error::Source(SourceError::Zero("window")) => w == 0,
                Error::Source(SourceError::Zero("stride")) => w != 0 && stride == 0,
                Error::Source(SourceError::Zero("world_size")) => input.world_size == 0,
                Error::Source(SourceError::BadRank { rank, world_size }) => {
                    *rank >= *world_size && *world_size == input.world_size
                }
                // No window fits in the file, which is named, in tokens.
                Error::Source(SourceError::NoWindows {
                    window,
                    longest,
                    unit,
                    path: p,
                }) => {
                    *window == w
                        && *longest == n
                        && w > n
                        && *unit == "tokens"
                        && p.as_deref() == Some(file_path)
                }
                // Windows fit, but this rank's share of the epoch is empty.
                Error::Source(SourceError::EmptyShare {
                    rank,
                    world_size,
                    windows: got,
                    even_ranks,
                }) => {
                    let world = input.world_size;
                    let windows = if w <= n { (n - w) / stride + 1 } else { 0 };
                    let epoch = if input.even_ranks {
                        windows - windows % world
                    } else {
                        windows
                    };
                    let share = epoch / world + u64::from(input.rank < epoch % world);
                    (*rank, *world_size, *got, *even_ranks)
                        == (input.rank, world, windows, input.even_ranks)
                        && windows > 0
                        && share == 0
                }
                _ => false,
            };
            return if justified {
                Ok(Reached::Opened)
            } else {
                Err(format!("sampler build gave {e:?} for {input:?}"))
            };
        }
    };
    if w == 0 || stride == 0 || w > n || input.rank >= input.world_size {
        return Err(format!("sampler built for an impossible set-up {input:?}"));
    }
    let grid = (n - w) / stride + 1;
    if sampler.grid_windows() != grid {
        return Err(format!(
            "{} grid windows, expected {grid}",
            sampler.grid_windows()
        ));
    }
    let ty = [TokenType::U16, TokenType::I32, TokenType::I64][(n % 3) as usize];
    for epoch in 0..2 {
        let mut starts = Vec::new();
        for (i, window) in sampler.epoch(epoch).take(MAX_CHECKED).enumerate() {
            let (start, len) = (window.start() as u64, window.len() as u64);
            if len != w || start + len > n {
                return Err(format!("window {start}+{len} outside the shard of {n}"));
            }
            let want = &tokens[start as usize..(start + len) as usize];
            match window.to_vec() {
                Ok(got) if got == want => {}
                other => return Err(format!("window at {start} reads {other:?}")),
            }
            if input.order == Order::Sequential {
                let g = input.rank + i as u64 * input.world_size;
                if start != g * stride {
                    return Err(format!(
                        "sequential sample {i} starts at {start}, not {}",
                        g * stride
                    ));
                }
            }
            if !matches!(input.order, Order::Random { .. }) && start % stride != 0 {
                return Err(format!("grid window at {start}, off the stride {stride}"));
            }
            // One shard: a grid window's id is its grid index, a random one's its start.
            let id_start = match input.order {
                Order::Random { .. } => window.id(),
                _ => window.id() * stride,
            };
            if id_start != start || window.epoch() != epoch {
                return Err(format!(
                    "window at {start} of epoch {epoch} has id {} and epoch {}",
                    window.id(),
                    window.epoch()
                ));
            }
            if i < 64 {
                check_decoders(&window, want, ty)?;
            }
            starts.push(start);
        }
        if let (Order::Shuffled { .. }, 1, false) =
            (input.order, input.world_size, input.even_ranks)
            && starts.len() as u64 == grid
        {
            starts.sort_unstable();
            if starts
                .iter()
                .enumerate()
                .any(|(g, &s)| s != g as u64 * stride)
            {
                return Err("a shuffled epoch is not a permutation of the grid".into());
            }
        }
    }
    Ok(Reached::Sampled)
}

/// The token decoders write exactly the window's tokens, refuse a type that cannot hold
/// one, and reject a wrong size.
fn check_decoders(window: &Window<TokenShard>, want: &[u32], ty: TokenType) -> Result<(), String> {
    let read = |out: &[u8]| -> Vec<u64> {
        out.chunks_exact(ty.bytes())
            .map(|c| {
                let mut b = [0u8; 8];
                b[..c.len()].copy_from_slice(c);
                u64::from_le_bytes(b)
            })
            .collect()
    };
    let want64: Vec<u64> = want.iter().map(|&t| u64::from(t)).collect();
    // Whether `ty` holds these tokens: u16 never holds a u32 shard's (whatever their
    // values), i32 holds tokens up to i32::MAX.
    let holds = |tokens: &[u64]| match (window.format(), ty) {
        (ShardFormat::U32, TokenType::U16) => false,
        (_, TokenType::I32) => tokens.iter().all(|&t| t <= i32::MAX as u64),
        _ => true,
    };
    let tokens = Tokens::new(ty);
    let mut out = vec![0u8; tokens.sample_bytes(want.len() as u64)];
    match (tokens.decode(window.clone(), &mut out), holds(&want64)) {
        (Ok(()), true) => {
            if read(&out) != want64 {
                return Err(format!("Tokens as {ty} wrote the wrong values"));
            }
        }
        (Ok(()), false) => {
            return Err(format!("Tokens as {ty} accepted tokens it cannot hold"));
        }
        (Err(e), true) => return Err(format!("Tokens decode: {e}")),
        (Err(_), false) => {}
    }
    let mut short = vec![0u8; out.len().saturating_sub(1)];
    if tokens.decode(window.clone(), &mut short).is_ok() {
        return Err("Tokens accepted a sample one byte short".into());
    }
    let next = NextToken::new(ty);
    let mut out = vec![0u8; next.sample_bytes(want.len() as u64)];
    match next.decode(window.clone(), &mut out) {
        Ok(()) if want.len() >= 2 && holds(&want64) => {
            let (inputs, targets) = NextToken::split(&out);
            let t = want.len() - 1;
            if read(inputs) != want64[..t] || read(targets) != want64[1..] {
                return Err(format!("NextToken as {ty} wrote the wrong values"));
            }
        }
        Ok(()) if want.len() >= 2 => {
            return Err(format!("NextToken as {ty} accepted tokens it cannot hold"))
        }
        Ok(()) => return Err("NextToken accepted a window of one token".into()),
        Err(e) if want.len() >= 2 && holds(&want64) => {
            return Err(format!("NextToken decode: {e}"))
        }
        Err(_) => {}
    }
    Ok(())
}
