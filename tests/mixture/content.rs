//! A mixture's state knows its data (issue 29): each source's record in a `MixtureState`
//! holds its files' content fingerprints, so a state saved on one dataset is refused on
//! another of the same file names and sizes (one source's tokens reversed), naming the
//! source and the file; the same files copied to another folder resume exactly; a state of
//! the version before `contents` is refused naming its version.

use std::path::{Path, PathBuf};

use pinring::source::{
    Mixture, MixtureState, SourceError, TokenShard, TokenShards, MIXTURE_STATE_VERSION,
};
use pinring::Error;

use crate::helpers::{drawn, random_tokens, source, Drawn};
use crate::named_shards::write_named;

const NAMES: [&str; 2] = ["web.bin", "code.bin"];

fn tokens() -> [Vec<u16>; 2] {
    [random_tokens(4000, 7), random_tokens(2500, 8)]
}

/// `shards` written under `dir` by [`NAMES`]; their paths.
fn write(dir: &Path, shards: &[Vec<u16>; 2]) -> Vec<PathBuf> {
    write_named(dir, &NAMES, shards)
}

/// A mixture of one source per file (source `i` shuffled with seed `i + 1`).
fn mixture(paths: &[PathBuf]) -> Mixture<TokenShards> {
    let sources = paths.iter().zip(1..).map(|(path, seed)| source(path, seed));
    Mixture::builder(sources)
        .weights([0.6, 0.4])
        .seed(9)
        .batch_size(4)
        .build()
        .unwrap()
}

/// The state after 5 steps of 4 samples, through its text form.
fn saved(mix: &Mixture<TokenShards>) -> MixtureState {
    assert_eq!(mix.iter().take(20).count(), 20);
    let state = mix.checkpoint_after(None, 20).unwrap();
    MixtureState::from_text(&state.to_text()).unwrap()
}

#[test]
fn a_mixture_state_is_refused_on_other_tokens_of_the_same_names_and_sizes() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let [web, code] = tokens();
    let saved_on = write(a.path(), &[web.clone(), code.clone()]);
    let reversed: Vec<u16> = code.iter().rev().copied().collect();
    let other = write(b.path(), &[web, reversed]);
    let state = saved(&mixture(&saved_on));
    assert!(state.sources.iter().all(|s| s.dataset.contents.len() == 1));
    let here = mixture(&other);
    let Err(err) = here.iter_from(&state) else {
        panic!("resumed on other data")
    };
    let content = |path: &PathBuf| format!("{:#018x}", TokenShard::open(path).unwrap().content());
    match &err {
        Error::Source(SourceError::CheckpointMismatch { what, saved, here }) => assert_eq!(
            (what.as_str(), saved, here),
            (
                "source 1's the content of code.bin (file 0: the same name and size, other \
                 bytes)",
                &content(&saved_on[1]),
                &content(&other[1])
            )
        ),
        other => panic!("expected a CheckpointMismatch, got {other:?}"),
    }
    assert!(here.check_state(&state).is_err());
    assert!(here.checkpoint_after(Some(&state), 4).is_err());
}

#[test]
fn a_mixture_state_resumes_on_the_same_files_in_another_folder() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let saved_on = write(a.path(), &tokens());
    let copies = write(b.path(), &tokens());
    let original = mixture(&saved_on);
    let state = saved(&original);
    let run = |mix: &Mixture<TokenShards>| -> Vec<(Drawn, Vec<u32>)> {
        mix.iter_from(&state)
            .unwrap()
            .take(40)
            .map(|s| {
                let tokens = s.item().to_vec().unwrap();
                (drawn(s), tokens)
            })
            .collect()
    };
    let want = run(&original);
    assert_eq!(want[0].0 .3, Some(5));
    assert_eq!(run(&mixture(&copies)), want);
}

#[test]
fn a_mixture_state_of_the_version_before_contents_is_refused_by_name() {
    assert_eq!(MIXTURE_STATE_VERSION, 2);
    let dir = tempfile::tempdir().unwrap();
    let mix = mixture(&write(dir.path(), &tokens()));
    let state = saved(&mix);
    // Version 1's text: the sources' records have no `contents`.
    let mut value: serde_json::Value = serde_json::from_str(&state.to_text()).unwrap();
    value["version"] = 1.into();
    for source in value["sources"].as_array_mut().unwrap() {
        assert!(source.as_object_mut().unwrap().remove("contents").is_some());
    }
    let old = serde_json::to_string_pretty(&value).unwrap();
    let err = MixtureState::<pinring::source::Checkpoint>::from_text(&old).unwrap_err();
    assert!(
        err.to_string().contains(
            "a mixture state of version 1, which this build (version 2) cannot read: missing \
             field `contents`"
        ),
        "{err}"
    );
    // One of version 1 that reads is refused by the mixture, by name.
    let one = MixtureState {
        version: 1,
        ..state
    };
    let Err(err) = mix.iter_from(&one) else {
        panic!("resumed from version 1")
    };
    assert!(
        matches!(&err, Error::Source(SourceError::MixtureMismatch { what, saved, here })
            if what == "the state version" && saved == "1" && here == "2"),
        "{err:?}"
    );
}
