//! Generates the type stubs of `pinring._pinring` from the code, or checks them.
//!
//!     cargo run --manifest-path python/Cargo.toml --features stubs --bin stub_gen            # writes
//!     cargo run --manifest-path python/Cargo.toml --features stubs --bin stub_gen -- --check # compares
//!
//! It builds with the `stubs` feature only, which makes the classes' stub attributes
//! pyo3-stub-gen's (`src/stub_attrs.rs`).
//! The stubs go to `python/pinring/_pinring.pyi`, beside the compiled module; `--check`
//! exits 1 (and prints a diff hint) when the checked-in file differs from what the code
//! generates, which `scripts/python-tests.sh` runs in CI.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let check = std::env::args().any(|a| a == "--check");
    let mut info = match _pinring::stub_info() {
        Ok(info) => info,
        Err(e) => {
            eprintln!("stub_gen: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let Some(module) = info.modules.get_mut("pinring._pinring") else {
        eprintln!(
            "stub_gen: no module pinring._pinring among {:?}",
            info.modules.keys()
        );
        return ExitCode::FAILURE;
    };
    // A class's methods come from each of its `#[pymethods]` blocks in the order the linker
    // left their registrations, which differs between builds: sorted by name, the stubs
    // are the same from every build.
    for class in module.class.values_mut() {
        class.methods.sort_keys();
        class.getter_setters.sort_keys();
    }
    let text = module.format_with_config(info.config.use_type_statement);
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("pinring/_pinring.pyi");
    if check {
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        if current == text {
            println!("stub_gen: {} is up to date", path.display());
            return ExitCode::SUCCESS;
        }
        let fresh = path.with_extension("pyi.generated");
        let _ = std::fs::write(&fresh, &text);
        eprintln!(
            "stub_gen: {} differs from what the code generates (written to {}): run \
             `cargo run --manifest-path python/Cargo.toml --features stubs --bin stub_gen` and \
             commit the stubs",
            path.display(),
            fresh.display()
        );
        return ExitCode::FAILURE;
    }
    if let Err(e) = std::fs::write(&path, text) {
        eprintln!("stub_gen: cannot write {}: {e}", path.display());
        return ExitCode::FAILURE;
    }
    println!("stub_gen: wrote {}", path.display());
    ExitCode::SUCCESS
}
