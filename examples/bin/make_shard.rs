//! The `make_shard` example as a binary target too, for the command-line tests (`tests/cli.rs`):
//! `cargo test` builds it in the same pass as the tests, with their profile and features,
//! and they run it as `CARGO_BIN_EXE_make_shard`. `cargo run --example make_shard` runs the example.

#[path = "../make_shard.rs"]
mod tool;

fn main() -> std::process::ExitCode {
    tool::main()
}
