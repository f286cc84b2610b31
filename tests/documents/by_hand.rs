//! modded-nanogpt's semantics on datasets small enough to work out by hand: the expected
//! values are written out here, not generated, so they cannot rot with the code.

use pinring::source::{write_shard, Cursor, Documents, TokenShards};
use pinring::{Fence, Pipeline};

use crate::field_values::values;

/// Shard tokens (bos 9): a lead token, then documents
/// d0 = [9 11 12 13] at 1, d1 = [9 21 22] at 5, d2 = [9 31 32 33 34 35] at 8,
/// d3 = [9 41 42] at 14.
const SHARD: [u16; 17] = [
    1, 9, 11, 12, 13, 9, 21, 22, 9, 31, 32, 33, 34, 35, 9, 41, 42,
];

/// Every step of `rank` of 2: (step, epoch, tokens, cu_seqlens[..4], positions, ids, lens).
type Seen = (u64, u64, Vec<i64>, Vec<i64>, Vec<i64>, Vec<u64>, Vec<u32>);

fn steps_of(rank: u64, schedule: Vec<(u64, u64, u64)>, steps: usize) -> Vec<Seen> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("train_000.bin");
    write_shard(&path, &SHARD).unwrap();
    let docs = Documents::builder(TokenShards::open([&path]).unwrap())
        .bos(9)
        .tokens_per_batch(5)
        .max_seq_len(4)
        .schedule(schedule)
        .shard(rank, 2)
        .positions(true)
        .build()
        .unwrap();
    let config = docs.config().decode_threads(1).build().unwrap();
    let mut pipeline = Pipeline::new(config, docs.decoder(), docs.iter().take(steps)).unwrap();
    let mut out = Vec::new();
    while let Some(batch) = pipeline.pop().unwrap() {
        assert_eq!(
            batch.field("cu_seqlens").unwrap().len,
            128,
            "modded-nanogpt's rule"
        );
        out.push((
            batch.step().unwrap(),
            batch.epoch(),
            values(&batch, "tokens"),
            values(&batch, "cu_seqlens")[..4].to_vec(),
            values(&batch, "positions"),
            batch.sample_ids().to_vec(),
            batch.row_lens().to_vec(),
        ));
        batch.release(Fence::Sync).unwrap();
    }
    out
}

/// N = 5, max_seq_len = 4, 2 ranks. Rank 0 takes d0 (4 tokens) and the first 2 of d1
/// (filling 6 = N + 1); rank 1 takes d2 cut at 4, then the first 2 of d3. The second step
/// finds no document left: the shard's partial step is dropped and, past the last shard,
/// the next epoch starts over.
#[test]
fn two_ranks_cut_documents_and_fill_exactly() {
    let rank0 = steps_of(0, vec![], 2);
    let rank1 = steps_of(1, vec![], 2);
    let step0_r0: Seen = (
        0,
        0,
        vec![9, 11, 12, 13, 9, 21],
        vec![0, 4, 5, 5], // the last piece less 1 ends at N; padding is N
        vec![0, 1, 2, 3, 0],
        vec![1, 5],
        vec![4, 1],
    );
    let step0_r1: Seen = (
        0,
        0,
        vec![9, 31, 32, 33, 9, 41],
        vec![0, 4, 5, 5],
        vec![0, 1, 2, 3, 0],
        vec![8, 14],
        vec![4, 1],
    );
    assert_eq!(rank0[0], step0_r0);
    assert_eq!(rank1[0], step0_r1);
    // Step 1: epoch 1, the same walk again.
    assert_eq!(rank0[1], renumbered(&step0_r0, 1, 1));
    assert_eq!(rank1[1], renumbered(&step0_r1, 1, 1));
}

/// A schedule entry at step 1 (modded-nanogpt's `.send()` before step 1) changes step 1's
/// sizes: N = 2, max_seq_len 4.
#[test]
fn a_schedule_entry_changes_its_own_step() {
    let rank0 = steps_of(0, vec![(1, 2, 4)], 2);
    let rank1 = steps_of(1, vec![(1, 2, 4)], 2);
    assert_eq!(
        rank0[1],
        (
            1,
            1,
            vec![9, 11, 12],
            vec![0, 2, 2, 2],
            vec![0, 1],
            vec![1],
            vec![2]
        )
    );
    assert_eq!(
        rank1[1],
        (
            1,
            1,
            vec![9, 21, 22],
            vec![0, 2, 2, 2],
            vec![0, 1],
            vec![5],
            vec![2]
        )
    );
}

/// A step seen again with another number and epoch.
fn renumbered(seen: &Seen, step: u64, epoch: u64) -> Seen {
    let mut s = seen.clone();
    (s.0, s.1) = (step, epoch);
    s
}

/// A shard's partial step is dropped: the step starts over at the next shard's first
/// document, and the documents left in the shard are never used.
#[test]
fn a_partial_step_at_a_shard_end_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    // Two shards of 5 documents of 10 tokens; a rank's step (N = 19) takes 2 documents.
    let doc = |k: u16| -> Vec<u16> {
        std::iter::once(7)
            .chain((1..10).map(|i| 100 + k * 10 + i))
            .collect()
    };
    let mut paths = Vec::new();
    for s in 0..2u16 {
        let tokens: Vec<u16> = (0..5).flat_map(|k| doc(s * 5 + k)).collect();
        let path = dir.path().join(format!("train_{s}.bin"));
        write_shard(&path, &tokens).unwrap();
        paths.push(path);
    }
    let docs = |world| {
        Documents::builder(TokenShards::open(&paths).unwrap())
            .bos(7)
            .tokens_per_batch(19)
            .max_seq_len(100)
            .shard(0, world)
            .build()
            .unwrap()
    };
    let starts = |world| -> Vec<(Cursor, Vec<u64>)> {
        docs(world)
            .iter()
            .take(5)
            .map(|s| (s.start().unwrap(), s.pieces().map(|p| p.doc).collect()))
            .collect()
    };
    let at = |epoch, shard, doc| Cursor { epoch, shard, doc };
    // One rank: documents 0-1, 2-3 of shard 0; document 4 alone is too short: dropped.
    assert_eq!(
        starts(1),
        [
            (at(0, 0, 0), vec![0, 10]),
            (at(0, 0, 2), vec![20, 30]),
            (at(0, 1, 0), vec![50, 60]),
            (at(0, 1, 2), vec![70, 80]),
            (at(1, 0, 0), vec![0, 10]),
        ]
    );
    // Two ranks: a step takes 4 documents; each shard holds one step.
    assert_eq!(
        starts(2),
        [
            (at(0, 0, 0), vec![0, 10]),
            (at(0, 1, 0), vec![50, 60]),
            (at(1, 0, 0), vec![0, 10]),
            (at(1, 1, 0), vec![50, 60]),
            (at(2, 0, 0), vec![0, 10]),
        ]
    );
}
