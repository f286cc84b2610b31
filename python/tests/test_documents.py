"""pinring.Documents against a faithful copy of modded-nanogpt's generator (parity), and
the source's own promises: the fields a batch exports, shapes over a schedule, shuffled
epochs, positions, LLaMA-3 shards, elastic resume, and bad input in Python's words."""

import gc
import inspect

import numpy as np
import pytest

import modded_reference as ref
import pinring
from conftest import BOUND
from conftest import write_shard as write_u16_windows_shard
from docs_data import GPT2_BOS, LLAMA3_BOS, Corpus, write_doc_shards, write_tokens

BOS = GPT2_BOS
SCHEDULE = [(4, 1536, 512)]  # from step 4: 1536 tokens per rank, documents cut at 512


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Four shards of unequal lengths (the last one too short for a W=8 step at 1536)."""
    return write_doc_shards(tmp_path_factory.mktemp("docs"), [30_000, 22_000, 41_000, 9_000])


@pytest.fixture(scope="module")
def corpus(shards):
    return Corpus(shards)


def pops(loader, limit=None, epoch=None):
    """Steps popped (each copied out as numpy and released): `limit` of them, or those of
    epoch `epoch` (stopping at the first step of the next one, which is released unread)."""
    out = []
    while limit is None or len(out) < limit:
        batch = loader.pop(timeout=BOUND)
        if batch is None:
            break
        if epoch is not None and batch.epoch != epoch:
            batch.release()
            break
        out.append(dict(
            tokens=np.from_dlpack(batch["tokens"]).copy(),
            inputs=np.from_dlpack(batch["inputs"]).copy(),
            targets=np.from_dlpack(batch["targets"]).copy(),
            cu=np.from_dlpack(batch["cu_seqlens"]).copy(),
            positions=np.from_dlpack(batch["positions"]).copy() if "positions" in batch else None,
            ids=batch.doc_ids.copy(), step=batch.step, epoch=batch.epoch,
            max_seqlen=batch.max_seqlen, seq=batch.seq,
        ))
        batch.release()
    return out


def run(pattern, limit=None, epoch=None, **kw):
    with pinring.Loader(pinring.Documents(pattern, **kw), device="cpu") as loader:
        return pops(loader, limit, epoch)


def pieces(step):
    """(document id, length in cu_seqlens, tokens taken) of each piece of a step: the last
    piece takes one token more than its cu_seqlens length (the last target)."""
    cu, n = step["cu"], len(step["inputs"])
    count = len(step["ids"])
    ends = list(cu[1:count + 1])
    assert ends[-1] == n and all(c == n for c in cu[count + 1:]), "padding with N"
    lens = np.diff(np.concatenate([[0], ends]))
    takes = lens.copy()
    takes[-1] += 1
    return list(zip(step["ids"].tolist(), lens.tolist(), takes.tolist()))


def check_against_corpus(step, corpus, max_seq_len):
    """Each piece is the start of the document its id names (a BOS token at the id's
    offset), at most max_seq_len tokens of it; tokens, inputs, targets and max_seqlen agree."""
    start = 0
    for doc, length, take in pieces(step):
        assert doc in corpus.docs, f"id {doc} is no document's BOS offset"
        assert take <= min(max_seq_len, corpus.docs[doc][1]), (doc, take)
        np.testing.assert_array_equal(step["tokens"][start:start + take], corpus.tokens[doc:doc + take])
        start += length
    np.testing.assert_array_equal(step["inputs"], step["tokens"][:-1])
    np.testing.assert_array_equal(step["targets"], step["tokens"][1:])
    assert step["max_seqlen"] == int(np.diff(step["cu"]).max())


# Parity with modded-nanogpt's generator.


@pytest.mark.parametrize("world, n, msl, schedule", [
    (1, 1024, 256, SCHEDULE),
    (2, 1024, 256, SCHEDULE),
    (8, 384, 128, [(4, 512, 256)]),  # smaller steps: 8 ranks still span many steps
])
def test_parity_with_modded_nanogpt(shards, corpus, world, n, msl, schedule):
    """Rank 0 and the last rank of W: step k is exactly the generator's step k, over every
    shard (partial steps at shard ends dropped) and a schedule change at step 4; then
    pinring goes on into epoch 1 where the generator stops."""
    for rank in sorted({0, world - 1}):
        want = list(ref.steps(shards, tokens_per_batch=n, max_seq_len=msl, rank=rank,
                              world_size=world, bos_id=BOS, schedule=schedule))
        got = run(shards, len(want) + 1, tokens_per_batch=n, max_seq_len=msl,
                  schedule=schedule, rank=rank, world_size=world)
        assert len(want) > 8, "the data must span several steps and shards"
        assert len(got) == len(want) + 1
        for k, ((wi, wt, wc), g) in enumerate(zip(want, got)):
            where = f"rank {rank}/{world}, step {k}"
            assert g["inputs"].dtype == np.int32 and g["cu"].dtype == np.int32
            np.testing.assert_array_equal(g["inputs"], wi, err_msg=f"inputs, {where}")
            np.testing.assert_array_equal(g["targets"], wt, err_msg=f"targets, {where}")
            np.testing.assert_array_equal(g["cu"], wc, err_msg=f"cu_seqlens, {where}")
            assert g["max_seqlen"] == int(np.diff(wc).max()), where
            assert (g["step"], g["epoch"]) == (k, 0), where
            check_against_corpus(g, corpus, msl if k < 4 else schedule[0][2])
        # modded-nanogpt stops after the last shard; pinring starts epoch 1 at shard 0.
        assert (got[-1]["step"], got[-1]["epoch"]) == (len(want), 1)


def test_parity_of_llama3_shards_with_bos_128000(tmp_path):
    """u32 shards (LLaMA-3's format): bos defaults to 128000; tokens above 65535 survive;
    int64 tokens hold the same values."""
    pattern = write_doc_shards(tmp_path, [12_000, 9_000], bos=LLAMA3_BOS, u32=True, vocab=200_000)
    src = pinring.Documents(pattern, tokens_per_batch=512, max_seq_len=200, dtype="int64")
    assert src.bos == LLAMA3_BOS and src.dtype == "int64"
    for world, rank in [(1, 0), (2, 1)]:
        want = list(ref.steps(pattern, tokens_per_batch=512, max_seq_len=200, rank=rank,
                              world_size=world, bos_id=LLAMA3_BOS))
        got = run(pattern, len(want), tokens_per_batch=512, max_seq_len=200, rank=rank,
                  world_size=world, dtype="int64")
        assert len(want) > 5 and len(got) == len(want)
        assert max(int(g["inputs"].max()) for g in got) > 65535
        for (wi, wt, wc), g in zip(want, got):
            assert g["inputs"].dtype == np.int64
            np.testing.assert_array_equal(g["inputs"], wi)
            np.testing.assert_array_equal(g["targets"], wt)
            np.testing.assert_array_equal(g["cu"], wc)


# The fields a batch exports.


def test_a_step_exports_its_fields_zero_copy(shards):
    src = pinring.Documents(shards, tokens_per_batch=1024, max_seq_len=256, schedule=SCHEDULE,
                            positions=True)
    assert src.fields == ["tokens", "inputs", "targets", "cu_seqlens", "positions"]
    with pinring.Loader(src, device="cpu") as loader:
        b = loader.pop(timeout=BOUND)
        assert b.fields == ("tokens", "inputs", "targets", "cu_seqlens", "positions")
        assert "inputs" in b and "nope" not in b
        f = {name: b[name] for name in b.fields}
        assert [f[n].shape for n in b.fields] == [(1025,), (1024,), (1024,), (128,), (1024,)]
        assert [f[n].dtype for n in b.fields] == ["int32"] * 5
        assert f["inputs"].name == "inputs" and f["inputs"].batch is b
        assert f["inputs"].device == "cpu" and f["inputs"].__dlpack_device__() == (1, 0)
        assert len(f["targets"]) == 1024 and f["targets"].nbytes == 4096
        # inputs and targets are views of tokens: one token apart, in the slot itself.
        assert f["inputs"].ptr == f["tokens"].ptr and f["targets"].ptr == f["tokens"].ptr + 4
        assert b.ptr <= f["tokens"].ptr < f["cu_seqlens"].ptr < b.ptr + b.nbytes
        views = {n: np.from_dlpack(f[n]) for n in b.fields}
        for n, v in views.items():
            assert v.ndim == 1 and v.ctypes.data == f[n].ptr, n
        views["inputs"][0] = -7  # writes land in tokens: one buffer
        assert np.from_dlpack(b["tokens"])[0] == -7
        assert b.max_seqlen == int(np.diff(views["cu_seqlens"]).max())
        assert b.doc_ids.dtype == np.uint64 and len(b.doc_ids) == (views["cu_seqlens"] < 1024).sum()
        assert b.step == 0 and "step=0" in repr(b) and "inputs" in repr(f["inputs"])
        with pytest.raises(KeyError, match="tokens, inputs, targets, cu_seqlens, positions"):
            b["input"]
        with pytest.raises(BufferError, match="several fields"):
            np.from_dlpack(b)
        b.release()
        with pytest.raises(BufferError, match="released"):
            f["inputs"].__dlpack__()
        assert f["inputs"].shape == (1024,)  # facts stay readable after the release
        steps = pops(loader, 6)
    # The schedule: each step has its own length (the slot is sized for the largest).
    assert [len(s["inputs"]) for s in steps] == [1024, 1024, 1024, 1536, 1536, 1536]
    assert [len(s["cu"]) for s in steps] == [128] * 6  # max(1536 // 300 ...) rounds to 128 too


def test_positions_restart_at_every_document(shards):
    for s in run(shards, 8, tokens_per_batch=1024, max_seq_len=256, positions=True):
        want = np.concatenate([np.arange(length) for _, length, _ in pieces(s)])
        np.testing.assert_array_equal(s["positions"], want)


def test_a_field_shares_the_batch_lease(shards):
    """The last view of any field keeps the slot: released when it dies, not before."""
    src = pinring.Documents(shards, tokens_per_batch=1024, max_seq_len=256)
    with pinring.Loader(src, device="cpu", device_slots=1, lease_timeout=0.01) as loader:
        b = loader.pop(timeout=BOUND)
        cu = np.from_dlpack(b["cu_seqlens"])
        del b
        gc.collect()
        with pytest.raises(pinring.AllSlotsLeased, match="held by batch 0"):
            loader.pop(timeout=BOUND)
        field = None
        del cu
        gc.collect()
        b = loader.pop(timeout=BOUND)
        field = b["targets"]  # a Field alone holds the batch too
        del b
        gc.collect()
        with pytest.raises(pinring.AllSlotsLeased, match="held by batch 1"):
            loader.pop(timeout=BOUND)
        del field
        gc.collect()
        assert loader.pop(timeout=BOUND).step == 2


def test_window_batches_have_no_fields(tmp_path):
    path = write_u16_windows_shard(tmp_path / "w.bin", np.arange(100))
    with pinring.Loader(pinring.TokenWindows(path, seq_len=9), batch_size=2) as loader:
        b = loader.pop(timeout=BOUND)
        assert b.fields == () and b.max_seqlen is None and b.doc_ids is None
        assert b.step == 0  # windows number their steps too (issue 22)
        with pytest.raises(KeyError, match="no fields"):
            b["inputs"]
        assert np.from_dlpack(b).shape == (2, 10)
        b.release()


# Beyond modded-nanogpt: shuffled epochs, epochs, resume.


def test_shuffled_order_gives_every_document_once_per_epoch(shards, corpus):
    n, msl, world = 512, 200, 2
    kw = dict(tokens_per_batch=n, max_seq_len=msl, order="shuffled", seed=3)
    assert pinring.Documents(shards, **kw).documents == len(corpus.docs)
    ids = {0: [], 1: []}
    rank0 = {0: [], 1: []}
    for rank in range(world):
        src = pinring.Documents(shards, rank=rank, world_size=world, **kw)
        with pinring.Loader(src, device="cpu", epochs=2) as loader:
            for s in pops(loader):
                check_against_corpus(s, corpus, msl)
                ids[s["epoch"]] += s["ids"].tolist()
                if rank == 0:
                    rank0[s["epoch"]] += s["ids"].tolist()
    for e, got in ids.items():
        assert len(got) == len(set(got)), f"a document twice in epoch {e}"
        missing = set(corpus.docs) - set(got)
        # Only the epoch's last partial step is dropped: less than a step of every rank.
        left = sum(min(corpus.docs[d][1], msl) for d in missing)
        assert left < world * (n + 1) + world * msl, (e, len(missing), left)
    assert rank0[0] != rank0[1], "each epoch is a fresh permutation"
    assert rank0[0] != sorted(rank0[0]), "shuffled is not the sequential walk"
    # The same seed gives the same order; another seed another.
    first = lambda seed: [s["ids"].tolist() for s in run(shards, 3, **dict(kw, seed=seed))]  # noqa: E731
    assert first(3) == first(3) != first(4)


def test_epochs_caps_the_run_and_iteration_yields_steps(shards):
    src = pinring.Documents(shards, tokens_per_batch=1024, max_seq_len=256)
    with pinring.Loader(src, device="cpu", epochs=1) as loader:
        assert loader.batch_size == 1 and loader.total_batches is None
        steps = [b.step for b in loader]  # every step of the run (here: epoch 0)
        assert steps == list(range(len(steps))) and len(steps) > 10
        assert loader.pop(timeout=BOUND) is None and loader.epoch == 0
    with pinring.Loader(src, device="cpu", epochs=2) as loader:
        got = pops(loader)
        assert {s["epoch"] for s in got} == {0, 1} and len(got) == 2 * len(steps)
        assert loader.epoch == 1


def positions_of(steps, corpus):
    """Per shard, the documents delivered (each once): must be a prefix of the shard's
    documents in order, since the sequential walk drops only a shard's tail."""
    ids = [i for s in steps for i in s["ids"].tolist()]
    assert len(ids) == len(set(ids)), "a document delivered twice"
    per_shard = []
    for docs in corpus.shard_docs:
        got = [d for d in docs if d in set(ids)]
        assert got == docs[: len(got)], "a document skipped inside a shard"
        per_shard.append(len(got))
    return per_shard


def test_elastic_resume_2_then_3_then_1(shards, corpus):
    """W=2 for 5 steps, then W=3 from the merged state for 4, then W=1 to the end of the
    epoch: no document twice, none skipped but the shard tails the walk drops, equal steps
    on every rank (the states merge), steps numbered on."""
    n, msl = 512, 256
    kw = dict(tokens_per_batch=n, max_seq_len=msl)
    steps, states = [], []
    for rank in range(2):
        with pinring.Loader(pinring.Documents(shards, rank=rank, world_size=2, **kw), device="cpu") as loader:
            steps += pops(loader, 5)
            states.append(loader.state_dict())
    assert states[0] == states[1] and states[0]["step"] == 5 and states[0]["world_size"] == 2
    state = pinring.merge_states(states)
    states = []
    for rank in range(3):
        src = pinring.Documents(shards, rank=rank, world_size=3, **kw)
        with pinring.Loader(src, device="cpu", state=state) as loader:
            got = pops(loader, 4)
            assert [s["step"] for s in got] == [5, 6, 7, 8]
            steps += got
            states.append(loader.state_dict())
    state = pinring.merge_states(states)
    assert state["step"] == 9 and state["world_size"] == 3
    loader = pinring.Loader(pinring.Documents(shards, **kw), device="cpu")
    loader.load_state_dict(state)  # before the first pop, as state= would
    with loader:
        rest = pops(loader, epoch=0)
    assert rest[0]["step"] == 9 and len(rest) > 5
    steps += rest
    for s in steps:
        check_against_corpus(s, corpus, msl)
    per_shard = positions_of(steps, corpus)
    for docs, taken in zip(corpus.shard_docs, per_shard):
        left = sum(min(corpus.docs[d][1], msl) for d in docs[taken:])
        assert left < 3 * (n + 1) + 3 * msl, "more than a step's tail left in a shard"
    # An uninterrupted W=1 run covers a prefix of each shard too (the tails differ by W).
    positions_of(run(shards, None, epoch=0, **kw), corpus)


def test_every_rank_pops_the_same_number_of_steps(shards):
    counts = [len(run(shards, None, epoch=0, tokens_per_batch=700, max_seq_len=300, rank=r,
                      world_size=3)) for r in range(3)]
    assert counts[0] == counts[1] == counts[2] > 3


def test_state_dict_is_the_checkpoint_record(shards):
    src = pinring.Documents(shards, tokens_per_batch=1024, max_seq_len=256, schedule=SCHEDULE)
    with pinring.Loader(src, device="cpu") as loader:
        first = loader.state_dict()
        pops(loader, 6)
        state = loader.state_dict()
    assert set(state) == {"version", "format", "files", "sizes", "contents", "bos", "order", "seed",
                          "schedule", "max_docs", "epoch", "shard", "doc", "step", "world_size", "skip", "kind"}
    assert (first["step"], first["doc"], state["step"], state["skip"]) == (0, 0, 6, [])
    assert state["schedule"] == [[0, 1024, 256], [4, 1536, 512]] and state["bos"] == BOS
    # A resume from it goes on where the run left off.
    with pinring.Loader(src, device="cpu", state=state) as loader:
        resumed = pops(loader, 2)
    straight = run(shards, 8, tokens_per_batch=1024, max_seq_len=256, schedule=SCHEDULE)[6:]
    for a, b in zip(resumed, straight):
        np.testing.assert_array_equal(a["tokens"], b["tokens"])
        np.testing.assert_array_equal(a["cu"], b["cu"])


# Bad input, each in Python's words.


def one_shard(tmp_path, tokens, u32=False, name="s.bin"):
    return write_tokens(tmp_path / name, tokens, u32=u32)


@pytest.mark.parametrize("kwargs, argument, needle", [
    (dict(tokens_per_batch=0), "tokens_per_batch", "tokens_per_batch must be at least 1"),
    (dict(max_seq_len=0), "max_seq_len", "max_seq_len must be at least 1"),
    (dict(max_docs=0), "max_docs", "max_docs must be at least 1"),
    (dict(bos=70000), "bos", "65535"),
    (dict(bos=-1), "bos", "bos must be"),
    (dict(schedule=[(4, 64, 16), (4, 32, 16)]), "schedule", "schedule[1] (from step 4)"),
    (dict(schedule=[(4, 64, 16), (2, 32, 16)]), "schedule", "strictly increasing"),
    (dict(schedule=[(4, 0, 16)]), "schedule", "tokens_per_batch is 0"),
    (dict(schedule=[(4, 64)]), "schedule", "schedule[0]"),
    (dict(schedule=5), "schedule", "list of (from_step"),
    (dict(order="random"), "order", "\"sequential\", \"shuffled\""),
    (dict(dtype="float32"), "dtype", "not one of"),
    (dict(rank=2, world_size=2), "rank", "rank must be in 0..world_size"),
    (dict(world_size=0), "world_size", "world_size must be at least 1"),
])
def test_bad_arguments_are_config_errors_naming_them(tmp_path, kwargs, argument, needle):
    path = one_shard(tmp_path, np.tile([BOS, 1, 2, 3, 4, 5, 6, 7, 8, 9], 100))
    args = dict(tokens_per_batch=32, max_seq_len=16)
    args.update(kwargs)
    with pytest.raises(pinring.ConfigError) as info:
        pinring.Documents(path, **args)
    assert info.value.argument == argument, str(info.value)
    assert needle in str(info.value), str(info.value)
    assert "Builder" not in str(info.value) and "`" not in str(info.value)


def test_a_shard_without_bos_is_a_source_error_naming_it(tmp_path):
    good = one_shard(tmp_path, np.tile([BOS, 1, 2, 3], 100), name="a.bin")
    bad = one_shard(tmp_path, np.arange(400) % 1000, name="b.bin")
    with pytest.raises(pinring.SourceError) as info:
        pinring.Documents([bad, good], tokens_per_batch=8, max_seq_len=8)
    assert info.value.path == bad and "50256" in str(info.value)
    # A u16 dtype cannot hold a u32 shard's tokens.
    wide = one_shard(tmp_path, np.tile([LLAMA3_BOS, 70000, 3], 100), u32=True, name="w.bin")
    with pytest.raises(pinring.ConfigError) as info:
        pinring.Documents(wide, tokens_per_batch=8, max_seq_len=8, dtype="uint16")
    assert info.value.argument == "dtype"


def test_no_step_fitting_in_an_epoch_is_a_source_error(tmp_path):
    path = one_shard(tmp_path, np.tile([BOS, 1, 2, 3, 4], 20))  # 100 tokens
    with pytest.raises(pinring.SourceError, match="no step fits"):
        pinring.Documents(path, tokens_per_batch=200, max_seq_len=16)
    # A schedule that grows past the data: an error from pop at that step, after the others.
    src = pinring.Documents(path, tokens_per_batch=9, max_seq_len=16, schedule=[(3, 500, 16)])
    with pinring.Loader(src, device="cpu") as loader:
        assert [s["step"] for s in pops(loader, 3)] == [0, 1, 2]
        with pytest.raises(pinring.SourceError, match="step 3"):
            loader.pop(timeout=BOUND)
        with pytest.raises(pinring.StoppedError):
            loader.pop(timeout=BOUND)


def test_max_docs_too_small_for_a_step_names_the_step_and_the_count(tmp_path):
    """Documents of 10 tokens: 2 a step at N=19, 6 at N=59 from step 3; max_docs=4 holds 3."""
    path = one_shard(tmp_path, np.tile([BOS, 1, 2, 3, 4, 5, 6, 7, 8, 9], 300))
    src = pinring.Documents(path, tokens_per_batch=19, max_seq_len=64, max_docs=4,
                            schedule=[(3, 59, 64)])
    with pinring.Loader(src, device="cpu") as loader:
        assert [len(s["ids"]) for s in pops(loader, 3)] == [2, 2, 2]
        with pytest.raises(pinring.ConfigError) as info:
            loader.pop(timeout=BOUND)
    assert info.value.argument == "max_docs"
    assert "step 3 needs 6 documents" in str(info.value) and "max_docs" in str(info.value)


def test_loader_arguments_that_mean_nothing_for_documents(shards, tmp_path):
    src = pinring.Documents(shards, tokens_per_batch=1024, max_seq_len=256)
    with pytest.raises(pinring.ConfigError) as info:
        pinring.Loader(src, 8)
    assert info.value.argument == "batch_size" and "tokens_per_batch" in str(info.value)
    with pytest.raises(pinring.ConfigError) as info:
        pinring.Loader(src, drop_last=True)
    assert info.value.argument == "drop_last"
    with pytest.raises(TypeError, match="needs batch_size"):
        pinring.Loader(pinring.TokenWindows(write_u16_windows_shard(tmp_path / "w.bin", np.arange(99)), seq_len=9))
    with pytest.raises(TypeError):
        len(src)
    with pinring.Loader(src, device="cpu") as loader:
        assert loader  # truthy, though len() has no answer
        for call in (lambda: len(loader), lambda: loader.epoch_len, lambda: loader.epoch_batches):
            with pytest.raises(TypeError, match="not known up front"):
                call()


def test_states_of_another_run_or_kind_are_refused(shards, tmp_path):
    kw = dict(tokens_per_batch=1024, max_seq_len=256)
    states = []
    for rank in range(2):
        with pinring.Loader(pinring.Documents(shards, rank=rank, world_size=2, **kw), device="cpu") as loader:
            pops(loader, 2 + rank)  # unequal steps
            states.append(loader.state_dict())
    with pytest.raises(pinring.CheckpointError, match="rank 0 at step 2, rank 1 at step 3"):
        pinring.merge_states(states)
    state = states[0]
    refusals = [
        (dict(kw, schedule=SCHEDULE), "schedule"),
        (dict(kw, bos=7), "bos"),
        (dict(kw, order="shuffled"), "order"),
        (dict(kw, max_docs=256), "max_docs"),
    ]
    for other, needle in refusals:
        with pytest.raises(pinring.CheckpointError, match=needle):
            pinring.Loader(pinring.Documents(shards, **other), device="cpu", state=state)
    with pytest.raises(pinring.CheckpointError, match="unknown key \"extra\""):
        pinring.Loader(pinring.Documents(shards, **kw), device="cpu", state=dict(state, extra=1))
    missing = {k: v for k, v in state.items() if k != "doc"}
    with pytest.raises(pinring.CheckpointError, match="\"doc\" is missing"):
        pinring.Loader(pinring.Documents(shards, **kw), device="cpu", state=missing)
    # A window loader's state is not a documents state, nor the other way round.
    path = write_u16_windows_shard(tmp_path / "w.bin", np.arange(999))
    windows = pinring.TokenWindows(path, seq_len=9)
    with pinring.Loader(windows, batch_size=2) as loader:
        window_state = loader.state_dict()
    with pytest.raises(pinring.CheckpointError, match="kind of source"):
        pinring.Loader(pinring.Documents(shards, **kw), device="cpu", state=window_state)
    with pytest.raises(pinring.CheckpointError, match="kind of source"):
        pinring.Loader(windows, batch_size=2, state=state)
    with pytest.raises(pinring.CheckpointError, match="different kinds"):
        pinring.merge_states([state, window_state])


def test_help_documents_every_parameter():
    doc = pinring.Documents.__doc__
    for name in inspect.signature(pinring.Documents).parameters:
        assert f"    {name}: " in doc, name
    for name in ("fields", "max_seqlen", "doc_ids", "step"):
        assert getattr(pinring.Batch, name).__doc__, name
    for name in ("name", "shape", "dtype", "device", "batch"):
        assert getattr(pinring.Field, name).__doc__, name


def test_a_field_capsule_is_1d_over_the_field_bytes(shards):
    from test_dlpack import KDL_INT, open_capsule

    src = pinring.Documents(shards, tokens_per_batch=1024, max_seq_len=256)
    with pinring.Loader(src, device="cpu") as loader:
        b = loader.pop(timeout=BOUND)
        for name, n in [("targets", 1024), ("cu_seqlens", 128)]:
            field = b[name]
            for kwargs, kind in [({}, b"dltensor"), ({"max_version": (1, 0)}, b"dltensor_versioned")]:
                got, m = open_capsule(field.__dlpack__(**kwargs))
                assert got == kind
                t = m.dl_tensor
                assert t.data == field.ptr and t.ndim == 1 and t.shape[0] == n and t.strides[0] == 1
                assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (KDL_INT, 32, 1)
                assert (t.device.device_type, t.device.device_id) == (1, 0) and t.byte_offset == 0
            with pytest.raises(BufferError):
                field.__dlpack__(copy=True)
            with pytest.raises(BufferError):
                field.__dlpack__(stream=7)  # no CUDA streams on the cpu backend
        b.release()


def test_a_documents_loaders_repr_says_what_a_batch_is(shards):
    """Issue 29 item 6: a Documents batch is one step of named fields, not a (1, slot
    bytes) array of uint8: the repr says its size and fields."""
    src = pinring.Documents(shards, tokens_per_batch=1024, max_seq_len=256, schedule=SCHEDULE)
    with pinring.Loader(src, device="cpu", epochs=1) as loader:
        text = repr(loader)
    assert text.startswith("<pinring.Loader of Documents: a batch is one step of "), text
    assert "tokens_per_batch=1024 max_seq_len=256 (1 schedule change(s) later)" in text, text
    assert "fields=(tokens, inputs, targets, cu_seqlens)" in text and "epochs=1" in text, text
    assert "batch_size" not in text and "uint8" not in text and "shape" not in text, text
    sized = dict(tokens_per_batch=512, max_seq_len=128, positions=True)
    mixed = pinring.Mixture([pinring.Documents(shards, **sized),
                             pinring.Documents(shards, order="shuffled", **sized)])
    with pinring.Loader(mixed, device="cpu") as loader:
        text = repr(loader)
    assert "of a Mixture of Documents" in text and "tokens_per_batch=512" in text, text
    assert "positions" in text, text
    with pinring.Loader(pinring.TokenWindows(shards, seq_len=63), batch_size=2, device="cpu") as loader:
        assert repr(loader).startswith("<pinring.Loader batch_size=2 shape=(2, 64) dtype=int32")
