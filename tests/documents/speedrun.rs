//! modded-nanogpt's loader, both of its modes and every output (issue 31), through real
//! pipelines (cpu backend) against a model written from master's `distributed_data_generator`
//! (`train_gpt.py` at `f411b3d`): the contiguous validation walk (`align_to_bos=false`),
//! `grad_accum_steps` (`G` pops a step, the schedule per optimizer step, a taper), int64
//! `targets`, `bigram_inputs` (master's hash, position 1 against `M`), the `seq_cap` split,
//! `max_docs` by the formula alone, resume across `(world_size, G)`, and the bad settings.

use std::path::PathBuf;

use pinring::source::{
    modded_max_docs, modded_max_docs_formula, DocOrder, Documents, DocumentsBuilder, SourceError,
    StepModes, TokenType,
};
use pinring::{Batch, Error, Fence, Pipeline};

use crate::field_values::values;
use crate::helpers::{assert_says, builder, shard, write_shards, BOS};

/// One send of master's generator on one rank: its `inputs`, `targets`, `cu_seqlens`
/// and `bigram_inputs`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Send {
    inputs: Vec<i64>,
    targets: Vec<i64>,
    cu: Vec<i64>,
    bigram: Vec<i64>,
}

/// master's `get_bigram_hash` on `x`, written from its torch code: `out = x; out[0] = M;
/// out[1:] = (36313 * out[1:] ^ 27191 * out[:-1]) % M` (the right side read before the
/// assignment, so `out[:-1]` is `x[:-1]` with `M` at 0), int32 products wrapping, `%`
/// taking the divisor's sign.
fn master_bigram(x: &[i64], m: i32) -> Vec<i64> {
    let mut out: Vec<i32> = x.iter().map(|&t| t as i32).collect();
    if out.is_empty() {
        return vec![];
    }
    out[0] = m;
    let prev = out.clone();
    for i in 1..out.len() {
        let v = out[i].wrapping_mul(36313) ^ prev[i - 1].wrapping_mul(27191);
        out[i] = v.rem_euclid(m);
    }
    out.into_iter().map(i64::from).collect()
}

/// master's `_cum_lengths`: `full(max_docs, N)`, `[0] = 0`, `[1:len+1] = cum`; `None`
/// where it would not fit.
fn master_cu(cum: &[i64], n: usize, max_docs: usize) -> Option<Vec<i64>> {
    if cum.len() + 1 > max_docs {
        return None;
    }
    let mut cu = vec![n as i64; max_docs];
    cu[0] = 0;
    cu[1..=cum.len()].copy_from_slice(cum);
    Some(cu)
}

/// The ANVIL cap, on master's `cu` entries before the padding: every segment (an entry to
/// the next, the last to `N`) longer than `cap` split from its start into pieces of `cap`.
fn capped(entries: &[i64], n: i64, cap: i64) -> Vec<i64> {
    let mut out = vec![];
    for (i, &a) in entries.iter().enumerate() {
        out.push(a);
        let b = entries.get(i + 1).copied().unwrap_or(n);
        let mut at = a + cap;
        while at < b {
            out.push(at);
            at += cap;
        }
    }
    out
}

/// master's generator for `rank` of `world`, `sends` sends: `sizes(i)` gives send `i`'s
/// `(N, max_seq_len)` (per rank, already divided by `G`), `max_docs(N)` its rule. Past the
/// last shard the walk goes on from the first (pinring's next epoch; master's file list
/// would end).
#[allow(clippy::too_many_arguments)]
fn master(
    shards: &[Vec<u32>],
    align: bool,
    world: usize,
    rank: usize,
    sends: usize,
    sizes: impl Fn(usize) -> (usize, usize),
    max_docs: impl Fn(usize) -> usize,
    m: i32,
    cap: Option<i64>,
) -> Vec<Send> {
    let tok = |s: usize, i: usize| i64::from(shards[s % shards.len()][i]);
    let mut out = vec![];
    let (mut s, mut i, mut pos) = (0usize, 0usize, 0usize);
    while out.len() < sends {
        let (n, msl) = sizes(out.len());
        let md = max_docs(n);
        let tokens = &shards[s % shards.len()];
        let (buf, cum): (Vec<i64>, Vec<i64>) = if align {
            // Shard.next_batch.
            let bos_idx: Vec<usize> = (0..tokens.len()).filter(|&j| tokens[j] == BOS).collect();
            let mut idx = i;
            let mut mine = None;
            let mut ran_out = false;
            for r in 0..world {
                let (mut starts, mut ends) = (vec![], vec![]);
                let mut cur_len = 0;
                while cur_len <= n {
                    if idx >= bos_idx.len() {
                        ran_out = true;
                        break;
                    }
                    let cur = bos_idx[idx];
                    starts.push(cur);
                    idx += 1;
                    let next = bos_idx.get(idx).copied().unwrap_or(tokens.len());
                    let end = next.min(cur + msl).min(cur + n - cur_len + 1);
                    ends.push(end);
                    cur_len += end - cur;
                }
                if ran_out {
                    break;
                }
                if r == rank {
                    mine = Some((starts, ends));
                }
            }
            if ran_out {
                s += 1;
                i = 0;
                continue;
            }
            i = idx;
            let (starts, mut ends) = mine.unwrap();
            let buf: Vec<i64> = starts
                .iter()
                .zip(&ends)
                .flat_map(|(&a, &b)| (a..b).map(move |j| (a, j)))
                .map(|(_, j)| tok(s, j))
                .collect();
            *ends.last_mut().unwrap() -= 1;
            let mut acc = 0;
            let cum = starts
                .iter()
                .zip(&ends)
                .map(|(&a, &b)| {
                    acc += (b - a) as i64;
                    acc
                })
                .collect();
            (buf, cum)
        } else {
            if pos + world * n + 1 >= tokens.len() {
                s += 1;
                pos = 0;
                continue;
            }
            let at = pos + rank * n;
            let buf: Vec<i64> = (at..at + n + 1).map(|j| tok(s, j)).collect();
            let cum = (0..n)
                .filter(|&j| buf[j] == i64::from(BOS))
                .map(|j| j as i64)
                .collect();
            pos += world * n;
            (buf, cum)
        };
        let cum = match cap {
            Some(c) => {
                let mut e = vec![0];
                e.extend(&cum);
                capped(&e, n as i64, c)[1..].to_vec()
            }
            None => cum,
        };
        let inputs = buf[..n].to_vec();
        out.push(Send {
            bigram: master_bigram(&inputs, m),
            targets: buf[1..].to_vec(),
            cu: master_cu(&cum, n, md).expect("the model's step fits"),
            inputs,
        });
    }
    out
}

/// Three shards whose ends fall mid-step: documents of mixed lengths (some past
/// max_seq_len), tokens before the first `bos`, a document starting at a window's first
/// input now and then.
fn dataset() -> Vec<Vec<u32>> {
    let lens = |seed: usize, count: usize| -> Vec<usize> {
        (0..count)
            .map(|i| match (i * 5 + seed) % 9 {
                0 => 70 + (i * 11) % 40,
                k => 2 + (k * 3 + i) % 17,
            })
            .collect()
    };
    vec![
        shard(BOS, 3, &lens(1, 120)),
        shard(BOS, 0, &lens(2, 90)),
        shard(BOS, 1, &lens(3, 130)),
    ]
}

/// Pops `sends` batches of `docs` (rank `rank` of `world`), each as a [`Send`] with its
/// step and micro-step.
fn pinring_sends(docs: &Documents, sends: usize) -> Vec<(u64, u64, Send)> {
    let config = docs.config().decode_threads(2).build().unwrap();
    let mut p = Pipeline::new(config, docs.decoder(), docs.iter().take(sends)).unwrap();
    let mut out = vec![];
    while let Some(batch) = p.pop().unwrap() {
        out.push((batch.step().unwrap(), batch.dims()[3], send_of(&batch)));
        batch.release(Fence::Sync).unwrap();
    }
    out
}

fn send_of(batch: &Batch) -> Send {
    let has = |name: &str| batch.field(name).is_some();
    Send {
        inputs: values(batch, "inputs"),
        targets: values(batch, "targets"),
        cu: values(batch, "cu_seqlens"),
        bigram: if has("bigram_inputs") {
            values(batch, "bigram_inputs")
        } else {
            vec![]
        },
    }
}

const V: u64 = 50304 * 15 / 2;
const M: i32 = (V - 1) as i32;

fn paths(dir: &tempfile::TempDir) -> Vec<PathBuf> {
    write_shards(dir.path(), &dataset(), false)
}

fn speedrun(paths: &[PathBuf], rank: u64, world: u64) -> DocumentsBuilder {
    builder(paths)
        .shard(rank, world)
        .targets_dtype(TokenType::I64)
        .bigram_vocab_size(V)
}

#[test]
fn the_contiguous_walk_is_masters_validation_walk_on_every_rank() {
    let dir = tempfile::tempdir().unwrap();
    let paths = paths(&dir);
    let data = dataset();
    for world in [1usize, 2, 8] {
        let n = 64 / world.min(4) + 3;
        for rank in [0, world - 1] {
            let docs = speedrun(&paths, rank as u64, world as u64)
                .tokens_per_batch(n as u64)
                .max_seq_len(1 << 20)
                .align_to_bos(false)
                .max_docs(64)
                .build()
                .unwrap();
            let sends = 120;
            let got = pinring_sends(&docs, sends);
            let want = master(
                &data,
                false,
                world,
                rank,
                sends,
                |_| (n, 0),
                |_| 64,
                M,
                None,
            );
            assert_eq!(got.len(), sends);
            for (k, ((step, micro, g), w)) in got.iter().zip(&want).enumerate() {
                assert_eq!((*step, *micro), (k as u64, 0), "W={world} rank {rank}");
                assert_eq!(g, w, "W={world} rank {rank} send {k}");
            }
            // Some window opens on a bos: master's cu_seqlens then says 0 twice.
            if world == 1 {
                assert!(
                    want.iter().any(|s| s.cu[1] == 0),
                    "the dataset misses the case"
                );
            }
        }
    }
}

#[test]
fn grad_accum_pops_g_sends_a_step_under_a_three_stage_schedule_and_a_taper() {
    let dir = tempfile::tempdir().unwrap();
    let paths = paths(&dir);
    let data = dataset();
    // (from_step, tokens, max_seq_len): up in three stages, then down (a taper).
    let stages = [(0u64, 40u64, 16u64), (3, 56, 24), (6, 72, 32), (9, 48, 16)];
    let at = |step: usize| {
        let e = stages.iter().rev().find(|e| e.0 as usize <= step).unwrap();
        (e.1 as usize, e.2 as usize)
    };
    for (world, g) in [(1usize, 8u64), (2, 2), (8, 1), (2, 8), (1, 1)] {
        let rank = world - 1;
        let docs = speedrun(&paths, rank as u64, world as u64)
            .tokens_per_batch(40)
            .max_seq_len(16)
            .schedule(stages[1..].to_vec())
            .grad_accum_steps(g)
            .build()
            .unwrap();
        let sends = 14 * g as usize;
        let got = pinring_sends(&docs, sends);
        let want = master(
            &data,
            true,
            world,
            rank,
            sends,
            |i| at(i / g as usize),
            |n| modded_max_docs(n as u64) as usize,
            M,
            None,
        );
        for (i, ((step, micro, gs), w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(
                (*step, *micro),
                ((i as u64) / g, (i as u64) % g),
                "W={world} G={g}"
            );
            assert_eq!(gs, w, "W={world} G={g} send {i}");
        }
        assert_eq!(got.len(), sends);
    }
}

#[test]
fn targets_are_int64_and_bigram_inputs_are_masters_hash() {
    let dir = tempfile::tempdir().unwrap();
    let paths = paths(&dir);
    let docs = speedrun(&paths, 0, 1)
        .tokens_per_batch(33)
        .max_seq_len(20)
        .build()
        .unwrap();
    let fields = docs.fields();
    assert_eq!(fields.get("targets").unwrap().dtype, pinring::Dtype::I64);
    assert_eq!(
        fields.get("bigram_inputs").unwrap().dtype,
        pinring::Dtype::I32
    );
    let got = pinring_sends(&docs, 3);
    let s = &got[0].2;
    // Position 1 hashes against M, not against inputs[0] (the summary's formula).
    assert_eq!(s.bigram[0], i64::from(M));
    let x1 = s.inputs[1] as i32;
    let want1 = (x1.wrapping_mul(36313) ^ M.wrapping_mul(27191)).rem_euclid(M);
    assert_eq!(s.bigram[1], i64::from(want1));
    let summary = (x1.wrapping_mul(36313) ^ (s.inputs[0] as i32).wrapping_mul(27191)).rem_euclid(M);
    assert_ne!(
        i64::from(summary),
        s.bigram[1],
        "the case does not tell them apart"
    );
    assert_eq!(s.bigram, master_bigram(&s.inputs, M));
    // A modulus that makes products wrap and xor go negative still lands in 0..M.
    let big: Vec<i64> = vec![7, 2_000_000_000, 1_999_999_999, 123_456_789];
    let h = master_bigram(&big, 1_000_003);
    assert!(h[1..].iter().all(|&v| (0..1_000_003).contains(&v)), "{h:?}");
}

#[test]
fn seq_cap_splits_every_long_segment_from_its_start() {
    let dir = tempfile::tempdir().unwrap();
    let paths = paths(&dir);
    let data = dataset();
    for align in [true, false] {
        let docs = speedrun(&paths, 1, 2)
            .tokens_per_batch(60)
            .max_seq_len(50)
            .seq_cap(7)
            .align_to_bos(align)
            .max_docs(40)
            .build()
            .unwrap();
        let got = pinring_sends(&docs, 40);
        let want = master(&data, align, 2, 1, 40, |_| (60, 50), |_| 40, M, Some(7));
        for (i, ((_, _, g), w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "align {align} send {i}");
            let real: Vec<i64> = g.cu.iter().copied().take_while(|&c| c < 60).collect();
            assert!(real.windows(2).all(|p| p[1] - p[0] <= 7), "{real:?}");
        }
    }
}

#[test]
fn max_docs_by_the_formula_alone_is_the_medium_tracks() {
    let dir = tempfile::tempdir().unwrap();
    let paths = paths(&dir);
    // The medium track's rule at the table's sizes: not the table.
    assert_eq!(modded_max_docs_formula(49152), 256);
    assert_eq!(modded_max_docs(49152), 128);
    let small = builder(&paths)
        .tokens_per_batch(40)
        .max_seq_len(16)
        .schedule(vec![(2, 600, 16)])
        .max_docs_formula(true)
        .build()
        .unwrap();
    assert_eq!(small.schedule().at(0).max_docs, 128);
    assert_eq!(
        small.schedule().at(2).max_docs,
        modded_max_docs_formula(600)
    );
    assert_eq!(
        small.modes(),
        StepModes {
            max_docs_formula: Some(true),
            ..StepModes::default()
        }
    );
}

#[test]
fn w8_g1_and_w1_g8_consume_the_same_windows_and_drop_different_ones_at_shard_ends() {
    let dir = tempfile::tempdir().unwrap();
    let paths = paths(&dir);
    let n = 37u64;
    // Every rank's window starts, in walk order, for (W, G).
    let windows = |world: u64, g: u64| -> Vec<(usize, u64)> {
        let mut all = vec![];
        let ranks: Vec<Vec<_>> = (0..world)
            .map(|r| {
                let docs = builder(&paths)
                    .shard(r, world)
                    .tokens_per_batch(n)
                    .max_seq_len(1 << 20)
                    .align_to_bos(false)
                    .grad_accum_steps(g)
                    .max_docs(64)
                    .build()
                    .unwrap();
                docs.until_epoch(1)
                    .iter()
                    .map(|s| s.pieces().map(|p| (p.shard, p.start)).next().unwrap())
                    .collect()
            })
            .collect();
        for i in 0..ranks[0].len() {
            for r in &ranks {
                all.push(r[i]);
            }
        }
        all
    };
    let wide = windows(8, 1);
    let deep = windows(1, 8);
    // Within a shard the windows are the same ones in the same order; W=8 drops the
    // partial 8-window step at a shard's end, W=1 only the last partial window.
    let in_shard = |w: &[(usize, u64)], s: usize| -> Vec<u64> {
        w.iter().filter(|p| p.0 == s).map(|p| p.1).collect()
    };
    for s in 0..3 {
        let (a, b) = (in_shard(&wide, s), in_shard(&deep, s));
        assert!(b.starts_with(&a), "shard {s}");
        assert!(
            b.len() > a.len(),
            "shard {s}: the deep walk keeps more of the shard's end"
        );
        assert!(a.windows(2).all(|p| p[1] - p[0] == n));
    }
}

#[test]
fn a_resume_across_world_size_and_grad_accum_delivers_each_document_at_most_once() {
    let dir = tempfile::tempdir().unwrap();
    let paths = paths(&dir);
    for align in [true, false] {
        let run = |rank: u64, world: u64, g: u64| {
            builder(&paths)
                .shard(rank, world)
                .tokens_per_batch(29)
                .max_seq_len(12)
                .align_to_bos(align)
                .grad_accum_steps(g)
                .max_docs(64)
                .build()
                .unwrap()
        };
        // (W=2, G=4) for 5 optimizer steps, then (W=4, G=1) from its state.
        let first: Vec<_> = (0..2).map(|r| run(r, 2, 4)).collect();
        let states: Vec<_> = first
            .iter()
            .map(|d| d.checkpoint_after(None, 5).unwrap())
            .collect();
        let state = pinring::source::DocumentsCheckpoint::merge(&states).unwrap();
        assert_eq!(state.step, 5);
        let mut seen = std::collections::HashSet::new();
        for d in &first {
            for s in d.iter().take(5 * 4) {
                assert!(s.step() < 5);
                for p in s.pieces() {
                    assert!(
                        seen.insert(p.doc),
                        "document {} twice (align {align})",
                        p.doc
                    );
                }
            }
        }
        let before = seen.len();
        for r in 0..4 {
            let d = run(r, 4, 1);
            let steps: Vec<_> = d.iter_from(&state).unwrap().take(6).collect();
            assert_eq!(steps[0].step(), 5);
            for s in steps {
                for p in s.pieces() {
                    assert!(
                        seen.insert(p.doc),
                        "document {} twice after the resume",
                        p.doc
                    );
                }
            }
        }
        assert!(seen.len() > before);
    }
}

#[test]
fn a_contiguous_state_is_not_an_aligned_ones() {
    let dir = tempfile::tempdir().unwrap();
    let paths = paths(&dir);
    let make = |align: bool| {
        builder(&paths)
            .tokens_per_batch(29)
            .max_seq_len(12)
            .align_to_bos(align)
            .build()
            .unwrap()
    };
    let state = make(false).checkpoint_after(None, 3).unwrap();
    assert!(!state.align_to_bos);
    assert_eq!(state.doc, 3 * 29, "the cursor is a token");
    let e = make(true).iter_from(&state).unwrap_err();
    assert_says(&e, "align_to_bos");
    let text = state.to_text();
    assert_eq!(
        pinring::source::DocumentsCheckpoint::from_text(&text).unwrap(),
        state
    );
}

#[test]
fn a_window_with_more_documents_than_max_docs_is_an_error_at_its_step() {
    let dir = tempfile::tempdir().unwrap();
    // Documents of 2 tokens: a window of 40 inputs holds 20 bos.
    let p = write_shards(dir.path(), &[shard(BOS, 0, &[2; 400])], false);
    let docs = builder(&p)
        .tokens_per_batch(40)
        .max_seq_len(64)
        .align_to_bos(false)
        .max_docs(8)
        .build()
        .unwrap();
    let config = docs.config().decode_threads(1).build().unwrap();
    let mut pipe = Pipeline::new(config, docs.decoder(), docs.iter().take(2)).unwrap();
    let e = pipe.pop().unwrap_err();
    assert_says(&e, "raise max_docs to at least 21");
}

#[test]
fn bad_speedrun_settings_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let paths = paths(&dir);
    let base = || builder(&paths).tokens_per_batch(29).max_seq_len(12);
    let bad = |b: DocumentsBuilder, setting: &str, says: &str| {
        let e = b.build().unwrap_err();
        match &e {
            Error::Source(SourceError::BadPacking { setting: s, .. }) => {
                assert_eq!(*s, setting, "{e}")
            }
            other => panic!("{other}"),
        }
        assert_says(&e, says);
    };
    bad(base().grad_accum_steps(0), "grad_accum_steps", "1 or more");
    bad(base().seq_cap(0), "seq_cap", "1 or more");
    bad(
        base().bigram_vocab_size(1),
        "bigram_vocab_size",
        "give 2 to 2147483648",
    );
    bad(
        base().bigram_vocab_size(1 << 31 | 1),
        "bigram_vocab_size",
        "give 2 to",
    );
    bad(
        base().targets_dtype(TokenType::U16),
        "targets_dtype",
        "int32",
    );
    bad(
        base()
            .align_to_bos(false)
            .order(DocOrder::Shuffled { seed: 1 }),
        "align_to_bos",
        "order sequential",
    );
    bad(
        base().max_docs(8).max_docs_formula(true),
        "max_docs_formula",
        "not both",
    );
    // The largest bigram vocabulary that fits is taken.
    base().bigram_vocab_size(1 << 31).build().unwrap();
}

#[test]
fn host_fields_keep_their_bytes_from_pop_until_release_while_host_slots_are_reused() {
    let dir = tempfile::tempdir().unwrap();
    let paths = paths(&dir);
    let data = dataset();
    let docs = speedrun(&paths, 0, 1)
        .tokens_per_batch(41)
        .max_seq_len(30)
        .build()
        .unwrap();
    let config = docs
        .config()
        .decode_threads(1)
        .host_slots(2)
        .device_slots(6)
        .host_fields(vec!["bigram_inputs".to_owned(), "targets".to_owned()])
        .build()
        .unwrap();
    let want = master(
        &data,
        true,
        1,
        0,
        6,
        |_| (41, 30),
        |n| modded_max_docs(n as u64) as usize,
        M,
        None,
    );
    let mut p = Pipeline::new(config, docs.decoder(), docs.iter().take(6)).unwrap();
    // Six batches held at once: host slots 0 and 1 were refilled twice under the first.
    let held: Vec<Batch> = (0..6).map(|_| p.pop().unwrap().unwrap()).collect();
    for (k, batch) in held.iter().enumerate() {
        let host = batch.host_field_bytes("bigram_inputs").unwrap();
        let as_i64: Vec<i64> = host
            .chunks_exact(4)
            .map(|c| i64::from(i32::from_le_bytes(c.try_into().unwrap())))
            .collect();
        assert_eq!(as_i64, want[k].bigram, "batch {k}");
        assert_eq!(
            host,
            batch.field_bytes("bigram_inputs").unwrap(),
            "batch {k}"
        );
        let t = batch.host_field_bytes("targets").unwrap();
        assert_eq!(t, batch.field_bytes("targets").unwrap(), "batch {k}");
        assert!(batch.host_field_bytes("inputs").is_none(), "not kept");
    }
    for b in held {
        b.release(Fence::Sync).unwrap();
    }
    let unknown = docs
        .config()
        .host_fields(vec!["bigram".to_owned()])
        .build()
        .unwrap_err();
    assert_says(&unknown, "host_fields names \"bigram\"");
}

#[test]
fn start_step_skip_steps_and_locate_count_optimizer_steps_in_both_modes() {
    let dir = tempfile::tempdir().unwrap();
    let paths = paths(&dir);
    for align in [true, false] {
        let make = || {
            builder(&paths)
                .shard(1, 2)
                .tokens_per_batch(23)
                .max_seq_len(12)
                .align_to_bos(align)
                .grad_accum_steps(3)
                .max_docs(64)
        };
        let whole: Vec<_> = make().build().unwrap().iter().take(3 * 10).collect();
        let key = |s: &pinring::source::DocStep| {
            (
                s.step(),
                s.micro_step(),
                s.pieces().map(|p| (p.doc, p.len)).collect::<Vec<_>>(),
            )
        };
        // Starting at optimizer step 2 and leaving out 4..6: the same pops as the whole
        // run's, those steps' three pops each left out.
        let part: Vec<_> = make()
            .start_step(2)
            .skip_steps([(4, 6)])
            .build()
            .unwrap()
            .iter()
            .take(3 * 6)
            .map(|s| key(&s))
            .collect();
        let want: Vec<_> = whole
            .iter()
            .filter(|s| s.step() >= 2 && !(4..6).contains(&s.step()))
            .take(3 * 6)
            .map(key)
            .collect();
        assert_eq!(part, want, "align {align}");
        // A state after 4 optimizer steps resumes at step 4, micro-step 0.
        let docs = make().build().unwrap();
        let state = docs.checkpoint_after(None, 4).unwrap();
        let resumed: Vec<_> = docs
            .iter_from(&state)
            .unwrap()
            .take(3)
            .map(|s| key(&s))
            .collect();
        assert_eq!(
            resumed,
            whole[12..15].iter().map(key).collect::<Vec<_>>(),
            "align {align}"
        );
        // Every piece is located in its shard.
        for s in &whole[..6] {
            for p in s.pieces() {
                let at = docs.location(p.doc, p.len - 1).unwrap();
                assert_eq!(
                    (at.path.as_path(), at.offset),
                    (paths[p.shard].as_path(), p.start)
                );
            }
        }
    }
}

#[test]
fn a_window_that_ends_exactly_at_the_shards_end_is_dropped_as_master_drops_it() {
    let dir = tempfile::tempdir().unwrap();
    // W·N + 1 = 2·10 + 1 = 21 tokens: master's `pos + num_tokens + 1 >= len(tokens)` holds
    // at pos 0, so it goes on to the next shard; so does pinring.
    let exact = shard(BOS, 0, &[7, 7, 7]);
    assert_eq!(exact.len(), 21);
    let p = write_shards(dir.path(), &[exact, shard(BOS, 0, &[9; 10])], false);
    let starts: Vec<(usize, u64)> = builder(&p)
        .shard(0, 2)
        .tokens_per_batch(10)
        .max_seq_len(64)
        .align_to_bos(false)
        .build()
        .unwrap()
        .until_epoch(1)
        .iter()
        .map(|s| s.pieces().map(|p| (p.shard, p.start)).next().unwrap())
        .collect();
    // Shard 1 (90 tokens): windows at 0, 20, 40, 60 (60 + 21 < 90; 80 + 21 does not fit).
    assert_eq!(starts, [(1, 0), (1, 20), (1, 40), (1, 60)]);
}
