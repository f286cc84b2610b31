//! Mixtures of documents through real pipelines (cpu backend): every field of every batch
//! against the model (tokens, inputs, targets, cu_seqlens, positions), the rows (source,
//! id within the source, length), the step and dims, `Batch::locate` read back from the
//! shard files, and the per-source counts in `Stats`.

use std::sync::Arc;

use pinring::source::{Stop, TokenType};
use pinring::{Fence, Pipeline};

use super::data::{cu_seqlens, row_lens, Data, ModelOrder};
use super::field_values::values;
use super::helpers::{shard, sources_of, Written};
use super::sizes::sizes_at;

/// Three sources of two shards each, short and long documents; the middle one shuffled.
fn sources() -> Vec<(Data, ModelOrder)> {
    sources_of(3, |s| {
        let lens = |seed: usize, count: usize| -> Vec<usize> {
            (0..count)
                .map(|i| match (i * 7 + seed * 3 + s) % 11 {
                    0 => 70 + (i * 13) % 50,
                    k => 1 + (k * 5 + i) % 25,
                })
                .collect()
        };
        let shards = vec![
            shard(3, &lens(1, 40 + 10 * s), 100 * s as u32),
            shard(0, &lens(2, 30), 100 * s as u32 + 50),
        ];
        let order = if s == 1 {
            ModelOrder::Shuffled(77)
        } else {
            ModelOrder::Sequential
        };
        (shards, order)
    })
}

/// Tokens `offset..offset + len` of a `u16` shard file, read from its bytes (past llm.c's
/// 1024-byte header).
fn file_tokens(path: &std::path::Path, offset: u64, len: u64) -> Vec<i64> {
    let bytes = std::fs::read(path).unwrap();
    let at = 1024 + 2 * offset as usize;
    bytes[at..at + 2 * len as usize]
        .chunks_exact(2)
        .map(|c| i64::from(u16::from_le_bytes([c[0], c[1]])))
        .collect()
}

fn check_run(ty: TokenType, world: u64, schedule: Vec<(u64, u64, u64)>) {
    let sources = sources();
    let mut written = Written::new(&sources, 4);
    let weights = vec![0.5, 0.3, 0.2];
    let base = (40u64, 24u64);
    let steps = 12;
    let sizes = |k: u64| sizes_at(base, &schedule, k);
    let sequence = written
        .model
        .sequence(&[(0, weights.clone())], Stop::Never, 100_000);
    let want = written
        .model
        .steps(&sequence, world as usize, &sizes, 0, steps);
    for rank in 0..world {
        let mix = written
            .mixture_of_rank(rank, world, base)
            .weights(weights.clone())
            .schedule(schedule.clone())
            .max_docs(64)
            .token_type(ty)
            .positions(true)
            .build()
            .unwrap();
        let config = mix
            .config()
            .decode_threads(2)
            .locator(Arc::new(mix.clone()))
            .build()
            .unwrap();
        let mut pipeline = Pipeline::new(config, mix.decoder(), mix.iter().take(steps)).unwrap();
        let mut k = 0;
        let mut per_source = [0u64; 3];
        while let Some(batch) = pipeline.pop().unwrap() {
            let w = &want[k];
            let spans = &w.ranks[rank as usize];
            let (n, _) = sizes(k as u64);
            assert_eq!(batch.step(), Some(k as u64));
            assert_eq!(batch.epoch(), 0);
            assert_eq!(batch.dims(), [n as u64 + 1, 64, n as u64, 0]);
            let buf: Vec<i64> = spans
                .iter()
                .flat_map(|(s, p)| {
                    let data = &sources[usize::from(*s)].0;
                    data.shards[p.shard][p.start..p.end].to_vec()
                })
                .map(i64::from)
                .collect();
            assert_eq!(values(&batch, "tokens"), buf, "step {k}");
            assert_eq!(values(&batch, "inputs"), buf[..n], "step {k}");
            assert_eq!(values(&batch, "targets"), buf[1..], "step {k}");
            let plain: Vec<_> = spans.iter().map(|p| p.1).collect();
            let cu: Vec<i64> = cu_seqlens(&plain, n, 64)
                .unwrap()
                .into_iter()
                .map(i64::from)
                .collect();
            assert_eq!(values(&batch, "cu_seqlens"), cu, "step {k}");
            let positions: Vec<i64> = plain
                .iter()
                .flat_map(|p| 0..(p.end - p.start) as i64)
                .take(n)
                .collect();
            assert_eq!(values(&batch, "positions"), positions, "step {k}");
            // Rows: source, id within it, length in cu_seqlens.
            let sources_of: Vec<u16> = spans.iter().map(|p| p.0).collect();
            assert_eq!(batch.row_sources(), sources_of, "step {k}");
            let ids: Vec<u64> = spans
                .iter()
                .map(|(s, p)| sources[usize::from(*s)].0.id(*p))
                .collect();
            assert_eq!(batch.sample_ids(), ids, "step {k}");
            let lens = row_lens(&cu, spans.len());
            assert_eq!(batch.row_lens(), lens, "step {k}");
            // Each row located: its tokens in the batch are those of its file.
            let tokens = values(&batch, "tokens");
            let located = batch.locate().unwrap();
            assert_eq!(located.len(), spans.len());
            for (r, at) in located.iter().enumerate() {
                assert_eq!(at.source, sources_of[r]);
                assert_eq!(at.len, u64::from(lens[r]));
                assert!(written.paths[usize::from(at.source)].contains(&at.path));
                let from = cu[r] as usize;
                assert_eq!(
                    file_tokens(&at.path, at.offset, at.len),
                    tokens[from..from + at.len as usize],
                    "step {k} row {r}: {at}"
                );
                per_source[usize::from(at.source)] += 1;
            }
            batch.release(Fence::Sync).unwrap();
            k += 1;
        }
        assert_eq!(k, steps);
        // Stats count each source's documents (pieces) of this rank.
        let stats = pipeline.stats();
        let counts: Vec<u64> = stats.sources.iter().map(|s| s.samples).collect();
        assert_eq!(counts, per_source, "rank {rank}");
        assert!(stats.to_string().contains("source 2 "), "{stats}");
    }
}

#[test]
fn every_field_row_and_location_of_a_mixture_of_documents() {
    check_run(TokenType::I32, 2, vec![]);
}

#[test]
fn a_schedule_and_i64_tokens_on_three_ranks() {
    check_run(TokenType::I64, 3, vec![(4, 60, 30), (9, 20, 8)]);
}
