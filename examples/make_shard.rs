//! Writes a synthetic token shard in the llm.c / modded-nanogpt `.bin` format.
//!
//! ```text
//! cargo run --release --example make_shard -- PATH TOKENS [SEED]
//! ```
//!
//! Tokens are uniform over the GPT-2 vocabulary (0..50257), drawn from splitmix64 with
//! SEED (default 0), so the same arguments always give the same file.

use std::process::ExitCode;

use pinring::source::{ShardWriter, SplitMix64};

const USAGE: &str = "usage: make_shard PATH TOKENS [SEED]   (TOKENS in 1..=2147483647)";
const VOCAB: u64 = 50257;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (path, tokens, seed) = match args.as_slice() {
        [path, tokens] => (path, tokens.parse::<u64>(), Ok(0)),
        [path, tokens, seed] => (path, tokens.parse::<u64>(), seed.parse::<u64>()),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let (Ok(tokens @ 1..), Ok(seed)) = (tokens, seed) else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    match write(path, tokens, seed) {
        Ok(()) => {
            println!("wrote {tokens} tokens to {path}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn write(path: &str, tokens: u64, seed: u64) -> pinring::Result<()> {
    let mut rng = SplitMix64::new(seed);
    let mut writer = ShardWriter::create(path)?;
    let mut chunk = vec![0u16; 1 << 16];
    let mut left = tokens;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        for t in &mut chunk[..n] {
            *t = rng.below(VOCAB) as u16;
        }
        // The writer refuses a count past the format's i32 limit, naming the file.
        writer.write(&chunk[..n])?;
        left -= n as u64;
    }
    writer.finish()?;
    Ok(())
}
