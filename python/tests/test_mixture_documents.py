"""pinring.Mixture of Documents (issue 22): documents mixed one by one by weight and packed
into steps as one Documents source packs its own. Shares within 1 document of the weights
at every prefix of the document sequence, each source's documents in its own order, exactly
once across save -> merge -> resume chains that change the world size and the weights;
start_step and skip_steps; locate reads back each piece; bad input."""

import json
import pathlib
import random

import numpy as np
import pytest

import pinring
from conftest import BOUND, popped
from docs_data import GPT2_BOS, Corpus, read_tokens, write_doc_shards

TOKENS, MSL = 256, 96


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    root = tmp_path_factory.mktemp("docmix")
    web = write_doc_shards(root / "web", [9000, 6000, 7000], seed=1, mean=60)
    code = write_doc_shards(root / "code", [5000, 4000], seed=2, mean=40)
    return [web, code]


def source(pattern, **kw):
    return pinring.Documents(pattern, tokens_per_batch=TOKENS, max_seq_len=MSL, **kw)


def mixture(corpora, weights=(0.7, 0.3), rank=0, world=1, **kw):
    return pinring.Mixture([source(p) for p in corpora], weights=list(weights), rank=rank, world_size=world, **kw)


def steps_of(loader, n):
    """`n` steps: (step, sources, doc ids, tokens, cu_seqlens) each."""
    return popped(loader, n, lambda b: (b.step, b.sources.copy(), b.doc_ids.copy(),
                                        np.from_dlpack(b["tokens"]).copy(), np.from_dlpack(b["cu_seqlens"]).copy()))


def run(corpora, world, steps, weights, state=None, reweight=False):
    """Every rank of one run; returns the run's documents in global order (step by step,
    rank after rank) and the merged state."""
    per_rank, states = [], []
    for rank in range(world):
        mix = mixture(corpora, weights, rank, world)
        loader = pinring.Loader(mix, device="cpu", state=None if reweight else state)
        with loader:
            if reweight:
                loader.load_state_dict(state, weights=list(weights))
            got = steps_of(loader, steps)
            assert len(got) == steps
            per_rank.append(got)
            states.append(json.loads(json.dumps(loader.state_dict())))
    docs = []
    for k in range(steps):
        assert len({per_rank[r][k][0] for r in range(world)}) == 1, "every rank at the same step"
        for r in range(world):
            _, srcs, ids, tokens, cu = per_rank[r][k]
            assert cu[len(ids)] == TOKENS
            docs.extend(zip(srcs.tolist(), ids.tolist()))
    return docs, pinring.merge_states(states)


def check_shares(seq, weights, start=0):
    w = np.asarray(weights, float) / sum(weights)
    counts = np.zeros(len(w))
    for n, s in enumerate(seq[start:], 1):
        counts[s] += 1
        assert np.all(np.abs(counts - w * n) <= 1 + 1e-9), (n, counts, w * n)


@pytest.mark.parametrize("chain_seed", range(6))
def test_exactly_once_across_save_merge_resume_chains(corpora, chain_seed):
    rng = random.Random(chain_seed)
    walks = [[i for ids in Corpus(p).shard_docs for i in ids] for p in corpora]
    weights = [0.7, 0.3]
    spans, every, state = [(0, weights)], [], None
    for _ in range(rng.randint(2, 4)):
        world, steps = rng.randint(1, 3), rng.randint(1, 5)
        change = state is not None and rng.random() < 0.4
        if change:
            weights = [rng.choice([0.2, 0.5, 0.8]), rng.choice([0.2, 0.5])]
            spans.append((state["consumed"], weights))
        docs, state = run(corpora, world, steps, weights, state, reweight=change)
        every += docs
        assert state["consumed"] == len(every), "the state counts the documents delivered"
    assert len(set(every)) == len(every), "no document twice"
    for s, walk in enumerate(walks):
        got = [i for src, i in every if src == s]
        assert got == walk[: len(got)], f"source {s}: its own documents in order, none skipped"
    for (start, w), (end, _) in zip(spans, spans[1:] + [(len(every), None)]):
        check_shares([src for src, _ in every[:end]], w, start)


def test_rows_locate_and_read_back(corpora):
    tokens_of = {str(p): read_tokens(p) for c in corpora for p in sorted(pathlib.Path(c).parent.glob("*.bin"))}
    with pinring.Loader(mixture(corpora, rank=1, world=2), device="cpu") as loader:
        assert loader.batch_size == 1
        for _ in range(6):
            batch = loader.pop(timeout=BOUND)
            tokens = np.from_dlpack(batch["tokens"]).copy()
            cu = np.from_dlpack(batch["cu_seqlens"]).copy()
            locs = batch.locate()
            assert [loc.source for loc in locs] == batch.sources.tolist()
            for j, loc in enumerate(locs):
                assert pathlib.Path(loc.path).parent == pathlib.Path(corpora[loc.source]).parent
                piece = tokens[cu[j] : cu[j] + loc.len]
                assert piece[0] == GPT2_BOS
                np.testing.assert_array_equal(tokens_of[loc.path][loc.offset : loc.offset + loc.len], piece)
            batch.release()


def test_start_step_and_skip_steps(corpora):
    with pinring.Loader(mixture(corpora, world=2, rank=1), device="cpu") as loader:
        whole = steps_of(loader, 20)
    with pinring.Loader(mixture(corpora, world=2, rank=1), device="cpu", start_step=7) as loader:
        from_7 = steps_of(loader, 13)
    with pinring.Loader(mixture(corpora, world=2, rank=1), device="cpu", skip_steps=[(3, 6)]) as loader:
        skipping = steps_of(loader, 6)
        state = loader.state_dict()
    assert state["skip"] == [[3, 6]] and state["step"] == 9
    with pinring.Loader(mixture(corpora, world=2, rank=1), device="cpu", state=state) as loader:
        skipping += steps_of(loader, 5)
    for got, want in [(from_7, whole[7:]), (skipping, [w for w in whole if not 3 <= w[0] < 6][:11])]:
        assert [g[0] for g in got] == [w[0] for w in want]
        for g, w in zip(got, want):
            assert all((a == b).all() for a, b in zip(g[1:], w[1:]))


def test_stats_and_stop_first(corpora):
    mix = mixture(corpora, stop="first")
    assert all(n is not None for n in mix.epoch_lens), "a stop rule counts every source's documents"
    counts = np.zeros(2, int)
    with pinring.Loader(mix, device="cpu") as loader:
        while (batch := loader.pop(timeout=BOUND)) is not None:
            counts += np.bincount(batch.sources, minlength=2)
            batch.release()
        stats = loader.stats()
    assert [s["samples"] for s in stats["sources"]] == counts.tolist()
    assert all(c <= n for c, n in zip(counts, mix.epoch_lens))


def test_bad_document_mixtures(corpora, tmp_path):
    def refused(match, sources, **kw):
        with pytest.raises(pinring.ConfigError, match=match) as info:
            pinring.Mixture(sources, **kw)
        assert info.value.argument == "sources"

    web, code = corpora
    refused("tokens_per_batch is 512, source 0's is 256",
            [source(web), pinring.Documents(code, tokens_per_batch=512, max_seq_len=MSL)])
    refused("max_seq_len", [source(web), pinring.Documents(code, tokens_per_batch=TOKENS, max_seq_len=MSL + 1)])
    refused("dtype is \"int64\", source 0's is \"int32\"", [source(web), source(code, dtype="int64")])
    refused("positions", [source(web), source(code, positions=True)])
    refused("rank/world_size", [source(web), source(code, rank=1, world_size=2)])
    refused("bos", [source(web), source(code, bos=7)])
    path = tmp_path / "w.bin"
    from conftest import write_shard
    write_shard(path, np.arange(100))
    refused("source 1 gives TokenWindows, source 0 gives Documents",
            [source(web), pinring.TokenWindows(str(path), seq_len=9)])
    with pytest.raises(pinring.ConfigError, match="batch_size"):
        pinring.Loader(mixture(corpora), batch_size=4)
    with pytest.raises(pinring.ConfigError, match="no epochs"):
        pinring.Loader(mixture(corpora), epochs=1)
