//! A training loop over `pinring::Loader`: a bigram language model in plain Rust, trained
//! data-parallel on `--world` ranks (in one process, one loader a rank), that saves its
//! weights and its loader state together, can be killed at any time, and resumes from the
//! last save on another number of ranks.
//!
//! ```text
//! cargo run --release --example make_shard -- data/train_000.bin 2000000
//! cargo run --release --example train_loop -- --world 2 --steps 40 --save ckpt.bin 'data/train_*.bin'
//! cargo run --release --example train_loop -- --world 3 --steps 80 --save ckpt.bin --resume 'data/train_*.bin'
//! ```
//!
//! The model is a table of `V × V` logits (tokens taken modulo `--vocab V`): the next
//! token's distribution given this one, trained with softmax cross-entropy and SGD. Each
//! step every rank pops its batch of `B` windows of `T + 1` tokens; the ranks' gradients
//! are averaged (as an all-reduce would), so every rank holds the same weights. The save
//! is one file, written under a temporary name and renamed into place: the weights and
//! the ranks' merged [`State`], which resumes the same global walk on any world size.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use pinring::source::{Order, TokenType};
use pinring::{Fence, Loader, State};
use pinring_examples::args::at_least_one;
use pinring_examples::{exit, ids_log, say, shards};

/// Trains a bigram model on token windows through pinring::Loader, saving the weights and
/// the loader's state together; --resume continues from the save on any --world.
#[derive(Debug, Parser)]
#[command(name = "train_loop", version)]
struct Args {
    /// Shard files, or patterns with `*` and `?` in the file name (quote them).
    #[arg(value_name = "PATH", required = true)]
    paths: Vec<String>,
    /// Data-parallel ranks, each with a loader of its own.
    #[arg(long, value_name = "W", default_value_t = 2, value_parser = at_least_one)]
    world: u64,
    /// Windows per batch on each rank.
    #[arg(long, value_name = "B", default_value_t = 8, value_parser = at_least_one)]
    batch_size: u64,
    /// Sequence length T: a window holds T + 1 tokens.
    #[arg(long, value_name = "T", default_value_t = 64, value_parser = at_least_one)]
    seq_len: u64,
    /// Train up to this step (counted from the start, also when resumed).
    #[arg(long, value_name = "N", default_value_t = 100, value_parser = at_least_one)]
    steps: u64,
    /// Epochs of the data at most.
    #[arg(long, value_name = "E", value_parser = at_least_one)]
    epochs: Option<u64>,
    /// The model's vocabulary: tokens are taken modulo V.
    #[arg(long, value_name = "V", default_value_t = 64, value_parser = at_least_one)]
    vocab: u64,
    /// The learning rate.
    #[arg(long, value_name = "LR", default_value_t = 0.5)]
    lr: f32,
    /// The shuffle's seed.
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// Where the weights and the loader state are saved (and resumed from).
    #[arg(long, value_name = "FILE")]
    save: Option<PathBuf>,
    /// Save every N steps.
    #[arg(long, value_name = "N", default_value_t = 10, value_parser = at_least_one)]
    save_every: u64,
    /// Resume from --save.
    #[arg(long)]
    resume: bool,
    /// Append each consumed window's id to this file, one line a batch: `step rank ids...`.
    #[arg(long, value_name = "FILE")]
    ids: Option<PathBuf>,
}

/// The model: logits of the next token given this one, `vocab × vocab`, row-major.
struct Bigram {
    vocab: usize,
    logits: Vec<f32>,
}

impl Bigram {
    /// Adds the gradient of the mean cross-entropy over `pairs` to `grad` (scaled by
    /// `scale`) and returns the summed loss.
    fn accumulate(&self, pairs: &[(usize, usize)], grad: &mut [f32], scale: f32) -> f64 {
        let v = self.vocab;
        let mut loss = 0.0f64;
        let mut p = vec![0f32; v];
        for &(x, y) in pairs {
            let row = &self.logits[x * v..(x + 1) * v];
            let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0f32;
            for (pi, &l) in p.iter_mut().zip(row) {
                *pi = (l - max).exp();
                sum += *pi;
            }
            loss += f64::from(sum.ln() - (row[y] - max));
            let g = &mut grad[x * v..(x + 1) * v];
            for (j, (gj, pj)) in g.iter_mut().zip(&p).enumerate() {
                let target = if j == y { 1.0 } else { 0.0 };
                *gj += scale * (pj / sum - target);
            }
        }
        loss
    }
}

/// A save: the step it was taken after, the weights, and the loader state.
struct Saved {
    weights: Vec<f32>,
    state: State,
}

/// Writes the save under a temporary name, then renames it into place: a kill leaves the
/// last whole save.
fn save(path: &Path, weights: &[f32], state: &State) -> std::io::Result<()> {
    let text = state.to_text();
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&(text.len() as u64).to_le_bytes())?;
    f.write_all(text.as_bytes())?;
    for w in weights {
        f.write_all(&w.to_le_bytes())?;
    }
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Reads a save back.
fn load(path: &Path, vocab: usize) -> Result<Saved, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let bad = || format!("{} is not a save of this program", path.display());
    let n = u64::from_le_bytes(
        bytes
            .get(..8)
            .ok_or_else(bad)?
            .try_into()
            .map_err(|_| bad())?,
    );
    let n = usize::try_from(n).map_err(|_| bad())?;
    let text = std::str::from_utf8(bytes.get(8..8 + n).ok_or_else(bad)?).map_err(|_| bad())?;
    let state = State::from_text(text).map_err(|e| format!("{}: {e}", path.display()))?;
    let weights: Vec<f32> = bytes[8 + n..]
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    if weights.len() != vocab * vocab {
        return Err(format!(
            "{} holds a model of {} weights, not {vocab}×{vocab}: pass the --vocab it was saved with",
            path.display(),
            weights.len()
        ));
    }
    Ok(Saved { weights, state })
}

fn run(args: Args) -> Result<(), String> {
    let vocab = usize::try_from(args.vocab).map_err(|e| e.to_string())?;
    let source = shards::open(&args.paths)
        .map_err(|e| e.to_string())?
        .decode_as(TokenType::I32)
        .windows(args.seq_len + 1)
        .order(Order::Shuffled { seed: args.seed })
        .build()
        .map_err(|e| e.to_string())?;
    let resumed = match (&args.save, args.resume) {
        (Some(path), true) => Some(load(path, vocab)?),
        (None, true) => return Err("--resume needs --save FILE".to_owned()),
        _ => None,
    };
    let mut model = Bigram {
        vocab,
        logits: match &resumed {
            Some(saved) => saved.weights.clone(),
            None => vec![0.0; vocab * vocab],
        },
    };
    let mut loaders = (0..args.world)
        .map(|rank| {
            let mut b = Loader::builder(source.clone())
                .batch_size(args.batch_size)
                .rank(rank)
                .world_size(args.world)
                .decode_threads(1);
            if let Some(e) = args.epochs {
                b = b.epochs(e);
            }
            if let Some(saved) = &resumed {
                b = b.resume(&saved.state);
            }
            b.build()
        })
        .collect::<pinring::Result<Vec<_>>>()
        .map_err(|e| e.to_string())?;
    let mut step = resumed.as_ref().map_or(0, |s| s.state.step());
    if let Some(saved) = &resumed {
        say!(
            "resumed at step {step} on {} ranks (saved on {})",
            args.world,
            saved.state.world_size()
        );
    }
    let mut ids = ids_log::open(args.ids.as_deref())?;
    let per_rank = (args.batch_size * args.seq_len) as f32;
    let scale = 1.0 / (per_rank * args.world as f32);
    'steps: while step < args.steps {
        let mut grad = vec![0f32; vocab * vocab];
        let mut loss = 0.0;
        for (rank, loader) in loaders.iter_mut().enumerate() {
            let Some(batch) = loader.pop().map_err(|e| e.to_string())? else {
                say!("the data ended at step {step}");
                break 'steps;
            };
            let tokens: Vec<usize> = batch
                .bytes()
                .chunks_exact(4)
                .map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize % vocab)
                .collect();
            let window = (args.seq_len + 1) as usize;
            let pairs: Vec<(usize, usize)> = tokens
                .chunks_exact(window)
                .flat_map(|w| w.windows(2).map(|p| (p[0], p[1])))
                .collect();
            loss += model.accumulate(&pairs, &mut grad, scale);
            if let Some(f) = &mut ids {
                let list: Vec<String> = batch.sample_ids().iter().map(u64::to_string).collect();
                let line = format!("{} {rank} {}", batch.step().unwrap_or(step), list.join(" "));
                ids_log::append(f, &line)?;
            }
            batch.release(Fence::Sync).map_err(|e| e.to_string())?;
        }
        for (w, g) in model.logits.iter_mut().zip(&grad) {
            *w -= args.lr * g;
        }
        step += 1;
        say!(
            "step {step} loss {:.4}",
            loss / f64::from(per_rank * args.world as f32)
        );
        if let Some(path) = &args.save {
            if step % args.save_every == 0 {
                let states: Vec<State> = loaders.iter().map(Loader::state).collect();
                let state = State::merge(&states).map_err(|e| e.to_string())?;
                save(path, &model.logits, &state).map_err(|e| e.to_string())?;
                say!("saved step {step} to {}", path.display());
            }
        }
    }
    Ok(())
}

pub(crate) fn main() -> ExitCode {
    exit::status(run(Args::parse()))
}
