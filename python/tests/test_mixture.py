"""pinring.Mixture (issue 22): weighted sources mixed into one global sequence, sharded
once. Proportions within 1 of the weights at every prefix, each source walking its own
order, exactly once across random save -> merge -> resume chains that change the world
size, the batch size and the weights; start_step, skip_steps, per-source stats, stop rules,
and bad input as ConfigError / CheckpointError."""

import json
import random

import numpy as np
import pytest

import pinring
from conftest import BOUND, popped, read_shard, write_shard

SEQ = 15  # windows of 16 tokens
# Three shards of distinct tokens: a row's first token says which source it came from.
SIZES = {"web": (0, 4001), "code": (20000, 1601), "math": (40000, 801)}


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mix")
    return {name: write_shard(folder / f"{name}.bin", np.arange(first, first + n)) for name, (first, n) in SIZES.items()}


def sources(corpora, order="shuffled", **kw):
    return [pinring.TokenWindows(corpora[n], seq_len=SEQ, dtype="int32", order=order, seed=s + 1, **kw)
            for s, n in enumerate(SIZES)]


def source_of(row):
    return int(row[0]) // 20000


def mixture(corpora, weights=(0.7, 0.2, 0.1), rank=0, world=1, **kw):
    return pinring.Mixture(sources(corpora), weights=list(weights), seed=kw.pop("seed", 0), rank=rank,
                           world_size=world, **kw)


def pop_rows(loader, n):
    """`n` batches: (step, sources, ids, rows) each, rows copied out, batches released."""
    return popped(loader, n,
                  lambda b: (b.step, b.sources.copy(), b.sample_ids.copy(), np.from_dlpack(b).copy()))


def walk_alone(src_path, seed, epochs, order="shuffled"):
    """A source's own walk (world size 1), epochs 0..epochs-1, as sample ids."""
    src = pinring.TokenWindows(src_path, seq_len=SEQ, dtype="int32", order=order, seed=seed)
    with pinring.Loader(src, batch_size=1, device="cpu", epochs=epochs) as loader:
        ids = []
        while (b := loader.pop(timeout=BOUND)) is not None:
            ids.extend(b.sample_ids)
            b.release()
    return ids


def check_shares(sources_seq, weights, start=0):
    """Every prefix of `sources_seq` (from `start`) holds each source within 1 of its
    weight's share."""
    w = np.asarray(weights, dtype=float) / sum(weights)
    counts = np.zeros(len(w))
    for n, s in enumerate(sources_seq[start:], 1):
        counts[s] += 1
        assert np.all(np.abs(counts - w * n) <= 1.0 + 1e-9), (n, counts, w * n)


@pytest.mark.parametrize("weights", [(0.7, 0.2, 0.1), (0.1, 0.2, 0.7), (1, 1, 1), (5, 0, 1), (0.45, 0.45, 0.1)])
@pytest.mark.parametrize("world", [1, 3])
def test_proportions_at_every_prefix_and_rows_match_their_source(corpora, weights, world):
    batch, steps = 4, 25
    runs = []
    for rank in range(world):
        with pinring.Loader(mixture(corpora, weights, rank, world), batch_size=batch, device="cpu") as loader:
            assert len(loader.stats()["sources"]) in (0, 3)
            runs.append(pop_rows(loader, steps))
    # Rank r's row i of step k is position k·W·B + r + W·i of the global sequence.
    seq = [None] * (steps * world * batch)
    for rank, run in enumerate(runs):
        assert [s for s, *_ in run] == list(range(steps))
        for k, (_, srcs, ids, rows) in enumerate(run):
            for i, (s, sid, row) in enumerate(zip(srcs, ids, rows)):
                assert source_of(row) == s, "batch.sources names the row's source"
                first = SIZES[list(SIZES)[s]][0]
                assert row[0] == first + SEQ * sid, "sample_ids is the id within its source"
                seq[k * world * batch + rank + world * i] = int(s)
    check_shares(seq, weights)


def test_each_source_walks_its_own_order_once_per_epoch(corpora):
    """Seed 0: each source's n-th sample is the n-th of its own walk alone (epoch after
    epoch, a fresh shuffle each); no sample twice within a source's epoch."""
    names = list(SIZES)
    with pinring.Loader(mixture(corpora, (0.2, 0.3, 0.5)), batch_size=8, device="cpu") as loader:
        run = pop_rows(loader, 60)
    per = {s: [] for s in range(3)}
    for _, srcs, ids, _ in run:
        for s, i in zip(srcs, ids):
            per[int(s)].append(int(i))
    for s, got in per.items():
        alone = walk_alone(corpora[names[s]], s + 1, epochs=1 + len(got) // 50)
        assert got == alone[: len(got)], names[s]
    # The math source (50 windows) went round several times: each epoch a permutation.
    n = len(walk_alone(corpora["math"], 3, 1))
    epochs = [per[2][i : i + n] for i in range(0, len(per[2]) - n + 1, n)]
    assert len(epochs) >= 3 and all(sorted(e) == list(range(n)) for e in epochs)
    assert epochs[0] != epochs[1]


def test_the_mixture_seed_reshuffles_every_source_but_keeps_the_blend(corpora):
    with pinring.Loader(mixture(corpora, seed=0), batch_size=8, device="cpu") as loader:
        a = pop_rows(loader, 5)
    with pinring.Loader(mixture(corpora, seed=9), batch_size=8, device="cpu") as loader:
        b = pop_rows(loader, 5)
    assert [s.tolist() for _, s, _, _ in a] == [s.tolist() for _, s, _, _ in b]
    assert [i.tolist() for _, _, i, _ in a] != [i.tolist() for _, _, i, _ in b]


def run_ranks(corpora, world, batch, steps, weights, state=None, reweight=False):
    """Every rank of one run: `steps` batches each; returns (global position -> (source,
    id), merged state, the positions' first index)."""
    got, states = {}, []
    start = state["consumed"] if state else 0
    for rank in range(world):
        mix = mixture(corpora, weights, rank, world)
        if reweight:
            loader = pinring.Loader(mix, batch_size=batch, device="cpu")
            loader.load_state_dict(state, weights=list(weights))
        else:
            loader = pinring.Loader(mix, batch_size=batch, device="cpu", state=state)
        with loader:
            run = pop_rows(loader, steps)
            assert len(run) == steps
            for k, (_, srcs, ids, rows) in enumerate(run):
                for i, (s, sid) in enumerate(zip(srcs, ids)):
                    pos = start + k * world * batch + rank + world * i
                    assert pos not in got
                    got[pos] = (int(s), int(sid))
            states.append(json.loads(json.dumps(loader.state_dict())))  # as torch.save / json hold it
    merged = pinring.merge_states(states)
    assert merged["consumed"] == start + steps * world * batch
    return got, merged


@pytest.mark.parametrize("chain_seed", range(12))
def test_exactly_once_across_random_save_merge_resume_chains(corpora, chain_seed):
    """Random chains of runs, each on another world size, batch size and (sometimes)
    weights, resumed from the merged state of the last: the global sequence is contiguous,
    each source's samples are exactly its own walk (no sample twice within its epoch, none
    skipped), and each weight span's shares hold at every prefix from its start."""
    rng = random.Random(chain_seed)
    names = list(SIZES)
    weights = [rng.choice([0.7, 0.5, 0.2]), rng.choice([0.2, 0.3]), rng.choice([0.1, 0.2])]
    spans = [(0, weights)]
    every, state = {}, None
    for link in range(rng.randint(2, 4)):
        world, batch, steps = rng.randint(1, 3), rng.choice([2, 3, 4, 8]), rng.randint(1, 6)
        change = state is not None and rng.random() < 0.5
        if change:
            weights = [rng.choice([0.1, 0.4, 0.6, 1.0]) for _ in range(3)]
            spans.append((state["consumed"], weights))
        got, state = run_ranks(corpora, world, batch, steps, weights, state, reweight=change)
        assert not (every.keys() & got.keys())
        every.update(got)
    assert sorted(every) == list(range(len(every))), "contiguous global positions"
    seq = [every[p] for p in range(len(every))]
    per = {s: [i for src, i in seq if src == s] for s in range(3)}
    for s, ids in per.items():
        alone = walk_alone(corpora[names[s]], s + 1, epochs=1 + len(ids) // 50)
        assert ids == alone[: len(ids)], f"{names[s]}: its own walk, exactly once"
    for (start, w), (end, _) in zip(spans, spans[1:] + [(len(seq), None)]):
        check_shares([src for src, _ in seq[:end]], w, start)
    assert [span["from"] for span in state["weights"]] == [s for s, _ in spans]


def test_start_step_equals_the_uninterrupted_run_from_k(corpora):
    for world in (1, 2):
        for rank in range(world):
            with pinring.Loader(mixture(corpora, rank=rank, world=world), batch_size=4, device="cpu") as loader:
                whole = pop_rows(loader, 40)
            for k in (0, 1, 17, 33):
                with pinring.Loader(mixture(corpora, rank=rank, world=world), batch_size=4, device="cpu",
                                    start_step=k) as loader:
                    assert loader.start_step == k
                    from_k = pop_rows(loader, 40 - k)
                assert [s for s, *_ in from_k] == list(range(k, 40))
                for (s1, a1, b1, r1), (s2, a2, b2, r2) in zip(from_k, whole[k:]):
                    assert s1 == s2 and (a1 == a2).all() and (b1 == b2).all() and (r1 == r2).all()


def test_skip_steps_removes_exactly_those_steps_also_across_a_resume(corpora):
    skip = [(3, 5), range(9, 10), (20, 26)]
    skipped = {3, 4, 9, *range(20, 26)}
    with pinring.Loader(mixture(corpora), batch_size=4, device="cpu") as loader:
        whole = pop_rows(loader, 40)
    with pinring.Loader(mixture(corpora), batch_size=4, device="cpu", skip_steps=skip) as loader:
        assert loader.skip_steps == [(3, 5), (9, 10), (20, 26)]
        first = pop_rows(loader, 8)
        state = loader.state_dict()
    assert state["skip"] == [[3, 5], [9, 10], [20, 26]]
    # Resumed without skip_steps: the state's ranges go on being skipped.
    with pinring.Loader(mixture(corpora), batch_size=4, device="cpu", state=state) as loader:
        rest = pop_rows(loader, 40 - len(skipped) - 8)
    kept = [w for w in whole if w[0] not in skipped]
    got = first + rest
    assert [s for s, *_ in got] == [s for s, *_ in kept]
    for (_, a1, b1, r1), (_, a2, b2, r2) in zip(got, kept):
        assert (a1 == a2).all() and (b1 == b2).all() and (r1 == r2).all()


def test_stats_count_each_source_and_its_share(corpora):
    """stop="first": a finite run, drained, so every sample decoded was popped."""
    mix = mixture(corpora, (0.5, 0.3, 0.2), stop="first")
    with pinring.Loader(mix, batch_size=4, device="cpu") as loader:
        counts = np.zeros(3, dtype=int)
        while (batch := loader.pop(timeout=BOUND)) is not None:
            counts += np.bincount(batch.sources, minlength=3)
            batch.release()
        stats = loader.stats()
    assert [s["samples"] for s in stats["sources"]] == counts.tolist()
    shares = [s["share"] for s in stats["sources"]]
    assert shares == pytest.approx((counts / counts.sum()).tolist())
    assert all(s["decode"] >= 0 and s["per_sample"] >= 0 for s in stats["sources"])
    assert stats["slowest_source"] in (None, 0, 1, 2) and isinstance(stats["verdict"], str)
    # The first source to run out ends the mixture: no source starts a second epoch.
    assert all(c <= n for c, n in zip(counts, mix.epoch_lens))
    assert max(c / n for c, n in zip(counts, mix.epoch_lens)) > 0.9
    assert counts.sum() % 4 == 0
    # A single source has no per-source lines.
    with pinring.Loader(sources(corpora)[0], batch_size=4, device="cpu") as loader:
        loader.pop(timeout=BOUND).release()
        assert loader.stats()["sources"] == [] and loader.stats()["slowest_source"] is None


def test_stop_all_ends_once_every_source_finished_an_epoch(corpora):
    mix = mixture(corpora, (0.5, 0.3, 0.2), stop="all", world=2)
    totals = np.zeros(3, dtype=int)
    steps = []
    for rank in range(2):
        with pinring.Loader(mixture(corpora, (0.5, 0.3, 0.2), stop="all", rank=rank, world=2), batch_size=4,
                            device="cpu") as loader:
            with pytest.raises(TypeError, match="Mixture"):
                len(loader)
            n = 0
            for batch in loader:  # to the mixture's end
                totals += np.bincount(batch.sources, minlength=3)
                assert batch.epoch == 0
                batch.release()
                n += 1
            steps.append(n)
    assert steps[0] == steps[1], "every rank gets the same whole steps"
    # Every source finished its first epoch, but for the step that would end past it
    # (dropped on every rank: fewer than world_size x batch_size = 8 positions).
    assert all(t > n - 8 for t, n in zip(totals, mix.epoch_lens))
    assert totals[2] > mix.epoch_lens[2], "the early sources cycle meanwhile"


def test_mixture_of_records(tmp_path):
    rb = 12
    files = []
    for s, n in enumerate([300, 120]):
        data = np.full((n, rb), s, dtype=np.uint8)
        data[:, 1:3] = np.arange(n, dtype="<u2").view(np.uint8).reshape(n, 2)
        path = tmp_path / f"r{s}.bin"
        data.tofile(path)
        files.append(str(path))
    mix = pinring.Mixture([pinring.FixedRecords(f, record_bytes=rb, order="shuffled", seed=4) for f in files],
                          weights=[3, 1])
    assert mix.shares == pytest.approx([0.75, 0.25]) and mix.dtype == "uint8"
    with pinring.Loader(mix, batch_size=5, device="cpu") as loader:
        run = pop_rows(loader, 20)
    seq = []
    for _, srcs, ids, rows in run:
        for s, i, row in zip(srcs, ids, rows):
            assert row[0] == s and int(row[1:3].view("<u2")[0]) == i
            seq.append(int(s))
    check_shares(seq, [3, 1])


def test_state_dict_is_the_mixture_state_record_and_merges(corpora):
    with pinring.Loader(mixture(corpora, rank=0, world=2), batch_size=4, device="cpu") as a, \
            pinring.Loader(mixture(corpora, rank=1, world=2), batch_size=4, device="cpu") as b:
        for loader in (a, b):
            pop_rows(loader, 3)
        states = [a.state_dict(), b.state_dict()]
        assert set(states[0]) == {"version", "seed", "stop", "weights", "consumed", "step", "skip", "world_size",
                                  "batch_size", "sources", "kind"}
        assert states[0]["consumed"] == 24 and states[0]["step"] == 3 and states[0]["stop"] == "never"
        assert states[0]["weights"] == [{"from": 0, "weights": [0.7, 0.2, 0.1], "counts": [0, 0, 0]}]
        lens = mixture(corpora).epoch_lens
        assert sum(s["consumed"] + s["epoch"] * n for s, n in zip(states[0]["sources"], lens)) == 24
        assert pinring.merge_states(states) == states[0]
        pop_rows(a, 1)
        with pytest.raises(pinring.CheckpointError, match="consumed"):
            pinring.merge_states([a.state_dict(), b.state_dict()])


def test_merge_states_of_two_mixture_runs_names_what_differs_before_the_counts(corpora):
    """Issue 28: states of two different runs (here another seed) at different counts
    name what differs, as the windows and Documents merges do, rather than the counts."""
    with pinring.Loader(mixture(corpora, rank=0, world=2), batch_size=4, device="cpu") as a, \
            pinring.Loader(mixture(corpora, rank=1, world=2, seed=9), batch_size=4, device="cpu") as b:
        pop_rows(a, 2)
        pop_rows(b, 3)
        with pytest.raises(pinring.CheckpointError, match="the seed") as info:
            pinring.merge_states([a.state_dict(), b.state_dict()])
        assert "consumed" not in str(info.value), str(info.value)


def test_bad_mixtures_are_config_errors(corpora, tmp_path):
    def refused(argument, match, *args, **kwargs):
        with pytest.raises(pinring.ConfigError, match=match) as info:
            pinring.Mixture(*args, **kwargs)
        assert info.value.argument == argument and isinstance(info.value, ValueError)

    srcs = sources(corpora)
    refused("weights", "weight 1 is -0.5", srcs, weights=[1, -0.5, 1])
    refused("weights", "every weight is 0", srcs, weights=[0, 0, 0])
    refused("weights", "weight 2 is NaN", srcs, weights=[1, 1, float("nan")])
    refused("weights", "inf", srcs, weights=[1, float("inf"), 1])
    refused("weights", "2 weight.*3 source", srcs, weights=[1, 1])
    refused("weights", "list of numbers", srcs, weights="0.5,0.5")
    refused("weights", "list of numbers", srcs, weights=[1, "a", 2])
    refused("sources", "at least one source", [])
    ranked = pinring.TokenWindows(corpora["web"], seq_len=SEQ, rank=1, world_size=2)
    refused("sources", "source 1 sets its own rank/world_size", [srcs[0], ranked])
    longer = pinring.TokenWindows(corpora["code"], seq_len=SEQ + 1, dtype="int32")
    refused("sources", "window is 17, source 0's is 16", [srcs[0], longer])
    wider = pinring.TokenWindows(corpora["code"], seq_len=SEQ, dtype="int64")
    refused("sources", "dtype is \"int64\", source 0's is \"int32\"", [srcs[0], wider])
    rec = tmp_path / "r.bin"
    np.zeros(64, np.uint8).tofile(rec)
    records = pinring.FixedRecords(str(rec), record_bytes=16)
    refused("sources", "source 1 gives FixedRecords, source 0 gives TokenWindows", [srcs[0], records])
    refused("sources", "record size", [records, pinring.FixedRecords(str(rec), record_bytes=8)])
    refused("stop", "not one of", srcs, stop="sometimes")
    refused("rank", "rank must be in 0..world_size", srcs, rank=2, world_size=2)
    refused("world_size", "at least 1", srcs, world_size=0)
    refused("seed", "seed", srcs, seed=-1)
    with pytest.raises(TypeError, match="list of sources"):
        pinring.Mixture(srcs[0])
    with pytest.raises(TypeError, match="does not nest"):
        pinring.Mixture([pinring.Mixture(srcs)])
    mix = pinring.Mixture(srcs)
    assert mix.weights == [1.0, 1.0, 1.0] and mix.stop == "never" and "3 TokenWindows" in repr(mix)
    with pytest.raises(pinring.ConfigError, match="no epochs") as info:
        pinring.Loader(mix, batch_size=4, epochs=1)
    assert info.value.argument == "epochs"
    with pytest.raises(TypeError, match="batch_size"):
        pinring.Loader(mix)


def test_a_state_with_other_weights_is_refused_unless_asked_for(corpora):
    with pinring.Loader(mixture(corpora, (0.7, 0.2, 0.1)), batch_size=4, device="cpu") as loader:
        pop_rows(loader, 5)
        state = loader.state_dict()
    other = mixture(corpora, (0.2, 0.2, 0.6))
    with pytest.raises(pinring.CheckpointError, match=r"weights in force.*load_state_dict\(state, weights="):
        pinring.Loader(other, batch_size=4, device="cpu", state=state)
    # Asked for: from the saved point on, the new weights; the history records it.
    with pinring.Loader(mixture(corpora, (0.7, 0.2, 0.1)), batch_size=4, device="cpu") as loader:
        loader.load_state_dict(state, weights=[0.2, 0.2, 0.6])
        run = pop_rows(loader, 10)
        after = loader.state_dict()
    assert [s for s, *_ in run] == list(range(5, 15))
    check_shares([int(s) for _, srcs, _, _ in run for s in srcs], [0.2, 0.2, 0.6])
    assert [w["from"] for w in after["weights"]] == [0, 20]
    assert after["weights"][1]["weights"] == [0.2, 0.2, 0.6]
    # A later resume reproduces the run: with the new weights' Mixture, no weights= needed.
    with pinring.Loader(other, batch_size=4, device="cpu", state=after) as loader:
        assert pop_rows(loader, 1)[0][0] == 15
    # Bad weights, or weights for a loader that has none.
    with pinring.Loader(mixture(corpora), batch_size=4, device="cpu") as loader:
        with pytest.raises(pinring.ConfigError, match="weight 0 is -1") as info:
            loader.load_state_dict(state, weights=[-1, 1, 1])
        assert info.value.argument == "weights"
    with pinring.Loader(sources(corpora)[0], batch_size=4, device="cpu") as loader:
        with pytest.raises(pinring.ConfigError, match="Mixture") as info:
            loader.load_state_dict(state, weights=[1, 1, 1])
        assert info.value.argument == "weights"
        with pytest.raises(pinring.CheckpointError, match="kind of source"):
            loader.load_state_dict(state)
    with pinring.Loader(mixture(corpora), batch_size=4, device="cpu") as loader:
        with pytest.raises(pinring.CheckpointError, match="unknown key \"extra\""):
            loader.load_state_dict(dict(state, extra=1))
        with pytest.raises(pinring.CheckpointError, match="seed"):
            pinring.Loader(mixture(corpora, seed=3), batch_size=4, device="cpu", state=state)
