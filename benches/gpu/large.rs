//! Section `large`: 32 MiB token batches (64 x 131073 i32), against raw copies from the
//! same ring, raw copies beside decoding threads, and the PyTorch peers.

use std::collections::HashMap;
use std::time::Duration;

use pinring::source::{TokenType, Tokens};
use pinring_benches::{cores, cores_but};

use crate::harness::{Gpu, Res};
use crate::nothing::drain;
use crate::raw::raw_copies;
use crate::report::{row, GIB};
use crate::tokens::{drive_tokens, random_windows, token_pipeline_with, Knobs};
use crate::torch::torch_ref;

pub fn large(gpu: &Gpu, shard: &str, torch: &HashMap<String, f64>) -> Res {
    const B: usize = 64;
    const T1: u64 = 131_073;
    let bytes = B as f64 * T1 as f64 * 4.0;
    const N: usize = 600;
    // A finite source (the warm-up, the timed batches and slack), drained after the
    // timed part so that nothing writes the ring while the raw copies read it.
    // Decode threads as the sizing guide says (C / G - 4): with every core decoding, the
    // copy thread went short of one on a host whose decode tops out near the copy rate
    // (42.1 against 50.3 GiB/s, 16 threads 1117% busy; the Python row's 12 threads reached
    // 100.9% of raw on the same host in the same run).
    let threads = cores_but(4);
    let knobs = Knobs {
        batches: Some(N + 40),
        threads: Some(threads),
        ..Knobs::default()
    };
    let mut p = token_pipeline_with(shard, B, T1, knobs)?;
    let (n, secs, busiest) = drive_tokens(gpu, "large", &mut p, N, 30.0)?;
    let gibps = n as f64 * bytes / secs / GIB;
    drain(&mut p)?;
    // Raw H2D of the same size from the same registered ring, in the same run.
    let size = B * T1 as usize * 4;
    let raw = size as f64 / raw_copies(gpu, &p, size, 60)? / GIB;
    let dl = torch.get("dataloader_large_gibps").copied();
    row(
        "large 64x131073 i32, GiB/s",
        &format!("{gibps:.2}"),
        &format!(
            "raw H2D {raw:.2}: {:.1}%; {threads} decode threads; DataLoader(4, pin) {}{}",
            100.0 * gibps / raw,
            torch_ref(torch, "dataloader_large_gibps", |v| format!("{v:.2}")),
            dl.map_or(String::new(), |v| format!(" (x{:.1})", gibps / v))
        ),
        ">= 95% of raw H2D",
        Some(gibps >= 0.95 * raw),
    );
    // The same raw copies while decode threads (no pipeline) stream windows through
    // host memory as the pipeline's do: what the copy engine gets when decoding
    // competes with it for host memory bandwidth.
    let beside = {
        let stop = std::sync::atomic::AtomicBool::new(false);
        let sampler = random_windows(shard, T1, 5)?;
        let decoder = Tokens::new(TokenType::I32);
        std::thread::scope(|scope| {
            for i in 0..cores() {
                let (stop, sampler) = (&stop, &sampler);
                scope.spawn(move || {
                    let mut out = vec![0u8; decoder.sample_bytes(T1)];
                    for w in sampler.iter().skip(i * 7) {
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                        let _ = pinring::Decode::decode(&decoder, w, &mut out);
                        std::hint::black_box(&out);
                    }
                });
            }
            std::thread::sleep(Duration::from_millis(100));
            let secs = raw_copies(gpu, &p, size, 60);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            secs.map(|secs| (size as f64 / secs / GIB, cores()))
        })?
    };
    row(
        "  raw H2D beside decode threads, no pipeline",
        &format!("{:.2}", beside.0),
        &format!(
            "{:.1}% of raw: {} threads decoding windows into ordinary memory meanwhile",
            100.0 * beside.0 / raw,
            beside.1
        ),
        "-",
        None,
    );
    row(
        "  vs seed-001 prefetch thread",
        &format!("limit: {busiest}"),
        &format!(
            "prefetch thread {} GiB/s",
            torch_ref(torch, "prefetch_large_gibps", |v| format!("{v:.2}"))
        ),
        "-",
        None,
    );
    Ok(())
}
