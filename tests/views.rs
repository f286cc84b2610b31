//! Typed views of a batch on the cpu backend (`Batch::field_as`, `Batch::bytes_as`) and a
//! step's token count (`Batch::step_tokens`): the same values the bytes hold, borrowed;
//! every misfit an error, never a panic.

use pinring::source::{write_shard, Documents, TokenShards, TokenType};
use pinring::{Dtype, Fence, Loader, ViewError};

#[test]
fn typed_views_are_the_bytes_and_refuse_what_does_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.bin");
    let tokens: Vec<u16> = (0..3000)
        .map(|i| if i % 37 == 0 { 50256 } else { i % 5000 })
        .collect();
    write_shard(&path, &tokens).unwrap();
    let shards = TokenShards::open([&path]).unwrap();

    // Windows of 3 tokens, 5 a batch: 15 i32, 60 bytes.
    let windows = shards
        .clone()
        .decode_as(TokenType::I32)
        .windows(3)
        .build()
        .unwrap();
    let mut loader = Loader::builder(windows).batch_size(5).build().unwrap();
    let batch = loader.pop().unwrap().unwrap();
    let parsed: Vec<i32> = batch
        .bytes()
        .chunks_exact(4)
        .map(|b| i32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(batch.bytes_as::<i32>().unwrap(), parsed.as_slice());
    assert_eq!(batch.bytes_as::<u32>().unwrap().len(), 15);
    // 60 bytes are not whole i64s: refused, not truncated.
    assert!(matches!(
        batch.bytes_as::<i64>(),
        Err(ViewError::Misfit {
            len: 60,
            asked: Dtype::I64,
            ..
        })
    ));
    assert_eq!(batch.step_tokens(), None);
    assert!(
        matches!(batch.field_as::<i32>("inputs"), Err(ViewError::NoField { name }) if name == "inputs")
    );
    batch.release(Fence::Sync).unwrap();

    // A packed step of u32 tokens: each field as its own type.
    let docs = Documents::builder(shards)
        .tokens_per_batch(100)
        .max_seq_len(64)
        .token_type(TokenType::U32)
        .positions(true)
        .build()
        .unwrap();
    let mut loader = Loader::builder(docs).build().unwrap();
    let batch = loader.pop().unwrap().unwrap();
    let n = batch.step_tokens().unwrap();
    assert_eq!((n, batch.dims()[2] as usize), (100, 100));
    let inputs = batch.field_as::<u32>("inputs").unwrap();
    let bytes = batch.field_bytes("inputs").unwrap();
    assert_eq!(inputs.len(), n);
    assert!(inputs
        .iter()
        .zip(bytes.chunks_exact(4))
        .all(|(&t, b)| t == u32::from_le_bytes(b.try_into().unwrap())));
    assert_eq!(inputs[0], 50256);
    assert_eq!(batch.field_as::<i32>("cu_seqlens").unwrap()[..2], [0, 37]);
    assert_eq!(batch.field_as::<i32>("positions").unwrap()[..3], [0, 1, 2]);
    let err = batch.field_as::<i64>("inputs").unwrap_err();
    assert_eq!(
        err,
        ViewError::Dtype {
            name: "inputs".into(),
            held: Dtype::U32,
            asked: Dtype::I64
        }
    );
    assert!(err.to_string().contains("holds uint32, not int64"), "{err}");
    let err: pinring::Error = batch.field_as::<u8>("nothing").unwrap_err().into();
    assert!(err.to_string().contains("no field \"nothing\""), "{err}");
    batch.release(Fence::Sync).unwrap();
}
