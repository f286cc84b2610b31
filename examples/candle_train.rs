//! A causal language model trained by candle through `pinring::Loader` (feature `candle`):
//! token windows decoded as `u32` (what candle's `index_select` takes) become one candle
//! tensor a step (`Batch::to_candle`), a one-block transformer (token and position
//! embeddings, causal self-attention, an MLP, RMS norms, a tied-free head) learns them with
//! AdamW, and the loss is logged every step. It saves the model, AdamW's moments and the
//! loader's state together, can stop after any step, and resumes exactly: the resumed run
//! pops the batches the uninterrupted run pops and its losses are that run's.
//!
//! ```text
//! cargo run --release -p pinring-examples --features candle --example make_shard -- data/train_000.bin 200000
//! cargo run --release -p pinring-examples --features candle --example candle_train -- \
//!     --steps 60 --stop-after 30 --save ckpt 'data/train_*.bin'
//! cargo run --release -p pinring-examples --features candle --example candle_train -- \
//!     --steps 60 --save ckpt --resume 'data/train_*.bin'
//! ```
//!
//! AdamW is candle-nn's update rule written out here, because candle-nn's `AdamW` keeps its
//! moments private and an exact resume needs them. The weights start from a seeded
//! generator (SplitMix64), so that two runs with the same `--seed` start alike. The save is
//! a folder written whole under a temporary name and renamed into place: `model.safetensors`
//! (the weights), `adamw.safetensors` (the moments and the step) and `loader.json` (the
//! loader's [`State`]).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use candle_core::{DType, Device, Tensor, Var, D};
use clap::Parser;
use pinring::source::{Order, SplitMix64, TokenType};
use pinring::{Dtype, Loader, State};
use pinring_examples::args::{at_least_one, at_least_one_usize};
use pinring_examples::{exit, ids_log, say, shards};

/// Trains a one-block causal transformer with candle on token windows popped from
/// pinring::Loader; saves model, AdamW and loader state together; --resume continues exactly.
#[derive(Debug, Parser)]
#[command(name = "candle_train", version)]
struct Args {
    /// llm.c shard files, or patterns with `*` and `?` in the file name (quote them).
    #[arg(value_name = "PATH", required = true)]
    paths: Vec<String>,
    /// Windows per batch.
    #[arg(long, value_name = "B", default_value_t = 8, value_parser = at_least_one)]
    batch_size: u64,
    /// Context length T: a window holds T + 1 tokens.
    #[arg(long, value_name = "T", default_value_t = 16, value_parser = at_least_one_usize)]
    seq_len: usize,
    /// The model's vocabulary: every token must be below it.
    #[arg(long, value_name = "V", default_value_t = 64, value_parser = at_least_one_usize)]
    vocab: usize,
    /// The model's width.
    #[arg(long, value_name = "D", default_value_t = 32, value_parser = at_least_one_usize)]
    dim: usize,
    /// Train up to this step (counted from the start, also when resumed).
    #[arg(long, value_name = "N", default_value_t = 40, value_parser = at_least_one)]
    steps: u64,
    /// Save after this step and stop (as a run killed after its save would).
    #[arg(long, value_name = "K", value_parser = at_least_one)]
    stop_after: Option<u64>,
    /// AdamW's learning rate.
    #[arg(long, value_name = "LR", default_value_t = 3e-3)]
    lr: f64,
    /// The seed of the weights and of the windows' shuffle.
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// The folder the model, AdamW and loader states are saved in (and resumed from).
    #[arg(long, value_name = "DIR")]
    save: Option<PathBuf>,
    /// Resume from --save.
    #[arg(long)]
    resume: bool,
    /// Append each step's window ids to this file, one line a step: `step ids...`.
    #[arg(long, value_name = "FILE")]
    ids: Option<PathBuf>,
}

type R<T> = Result<T, String>;

fn c(e: candle_core::Error) -> String {
    e.to_string()
}

/// The model's weights, by name (sorted: the order every pass and every save takes).
struct Model {
    vars: Vec<(String, Var)>,
    heads: HashMap<String, usize>,
    dim: usize,
}

impl Model {
    /// Weights drawn from `seed`: normal-ish (the sum of 4 uniforms) with std
    /// `0.02`, norms' gains 1.
    fn new(vocab: usize, t: usize, dim: usize, seed: u64) -> R<Self> {
        let mut rng = SplitMix64::new(seed);
        let shapes: [(&str, Vec<usize>); 9] = [
            ("attn.k", vec![dim, dim]),
            ("attn.o", vec![dim, dim]),
            ("attn.q", vec![dim, dim]),
            ("attn.v", vec![dim, dim]),
            ("head", vec![dim, vocab]),
            ("mlp.down", vec![4 * dim, dim]),
            ("mlp.up", vec![dim, 4 * dim]),
            ("wpe", vec![t, dim]),
            ("wte", vec![vocab, dim]),
        ];
        let mut vars = Vec::new();
        for (name, shape) in shapes {
            let n: usize = shape.iter().product();
            let values: Vec<f32> = (0..n)
                .map(|_| {
                    let u: f64 = (0..4)
                        .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
                        .sum();
                    ((u - 2.0) * 0.02 * 3f64.sqrt()) as f32
                })
                .collect();
            let t = Tensor::from_vec(values, shape, &Device::Cpu).map_err(c)?;
            vars.push((name.to_owned(), Var::from_tensor(&t).map_err(c)?));
        }
        for name in ["norm.1", "norm.2", "norm.f"] {
            let t = Tensor::ones(dim, DType::F32, &Device::Cpu).map_err(c)?;
            vars.push((name.to_owned(), Var::from_tensor(&t).map_err(c)?));
        }
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        let heads = vars
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.clone(), i))
            .collect();
        Ok(Model { vars, heads, dim })
    }

    fn w(&self, name: &str) -> &Tensor {
        self.vars[self.heads[name]].1.as_tensor()
    }

    fn rms_norm(&self, x: &Tensor, name: &str) -> candle_core::Result<Tensor> {
        let ms = x.sqr()?.mean_keepdim(D::Minus1)?;
        x.broadcast_div(&(ms + 1e-5)?.sqrt()?)?
            .broadcast_mul(self.w(name))
    }

    /// The mean next-token cross-entropy of `windows` (`[B, T + 1]`, `u32`).
    fn loss(&self, windows: &Tensor) -> candle_core::Result<Tensor> {
        let (b, t1) = windows.dims2()?;
        let t = t1 - 1;
        let inputs = windows.narrow(1, 0, t)?.contiguous()?;
        let targets = windows.narrow(1, 1, t)?.contiguous()?.flatten_all()?;
        let tok = self
            .w("wte")
            .index_select(&inputs.flatten_all()?, 0)?
            .reshape((b, t, self.dim))?;
        let x = tok.broadcast_add(&self.w("wpe").narrow(0, 0, t)?)?;
        // Causal self-attention, one head.
        let h = self.rms_norm(&x, "norm.1")?;
        let proj = |name: &str| h.broadcast_matmul(self.w(name));
        let (q, k, v) = (proj("attn.q")?, proj("attn.k")?, proj("attn.v")?);
        let scores = (q.matmul(&k.t()?.contiguous()?)? / (self.dim as f64).sqrt())?;
        let mask: Vec<f32> = (0..t * t)
            .map(|i| if i % t > i / t { -1e9 } else { 0.0 })
            .collect();
        let mask = Tensor::from_vec(mask, (t, t), &Device::Cpu)?;
        let attn = candle_nn::ops::softmax(&scores.broadcast_add(&mask)?, D::Minus1)?;
        let x = (x + attn.matmul(&v)?.broadcast_matmul(self.w("attn.o"))?)?;
        // The MLP.
        let h = self.rms_norm(&x, "norm.2")?;
        let up = h.broadcast_matmul(self.w("mlp.up"))?.gelu()?;
        let x = (x + up.broadcast_matmul(self.w("mlp.down"))?)?;
        let logits = self
            .rms_norm(&x, "norm.f")?
            .broadcast_matmul(self.w("head"))?;
        candle_nn::loss::cross_entropy(&logits.reshape((b * t, ()))?, &targets)
    }
}

/// AdamW as candle-nn's `AdamW::step` computes it, its moments and step kept here.
struct AdamW {
    lr: f64,
    step: u64,
    moments: Vec<(Tensor, Tensor)>,
}

const BETA1: f64 = 0.9;
const BETA2: f64 = 0.999;
const EPS: f64 = 1e-8;
const WEIGHT_DECAY: f64 = 0.01;

impl AdamW {
    fn new(model: &Model, lr: f64) -> candle_core::Result<Self> {
        let moments = model
            .vars
            .iter()
            .map(|(_, v)| Ok((v.zeros_like()?, v.zeros_like()?)))
            .collect::<candle_core::Result<_>>()?;
        Ok(AdamW {
            lr,
            step: 0,
            moments,
        })
    }

    fn update(&mut self, model: &Model, loss: &Tensor) -> candle_core::Result<()> {
        let grads = loss.backward()?;
        self.step += 1;
        let scale_m = 1.0 / (1.0 - BETA1.powi(self.step as i32));
        let scale_v = 1.0 / (1.0 - BETA2.powi(self.step as i32));
        for ((_, var), (m, v)) in model.vars.iter().zip(&mut self.moments) {
            let Some(g) = grads.get(var.as_tensor()) else {
                continue;
            };
            *m = ((&*m * BETA1)? + (g * (1.0 - BETA1))?)?;
            *v = ((&*v * BETA2)? + (g.sqr()? * (1.0 - BETA2))?)?;
            let m_hat = (&*m * scale_m)?;
            let v_hat = (&*v * scale_v)?;
            let decayed = (var.as_tensor() * (1.0 - self.lr * WEIGHT_DECAY))?;
            let delta = (m_hat / (v_hat.sqrt()? + EPS)?)?;
            var.set(&(decayed - (delta * self.lr)?)?)?;
        }
        Ok(())
    }
}

/// Saves the model, AdamW and the loader's state into `dir`, whole: written into a
/// temporary folder beside it, then renamed over it.
fn save(dir: &Path, model: &Model, adam: &AdamW, state: &State) -> R<()> {
    let tmp = dir.with_extension("tmp");
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
    let weights: HashMap<String, Tensor> = model
        .vars
        .iter()
        .map(|(n, v)| (n.clone(), v.as_tensor().clone()))
        .collect();
    candle_core::safetensors::save(&weights, tmp.join("model.safetensors")).map_err(c)?;
    let mut moments = HashMap::new();
    for ((name, _), (m, v)) in model.vars.iter().zip(&adam.moments) {
        moments.insert(format!("m.{name}"), m.clone());
        moments.insert(format!("v.{name}"), v.clone());
    }
    moments.insert(
        "step".to_owned(),
        Tensor::new(&[adam.step as i64], &Device::Cpu).map_err(c)?,
    );
    candle_core::safetensors::save(&moments, tmp.join("adamw.safetensors")).map_err(c)?;
    let mut f = std::fs::File::create(tmp.join("loader.json")).map_err(|e| e.to_string())?;
    f.write_all(state.to_text().as_bytes())
        .map_err(|e| e.to_string())?;
    f.sync_all().map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&tmp, dir).map_err(|e| format!("{}: {e}", dir.display()))
}

/// Loads a save of `dir` into `model` and `adam`; returns the loader's state.
fn load(dir: &Path, model: &Model, adam: &mut AdamW) -> R<State> {
    let at = |name: &str| dir.join(name);
    let weights = candle_core::safetensors::load(at("model.safetensors"), &Device::Cpu)
        .map_err(|e| format!("{}: {e}", at("model.safetensors").display()))?;
    let moments = candle_core::safetensors::load(at("adamw.safetensors"), &Device::Cpu)
        .map_err(|e| format!("{}: {e}", at("adamw.safetensors").display()))?;
    let missing = |what: &str| {
        format!(
            "{} holds no {what}: not a save of this model",
            dir.display()
        )
    };
    for ((name, var), (m, v)) in model.vars.iter().zip(&mut adam.moments) {
        let w = weights.get(name).ok_or_else(|| missing(name))?;
        var.set(w).map_err(|e| {
            format!("{name}: {e} (pass the --vocab, --dim and --seq-len it was saved with)")
        })?;
        *m = moments
            .get(&format!("m.{name}"))
            .ok_or_else(|| missing(name))?
            .clone();
        *v = moments
            .get(&format!("v.{name}"))
            .ok_or_else(|| missing(name))?
            .clone();
    }
    let step = moments.get("step").ok_or_else(|| missing("step"))?;
    adam.step = step.to_vec1::<i64>().map_err(c)?[0] as u64;
    let text = std::fs::read_to_string(at("loader.json"))
        .map_err(|e| format!("{}: {e}", at("loader.json").display()))?;
    State::from_text(&text).map_err(|e| format!("{}: {e}", at("loader.json").display()))
}

fn run(args: Args) -> R<()> {
    let source = shards::open(&args.paths)
        .map_err(|e| e.to_string())?
        .decode_as(TokenType::U32)
        .windows(args.seq_len as u64 + 1)
        .order(Order::Shuffled { seed: args.seed })
        .build()
        .map_err(|e| e.to_string())?;
    let model = Model::new(args.vocab, args.seq_len, args.dim, args.seed)?;
    let mut adam = AdamW::new(&model, args.lr).map_err(c)?;
    let mut builder = Loader::builder(source)
        .batch_size(args.batch_size)
        .decode_threads(1);
    let state = match (&args.save, args.resume) {
        (Some(dir), true) => Some(load(dir, &model, &mut adam)?),
        (None, true) => return Err("--resume needs --save DIR".to_owned()),
        _ => None,
    };
    if let Some(state) = &state {
        builder = builder.resume(state);
        say!("resumed at step {}", state.step());
    }
    let mut loader = builder.build().map_err(|e| e.to_string())?;
    let mut ids = ids_log::open(args.ids.as_deref())?;
    let shape = [args.batch_size as usize, args.seq_len + 1];
    let mut step = adam.step;
    while step < args.steps {
        let Some(batch) = loader.pop().map_err(|e| e.to_string())? else {
            say!("the data ended at step {step}");
            break;
        };
        let windows = batch.to_candle(Dtype::U32, &shape).map_err(c)?;
        if let Some(f) = &mut ids {
            let list: Vec<String> = batch.sample_ids().iter().map(u64::to_string).collect();
            ids_log::append(
                f,
                &format!("{} {}", batch.step().unwrap_or(step), list.join(" ")),
            )?;
        }
        // The tensor owns its copy: the slot goes back to the pipeline before the step.
        drop(batch);
        let largest = windows
            .max_all()
            .and_then(|m| m.to_scalar::<u32>())
            .map_err(c)?;
        if largest as usize >= args.vocab {
            return Err(format!(
                "token {largest} is not below --vocab {}",
                args.vocab
            ));
        }
        let loss = model.loss(&windows).map_err(c)?;
        adam.update(&model, &loss).map_err(c)?;
        step += 1;
        say!("step {step} loss {}", loss.to_scalar::<f32>().map_err(c)?);
        if args.stop_after == Some(step) || (step == args.steps && args.save.is_some()) {
            if let Some(dir) = &args.save {
                save(dir, &model, &adam, &loader.state())?;
                say!("saved step {step} to {}", dir.display());
            }
            if args.stop_after == Some(step) {
                say!("stopped after step {step}");
                break;
            }
        }
    }
    Ok(())
}

pub(crate) fn main() -> ExitCode {
    exit::status(run(Args::parse()))
}
