//! [`Packing`]: the packing given whole builds what the six setters build, a built source
//! gives it back, and the setters and `packing` write the one value (the last one given
//! wins).

use pinring::source::{Packing, TokenType};

use crate::helpers::{builder, shard, write_shards, BOS};

/// Each step's pieces, as (step, [(doc, len)]).
type Steps = Vec<(u64, Vec<(u64, u64)>)>;

fn steps(docs: &pinring::source::Documents, n: usize) -> Steps {
    docs.iter()
        .take(n)
        .map(|s| (s.step(), s.pieces().map(|p| (p.doc, p.len)).collect()))
        .collect()
}

#[test]
fn a_packing_given_whole_is_the_six_setters() {
    let dir = tempfile::tempdir().unwrap();
    let lens: Vec<usize> = (0..200).map(|i| 2 + (i * 7) % 19).collect();
    let paths = write_shards(dir.path(), &[shard(BOS, 1, &lens)], false);
    let packing = Packing {
        tokens_per_batch: 23,
        max_seq_len: 9,
        max_docs: Some(12),
        schedule: vec![(3, 31, 11)],
        token_type: Some(TokenType::U16),
        positions: Some(true),
    };
    let whole = builder(&paths).packing(packing.clone()).build().unwrap();
    let by_setters = builder(&paths)
        .tokens_per_batch(23)
        .max_seq_len(9)
        .max_docs(12)
        .schedule(vec![(3, 31, 11)])
        .token_type(TokenType::U16)
        .positions(true)
        .build()
        .unwrap();
    assert_eq!(whole.fields(), by_setters.fields());
    assert_eq!(whole.schedule(), by_setters.schedule());
    assert_eq!(steps(&whole, 8), steps(&by_setters, 8));
    assert_eq!(whole.packing(), packing);
    assert_eq!(by_setters.packing(), packing);
    // Built again from what it gives back: the same source.
    let again = builder(&paths).packing(whole.packing()).build().unwrap();
    assert_eq!(steps(&again, 8), steps(&whole, 8));
}

#[test]
fn the_setters_and_packing_write_one_value() {
    let dir = tempfile::tempdir().unwrap();
    let lens: Vec<usize> = (0..100).map(|i| 3 + i % 5).collect();
    let paths = write_shards(dir.path(), &[shard(BOS, 0, &lens)], false);
    // A setter after `packing` changes that field of it; `packing` after a setter
    // replaces it.
    let docs = builder(&paths)
        .packing(Packing {
            tokens_per_batch: 15,
            max_seq_len: 8,
            ..Packing::default()
        })
        .max_seq_len(4)
        .build()
        .unwrap();
    let p = docs.packing();
    assert_eq!((p.tokens_per_batch, p.max_seq_len), (15, 4));
    assert_eq!(
        (p.token_type, p.positions),
        (Some(TokenType::I32), Some(false))
    );
    let docs = builder(&paths)
        .max_seq_len(4)
        .token_type(TokenType::U16)
        .packing(Packing {
            tokens_per_batch: 15,
            max_seq_len: 8,
            ..Packing::default()
        })
        .build()
        .unwrap();
    assert_eq!(docs.packing().max_seq_len, 8);
    assert_eq!(docs.token_type(), TokenType::I32);
    // Nothing given: the sizes are required, as without `packing`.
    assert!(builder(&paths).packing(Packing::default()).build().is_err());
}
