//! The `train_loop` example as a binary target too, for the command-line tests (`tests/cli.rs`):
//! `cargo test` builds it in the same pass as the tests, with their profile and features,
//! and they run it as `CARGO_BIN_EXE_train_loop`. `cargo run --example train_loop` runs the example.

#[path = "../train_loop.rs"]
mod tool;

fn main() -> std::process::ExitCode {
    tool::main()
}
