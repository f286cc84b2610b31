"""Lineage, seek and skip (issue 22) for single sources: batch.step numbers every batch;
batch.locate() reads back the very bytes of each row from its file (windows, records,
packed documents, a mixture); Loader(start_step=k) is the uninterrupted run from k;
Loader(skip_steps=...) leaves out exactly those steps, also across a resume (of packed
documents too, on another world size); window and documents states carry their step and
skipped ranges."""

import pathlib

import numpy as np
import pytest

import pinring
from conftest import BOUND, popped, read_shard, write_shard
from docs_data import GPT2_BOS, read_tokens, write_doc_shards

SEQ = 9


def rows_of(loader, n=None):
    """Batches popped: (step, epoch, ids, rows) each; all of them when `n` is None."""
    out = []
    while n is None or len(out) < n:
        batch = loader.pop(timeout=BOUND)
        if batch is None:
            break
        out.append((batch.step, batch.epoch, batch.sample_ids.copy(), np.from_dlpack(batch).copy()))
        batch.release()
    return out


def same(a, b):
    assert len(a) == len(b)
    for (s1, e1, i1, r1), (s2, e2, i2, r2) in zip(a, b):
        assert (s1, e1) == (s2, e2)
        np.testing.assert_array_equal(i1, i2)
        np.testing.assert_array_equal(r1, r2)


def windows(shards, rank=0, world=1, order="shuffled"):
    return pinring.TokenWindows(shards, seq_len=SEQ, dtype="int64", order=order, seed=5, rank=rank,
                                world_size=world)


def records(tmp_path, n=203, rb=8):
    path = tmp_path / "records.bin"
    np.arange(n * rb, dtype=np.uint32).astype(np.uint8).tofile(path)
    return str(path)


def test_batches_carry_their_step_across_epochs(shards):
    with pinring.Loader(windows(shards), batch_size=16, device="cpu", epochs=3, drop_last=True) as loader:
        got = rows_of(loader)
    per_epoch = len(got) // 3
    assert [s for s, *_ in got] == list(range(len(got)))
    assert [e for _, e, *_ in got] == [k // per_epoch for k in range(len(got))]


@pytest.mark.parametrize("drop_last", [True, False])
@pytest.mark.parametrize("world", [1, 3])
def test_start_step_equals_the_uninterrupted_run_from_k(shards, drop_last, world):
    for rank in range(world):
        kw = dict(batch_size=16, device="cpu", epochs=4, drop_last=drop_last)
        with pinring.Loader(windows(shards, rank, world), **kw) as loader:
            whole = rows_of(loader)
            per_epoch = loader.epoch_batches
        for k in (0, 1, per_epoch - 1, per_epoch, 2 * per_epoch + 3, len(whole) - 1):
            with pinring.Loader(windows(shards, rank, world), start_step=k, **kw) as loader:
                assert loader.total_batches == len(whole) - k
                assert loader.epoch == whole[k][1]
                same(rows_of(loader), whole[k:])


def test_start_step_on_records(tmp_path):
    src = pinring.FixedRecords(records(tmp_path), record_bytes=8, order="shuffled", seed=2)
    with pinring.Loader(src, batch_size=10, device="cpu", epochs=3) as loader:
        whole = rows_of(loader)
    with pinring.Loader(src, batch_size=10, device="cpu", epochs=3, start_step=27) as loader:
        same(rows_of(loader), whole[27:])


def test_skip_steps_removes_exactly_those_steps_also_across_a_resume(shards):
    kw = dict(batch_size=8, device="cpu", epochs=3, drop_last=True)
    with pinring.Loader(windows(shards), **kw) as loader:
        whole = rows_of(loader)
        per_epoch = loader.epoch_batches
    skip = [(2, 4), range(per_epoch - 1, per_epoch + 2), (per_epoch * 2 + 5, per_epoch * 2 + 5)]
    skipped = {2, 3, per_epoch - 1, per_epoch, per_epoch + 1}
    kept = [w for w in whole if w[0] not in skipped]
    with pinring.Loader(windows(shards), skip_steps=skip, **kw) as loader:
        assert loader.total_batches == len(kept)
        epochs = []
        while loader.epoch < 3:
            epochs.append([b.step for b in iter_release(loader)])
        assert sum(epochs, []) == [s for s, *_ in kept]
        assert [len(e) for e in epochs] == [per_epoch - 3, per_epoch - 2, per_epoch]
    # Stop after 5 batches, resume (no skip_steps given): the state keeps skipping.
    with pinring.Loader(windows(shards), skip_steps=skip, **kw) as loader:
        first = rows_of(loader, 5)
        state = loader.state_dict()
    assert state["step"] == kept[5][0] and state["skip"] == [[2, 4], [per_epoch - 1, per_epoch + 2]]
    with pinring.Loader(windows(shards), state=state, **kw) as loader:
        assert loader.total_batches == len(kept) - 5
        rest = rows_of(loader)
    same(first + rest, kept)
    # A resume that adds its own ranges skips both.
    with pinring.Loader(windows(shards), state=state, skip_steps=[(kept[6][0], kept[8][0])], **kw) as loader:
        got = rows_of(loader)
    same(got, kept[5:6] + kept[8:])


def iter_release(loader):
    for batch in loader:
        yield batch
        batch.release()


def test_start_step_and_skip_across_a_change_of_world_size(shards):
    """Steps keep their numbers across an elastic resume, and the saved skips hold."""
    kw = dict(batch_size=4, device="cpu", drop_last=True)
    states = []
    for rank in range(2):
        with pinring.Loader(windows(shards, rank, 2), skip_steps=[(3, 6)], start_step=1, **kw) as loader:
            assert [s for s, *_ in rows_of(loader, 4)] == [1, 2, 6, 7]
            states.append(loader.state_dict())
    state = pinring.merge_states(states)
    assert state["step"] == 8 and state["skip"] == [[3, 6]]
    with pinring.Loader(windows(shards, 0, 3), state=state, skip_steps=[(9, 10)], **kw) as loader:
        assert [s for s, *_ in rows_of(loader, 3)] == [8, 10, 11]


def test_window_states_carry_step_and_skip(shards):
    with pinring.Loader(windows(shards), batch_size=4, device="cpu") as loader:
        state = loader.state_dict()
        assert (state["step"], state["skip"]) == (0, [])
        rows_of(loader, 3)
        state = loader.state_dict()
    assert (state["step"], state["consumed"]) == (3, 12)
    assert list(state)[-2:] == ["step", "skip"]
    for bad in [dict(state, skip=[[5, 3, 1]]), dict(state, skip="none"), dict(state, step=-1)]:
        with pytest.raises(pinring.CheckpointError, match="state\\[\"s"):
            pinring.Loader(windows(shards), batch_size=4, device="cpu", state=bad)
    missing = {k: v for k, v in state.items() if k != "skip"}
    with pytest.raises(pinring.CheckpointError, match="\"skip\" is missing"):
        pinring.Loader(windows(shards), batch_size=4, device="cpu", state=missing)


def test_bad_steps_are_config_errors(shards, tmp_path):
    def refused(argument, match, **kw):
        with pytest.raises(pinring.ConfigError, match=match) as info:
            pinring.Loader(windows(shards), batch_size=4, device="cpu", **kw)
        assert info.value.argument == argument

    refused("start_step", "0..2\\*\\*64", start_step=-1)
    refused("skip_steps", "ends before it starts", skip_steps=[(5, 3)])
    refused("skip_steps", "not a pair of ints", skip_steps=[(1, 2, 3)])
    refused("skip_steps", "not a pair of ints", skip_steps=[5])
    refused("skip_steps", "step other than 1", skip_steps=[range(0, 10, 2)])
    refused("skip_steps", "0..2\\*\\*64", skip_steps=[(-1, 2)])
    refused("skip_steps", "got a dict", skip_steps={1: 2})
    docs = pinring.Documents(write_doc_shards(tmp_path / "d", [5000]), tokens_per_batch=256, max_seq_len=64)
    with pytest.raises(pinring.ConfigError, match="ends before it starts") as info:
        pinring.Loader(docs, device="cpu", skip_steps=[(2, 1)])
    assert info.value.argument == "skip_steps"


def doc_steps(loader, n):
    """The next `n` steps of a Documents loader, as (step, epoch, doc_ids, tokens); the run
    must not end before them."""
    steps = popped(
        loader, n, lambda b: (b.step, b.epoch, b.doc_ids.copy(), np.from_dlpack(b["tokens"]).copy())
    )
    assert len(steps) == n, f"the run ended after {len(steps)} of {n} steps"
    return steps


def test_start_step_of_documents_equals_the_uninterrupted_run(tmp_path):
    """A single Documents source begins at step k: the same steps as the uninterrupted run
    from k (the steps before it walked over the index, not read), on every rank; a state
    before k begins at k too, and the state after it counts on."""
    pattern = write_doc_shards(tmp_path / "d", [9000, 4000, 7000])
    src = lambda rank: pinring.Documents(pattern, tokens_per_batch=256, max_seq_len=64, rank=rank,  # noqa: E731
                                         world_size=2)

    for rank in range(2):
        with pinring.Loader(src(rank), device="cpu") as loader:
            whole = doc_steps(loader, 40)
            early = None
        with pinring.Loader(src(rank), device="cpu") as loader:
            doc_steps(loader, 3)
            early = loader.state_dict()
        for k, state in [(9, None), (31, None), (12, early)]:
            with pinring.Loader(src(rank), device="cpu", start_step=k, state=state) as loader:
                assert loader.state_dict()["step"] == k
                got = doc_steps(loader, 40 - k)
                assert loader.state_dict()["step"] == 40
            same([(s, e, i, t) for s, e, i, t in got], whole[k:])


def test_skip_steps_of_documents_leave_out_exactly_those_steps_across_resumes(tmp_path):
    """A single Documents source skips steps on every rank: the others are the
    uninterrupted run's, with their numbers and documents; the state records the skipped
    ranges, so a resume (on the same world size or another, adding ranges of its own) keeps
    skipping them; across the runs no document is delivered twice, and none of a skipped
    step's."""
    pattern = write_doc_shards(tmp_path / "d", [9000, 4000, 7000])
    src = lambda rank, world=2: pinring.Documents(pattern, tokens_per_batch=256,  # noqa: E731
                                                  max_seq_len=64, rank=rank, world_size=world)

    skip = [(3, 6), range(10, 12)]
    skipped = {3, 4, 5, 10, 11}
    whole, states = [], []
    for rank in range(2):
        with pinring.Loader(src(rank), device="cpu") as loader:
            whole.append(doc_steps(loader, 30))
        kept = [s for s in whole[rank] if s[0] not in skipped]
        with pinring.Loader(src(rank), device="cpu", skip_steps=skip) as loader:
            assert loader.skip_steps == [(3, 6), (10, 12)]
            same(doc_steps(loader, 5), kept[:5])
            states.append(loader.state_dict())
        # After steps 0, 1, 2, 6 and 7: the next kept step, the ranges recorded.
        assert states[rank]["step"] == 8 and states[rank]["skip"] == [[3, 6], [10, 12]]
        # Resumed without skip_steps: the state keeps skipping.
        with pinring.Loader(src(rank), device="cpu", state=states[rank]) as loader:
            same(doc_steps(loader, 10), kept[5:15])
        # A start step inside a skipped range: the first kept step after it.
        with pinring.Loader(src(rank), device="cpu", start_step=4, skip_steps=skip) as loader:
            assert loader.state_dict()["step"] == 6
            same(doc_steps(loader, 3), kept[3:6])
    state = pinring.merge_states(states)
    # The first run used the documents of steps 0 to 7 on both ranks (3 to 5 skipped).
    used = {(e, int(i)) for run in whole for s, e, ids, _ in run if s < 8 for i in ids}
    delivered = set()
    for rank in range(3):
        with pinring.Loader(src(rank, 3), device="cpu", state=state, skip_steps=[(20, 22)]) as loader:
            got = doc_steps(loader, 12)
            assert loader.state_dict()["skip"] == [[3, 6], [10, 12], [20, 22]]
        assert [s for s, *_ in got] == [8, 9, 12, 13, 14, 15, 16, 17, 18, 19, 22, 23]
        for _, e, ids, _ in got:
            for i in ids:
                assert (e, int(i)) not in used and (e, int(i)) not in delivered, (rank, e, i)
                delivered.add((e, int(i)))
    # A state of version 1 (before `skip`) is refused by name.
    old = {k: v for k, v in states[0].items() if k != "skip"}
    old["version"] = 1
    with pytest.raises(pinring.CheckpointError, match="a Documents state of version 1, which this build "
                       "\\(version 3\\) cannot read: .*\"skip\" is missing"):
        pinring.Loader(src(0), device="cpu", state=old)


def check_token_rows(batch, rows):
    """Each row of a token batch equals the tokens its location names, read from the file."""
    locs = batch.locate()
    assert len(locs) == len(rows)
    for loc, row in zip(locs, rows):
        assert isinstance(loc, pinring.Location) and isinstance(loc, tuple)
        assert loc.len == len(row)
        np.testing.assert_array_equal(read_shard(loc.path)[loc.offset : loc.offset + loc.len], row)
    return locs


@pytest.mark.parametrize("order", ["sequential", "shuffled", "random"])
def test_locate_reads_back_the_bytes_of_each_window(shards, order):
    with pinring.Loader(windows(shards, 1, 2, order=order), batch_size=8, device="cpu", epochs=2) as loader:
        seen = set()
        while (batch := loader.pop(timeout=BOUND)) is not None:
            rows = np.from_dlpack(batch).copy()
            locs = check_token_rows(batch, rows)
            batch.release()
            assert batch.locate() == locs, "it works after release"
            assert all(loc.source == 0 for loc in locs)
            seen.update(loc.path for loc in locs)
    assert seen == set(shards)


def test_locate_reads_back_each_record(tmp_path):
    path = records(tmp_path)
    raw = pathlib.Path(path).read_bytes()
    src = pinring.FixedRecords(path, record_bytes=8, order="shuffled", seed=1)
    with pinring.Loader(src, batch_size=7, device="cpu", epochs=1) as loader:
        while (batch := loader.pop(timeout=BOUND)) is not None:
            for loc, row in zip(batch.locate(), np.from_dlpack(batch)):
                assert loc.path == path and loc.len == 1
                assert raw[loc.offset * 8 : (loc.offset + loc.len) * 8] == row.tobytes()
            batch.release()


def test_locate_reads_back_each_document_piece(tmp_path):
    pattern = write_doc_shards(tmp_path / "docs", [6000, 3000, 7000])
    shards = {str(p): read_tokens(p) for p in sorted(pathlib.Path(pattern).parent.glob("*.bin"))}
    src = pinring.Documents(pattern, tokens_per_batch=512, max_seq_len=128, world_size=2, rank=1)
    with pinring.Loader(src, device="cpu") as loader:
        for _ in range(12):
            batch = loader.pop(timeout=BOUND)
            tokens = np.from_dlpack(batch["tokens"]).copy()
            cu = np.from_dlpack(batch["cu_seqlens"]).copy()
            locs = batch.locate()
            assert len(locs) == len(batch.doc_ids) and (batch.sources == 0).all()
            for j, loc in enumerate(locs):
                piece = tokens[cu[j] : cu[j] + loc.len]
                assert piece[0] == GPT2_BOS and loc.len <= 128
                np.testing.assert_array_equal(shards[loc.path][loc.offset : loc.offset + loc.len], piece)
            batch.release()


def test_locate_names_each_rows_source_in_a_mixture(tmp_path):
    paths = [write_shard(tmp_path / f"s{i}.bin", np.arange(1000 * i, 1000 * i + 700)) for i in range(3)]
    srcs = [pinring.TokenWindows(p, seq_len=SEQ, dtype="int32", order="shuffled", seed=i) for i, p in enumerate(paths)]
    mix = pinring.Mixture(srcs, weights=[1, 2, 3], rank=1, world_size=2)
    with pinring.Loader(mix, batch_size=6, device="cpu", start_step=5, skip_steps=[(7, 9)]) as loader:
        for step in [5, 6, 9, 10]:
            batch = loader.pop(timeout=BOUND)
            assert batch.step == step
            locs = check_token_rows(batch, np.from_dlpack(batch).copy())
            assert [loc.source for loc in locs] == batch.sources.tolist()
            assert [loc.path for loc in locs] == [paths[s] for s in batch.sources]
            batch.release()
