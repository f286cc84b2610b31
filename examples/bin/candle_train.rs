//! The `candle_train` example as a binary target too, for its command-line test
//! (`tests/candle.rs`): `cargo test --features candle` builds it in the same pass as the
//! test, and the test runs it as `CARGO_BIN_EXE_candle_train`.

#[path = "../candle_train.rs"]
mod tool;

fn main() -> std::process::ExitCode {
    tool::main()
}
