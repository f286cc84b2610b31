//! Section `scaling`: the large workload's rate by number of decode threads.

use pinring_benches::cores;

use crate::harness::{Gpu, Res};
use crate::report::{row, GIB};
use crate::tokens::{drive_tokens, token_pipeline};

pub fn scaling(gpu: &Gpu, shard: &str) -> Res {
    const B: usize = 64;
    const T1: u64 = 131_073;
    let bytes = B as f64 * T1 as f64 * 4.0;
    let cores = cores();
    let mut threads: Vec<usize> = std::iter::successors(Some(1), |n| Some(n * 2))
        .take_while(|&n| n < cores)
        .collect();
    threads.push(cores);
    let mut cells = Vec::new();
    for &t in &threads {
        let mut p = token_pipeline(shard, B, T1, Some(t))?;
        let (n, secs, _) = drive_tokens(gpu, &format!("scaling_{t}"), &mut p, usize::MAX, 0.6)?;
        cells.push(format!("{:.1}", n as f64 * bytes / secs / GIB));
    }
    let list = threads
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join("/");
    row(
        "decode scaling (large), GiB/s",
        &cells.join("/"),
        &format!("{list} decode threads; {cores} cores"),
        "-",
        None,
    );
    Ok(())
}
