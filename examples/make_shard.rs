//! Writes a synthetic token shard in llm.c's `.bin` format: `u16` tokens (the GPT-2
//! format, also modded-nanogpt's) or, with `--u32`, `u32` tokens (the LLaMA-3 format).
//!
//! ```text
//! cargo run --release --example make_shard -- PATH TOKENS [SEED] [--u32] [--vocab V]
//!     [--doc-len N] [--bos ID]
//! cargo run --release --example make_shard -- --help
//! ```
//!
//! The tokens are documents, each a `bos` token (GPT-2's 50256, or LLaMA-3's 128000 with
//! `--u32`) and then tokens uniform over the rest of `0..V` (by default the GPT-2
//! vocabulary, 50257, or LLaMA-3's, 128256, with `--u32`): the shard's first token starts
//! one, and each later token starts the next with probability 1/N, so documents have
//! geometric lengths of mean N (`--doc-len`, default 1000 tokens: the scale of web text,
//! so that a packed-documents run walks an epoch in a sensible number of steps). Everything
//! is drawn from splitmix64 with SEED (default 0), so the same arguments always give the
//! same file. Every argument is checked before anything is written, and the shard is
//! written under a temporary name in the same directory and renamed into place once
//! complete: a failure leaves no file, and never a partial shard at PATH.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use pinring::source::{ShardFormat, ShardToken, ShardWriter, SplitMix64, GPT2_BOS, LLAMA3_BOS};
use pinring_examples::{exit, say};

/// The most tokens a shard holds: its header counts them in an `i32`.
const MAX_TOKENS: u64 = i32::MAX as u64;
/// GPT-2's vocabulary, the default for `u16` shards.
const GPT2_VOCAB: u64 = 50257;
/// LLaMA-3's vocabulary, the default for `u32` shards.
const LLAMA3_VOCAB: u64 = 128_256;
/// The mean document length by default, in tokens.
const DOC_LEN: u64 = 1000;

/// Writes a synthetic token shard in llm.c's .bin format (u16 tokens, or u32 with --u32):
/// documents of random tokens, each starting with the bos token, the same file for the
/// same arguments. The shard appears at PATH only once complete; a failure leaves no
/// file.
#[derive(Debug, Parser)]
#[command(name = "make_shard", version)]
struct Args {
    /// The shard file to write (replaced if it exists).
    path: PathBuf,
    /// Tokens in the shard, from 1 to 2147483647 (the header counts them in an i32).
    #[arg(value_parser = token_count)]
    tokens: u64,
    /// Seed of the token generator (splitmix64).
    #[arg(default_value_t = 0)]
    seed: u64,
    /// Write u32 tokens (llm.c's LLaMA-3 format: magic 20240801, version 7) instead of
    /// u16 (GPT-2: magic 20240520, version 1).
    #[arg(long)]
    u32: bool,
    /// Tokens are drawn from 0..V [default: 50257, or 128256 with --u32; at most 65536
    /// for u16 tokens].
    #[arg(long, value_name = "V", value_parser = vocab)]
    vocab: Option<u64>,
    /// Mean document length in tokens: each document is the bos token and then random
    /// tokens, its length geometric of mean N (at least 1).
    #[arg(long, value_name = "N", default_value_t = DOC_LEN, value_parser = doc_len)]
    doc_len: u64,
    /// The token that starts each document (never drawn otherwise) [default: 50256, GPT-2's
    /// <|endoftext|>, or 128000, LLaMA-3's <|begin_of_text|>, with --u32].
    #[arg(long, value_name = "ID")]
    bos: Option<u64>,
}

fn token_count(s: &str) -> Result<u64, String> {
    let why = || format!("TOKENS must be a whole number from 1 to {MAX_TOKENS}");
    match s.parse::<u64>() {
        Ok(n @ 1..=MAX_TOKENS) => Ok(n),
        Ok(0) => Err(why()),
        Ok(n) => Err(format!(
            "{n} is too many for one shard: {} (its header counts tokens in an i32)",
            why()
        )),
        Err(_) if s.starts_with('-') => Err(why()),
        Err(e) => Err(format!("{e}: {}", why())),
    }
}

fn vocab(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("the vocabulary needs at least 1 token".into()),
        Ok(n) if n > 1 << 32 => Err(format!("{n} is more than u32 tokens can number (2^32)")),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

fn doc_len(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(0) => Err("a document holds at least its bos token: give N of at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// The checked arguments: nothing is written before these all hold.
struct Plan {
    format: ShardFormat,
    vocab: u64,
    /// The token that starts each document.
    bos: u64,
    /// Where the shard is written before it is renamed to `path`.
    temp: PathBuf,
}

fn plan(args: &Args) -> Result<Plan, String> {
    let format = if args.u32 {
        ShardFormat::U32
    } else {
        ShardFormat::U16
    };
    let vocab = args.vocab.unwrap_or(match format {
        ShardFormat::U16 => GPT2_VOCAB,
        _ => LLAMA3_VOCAB,
    });
    if format == ShardFormat::U16 && vocab > 1 << 16 {
        return Err(format!(
            "--vocab {vocab} does not fit u16 tokens (at most 65536): add --u32 for a u32 shard"
        ));
    }
    let bos = args.bos.unwrap_or(match format {
        ShardFormat::U16 => u64::from(GPT2_BOS),
        _ => u64::from(LLAMA3_BOS),
    });
    let most = match format {
        ShardFormat::U16 => u64::from(u16::MAX),
        _ => u64::from(u32::MAX),
    };
    if bos > most {
        return Err(format!(
            "--bos {bos} does not fit {} tokens (at most {most}){}",
            format.describe(),
            if format == ShardFormat::U16 {
                ": add --u32 for a u32 shard"
            } else {
                ""
            }
        ));
    }
    if vocab == 1 && bos == 0 && args.doc_len > 1 {
        return Err(
            "--vocab 1 holds only the bos token 0: documents longer than 1 token need \
             another token (a larger --vocab, or --doc-len 1)"
                .into(),
        );
    }
    let path = &args.path;
    if path.is_dir() {
        return Err(format!(
            "{}: is a directory; give the path of the shard file to write",
            path.display()
        ));
    }
    let name = path
        .file_name()
        .ok_or_else(|| format!("{}: not a file name", path.display()))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        let why = if dir.exists() {
            "is not a directory"
        } else {
            "does not exist"
        };
        return Err(format!("{}: {} {why}", path.display(), dir.display()));
    }
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".tmp-{}", std::process::id()));
    Ok(Plan {
        format,
        vocab,
        bos,
        temp: dir.join(temp_name),
    })
}

pub(crate) fn main() -> ExitCode {
    let args = Args::parse();
    let plan = match plan(&args) {
        Ok(plan) => plan,
        Err(why) => return exit::bad_argument(why),
    };
    let written = match plan.format {
        ShardFormat::U16 => write::<u16>(&args, &plan),
        _ => write::<u32>(&args, &plan),
    };
    // Complete: rename into place (atomic within the directory). Failed: remove the
    // temporary file, so that nothing is left behind.
    let result = written
        .map_err(|e| format!("writing {}: {e}", args.path.display()))
        .and_then(|()| {
            std::fs::rename(&plan.temp, &args.path).map_err(|e| {
                format!(
                    "renaming {} to {}: {e}",
                    plan.temp.display(),
                    args.path.display()
                )
            })
        });
    match result {
        Ok(()) => {
            say!(
                "wrote {} {} tokens (vocabulary {}; documents of {} tokens on average, each \
                 starting with bos {}) to {}",
                args.tokens,
                plan.format.describe(),
                plan.vocab,
                args.doc_len,
                plan.bos,
                args.path.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = std::fs::remove_file(&plan.temp);
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A token type the generator can draw: `u16` or `u32`.
trait Draw: ShardToken + Default {
    /// `x`, which is below the vocabulary the plan checked against this type.
    fn from_draw(x: u64) -> Self;
}

impl Draw for u16 {
    fn from_draw(x: u64) -> Self {
        u16::try_from(x).unwrap_or(u16::MAX)
    }
}

impl Draw for u32 {
    fn from_draw(x: u64) -> Self {
        u32::try_from(x).unwrap_or(u32::MAX)
    }
}

/// Writes the shard at the plan's temporary path: the first token `bos`, each later one
/// `bos` with probability `1 / doc_len` (a new document), else uniform over the vocabulary
/// without `bos`.
fn write<T: Draw>(args: &Args, plan: &Plan) -> pinring::Result<()> {
    let mut rng = SplitMix64::new(args.seed);
    let mut writer = ShardWriter::<T>::create_as(&plan.temp)?;
    let mut chunk = [T::default(); 1 << 14];
    // The other tokens: 0..vocab less bos (drawn from one fewer and shifted past it).
    let bos_drawable = plan.bos < plan.vocab;
    let others = plan.vocab - u64::from(bos_drawable);
    let mut left = args.tokens;
    let mut first = true;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        for t in &mut chunk[..n] {
            let starts = std::mem::take(&mut first) || rng.below(args.doc_len) == 0;
            let x = if starts || others == 0 {
                plan.bos
            } else {
                let x = rng.below(others);
                x + u64::from(bos_drawable && x >= plan.bos)
            };
            *t = T::from_draw(x);
        }
        writer.write(&chunk[..n])?;
        left -= n as u64;
    }
    writer.finish()?;
    Ok(())
}
