//! The `quickstart` example as a binary target too, for the command-line tests (`tests/cli.rs`):
//! `cargo test` builds it in the same pass as the tests, with their profile and features,
//! and they run it as `CARGO_BIN_EXE_quickstart`. `cargo run --example quickstart` runs the example.

#[path = "../quickstart.rs"]
mod tool;

fn main() -> std::process::ExitCode {
    tool::main()
}
