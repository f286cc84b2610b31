"""Issue 33: `Loader.reshard(rank, world_size)`, called by every remaining rank after the
same number of pops, goes on with the same global walk sharded anew from the next pop:
W 4 -> 3 -> 5 mid-run (one rank leaves, then two join from the merged state), every
sample exactly once across the changes — windows, records, packed documents (each document at
most once, none left out but those the walk drops at a shard's end), a mixture of windows
and a mixture of documents."""

import numpy as np

import pinring
from conftest import BOUND, write_shard
from docs_data import Corpus, write_doc_shards


def rows(batch):
    """A batch's rows as (source, id) pairs (Documents: its documents)."""
    ids = batch.doc_ids if batch.fields else batch.sample_ids
    srcs = batch.sources
    return [(int(s), int(i)) for s, i in zip(srcs, ids)]


def pop_rows(loader, n=None):
    """The rows of `n` batches (all to the end when None)."""
    out = []
    while n is None or n > 0:
        batch = loader.pop(timeout=BOUND)
        if batch is None:
            break
        out += rows(batch)
        batch.release()
        n = None if n is None else n - 1
    return out


def resharded_run(make, first=4, second=3, third=5, pops=(3, 2), **kw):
    """Every row delivered by a run of `first` ranks that pops pops[0] batches each, is
    resharded to `second` (the last rank leaves), pops pops[1] each, is resharded to `third`
    (new ranks joining from the merged state) and runs to its end. `make(rank, world)`
    makes a rank's source."""
    loaders = [pinring.Loader(make(r, first), device="cpu", **kw) for r in range(first)]
    got = []
    for loader in loaders:
        got += pop_rows(loader, pops[0])
    for leaving in loaders[second:]:
        leaving.close()
    loaders = loaders[:second]
    for r, loader in enumerate(loaders):
        loader.reshard(r, second)
    for loader in loaders:
        got += pop_rows(loader, pops[1])
    state = pinring.merge_states([loader.state_dict() for loader in loaders])
    for r, loader in enumerate(loaders):
        loader.reshard(r, third)
    loaders += [pinring.Loader(make(r, third), device="cpu", state=state, **kw) for r in range(second, third)]
    for loader in loaders:
        got += pop_rows(loader)
        loader.close()
    return got


def test_windows_are_delivered_once_across_reshards(tmp_path):
    shard = write_shard(tmp_path / "train_000.bin", np.arange(20000))
    make = lambda r, w: pinring.TokenWindows(shard, seq_len=9, order="shuffled", seed=3,  # noqa: E731
                                             rank=r, world_size=w)
    got = resharded_run(make, batch_size=4, epochs=1)
    ids = [i for _, i in got]
    assert len(ids) == len(set(ids)), "a window came twice"
    every = pinring.TokenWindows(shard, seq_len=9).epoch_len
    # Only the epoch's tail that does not split into whole batches of every rank is left.
    assert every - len(ids) < 5 * 4, (every, len(ids))
    # The same run without reshards leaves its tail too, and every id is of the epoch.
    assert set(ids) <= set(range(every))


def test_documents_are_used_at_most_once_and_only_the_walks_drops_are_left(tmp_path):
    pattern = write_doc_shards(tmp_path / "d", [30000, 20000])
    corpus = Corpus(pattern)
    make = lambda r, w: pinring.Documents(pattern, tokens_per_batch=512, max_seq_len=128,  # noqa: E731
                                          rank=r, world_size=w)
    got = resharded_run(make, epochs=1)
    docs = [i for _, i in got]
    assert len(docs) == len(set(docs)), "a document came twice"
    # Sequential order: each shard's delivered documents are a prefix of its documents
    # (the walk drops only a shard's last partial step, at its end).
    for ids in corpus.shard_docs:
        taken = [i for i in ids if i in set(docs)]
        assert taken == ids[: len(taken)], "a document inside a shard was left out"
        assert len(ids) - len(taken) < 5 * 512 // 40 + 5
    assert set(docs) <= set(corpus.docs)


def test_a_mixture_is_delivered_once_across_reshards(tmp_path):
    a = write_shard(tmp_path / "a.bin", np.arange(12000))
    b = write_shard(tmp_path / "b.bin", np.arange(8000) + 7)
    make = lambda r, w: pinring.Mixture(  # noqa: E731
        [pinring.TokenWindows(a, seq_len=9, order="shuffled", seed=1),
         pinring.TokenWindows(b, seq_len=9, order="shuffled", seed=2)],
        weights=[0.6, 0.4], stop="first", rank=r, world_size=w)
    got = resharded_run(make, batch_size=4)
    assert len(got) == len(set(got)), "a mixed position came twice"
    with pinring.Loader(make(0, 1), batch_size=4, device="cpu") as loader:
        alone = pop_rows(loader)
    # The same samples as one rank alone delivers, but for the tail of the last step.
    assert set(got) <= set(alone) and len(alone) - len(got) < 5 * 4


def test_records_are_delivered_once_across_reshards(tmp_path):
    path = tmp_path / "records.bin"
    path.write_bytes(bytes(range(256)) * 40)  # 1280 records of 8 bytes
    make = lambda r, w: pinring.FixedRecords(path, record_bytes=8, rank=r, world_size=w)  # noqa: E731
    got = resharded_run(make, batch_size=3, epochs=1)
    ids = [i for _, i in got]
    assert len(ids) == len(set(ids)), "a record came twice"
    assert set(ids) <= set(range(1280)) and 1280 - len(ids) < 5 * 3, len(ids)


def test_a_mixture_of_documents_uses_each_document_once_across_reshards(tmp_path):
    web = write_doc_shards(tmp_path / "web", [20000, 15000], seed=1, mean=60)
    code = write_doc_shards(tmp_path / "code", [14000], seed=2, mean=40)
    make = lambda r, w: pinring.Mixture(  # noqa: E731
        [pinring.Documents(p, tokens_per_batch=256, max_seq_len=96) for p in (web, code)],
        weights=[0.7, 0.3], stop="first", rank=r, world_size=w)
    got = resharded_run(make)
    assert len(got) == len(set(got)), "a document came twice"
    with pinring.Loader(make(0, 1), device="cpu") as loader:
        alone = pop_rows(loader)
    # Every document is of the mixture's walk; those left out are what the ranks' last
    # partial steps drop at the run's end (5 ranks' steps of 256 tokens at most).
    assert set(got) <= set(alone), sorted(set(got) - set(alone))[:5]
    assert len(set(alone)) - len(got) < 5 * 256 // 20, (len(alone), len(got))
