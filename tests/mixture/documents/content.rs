//! A mixture of documents' state knows its data (issue 29): each source's
//! `DocumentsCheckpoint` in the state holds its shards' content fingerprints, so a state
//! saved on one dataset is refused on another of the same file names and sizes (one
//! source's tokens reversed), naming the source and the shard; the same shards copied to
//! another folder resume exactly; a state of the version before `contents` is refused
//! naming its version.

use std::path::{Path, PathBuf};

use pinring::source::{
    DocOrder, Documents, DocumentsCheckpoint, MixedPiece, Mixture, MixtureState, SourceError,
    TokenShard, TokenShards,
};
use pinring::Error;

use super::data::Data;
use super::helpers::{shard, write};

/// Two sources of one shard each: documents of 5 to 40 tokens.
fn dataset() -> Vec<Vec<u32>> {
    let lens = |salt: usize| -> Vec<usize> { (0..50).map(|k| 5 + (k * 11 + salt) % 36).collect() };
    vec![shard(2, &lens(1), 0), shard(0, &lens(4), 300)]
}

/// Each source's shards written under `dir` (`source{s}_000.bin`); their paths.
fn written(dir: &Path, shards: &[Vec<u32>]) -> Vec<Vec<PathBuf>> {
    shards
        .iter()
        .enumerate()
        .map(|(s, tokens)| {
            let data = Data {
                shards: vec![tokens.clone()],
                bos: super::helpers::BOS,
            };
            write(dir, s, &data)
        })
        .collect()
}

fn mixture(paths: &[Vec<PathBuf>]) -> Mixture<Documents> {
    Mixture::documents([
        Documents::builder(TokenShards::open(&paths[0]).unwrap())
            .order(DocOrder::Shuffled { seed: 2 }),
        Documents::builder(TokenShards::open(&paths[1]).unwrap()),
    ])
    .weights([0.5, 0.5])
    .seed(4)
    .tokens_per_batch(63)
    .max_seq_len(32)
    .build()
    .unwrap()
}

/// The state after 4 steps, through its text form.
fn saved(mix: &Mixture<Documents>) -> MixtureState<DocumentsCheckpoint> {
    let state = mix.checkpoint_after(None, 4).unwrap();
    MixtureState::from_text(&state.to_text()).unwrap()
}

#[test]
fn a_documents_mixture_state_is_refused_on_other_tokens_of_the_same_names_and_sizes() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut data = dataset();
    let saved_on = written(a.path(), &data);
    data[1].reverse();
    let other = written(b.path(), &data);
    let state = saved(&mixture(&saved_on));
    let here = mixture(&other);
    let Err(err) = here.iter_from(&state) else {
        panic!("resumed on other data")
    };
    let content = |path: &PathBuf| format!("{:#018x}", TokenShard::open(path).unwrap().content());
    match &err {
        Error::Source(SourceError::DocumentsCheckpointMismatch { what, saved, here }) => {
            assert_eq!(
                (what.as_str(), saved, here),
                (
                    "source 1's the content of source1_000.bin (file 0: the same name and \
                     size, other bytes)",
                    &content(&saved_on[1][0]),
                    &content(&other[1][0])
                )
            )
        }
        other => panic!("expected a DocumentsCheckpointMismatch, got {other:?}"),
    }
    assert!(here.check_state(&state).is_err());
}

#[test]
fn a_documents_mixture_state_resumes_on_the_same_shards_in_another_folder() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let saved_on = written(a.path(), &dataset());
    let copies = written(b.path(), &dataset());
    let original = mixture(&saved_on);
    let state = saved(&original);
    let run = |mix: &Mixture<Documents>| -> Vec<(u64, Vec<MixedPiece>, Vec<u32>)> {
        let shards = mix.shards();
        mix.iter_from(&state)
            .unwrap()
            .take(10)
            .map(|step| {
                assert!(step.error().is_none(), "{:?}", step.error());
                let tokens = step
                    .pieces()
                    .iter()
                    .flat_map(|p| {
                        let shard = &shards[p.source as usize].shards()[p.piece.shard];
                        (p.piece.start..p.piece.start + p.piece.len)
                            .map(|i| shard.token(i as usize).unwrap().unwrap())
                            .collect::<Vec<_>>()
                    })
                    .collect();
                (step.step(), step.pieces().to_vec(), tokens)
            })
            .collect()
    };
    let want = run(&original);
    assert_eq!((want.len(), want[0].0), (10, 4));
    assert_eq!(run(&mixture(&copies)), want);
}

#[test]
fn a_documents_mixture_state_of_the_version_before_contents_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let mix = mixture(&written(dir.path(), &dataset()));
    let state = saved(&mix);
    let mut value: serde_json::Value = serde_json::from_str(&state.to_text()).unwrap();
    value["version"] = 1.into();
    for source in value["sources"].as_array_mut().unwrap() {
        source["version"] = 2.into();
        assert!(source.as_object_mut().unwrap().remove("contents").is_some());
    }
    let old = serde_json::to_string_pretty(&value).unwrap();
    let err = MixtureState::<DocumentsCheckpoint>::from_text(&old).unwrap_err();
    assert!(
        err.to_string().contains(
            "a mixture state of version 1, which this build (version 2) cannot read: missing \
             field `contents`"
        ),
        "{err}"
    );
}
