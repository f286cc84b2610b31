//! The `locate` example as a binary target too, for the command-line tests (`tests/cli.rs`):
//! `cargo test` builds it in the same pass as the tests, with their profile and features,
//! and they run it as `CARGO_BIN_EXE_locate`. `cargo run --example locate` runs the example.

#[path = "../locate.rs"]
mod tool;

fn main() -> std::process::ExitCode {
    tool::main()
}
