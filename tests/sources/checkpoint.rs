//! The checkpoint's serde form: the JSON text round-trips, is read strictly with errors
//! naming the line and column, and says which version it is when it cannot be read.

use pinring::source::{
    write_shard, Checkpoint, Fingerprint, Order, SourceError, TokenShards, CHECKPOINT_VERSION,
};
use pinring::Error;

/// A checkpoint of a shard with an awkward name: quotes, a backslash, a newline, accents.
fn awkward() -> (tempfile::TempDir, Checkpoint) {
    let dir = tempfile::tempdir().unwrap();
    let name = "odd \"q\" \\ name\nwith lines é.bin";
    write_shard(dir.path().join(name), &[0; 100]).unwrap();
    let state = TokenShards::open([dir.path().join(name)])
        .unwrap()
        .windows(9)
        .order(Order::Random { seed: u64::MAX })
        .shard(1, 4)
        .batch_size(2)
        .build()
        .unwrap()
        .checkpoint(3, 1);
    assert_eq!(state.dataset.files, [name]);
    (dir, state)
}

fn bad_text(text: &str) -> (usize, String) {
    match Checkpoint::from_text(text) {
        Err(Error::Source(SourceError::BadCheckpointText { line, why, .. })) => (line, why),
        other => panic!("{text:?} gave {other:?}"),
    }
}

#[test]
fn the_text_form_round_trips_any_file_name_and_every_number() {
    let (_dir, state) = awkward();
    let text = state.to_text();
    assert!(text.starts_with("{\n  \"version\": 3,\n"), "{text}");
    assert_eq!(Checkpoint::from_text(&text).unwrap(), state);
    // Numbers up to u64::MAX survive (the seed), as JSON integers.
    assert!(text.contains("\"seed\": 18446744073709551615"), "{text}");
    // Compact JSON, or keys in another order, read the same.
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        Checkpoint::from_text(&serde_json::to_string(&value).unwrap()).unwrap(),
        state
    );
}

/// The serde form is one flat record: the keys of the Python layer's state dict.
#[test]
fn the_serde_form_is_one_flat_record() {
    let (_dir, state) = awkward();
    let value = serde_json::to_value(&state).unwrap();
    let keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let mut want = [
        "version",
        "format",
        "record_bytes",
        "files",
        "sizes",
        "contents",
        "window",
        "stride",
        "order",
        "seed",
        "windows",
        "epoch",
        "consumed",
        "world_size",
        "batch_size",
        "step",
        "skip",
    ];
    want.sort_unstable();
    let mut keys = keys;
    keys.sort_unstable();
    assert_eq!(keys, want);
    assert_eq!(value["version"], CHECKPOINT_VERSION);
    let back: Checkpoint = serde_json::from_value(value).unwrap();
    assert_eq!(back, state);
    // A fingerprint alone is its own record.
    let print: Fingerprint =
        serde_json::from_str(&serde_json::to_string(&state.dataset).unwrap()).unwrap();
    assert_eq!(print, state.dataset);
}

#[test]
fn bad_text_is_named_by_line() {
    let (_dir, state) = awkward();
    let text = state.to_text();
    // Line 1 is `{`, line 2 the version, and so on in to_text's order.
    let line_of = |key: &str| {
        1 + text
            .lines()
            .position(|l| l.trim_start().starts_with(&format!("\"{key}\"")))
            .unwrap()
    };
    let contents = format!("\"contents\": [\n    {}\n  ]", state.dataset.contents[0]);
    assert!(text.contains(&contents), "{text}");
    let cases: Vec<(String, usize, &str)> = vec![
        (String::new(), 1, "EOF"),
        ("not json".into(), 1, "expected"),
        (
            text.replace("\"window\": 9", "\"window\": \"nine\""),
            line_of("window"),
            "invalid type: string \"nine\", expected u64",
        ),
        (
            text.replace("\"window\": 9", "\"window\": -9"),
            line_of("window"),
            "expected u64",
        ),
        (
            text.replace("  \"stride\": 8,\n", ""),
            text.lines().count() - 1,
            "missing field `stride`",
        ),
        (
            text.replace("\"epoch\": 3,", "\"epoch\": 3,\n  \"epoch\": 4,"),
            line_of("epoch") + 1,
            "duplicate field `epoch`",
        ),
        (
            text.replace("\"epoch\": 3,", "\"epoch\": 3,\n  \"colour\": \"blue\","),
            line_of("epoch") + 1,
            "unknown field `colour`",
        ),
        // What is wrong with the record as a whole has no line (0).
        (
            text.replace("\"order\": \"random\"", "\"order\": \"sorted\""),
            0,
            "unknown order \"sorted\"",
        ),
        (
            text.replace("\"sizes\": [\n    1224\n  ]", "\"sizes\": []"),
            0,
            "`files` names 1 file(s) but `sizes` gives 0 size(s)",
        ),
        (
            text.replace(&contents, "\"contents\": [1, 2]"),
            0,
            "`files` names 1 file(s) but `contents` gives 2 content fingerprint(s)",
        ),
        (
            format!("{text}\n{{}}"),
            text.lines().count() + 1,
            "trailing",
        ),
    ];
    for (bad, line, phrase) in cases {
        let (l, why) = bad_text(&bad);
        assert_eq!(l, line, "{bad:?}: {why}");
        assert!(
            why.contains(phrase),
            "{bad:?}: `{why}` does not say `{phrase}`"
        );
    }
}

#[test]
fn another_version_is_named() {
    let (dir, state) = awkward();
    // Another version with the same keys reads; a sampler refuses it by name.
    let v9 = state.to_text().replace("\"version\": 3", "\"version\": 9");
    let read = Checkpoint::from_text(&v9).unwrap();
    assert_eq!(read.version, 9);
    let sampler = TokenShards::glob(dir.path().join("*.bin"))
        .unwrap()
        .windows(9)
        .order(Order::Random { seed: u64::MAX })
        .build()
        .unwrap();
    match sampler.check_checkpoint(&read) {
        Err(Error::Source(SourceError::CheckpointMismatch { what, saved, here })) => {
            assert_eq!(
                (what.as_str(), saved.as_str(), here.as_str()),
                ("the checkpoint version", "9", "3")
            )
        }
        other => panic!("expected a version mismatch, got {other:?}"),
    }
    // Another version with other keys: the error says which version it is.
    let v4 = v9
        .replace("\"version\": 9", "\"version\": 4")
        .replace("\"windows\"", "\"grid\"");
    let (_, why) = bad_text(&v4);
    assert!(
        why.starts_with("a checkpoint of version 4, which this build (version 3) cannot read"),
        "{why}"
    );
    // The line form of earlier builds is named as such.
    let (line, why) = bad_text("pinring-checkpoint 1\nformat u16\n");
    assert_eq!(line, 1);
    assert!(why.contains("the line form of earlier builds"), "{why}");
    // A field of a value (not of text) has no line.
    let unknown = Checkpoint {
        order: "sorted".into(),
        ..state
    };
    let err = unknown.order().unwrap_err();
    assert!(
        matches!(
            err,
            Error::Source(SourceError::BadCheckpointText { line: 0, .. })
        ),
        "{err:?}"
    );
    assert!(
        err.to_string().starts_with("bad checkpoint: unknown order"),
        "{err}"
    );
}
