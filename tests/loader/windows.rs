//! A loader over token windows and records: steps, epochs, states that resume exactly on
//! another world size, and the state a trainer consumed behind a prefetch thread.

use std::collections::BTreeSet;
use std::sync::mpsc;

use pinring::source::{Order, Sampler, TokenShards};
use pinring::{Loader, State};
use proptest::prelude::*;
use tempfile::TempDir;

use crate::helpers::{got, pop, pop_all, records, shards, windows, Got};

/// A loader of `batch` windows of `window` tokens a step, in `order`, for `epochs`
/// epochs, over one shard of `len` tokens (and the folder that holds it).
fn one_shard_loader(
    len: usize,
    window: u64,
    order: Order,
    batch: u64,
    epochs: u64,
) -> (TempDir, Loader<Sampler<TokenShards>>) {
    let (dir, paths) = shards(&[len]);
    let src = windows(&paths, window, order);
    let loader = Loader::builder(src)
        .batch_size(batch)
        .epochs(epochs)
        .build()
        .unwrap();
    (dir, loader)
}

#[test]
fn a_loader_numbers_its_steps_across_epochs_and_ends_at_its_cap() {
    let (_dir, mut loader) = one_shard_loader(5000, 65, Order::Shuffled { seed: 3 }, 8, 2);
    let per_epoch = loader.epoch_batches().unwrap();
    assert_eq!(per_epoch, 78 / 8);
    assert_eq!(loader.total_batches().unwrap(), Some(2 * per_epoch));
    let all = pop_all(&mut loader);
    let steps: Vec<u64> = all.iter().map(|g| g.0.unwrap()).collect();
    assert_eq!(steps, (0..2 * per_epoch).collect::<Vec<_>>());
    let epochs: Vec<u64> = all.iter().map(|g| g.1).collect();
    assert!(epochs[..per_epoch as usize].iter().all(|&e| e == 0));
    assert!(epochs[per_epoch as usize..].iter().all(|&e| e == 1));
    let state = loader.state();
    assert_eq!((state.epoch(), state.step()), (2, 2 * per_epoch));
}

#[test]
fn epoch_iter_yields_one_epoch_each_time() {
    let (_dir, mut loader) = one_shard_loader(3000, 33, Order::Sequential, 4, 3);
    let per_epoch = loader.epoch_batches().unwrap() as usize;
    for epoch in 0..3 {
        assert_eq!(loader.epoch(), epoch);
        let batches: Vec<_> = loader.epoch_iter().map(|b| got(b.unwrap())).collect();
        assert_eq!(batches.len(), per_epoch, "epoch {epoch}");
        assert!(batches.iter().all(|g| g.1 == epoch));
    }
    assert_eq!(loader.epoch_iter().count(), 0);
}

/// The windows' ids a run delivered, by epoch.
fn ids(batches: &[Got]) -> BTreeSet<(u64, u64)> {
    batches
        .iter()
        .flat_map(|g| g.2.iter().map(move |&id| (g.1, id)))
        .collect()
}

#[test]
fn a_saved_state_merged_over_ranks_resumes_exactly_once_on_another_world_size() {
    let (_dir, paths) = shards(&[4000, 3000]);
    let src = windows(&paths, 49, Order::Shuffled { seed: 11 });
    let on = |rank, world, state: Option<&State>| {
        let b = Loader::builder(src.clone())
            .batch_size(3)
            .rank(rank)
            .world_size(world)
            .epochs(1);
        match state {
            Some(s) => b.resume(s),
            None => b,
        }
        .build()
        .unwrap()
    };
    // Two ranks, five steps each; the states are equal and merge.
    let mut first = BTreeSet::new();
    let mut states = Vec::new();
    for rank in 0..2 {
        let mut loader = on(rank, 2, None);
        first.extend(ids(&pop(&mut loader, 5)));
        states.push(loader.state());
    }
    assert_eq!(states[0], states[1]);
    let state = State::merge(&states).unwrap();
    assert_eq!(state.step(), 5);
    // The rest of the epoch on three ranks: none twice, and every window of the epoch
    // but fewer than one step's worth (3 ranks x 3) delivered.
    let mut rest = BTreeSet::new();
    let mut steps = BTreeSet::new();
    for rank in 0..3 {
        let mut loader = on(rank, 3, Some(&state));
        for g in pop_all(&mut loader) {
            steps.insert(g.0.unwrap());
            for &id in &g.2 {
                assert!(rest.insert((g.1, id)), "window {id} twice");
            }
        }
    }
    assert!(first.is_disjoint(&rest));
    assert_eq!(steps.first(), Some(&5));
    let epoch = src.epoch_windows();
    let delivered = (first.len() + rest.len()) as u64;
    assert!(epoch - delivered < 9, "{delivered} of {epoch}");
}

#[test]
fn a_trainer_behind_a_prefetch_thread_saves_what_it_consumed() {
    let (_dir, paths) = shards(&[6000]);
    let src = windows(&paths, 17, Order::Shuffled { seed: 2 });
    let loader = Loader::builder(src.clone()).batch_size(4).build().unwrap();
    let states = loader.run_states();
    let (tx, rx) = mpsc::sync_channel(3);
    let prefetch = std::thread::spawn(move || {
        let mut loader = loader;
        while let Some(batch) = loader.pop().unwrap() {
            if tx.send(got(batch)).is_err() {
                break;
            }
        }
    });
    // The trainer consumes 7 batches while the thread pops ahead of it.
    let consumed: Vec<Got> = (0..7).map(|_| rx.recv().unwrap()).collect();
    let last = consumed.last().unwrap().0.unwrap();
    let saved = states.at(last + 1).unwrap();
    drop(rx);
    prefetch.join().unwrap();
    // The same as a loader that popped exactly those 7, and a resume goes on from batch 7.
    let mut straight = Loader::builder(src.clone()).batch_size(4).build().unwrap();
    let mut all = pop(&mut straight, 9);
    assert_eq!(all[..7], consumed[..]);
    let mut seven = Loader::builder(src.clone()).batch_size(4).build().unwrap();
    pop(&mut seven, 7);
    assert_eq!(seven.state(), saved);
    let mut resumed = Loader::builder(src)
        .batch_size(4)
        .resume(&saved)
        .build()
        .unwrap();
    assert_eq!(pop(&mut resumed, 2), all.split_off(7));
}

#[test]
fn start_and_skipped_steps_keep_the_uninterrupted_numbering() {
    let (_dir, paths) = shards(&[5000]);
    let src = windows(&paths, 25, Order::Shuffled { seed: 9 });
    let mut straight = Loader::builder(src.clone()).batch_size(5).build().unwrap();
    let all = pop(&mut straight, 30);
    // From step 4, steps 10 to 12 and 20 to 21 skipped.
    let skipping = || {
        Loader::builder(src.clone())
            .batch_size(5)
            .start_step(4)
            .skip_steps([10..13, 20..22])
            .build()
            .unwrap()
    };
    let mut loader = skipping();
    let got = pop(&mut loader, 20);
    let want: Vec<Got> = all
        .into_iter()
        .filter(|g| {
            let s = g.0.unwrap();
            s >= 4 && !(10..13).contains(&s) && !(20..22).contains(&s)
        })
        .take(20)
        .collect();
    assert_eq!(got, want);
    // The state records the skips, and a resume from it keeps skipping.
    let state = loader.state();
    assert_eq!(state.skip(), &[(10, 13), (20, 22)]);
    let mut before = skipping();
    pop(&mut before, 6); // steps 4 to 9
    let mid = before.state();
    assert_eq!(mid.step(), 13, "the next kept step after 4..10");
    let mut resumed = Loader::builder(src)
        .batch_size(5)
        .resume(&mid)
        .build()
        .unwrap();
    let next: Vec<u64> = pop(&mut resumed, 8).iter().map(|g| g.0.unwrap()).collect();
    assert_eq!(next, [13, 14, 15, 16, 17, 18, 19, 22]);
}

#[test]
fn records_load_from_a_file_set_one_record_a_sample() {
    let (_dir, set) = records(50, 6);
    let mut loader = Loader::builder(set)
        .batch_size(8)
        .epochs(1)
        .build()
        .unwrap();
    let all = pop_all(&mut loader);
    assert_eq!(all.len(), 50 / 8);
    let first = &all[0];
    assert_eq!(first.2, (0..8).collect::<Vec<_>>());
    assert_eq!(&first.3[6..12], &[7, 8, 9, 10, 11, 12]);
    assert_eq!(loader.state().epoch(), 1);
}

#[test]
fn a_state_reads_back_from_its_text_and_an_untagged_one_names_its_version() {
    let (_dir, paths) = shards(&[2000]);
    let src = windows(&paths, 9, Order::Sequential);
    let mut loader = Loader::builder(src).batch_size(2).build().unwrap();
    pop(&mut loader, 3);
    let state = loader.state();
    let text = state.to_text();
    assert!(text.contains("\"kind\": \"windows\""), "{text}");
    assert_eq!(State::from_text(&text).unwrap(), state);
    let mut value = state.to_value();
    value.as_object_mut().unwrap().remove("kind");
    let e = State::from_value(value).unwrap_err().to_string();
    assert!(
        e.contains("a state of version") && e.contains("earlier pinring"),
        "{e}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// The loader's state after k pops is the sampler's checkpoint after the samples of
    /// those k batches, whatever the batch size, world size, start and skipped steps.
    #[test]
    fn the_state_is_the_samplers_checkpoint_after_the_batches_popped(
        batch in 1u64..6,
        (world, rank) in (1u64..4).prop_flat_map(|w| (Just(w), 0..w)),
        start in 0u64..6,
        skip_at in 0u64..12,
        skip_len in 0u64..4,
        pops in 0usize..14,
        drop_last in any::<bool>(),
    ) {
        let (_dir, paths) = shards(&[1500, 700]);
        let src = windows(&paths, 21, Order::Shuffled { seed: 4 });
        let mut loader = Loader::builder(src.clone())
            .batch_size(batch)
            .rank(rank)
            .world_size(world)
            .drop_last(drop_last)
            .start_step(start)
            .skip_steps(skip_at..skip_at + skip_len)
            .build()
            .unwrap();
        let popped: u64 = pop(&mut loader, pops).iter().map(|g| g.2.len() as u64).sum();
        let sampler: Sampler<TokenShards> = src
            .to_builder()
            .shard(rank, world)
            .batch_size(batch)
            .drop_last(drop_last)
            .start_step(start)
            .skip_steps([(skip_at, skip_at + skip_len)])
            .build()
            .unwrap();
        let want = sampler.checkpoint_after(&sampler.checkpoint(0, 0), popped).unwrap();
        prop_assert_eq!(loader.state(), State::Windows(want));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Resharded 4 → 3 → 5 at random steps (every remaining rank after the same pops), a
    /// run of one epoch delivers every window at most once, and all but fewer than one
    /// step's worth at the last world size.
    #[test]
    fn resharding_mid_run_delivers_each_window_once(
        first in 1usize..6,
        second in 1usize..6,
        batch in 1u64..4,
        shuffled in any::<bool>(),
    ) {
        let (_dir, paths) = shards(&[3000, 1200]);
        let order = if shuffled { Order::Shuffled { seed: 8 } } else { Order::Sequential };
        let src = windows(&paths, 13, order);
        let mut loaders: Vec<_> = (0..4)
            .map(|r| Loader::builder(src.clone()).batch_size(batch).rank(r).world_size(4).epochs(1).build().unwrap())
            .collect();
        let mut seen = BTreeSet::new();
        let mut take = |loaders: &mut Vec<Loader<Sampler<TokenShards>>>, n: usize| -> Result<(), TestCaseError> {
            for l in loaders.iter_mut() {
                for g in pop(l, n) {
                    for &id in &g.2 {
                        prop_assert!(seen.insert(id), "window {} twice", id);
                    }
                }
            }
            Ok(())
        };
        take(&mut loaders, first)?;
        loaders.truncate(3);
        for (r, l) in loaders.iter_mut().enumerate() {
            l.reshard(r as u64, 3).unwrap();
        }
        take(&mut loaders, second)?;
        let mut loaders: Vec<_> = loaders.into_iter().collect();
        for (r, l) in loaders.iter_mut().enumerate() {
            l.reshard(r as u64, 5).unwrap();
        }
        for r in 3..5 {
            let mut l = Loader::builder(src.clone()).batch_size(batch).rank(r).world_size(5).epochs(1)
                .resume(&loaders[0].state()).build().unwrap();
            let _ = &mut l;
            loaders.push(l);
        }
        take(&mut loaders, usize::MAX)?;
        let epoch = src.epoch_windows() as usize;
        prop_assert!(epoch - seen.len() < 5 * batch as usize, "{} of {}", seen.len(), epoch);
    }
}

#[test]
fn pops_in_an_epoch_wait_in_slices_or_not_at_all_and_the_end_is_noted() {
    use std::time::Duration;
    let (_dir, mut loader) = one_shard_loader(2000, 9, Order::Sequential, 4, 2);
    let per_epoch = loader.epoch_batches().unwrap();
    let mut first = 0;
    loop {
        match loader.try_pop_in_epoch(0).unwrap() {
            pinring::TryPop::Batch(_) => first += 1,
            pinring::TryPop::NotReady => {
                if let Some(_batch) = loader.pop_in_epoch_for(0, Duration::from_secs(30)).unwrap() {
                    first += 1;
                } else {
                    break;
                }
            }
            pinring::TryPop::End => break,
        }
    }
    assert_eq!(first, per_epoch);
    assert_eq!(loader.epoch(), 1);
    assert!(!loader.ended());
    let second = pop_all(&mut loader);
    assert_eq!(second.len() as u64, per_epoch);
    assert!(loader.ended());
    // Closed: nothing more, the state and the stats stay.
    let state = loader.state();
    loader.close();
    assert!(matches!(loader.pop(), Err(pinring::Error::Stopped)));
    assert_eq!(loader.state(), state);
    assert_eq!(loader.stats().batches, 2 * per_epoch);
}
