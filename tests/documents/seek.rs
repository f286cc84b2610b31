//! Starting at a step and skipping steps (issue 22): `start_step(k)` is the uninterrupted
//! run from step `k`, on every rank; `skip_steps` leaves out exactly those steps, the
//! others keeping their numbers and their documents, also across save → merge → resume on
//! other world sizes, where every document is used at most once and none is left out but
//! the walk's drops and the skipped steps' documents; bad ranges are errors.

use pinring::source::{
    write_shard, Documents, DocumentsCheckpoint, SourceError, TokenShards,
    DOCUMENTS_CHECKPOINT_VERSION,
};
use pinring::{Error, Fence, Pipeline};
use proptest::prelude::*;

use crate::case::{bases, orders, Case, Used};
use crate::helpers::{assert_says, datasets, seen, shard, Got, BOS};
use crate::sizes::schedules;
use crate::skips::{records, skipped, skips};

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// On every rank, a source that starts at step `k` yields what the uninterrupted run
    /// yields from step `k` — the same steps, numbers, epochs and pieces — also when it
    /// resumes from a checkpoint before `k`; its checkpoints are the uninterrupted run's.
    #[test]
    fn start_step_k_is_the_uninterrupted_run_from_k(
        data in datasets(),
        world in 1u64..=4,
        base in bases(),
        schedule in schedules(),
        order in orders(),
        k in 0u64..25,
        m in 1usize..8,
    ) {
        let case = Case::write(data, false, base, schedule, order);
        for rank in 0..world {
            let whole = case.built(rank, world)?;
            let want: Vec<_> = whole
                .iter()
                .take(k as usize + m)
                .map(|s| seen(&case.data, &s))
                .collect();
            prop_assume!(want.len() == k as usize + m && want.iter().all(Result::is_ok));
            let from_k = case.source(rank, world).start_step(k).build().unwrap();
            prop_assert_eq!(from_k.start_step(), k);
            let got: Vec<_> = from_k.iter().take(m).map(|s| seen(&case.data, &s)).collect();
            prop_assert_eq!(&got[..], &want[k as usize..]);
            prop_assert_eq!(from_k.iter().next_step(), k);
            // The same through `with_steps` on the source already built.
            let again = whole.with_steps(k, []).unwrap();
            let got: Vec<_> = again.iter().take(m).map(|s| seen(&case.data, &s)).collect();
            prop_assert_eq!(&got[..], &want[k as usize..]);
            // The checkpoints: before any step, the uninterrupted run's at k; after m, at
            // k + m.
            prop_assert_eq!(
                from_k.checkpoint_after(None, 0).unwrap(),
                whole.checkpoint_after(None, k).unwrap()
            );
            let after = from_k.checkpoint_after(None, m as u64).unwrap();
            prop_assert_eq!(&after, &whole.checkpoint_after(None, k + m as u64).unwrap());
            // Resumed from a checkpoint before k, it begins at k; from one after, it goes
            // on from there.
            let early = whole.checkpoint_after(None, k / 2).unwrap();
            let resumed: Vec<_> = from_k
                .iter_from(&early)
                .unwrap()
                .take(m)
                .map(|s| seen(&case.data, &s))
                .collect();
            prop_assert_eq!(&resumed[..], &want[k as usize..]);
            prop_assert_eq!(from_k.checkpoint_after(Some(&early), m as u64).unwrap(), after.clone());
            // (Only where the run has a step after k: resuming locates the next step, and
            // past the last one the data has, none fits.)
            if m > 1 {
                let late = whole.checkpoint_after(None, k + 1).unwrap();
                let resumed: Vec<_> = from_k
                    .iter_from(&late)
                    .unwrap()
                    .take(m - 1)
                    .map(|s| seen(&case.data, &s))
                    .collect();
                prop_assert_eq!(&resumed[..], &want[k as usize + 1..]);
            }
        }
    }

    /// On every rank, skipping steps leaves out exactly those steps: the others are the
    /// uninterrupted run's, with their numbers; the checkpoint after them stands at the
    /// next step delivered, where the uninterrupted run's walk stands there, records the
    /// skipped ranges, and a run resumed from it keeps skipping them.
    #[test]
    fn skip_steps_leave_out_exactly_those_steps(
        data in datasets(),
        world in 1u64..=4,
        base in bases(),
        order in orders(),
        skip in skips(),
        k in 0u64..12,
        m in 1usize..10,
    ) {
        let case = Case::write(data, false, base, Vec::new(), order);
        for rank in 0..world {
            let whole = case.built(rank, world)?;
            let all: Vec<_> = whole.iter().take(80).map(|s| seen(&case.data, &s)).collect();
            prop_assume!(all.len() == 80 && all.iter().all(Result::is_ok));
            let all: Vec<Got> = all.into_iter().map(Result::unwrap).collect();
            let kept = |from: u64| -> Vec<Got> {
                all.iter()
                    .filter(|g| g.step >= from && !skipped(g.step, &skip))
                    .cloned()
                    .collect()
            };
            let want = kept(k);
            let run = case
                .source(rank, world)
                .start_step(k)
                .skip_steps(skip.clone())
                .build()
                .unwrap();
            let got: Vec<Got> = run.iter().take(m).map(|s| seen(&case.data, &s).unwrap()).collect();
            prop_assert_eq!(&got[..], &want[..m]);
            let state = run.checkpoint_after(None, m as u64).unwrap();
            let next = want[m].step;
            prop_assert_eq!(state.step, next);
            prop_assert_eq!(state.cursor(), whole.checkpoint_after(None, next).unwrap().cursor());
            records(&state, &skip)?;
            prop_assert_eq!(run.skip_steps(), &state.skip[..]);
            // Resumed (by a source that skips nothing of its own): it keeps skipping.
            let rest: Vec<Got> = whole
                .iter_from(&state)
                .unwrap()
                .take(5)
                .map(|s| seen(&case.data, &s).unwrap())
                .collect();
            prop_assert_eq!(&rest[..], &want[m..m + 5]);
        }
    }

    /// A run on 2 ranks skipping some steps, resumed on 3 skipping more, then on 1: each
    /// run delivers the model's walk from the state's cursor at its world size less the
    /// steps skipped so far (the state's and its own), numbered as the uninterrupted run
    /// numbers them; across the three, each document at most once an epoch and none left
    /// out inside the walk but the skipped steps'.
    #[test]
    fn elastic_resume_across_skipped_steps(
        data in datasets(),
        base in bases(),
        schedule in schedules(),
        order in orders(),
        (k1, k2, k3) in (0usize..10, 0usize..10, 1usize..10),
        (s1, s2) in (skips(), skips()),
    ) {
        let case = Case::write(data, false, base, schedule, order);
        let mut used = Used::default();
        let Some(a) = case.run(2, None, &s1, k1, &mut used)? else {
            return Err(TestCaseError::reject("no fit"));
        };
        let Some(b) = case.run(3, Some(&a), &s2, k2, &mut used)? else {
            return Err(TestCaseError::reject("no fit"));
        };
        let both: Vec<(u64, u64)> = s1.iter().chain(&s2).copied().collect();
        records(&b, &both)?;
        let Some(c) = case.run(1, Some(&b), &[], k3, &mut used)? else {
            return Err(TestCaseError::reject("no fit"));
        };
        records(&c, &both)?;
        used.check(&case.data, order)?;
    }
}

/// Documents of 10 tokens, then 4 of 5, then 10s again, in one shard; steps of 20 tokens
/// on one rank: steps 0 to 3 hold 2 documents each, step 4 holds the four short ones,
/// then 2 a step again.
fn with_a_crowded_step(dir: &std::path::Path) -> Documents {
    let mut lens = vec![10; 8];
    lens.extend([5; 4]);
    lens.extend([10; 40]);
    let path = dir.join("train_000.bin");
    let tokens: Vec<u16> = shard(BOS, 0, &lens).iter().map(|&t| t as u16).collect();
    write_shard(&path, &tokens).unwrap();
    Documents::builder(TokenShards::open([&path]).unwrap())
        .tokens_per_batch(19)
        .max_seq_len(64)
        .max_docs(3)
        .build()
        .unwrap()
}

/// A pipeline over a source with skipped steps: its batches keep their step numbers, and
/// their documents are those of the uninterrupted run's steps.
#[test]
fn a_pipeline_delivers_the_kept_steps_with_their_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let whole = with_a_crowded_step(dir.path());
    // Step 4 packs 4 documents into a cu_seqlens of 3: skipped, it is no error (it is
    // walked over, never packed), wherever the walk goes over it.
    let docs = whole.with_steps(1, [(2, 3), (4, 6)]).unwrap();
    assert_eq!(docs.skip_steps(), &[(2, 3), (4, 6)]);
    let config = docs.config().decode_threads(1).build().unwrap();
    let mut pipeline = Pipeline::new(config, docs.decoder(), docs.iter().take(4)).unwrap();
    let mut got = Vec::new();
    while let Some(batch) = pipeline.pop().unwrap() {
        got.push((batch.step().unwrap(), batch.sample_ids().to_vec()));
        batch.release(Fence::Sync).unwrap();
    }
    // Documents of 10 tokens start every 10 tokens up to 80, then the short ones (80, 85,
    // 90, 95), then every 10 from 100: step 5 holds 100 and 110.
    assert_eq!(
        got,
        [
            (1, vec![20, 30]),
            (3, vec![60, 70]),
            (6, vec![120, 130]),
            (7, vec![140, 150])
        ]
    );
    let state = docs.checkpoint_after(None, 4).unwrap();
    assert_eq!(
        (state.step, state.doc, &state.skip[..]),
        (8, 18, &[(2, 3), (4, 6)][..])
    );
    // The uninterrupted run fails at step 4; started past it, it does not.
    assert!(matches!(
        whole.checkpoint_after(None, 5),
        Err(Error::Source(SourceError::TooManyDocuments { step: 4, .. }))
    ));
    let from_5 = whole.with_steps(5, []).unwrap();
    assert_eq!(
        from_5.iter().next().unwrap().pieces().next().unwrap().doc,
        100
    );
    assert_eq!(from_5.checkpoint_after(None, 0).unwrap().doc, 12);
}

/// A resume keeps the saved skips and adds its own; the ranks of one run must skip the
/// same steps; other skips are no obstacle to a resume.
#[test]
fn resumes_keep_the_saved_skips_and_add_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let whole = with_a_crowded_step(dir.path());
    let first = whole.with_steps(0, [(4, 5)]).unwrap();
    let state = first.checkpoint_after(None, 5).unwrap();
    assert_eq!((state.step, &state.skip[..]), (6, &[(4, 5)][..]));
    let steps = |docs: &Documents, from: &DocumentsCheckpoint| -> Vec<u64> {
        docs.iter_from(from)
            .unwrap()
            .take(4)
            .map(|s| s.step())
            .collect()
    };
    assert_eq!(steps(&whole, &state), [6, 7, 8, 9]);
    let more = whole.with_steps(0, [(7, 9)]).unwrap();
    assert_eq!(steps(&more, &state), [6, 9, 10, 11]);
    let after = more.checkpoint_after(Some(&state), 2).unwrap();
    assert_eq!((after.step, &after.skip[..]), (10, &[(4, 5), (7, 9)][..]));
    // The same steps' documents as the uninterrupted walk: step 9 starts at document 20
    // (8 before the short ones, the 4 short ones in step 4, then 2 a step).
    let nine = more.iter_from(&state).unwrap().nth(1).unwrap();
    assert_eq!((nine.step(), nine.start().unwrap().doc), (9, 20));
    // Ranks of one run that skip differently do not merge.
    let mut differs = state.clone();
    differs.skip = vec![(4, 6)];
    let err = DocumentsCheckpoint::merge(&[state.clone(), differs.clone()]).unwrap_err();
    assert_source_error!(
        err,
        SourceError::DocumentsCheckpointMismatch { what, .. }
            if what == "the skipped steps (rank 1 against rank 0)"
    );
    assert_says(&err, "[(4, 5)] in the checkpoint but [(4, 6)]");
    // But a state with other skips resumes (they are the state's, not the source's).
    assert!(whole.check_checkpoint(&differs).is_ok());
}

#[test]
fn bad_ranges_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let whole = with_a_crowded_step(dir.path());
    let path = dir.path().join("train_000.bin");
    let err = Documents::builder(TokenShards::open([&path]).unwrap())
        .tokens_per_batch(19)
        .max_seq_len(64)
        .skip_steps([(3, 5), (9, 2)])
        .build()
        .unwrap_err();
    assert_source_error!(err, SourceError::BadSkip { start: 9, end: 2 });
    assert_says(&err, "9..2 end before they start");
    assert!(matches!(
        whole.with_steps(0, [(1, 0)]),
        Err(Error::Source(SourceError::BadSkip { start: 1, end: 0 }))
    ));
    // Empty ranges are no error, and skip nothing; overlapping ones merge.
    let docs = whole
        .with_steps(0, [(2, 2), (5, 7), (6, 9), (9, 10)])
        .unwrap();
    assert_eq!(docs.skip_steps(), &[(5, 10)]);
}

#[test]
fn checkpoints_of_older_versions_are_refused_by_name() {
    assert_eq!(DOCUMENTS_CHECKPOINT_VERSION, 3);
    let dir = tempfile::tempdir().unwrap();
    let whole = with_a_crowded_step(dir.path());
    let state = whole.checkpoint_after(None, 2).unwrap();
    let text = state.to_text();
    assert!(text.contains("\"skip\": []"), "{text}");
    // An older version's text: version 2 had no `contents`, version 1 nor `skip`.
    let older = |version: u32, without: &[&str]| {
        let mut value: serde_json::Value = serde_json::from_str(&text).unwrap();
        let record = value.as_object_mut().unwrap();
        record.insert("version".into(), version.into());
        for key in without {
            assert!(record.remove(*key).is_some(), "{key}");
        }
        serde_json::to_string_pretty(&value).unwrap()
    };
    for (version, without, missing) in [
        (2, &["contents"][..], "contents"),
        (1, &["contents", "skip"][..], "contents"),
    ] {
        let old = older(version, without);
        let err = DocumentsCheckpoint::from_text(&old).unwrap_err();
        assert_source_error!(err, SourceError::BadCheckpointText { .. });
        assert_says(
            &err,
            &format!(
                "a documents checkpoint of version {version}, which this build (version 3) \
                 cannot read: missing field `{missing}`"
            ),
        );
    }
    // One that reads but says version 2 is refused by the source.
    let mut two = state.clone();
    two.version = 2;
    let err = whole.check_checkpoint(&two).unwrap_err();
    assert_says(
        &err,
        "the checkpoint version is 2 in the checkpoint but 3 here",
    );
}
