//! The timeline (issue 15): `ConfigBuilder::trace` records per-batch spans of every stage,
//! `Pipeline::write_trace` writes Chrome trace JSON that parses and holds them in order.

use std::collections::HashMap;

use pinring::{decode_fn, Config, ConfigError, DecodeError, Fence, Pipeline, SlotTimeline};
use serde_json::Value;

fn copy(s: u32, out: &mut [u8]) -> Result<(), DecodeError> {
    out.copy_from_slice(&s.to_le_bytes());
    Ok(())
}

/// (start, end) in µs of a complete span or of an async begin/end pair.
type Span = (f64, f64);

struct Spans {
    /// name -> batch -> spans (a batch may have several decode items).
    by_name: HashMap<String, HashMap<u64, Vec<Span>>>,
    threads: Vec<String>,
}

fn parse(json: &[u8]) -> Spans {
    let doc: Value = serde_json::from_slice(json).expect("the trace is JSON");
    let events = doc["traceEvents"].as_array().expect("traceEvents");
    let mut by_name: HashMap<String, HashMap<u64, Vec<Span>>> = HashMap::new();
    let mut open: HashMap<u64, f64> = HashMap::new();
    let mut threads = Vec::new();
    for e in events {
        let name = e["name"].as_str().expect("name").to_string();
        match e["ph"].as_str().expect("ph") {
            "M" => {
                if name == "thread_name" {
                    threads.push(e["args"]["name"].as_str().unwrap().to_string());
                }
            }
            "X" => {
                let args = &e["args"];
                let ts = e["ts"].as_f64().unwrap();
                let dur = e["dur"].as_f64().unwrap();
                assert!(dur >= 0.0, "{e}");
                let (first, count) = match args.get("batches") {
                    Some(n) => (args["first"].as_u64().unwrap(), n.as_u64().unwrap()),
                    None => (args["batch"].as_u64().unwrap(), 1),
                };
                for b in first..first + count {
                    let spans = by_name.entry(name.clone()).or_default();
                    spans.entry(b).or_default().push((ts, ts + dur));
                }
            }
            "b" => {
                open.insert(e["id"].as_u64().unwrap(), e["ts"].as_f64().unwrap());
            }
            "e" => {
                let id = e["id"].as_u64().unwrap();
                let start = open.remove(&id).expect("an async end follows its begin");
                let end = e["ts"].as_f64().unwrap();
                let spans = by_name.entry(name).or_default();
                spans.entry(id).or_default().push((start, end));
            }
            "i" => {
                // The slot-cycle instants (take, lease, released): a point a batch.
                let ts = e["ts"].as_f64().unwrap();
                let b = e["args"]["batch"].as_u64().unwrap();
                let spans = by_name.entry(name).or_default();
                spans.entry(b).or_default().push((ts, ts));
            }
            other => panic!("unexpected phase {other}"),
        }
    }
    Spans { by_name, threads }
}

#[test]
fn trace_json_parses_and_holds_every_stage_in_order() {
    const BATCHES: u64 = 40;
    let config = Config::builder()
        .batch_size(8)
        .bytes_per_sample(4)
        .decode_threads(2)
        .trace(10_000)
        .build()
        .unwrap();
    let mut pipeline = Pipeline::new(config, decode_fn(copy), 0..(BATCHES as u32 * 8)).unwrap();
    let mut popped = 0;
    while let Some(batch) = pipeline.pop().unwrap() {
        assert_eq!(batch.seq(), popped);
        popped += 1;
        batch.release(Fence::Sync).unwrap();
    }
    assert_eq!(popped, BATCHES);
    let mut json = Vec::new();
    let written = pipeline.write_trace(&mut json).unwrap();
    let spans = parse(&json);
    let count: usize = spans
        .by_name
        .values()
        .flat_map(|m| m.values())
        .map(Vec::len)
        .sum();
    // Copy-enqueue spans count once per run in `written`, once per batch here.
    assert!(count >= written, "{count} spans parsed, {written} written");
    for thread in ["source", "copy", "consumer"] {
        assert!(
            spans.threads.iter().any(|t| t == thread),
            "{:?}",
            spans.threads
        );
    }
    assert!(spans.threads.iter().any(|t| t.starts_with("decode ")));
    let get = |name: &str, b: u64| -> &Vec<Span> {
        spans
            .by_name
            .get(name)
            .and_then(|m| m.get(&b))
            .unwrap_or_else(|| panic!("no {name} span for batch {b}"))
    };
    let mut last_pop_end = 0.0;
    for b in 0..BATCHES {
        let source = get("source", b)[0];
        let decodes = get("decode", b);
        let first_decode = decodes.iter().map(|s| s.0).fold(f64::MAX, f64::min);
        let last_decode = decodes.iter().map(|s| s.1).fold(0.0, f64::max);
        let enqueue = get("copy enqueue", b)[0];
        let pop = get("pop", b)[0];
        let release = get("release", b)[0];
        assert!(
            source.1 <= first_decode,
            "batch {b}: decoded before it was gathered"
        );
        assert!(
            last_decode <= enqueue.0,
            "batch {b}: copied before it was decoded"
        );
        assert!(
            enqueue.0 <= pop.1,
            "batch {b}: popped before its copy was enqueued"
        );
        assert!(
            pop.1 <= release.0,
            "batch {b}: released before it was popped"
        );
        assert!(last_pop_end <= pop.0, "batch {b}: pops out of order");
        last_pop_end = pop.1;
        // A batch whose host slot was reused (by batch b + 4, 4 host slots) was seen
        // complete first; the last few may end in flight as the copy thread ends.
        if b + 4 < BATCHES {
            let h2d = get("H2D", b)[0];
            assert!(
                enqueue.0 <= h2d.0 && h2d.0 <= h2d.1,
                "batch {b}: H2D {h2d:?}"
            );
        }
    }
}

#[test]
fn trace_is_off_by_default_and_capped() {
    let config = Config::builder()
        .batch_size(1)
        .bytes_per_sample(4)
        .build()
        .unwrap();
    assert_eq!(config.trace_spans(), 0);
    let pipeline = Pipeline::new(config, decode_fn(copy), 0..4u32).unwrap();
    let err = pipeline.write_trace(Vec::new()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::Unsupported);
    assert!(err.to_string().contains("ConfigBuilder::trace"), "{err}");
    let too_many = Config::builder()
        .batch_size(1)
        .bytes_per_sample(4)
        .trace(Config::MAX_TRACE_SPANS + 1)
        .build()
        .unwrap_err();
    assert!(matches!(
        too_many,
        ConfigError::TooMany { field: "trace", .. }
    ));
}

#[test]
fn a_small_ring_keeps_the_latest_spans() {
    let config = Config::builder()
        .batch_size(1)
        .bytes_per_sample(4)
        .trace(64)
        .build()
        .unwrap();
    let mut pipeline = Pipeline::new(config, decode_fn(copy), 0..200u32).unwrap();
    while let Some(batch) = pipeline.pop().unwrap() {
        batch.release(Fence::Sync).unwrap();
    }
    let mut json = Vec::new();
    assert_eq!(pipeline.write_trace(&mut json).unwrap(), 64);
    let spans = parse(&json);
    // The last batch's pop and release are among the latest spans.
    assert!(spans.by_name["pop"].contains_key(&199));
    assert!(spans.by_name["release"].contains_key(&199));
    assert!(!spans.by_name["pop"].contains_key(&0));
}

/// The slot timeline (issue 34): every batch's cycle read back from the trace, its
/// hand-offs in the protocol's order — the copy thread takes a device slot only after its
/// last batch's release, the consumer pops a batch only after its lease, a host slot is
/// gathered into again only after the copy out of it was seen complete — and the summary
/// counting each batch under one gate.
#[test]
fn the_slot_timeline_orders_every_hand_off_of_each_cycle() {
    const BATCHES: u64 = 64;
    const H: u64 = 4;
    const D: u64 = 2;
    let config = Config::builder()
        .batch_size(4)
        .bytes_per_sample(4)
        .decode_threads(2)
        .host_slots(H as usize)
        .device_slots(D as usize)
        .trace(100_000)
        .build()
        .unwrap();
    let mut pipeline = Pipeline::new(config, decode_fn(copy), 0..(BATCHES as u32 * 4)).unwrap();
    // The consumer holds two batches at once (every device slot), so that each copy into
    // a slot waits for the release of the batch before it there.
    let mut held = std::collections::VecDeque::new();
    while let Some(batch) = pipeline.pop().unwrap() {
        held.push_back(batch);
        if held.len() == D as usize {
            held.pop_front().unwrap().release(Fence::Sync).unwrap();
        }
    }
    for batch in held {
        batch.release(Fence::Sync).unwrap();
    }
    let timeline: SlotTimeline = pipeline.slot_timeline().expect("tracing is on");
    assert_eq!((timeline.host_slots(), timeline.device_slots()), (H, D));
    let cycles = timeline.cycles();
    assert_eq!(cycles.len() as u64, BATCHES, "{cycles:?}");
    for c in cycles {
        let k = c.seq;
        let at = |t: Option<u64>, what: &str| t.unwrap_or_else(|| panic!("batch {k}: no {what}"));
        let (gather, filled, take) = (
            at(c.gather, "gather"),
            at(c.filled, "fill"),
            at(c.take, "take"),
        );
        let (lease, popped, released) = (
            at(c.lease, "lease"),
            at(c.popped, "pop"),
            at(c.released, "release"),
        );
        assert!(gather <= filled && filled <= take, "batch {k}: {c:?}");
        assert!(
            take <= lease && lease <= popped && popped <= released,
            "batch {k}: {c:?}"
        );
        if k >= D {
            let before = timeline.cycle(k - D).unwrap();
            assert!(
                before.released.unwrap() <= take,
                "batch {k} took its device slot before batch {} released it: {c:?} {before:?}",
                k - D
            );
        }
        if k >= H {
            let before = timeline.cycle(k - H).unwrap();
            assert!(
                before.host_freed.unwrap() <= gather,
                "batch {k} gathered into its host slot before batch {}'s copy was seen complete",
                k - H
            );
        }
    }
    let handoffs = timeline.handoffs();
    let count = |name: &str| {
        handoffs
            .iter()
            .find(|h| h.name.starts_with(name))
            .unwrap_or_else(|| panic!("no hand-off {name}: {handoffs:?}"))
            .count as u64
    };
    // Every take is counted under one gate: its fill, its device slot's release, or the
    // take of the batch before it.
    assert_eq!(
        count("FILLED -> take") + count("RELEASED -> take") + count("take k-1 -> take k"),
        BATCHES
    );
    assert_eq!(
        count("LEASED -> popped (consumer was waiting)")
            + count("LEASED -> popped (consumer was busy)"),
        BATCHES
    );
    assert_eq!(count("device slot cycle"), BATCHES - D);
    assert_eq!(count("host slot cycle"), BATCHES - H);
    for h in &handoffs {
        assert!(h.p50_ns <= h.p90_ns && h.p90_ns <= h.max_ns, "{h:?}");
    }
    let table = timeline.to_string();
    assert!(
        table.contains("RELEASED -> take") && table.contains("H 4, D 2"),
        "{table}"
    );
}

#[test]
fn no_slot_timeline_without_tracing() {
    let config = Config::builder()
        .batch_size(2)
        .bytes_per_sample(4)
        .build()
        .unwrap();
    let pipeline = Pipeline::new(config, decode_fn(copy), 0..8u32).unwrap();
    assert!(pipeline.slot_timeline().is_none());
}
