//! A causal language model trained by candle through `pinring::Loader` (feature `candle`):
//! token windows decoded as `u32` (what candle's `index_select` takes) become one candle
//! tensor a step (`Batch::to_candle`), a one-block transformer (token and position
//! embeddings, causal self-attention, an MLP, RMS norms, a tied-free head) learns them with
//! AdamW, and the loss is logged every step. It saves the model, AdamW's moments and the
//! loader's state together, can stop after any step, and resumes exactly: the resumed run
//! pops the batches the uninterrupted run pops and its losses are that run's.
//!
//! With `--device cuda` (feature `candle-cuda`) the loader runs on pinring's cuda backend and
//! each batch reaches candle by `Batch::into_candle_as`: a device-to-device copy on candle's
//! stream, the batch released fenced on that stream, no host sync. `--compare-llama2c`
//! then also trains the same model, from the same start, on candle's own `llama2-c` data path
//! (a random window a sample, two `Tensor::new` a sample, `Tensor::stack`), and prints the
//! host time each data path takes a step (medians), measured in the same run.
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
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor, Var, D};
use clap::{Parser, ValueEnum};
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
    /// Where the model trains and the batches go: candle's cpu device, or cuda device 0
    /// (feature `candle-cuda`), fed by pinring's cuda backend.
    #[arg(long, value_enum, default_value_t = Where::Cpu)]
    device: Where,
    /// After the run, train the same model from the same start for as many steps on candle's
    /// `llama2-c` data path (the first PATH's tokens), and print each data path's host time
    /// a step (medians).
    #[arg(long)]
    compare_llama2c: bool,
}

/// The device the model trains on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Where {
    Cpu,
    Cuda,
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
    fn new(vocab: usize, t: usize, dim: usize, seed: u64, device: &Device) -> R<Self> {
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
            let t = Tensor::from_vec(values, shape, device).map_err(c)?;
            vars.push((name.to_owned(), Var::from_tensor(&t).map_err(c)?));
        }
        for name in ["norm.1", "norm.2", "norm.f"] {
            let t = Tensor::ones(dim, DType::F32, device).map_err(c)?;
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
        let mask = Tensor::from_vec(mask, (t, t), windows.device())?;
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
            // Detached: a gradient carries the step's graph, and a moment kept with it
            // would keep every step's graph alive (memory growing by a step's activations
            // each step; candle-nn's AdamW keeps its moments as `Var`s for the same reason).
            *m = ((&*m * BETA1)? + (g * (1.0 - BETA1))?)?.detach();
            *v = ((&*v * BETA2)? + (g.sqr()? * (1.0 - BETA2))?)?.detach();
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
fn load(dir: &Path, model: &Model, adam: &mut AdamW, device: &Device) -> R<State> {
    let at = |name: &str| dir.join(name);
    let weights = candle_core::safetensors::load(at("model.safetensors"), device)
        .map_err(|e| format!("{}: {e}", at("model.safetensors").display()))?;
    let moments = candle_core::safetensors::load(at("adamw.safetensors"), device)
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
    adam.step = step
        .to_device(&Device::Cpu)
        .and_then(|s| s.to_vec1::<i64>())
        .map_err(c)?[0] as u64;
    let text = std::fs::read_to_string(at("loader.json"))
        .map_err(|e| format!("{}: {e}", at("loader.json").display()))?;
    State::from_text(&text).map_err(|e| format!("{}: {e}", at("loader.json").display()))
}

/// Host times of a run's data path, a step each.
#[derive(Default)]
struct Timings {
    /// `loader.pop()`.
    pop: Vec<Duration>,
    /// The pop and the batch made a tensor.
    whole: Vec<Duration>,
}

/// A batch of windows as one `(B, T + 1)` `u32` tensor on the model's device.
trait IntoWindows: Sized {
    fn into_windows(self, shape: &[usize], device: &Device) -> candle_core::Result<Tensor>;
}

impl IntoWindows for pinring::Batch<pinring::Cpu> {
    fn into_windows(self, shape: &[usize], _: &Device) -> candle_core::Result<Tensor> {
        // The tensor owns its copy: the slot goes back to the pipeline before the step.
        self.to_candle(Dtype::U32, shape)
    }
}

#[cfg(feature = "candle-cuda")]
impl IntoWindows for pinring::Batch<pinring::Cuda> {
    fn into_windows(self, shape: &[usize], device: &Device) -> candle_core::Result<Tensor> {
        let Device::Cuda(cuda) = device else {
            return Err(candle_core::Error::msg(
                "a cuda batch for a model not on cuda",
            ));
        };
        self.into_candle_as(Dtype::U32, shape, cuda)
    }
}

/// The median of `times`, in microseconds.
fn median_us(times: &mut [Duration]) -> f64 {
    times.sort();
    times
        .get(times.len() / 2)
        .map_or(0.0, |d| d.as_secs_f64() * 1e6)
}

/// One optimizer step on `windows`; returns the loss.
fn train_step(model: &Model, adam: &mut AdamW, windows: &Tensor, vocab: usize) -> R<f32> {
    let largest = windows
        .max_all()
        .and_then(|m| m.to_scalar::<u32>())
        .map_err(c)?;
    if largest as usize >= vocab {
        return Err(format!("token {largest} is not below --vocab {vocab}"));
    }
    let loss = model.loss(windows).map_err(c)?;
    adam.update(model, &loss).map_err(c)?;
    loss.to_scalar::<f32>().map_err(c)
}

fn run(args: Args) -> R<()> {
    let device = match args.device {
        Where::Cpu => Device::Cpu,
        Where::Cuda => cuda_device()?,
    };
    let source = shards::open(&args.paths)
        .map_err(|e| e.to_string())?
        .decode_as(TokenType::U32)
        .windows(args.seq_len as u64 + 1)
        .order(Order::Shuffled { seed: args.seed })
        .build()
        .map_err(|e| e.to_string())?;
    let model = Model::new(args.vocab, args.seq_len, args.dim, args.seed, &device)?;
    let mut adam = AdamW::new(&model, args.lr).map_err(c)?;
    let mut builder = Loader::builder(source)
        .batch_size(args.batch_size)
        .decode_threads(1);
    let state = match (&args.save, args.resume) {
        (Some(dir), true) => Some(load(dir, &model, &mut adam, &device)?),
        (None, true) => return Err("--resume needs --save DIR".to_owned()),
        _ => None,
    };
    if let Some(state) = &state {
        builder = builder.resume(state);
        say!("resumed at step {}", state.step());
    }
    let data = match args.device {
        Where::Cpu => train(
            &args,
            builder.build().map_err(|e| e.to_string())?,
            &model,
            &mut adam,
            &device,
        )?,
        Where::Cuda => train_on_cuda(&args, builder, &model, &mut adam, &device)?,
    };
    if args.compare_llama2c {
        compare_llama2c(&args, &device, data)?;
    }
    Ok(())
}

#[cfg(feature = "candle-cuda")]
fn cuda_device() -> R<Device> {
    Device::new_cuda(0).map_err(c)
}

#[cfg(not(feature = "candle-cuda"))]
fn cuda_device() -> R<Device> {
    Err("--device cuda needs the example built with --features candle-cuda".to_owned())
}

#[cfg(feature = "candle-cuda")]
fn train_on_cuda<S: pinring::source::Source>(
    args: &Args,
    builder: pinring::LoaderBuilder<S>,
    model: &Model,
    adam: &mut AdamW,
    device: &Device,
) -> R<Timings> {
    let loader = builder
        .cuda(pinring::CudaOptions::ordinal(0))
        .build()
        .map_err(|e| e.to_string())?;
    train(args, loader, model, adam, device)
}

#[cfg(not(feature = "candle-cuda"))]
fn train_on_cuda<S: pinring::source::Source>(
    _: &Args,
    _: pinring::LoaderBuilder<S>,
    _: &Model,
    _: &mut AdamW,
    _: &Device,
) -> R<Timings> {
    cuda_device().map(|_| Timings::default())
}

/// Trains from the loader up to `--steps`; returns each step's host time in the data path:
/// the pop, and the pop with the batch made a tensor.
fn train<S: pinring::source::Source, B: pinring::Backend>(
    args: &Args,
    mut loader: Loader<S, B>,
    model: &Model,
    adam: &mut AdamW,
    device: &Device,
) -> R<Timings>
where
    pinring::Batch<B>: IntoWindows,
{
    let mut ids = ids_log::open(args.ids.as_deref())?;
    let shape = [args.batch_size as usize, args.seq_len + 1];
    let mut step = adam.step;
    let mut data = Timings::default();
    while step < args.steps {
        let began = Instant::now();
        let Some(batch) = loader.pop().map_err(|e| e.to_string())? else {
            say!("the data ended at step {step}");
            break;
        };
        data.pop.push(began.elapsed());
        if let Some(f) = &mut ids {
            let list: Vec<String> = batch.sample_ids().iter().map(u64::to_string).collect();
            ids_log::append(
                f,
                &format!("{} {}", batch.step().unwrap_or(step), list.join(" ")),
            )?;
        }
        let windows = batch.into_windows(&shape, device).map_err(c)?;
        data.whole.push(began.elapsed());
        let loss = train_step(model, adam, &windows, args.vocab)?;
        step += 1;
        say!("step {step} loss {loss}");
        if args.stop_after == Some(step) || (step == args.steps && args.save.is_some()) {
            if let Some(dir) = &args.save {
                save(dir, model, adam, &loader.state())?;
                say!("saved step {step} to {}", dir.display());
            }
            if args.stop_after == Some(step) {
                say!("stopped after step {step}");
                break;
            }
        }
    }
    Ok(data)
}

/// candle's `llama2-c` training data path (`candle_datasets::nlp::tinystories::
/// DatasetRandomIter` batched by `Batcher::new_r2`): a random window of `T + 1` tokens a
/// sample, its inputs and targets each one `Tensor::new` on the device, and the batch one
/// `Tensor::stack` of each. Here the shard is read into memory once, as `u32` (llama2-c
/// maps its `u16` file and widens a window a sample), and the model's single input is the
/// `(B, T + 1)` stack of the windows' tokens, the same bytes as its two tensors.
fn llama2c_batch(
    tokens: &[u32],
    rng: &mut SplitMix64,
    b: usize,
    t: usize,
    device: &Device,
) -> candle_core::Result<Tensor> {
    let mut rows = Vec::with_capacity(b);
    for _ in 0..b {
        let start = (rng.next_u64() % (tokens.len() - t) as u64) as usize;
        let window = tokens[start..start + t + 1].to_vec();
        let inputs = Tensor::new(&window[..t], device)?;
        let targets = Tensor::new(&window[1..], device)?;
        rows.push(Tensor::cat(&[&inputs, &targets.narrow(0, t - 1, 1)?], 0)?);
    }
    Tensor::stack(&rows, 0)
}

/// `steps` optimizer steps, each on the tensor `make` gives; returns the host time of each
/// `make` and the last loss.
fn timed_steps(
    steps: usize,
    model: &Model,
    adam: &mut AdamW,
    vocab: usize,
    mut make: impl FnMut() -> candle_core::Result<Tensor>,
) -> R<(Vec<Duration>, f32)> {
    let (mut times, mut last) = (Vec::with_capacity(steps), 0.0);
    for _ in 0..steps {
        let began = Instant::now();
        let windows = make().map_err(c)?;
        times.push(began.elapsed());
        last = train_step(model, adam, &windows, vocab)?;
    }
    Ok((times, last))
}

/// Trains the same model from the same start for as many steps as the run had, fed by
/// [`llama2c_batch`], and prints both data paths' host time a step.
fn compare_llama2c(args: &Args, device: &Device, mut pinring: Timings) -> R<()> {
    let shards = shards::open(&args.paths).map_err(|e| e.to_string())?;
    let shard = shards.shards()[0].clone();
    let len = shard.len();
    let tokens = pinring::source::Window::new(shard, 0, len)
        .ok_or("the first shard cannot be read whole")?
        .to_vec()
        .map_err(|e| e.to_string())?;
    if tokens.len() <= args.seq_len + 1 {
        return Err("the first shard is shorter than a window".to_owned());
    }
    let model = Model::new(args.vocab, args.seq_len, args.dim, args.seed, device)?;
    let mut adam = AdamW::new(&model, args.lr).map_err(c)?;
    let mut rng = SplitMix64::new(args.seed);
    let (b, t) = (args.batch_size as usize, args.seq_len);
    let steps = pinring.whole.len();
    let (mut llama2c, last) = timed_steps(steps, &model, &mut adam, args.vocab, || {
        llama2c_batch(&tokens, &mut rng, b, t, device)
    })?;
    // What candle's allocator alone costs at that point of a step (after the step's sync):
    // a tensor of the batch's size made by candle, trained on like a batch.
    let (mut alloc, _) = timed_steps(steps, &model, &mut adam, args.vocab, || {
        Tensor::zeros((b, t + 1), DType::U32, device)
    })?;
    let (ours, pop, theirs, zeros) = (
        median_us(&mut pinring.whole),
        median_us(&mut pinring.pop),
        median_us(&mut llama2c),
        median_us(&mut alloc),
    );
    say!(
        "data path, host time a step (median of {steps}): pinring {ours:.1} us (pop {pop:.1} \
         us), candle's llama2-c path {theirs:.1} us ({:.2}x); candle's Tensor::zeros of the \
         batch's shape at that point {zeros:.1} us; llama2-c's last loss {last}",
        theirs / ours.max(1e-9)
    );
    Ok(())
}

pub(crate) fn main() -> ExitCode {
    exit::status(run(Args::parse()))
}
