//! The command line.

pub const USAGE: &str = "usage: gpu --shard PATH [--torch FILE] \
    [--only transport,small,copies,large,overlap,scaling,consumer,poison,cpu,explore,enqueue]";

const SECTIONS: &[&str] = &[
    "explore",
    "enqueue",
    "transport",
    "small",
    "copies",
    "large",
    "overlap",
    "scaling",
    "consumer",
    "poison",
    "cpu",
];

/// What the command line asks for.
#[derive(Debug)]
pub enum Command {
    /// Run the benchmark.
    Run(Args),
    /// Print the usage (`-h`, `--help`).
    Help,
}

/// The benchmark's inputs.
#[derive(Debug)]
pub struct Args {
    /// A uint16 token shard (`make_shard`), at least 10 Mi tokens.
    pub shard: String,
    /// The PyTorch peers' figures (`benches/torch_dataloader.py`).
    pub torch: Option<String>,
    /// The sections to run (all of the default ones when empty).
    pub only: Vec<String>,
}

pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Command, String> {
    let (mut shard, mut torch, mut only) = (None, None, Vec::new());
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--shard" => shard = Some(value()?),
            "--torch" => torch = Some(value()?),
            "--only" => {
                for s in value()?.split(',').filter(|s| !s.is_empty()) {
                    if !SECTIONS.contains(&s) {
                        return Err(format!("--only: unknown section `{s}`"));
                    }
                    only.push(s.to_string());
                }
            }
            // What `cargo bench` passes to a harness-less bench.
            "--bench" => {}
            "-h" | "--help" => return Ok(Command::Help),
            other => return Err(format!("unexpected argument `{other}`")),
        }
    }
    Ok(Command::Run(Args {
        shard: shard.ok_or("--shard is required")?,
        torch,
        only,
    }))
}
