"""Token files of Megatron-LM (`.bin` + `.idx`), datatrove (`.ds` + `.ds.index`), numpy
(`.npy`, written with numpy itself) and raw headerless tokens, read through
`pinring.TokenWindows(..., format=..., token_type=...)` and `pinring.Documents`: the same
batches as llm.c shards of the same tokens, documents from the files' own indexes when
`bos` is None, and bad files and arguments refused in Python's words.

The Megatron and datatrove files are written by writers that follow their projects'
source line by line (megatron/core/datasets/indexed_dataset.py's `_IndexWriter` and
`IndexedDatasetBuilder`; datatrove/pipeline/tokens/tokenizer.py's `TokenizedFile`):
Megatron-LM's own writer imports torch at module level (so it is not installed here);
datatrove's own writers of both formats (`TokenizedFile`, `MegatronTokenizedFile`) are
used too where datatrove is installed, and write the same bytes."""

import struct

import numpy as np
import pytest

import pinring
from conftest import BOUND
from docs_data import write_tokens

BOS = 7


def documents(n, seed, top):
    """`n` documents of 20 to 200 tokens below `top`, each starting with BOS (and no other)."""
    rng = np.random.default_rng(seed)
    docs = []
    for _ in range(n):
        doc = rng.integers(8, top, size=int(rng.integers(20, 201)), dtype=np.int64)
        doc[0] = BOS
        docs.append(doc)
    return docs


def write_megatron(prefix, docs, dtype=np.uint16, per_doc=1, modes=False):
    """Megatron-LM's IndexedDatasetBuilder(add_document, finalize) + _IndexWriter."""
    code = {np.uint16: 8, np.int32: 4}[dtype]
    sequence_lengths, document_indices = [], [0]
    with open(f"{prefix}.bin", "wb") as data_file:
        for doc in docs:
            lengths = [len(doc) // per_doc] * per_doc
            lengths[0] += len(doc) % per_doc
            data_file.write(np.array(doc, dtype=dtype).tobytes(order="C"))
            sequence_lengths.extend(lengths)
            document_indices.append(len(sequence_lengths))
    itemsize = np.dtype(dtype).itemsize
    pointers, curr = [], 0
    for length in sequence_lengths:
        pointers.append(curr)
        curr += length * itemsize
    with open(f"{prefix}.idx", "wb") as idx:
        idx.write(b"MMIDIDX\x00\x00")
        idx.write(struct.pack("<Q", 1))
        idx.write(struct.pack("<B", code))
        idx.write(struct.pack("<Q", len(sequence_lengths)))
        idx.write(struct.pack("<Q", len(document_indices)))
        idx.write(np.array(sequence_lengths, dtype=np.int32).tobytes(order="C"))
        idx.write(np.array(pointers, dtype=np.int64).tobytes(order="C"))
        idx.write(np.array(document_indices, dtype=np.int64).tobytes(order="C"))
        if modes:
            idx.write(np.zeros(len(sequence_lengths), dtype=np.int8).tobytes(order="C"))
    return f"{prefix}.bin"


def write_datatrove(path, docs, token_size=2):
    """datatrove's TokenizedFile: write() packs "<H" or "<I" and appends the end (in
    tokens); close() writes the ends as "<Q" to `<name>.index`."""
    fmt = "I" if token_size == 4 else "H"
    doc_ends, write_idx = [], 0
    with open(path, "wb") as tokens_file:
        for doc in docs:
            tokens = [int(t) for t in doc]
            tk_bytes = struct.pack(f"<%s{fmt}" % len(tokens), *tokens)
            tokens_file.write(tk_bytes)
            write_idx += len(tk_bytes) // token_size
            doc_ends.append(write_idx)
    with open(f"{path}.index", "wb") as index_file:
        index_file.write(struct.pack("<%sQ" % len(doc_ends), *doc_ends))
    return str(path)


def windows(path, **kw):
    with pinring.Loader(pinring.TokenWindows(path, 32, order="shuffled", seed=5, **kw),
                        batch_size=4, device="cpu", epochs=1) as loader:
        out = []
        for batch in loader:
            out.append(np.from_dlpack(batch).copy())
            batch.release()
        return out


def same(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("formats")
    narrow, wide = documents(60, 1, 60_000), documents(60, 2, 1 << 30)
    write_tokens(d / "n.bin", np.concatenate(narrow).astype(np.uint16))
    return d, narrow, wide


def test_every_format_gives_the_windows_of_the_same_tokens(corpus):
    d, narrow, wide = corpus
    want16 = windows(str(d / "n.bin"), dtype="int64")
    assert len(want16) > 10
    flat32 = np.concatenate(wide).astype(np.uint32)
    flat32.tofile(d / "w.raw")
    want32 = windows(str(d / "w.raw"), format="raw", token_type="uint32", dtype="int64")
    np.save(d / "n.npy", np.concatenate(narrow).astype(np.uint16))
    np.save(d / "w.npy", flat32)
    np.save(d / "wi.npy", flat32.astype(np.int32))
    np.concatenate(narrow).astype(np.uint16).tofile(d / "n.raw")
    cases = [
        (write_megatron(d / "m16", narrow), "megatron", None, want16),
        (str(d / "m16"), "megatron", "uint16", want16),  # the prefix names the pair
        (write_megatron(d / "m32", wide, np.int32, per_doc=3), "megatron", "int32", want32),
        (write_datatrove(d / "d16.ds", narrow), "datatrove", None, want16),
        (write_datatrove(d / "d32.ds", wide, 4), "datatrove", "uint32", want32),
        (str(d / "n.npy"), "npy", None, want16),
        (str(d / "w.npy"), "npy", None, want32),
        (str(d / "wi.npy"), "npy", "int32", want32),
        (str(d / "n.raw"), "raw", "uint16", want16),
    ]
    for path, fmt, token_type, want in cases:
        src = pinring.TokenWindows(path, 32, format=fmt, token_type=token_type)
        assert src.format == fmt
        got = windows(path, format=fmt, token_type=token_type, dtype="int64")
        assert same(got, want), (path, fmt)
    # uint32 batches (what candle's index_select takes): the tokens, unchanged.
    got = windows(str(d / "w.npy"), format="npy", dtype="uint32")
    assert got[0].dtype == np.uint32
    assert same([g.astype(np.int64) for g in got], want32)


def steps(source, n=None):
    out = []
    with pinring.Loader(source, device="cpu", epochs=1) as loader:
        for batch in loader:
            out.append((np.from_dlpack(batch["inputs"]).copy(), np.from_dlpack(batch["cu_seqlens"]).copy(),
                        batch.doc_ids.copy()))
            batch.release()
            if n is not None and len(out) == n:
                break
    return out


@pytest.mark.parametrize("order", ["sequential", "shuffled"])
def test_documents_without_bos_come_from_the_files_index(corpus, order):
    d, narrow, wide = corpus
    kw = dict(tokens_per_batch=255, max_seq_len=128, order=order, seed=3)
    want = steps(pinring.Documents(str(d / "n.bin"), bos=BOS, **kw))
    assert len(want) > 10
    for path, fmt in [(write_megatron(d / "dm16", narrow, per_doc=2), "megatron"),
                      (write_datatrove(d / "dd16.ds", narrow), "datatrove")]:
        src = pinring.Documents(path, format=fmt, **kw)
        assert src.bos is None and src.format == fmt
        got = steps(src)
        assert len(got) == len(want)
        for (gi, gc, gd), (wi, wc, wd) in zip(got, want):
            assert np.array_equal(gi, wi) and np.array_equal(gc, wc) and np.array_equal(gd, wd)
        # With bos given, the bos walk (here the same starts).
        with_bos = pinring.Documents(path, format=fmt, bos=BOS, **kw)
        assert with_bos.bos == BOS
        assert len(steps(with_bos)) == len(want)


def test_documents_from_an_index_resume_from_the_state_dict(corpus, tmp_path):
    d, narrow, _ = corpus
    path = write_datatrove(tmp_path / "r.ds", narrow)
    src = pinring.Documents(path, format="datatrove", tokens_per_batch=127, max_seq_len=64,
                            order="shuffled", seed=1)
    with pinring.Loader(src, device="cpu") as loader:
        for _ in range(3):
            loader.pop(timeout=BOUND).release()
        state = loader.state_dict()
        rest = [np.from_dlpack(b["inputs"]).copy() for b in [loader.pop(timeout=BOUND) for _ in range(1)]]
    with pinring.Loader(src, device="cpu") as loader:
        loader.load_state_dict(state)
        b = loader.pop(timeout=BOUND)
        assert b.step == 3
        assert np.array_equal(np.from_dlpack(b["inputs"]), rest[0])
        b.release()


def test_bad_format_arguments_and_files_are_refused_in_pythons_words(corpus, tmp_path):
    d, narrow, _ = corpus
    with pytest.raises(pinring.ConfigError, match="token_type") as e:
        pinring.TokenWindows(str(d / "n.raw"), 8, format="raw")
    assert e.value.argument == "token_type"
    with pytest.raises(pinring.ConfigError, match="format") as e:
        pinring.TokenWindows(str(d / "n.bin"), 8, format="parquet")
    assert e.value.argument == "format"
    with pytest.raises(pinring.ConfigError, match="token_type") as e:
        pinring.TokenWindows(str(d / "n.npy"), 8, format="npy", token_type="uint32")
    assert e.value.argument == "token_type" and e.value.path.endswith("n.npy")
    with pytest.raises(pinring.ConfigError, match="dtype"):
        pinring.TokenWindows(str(d / "w.npy"), 8, format="npy", dtype="uint16")
    # A Megatron .idx of another version; a .npy of floats; a .ds whose index does not fit.
    prefix = tmp_path / "bad"
    write_megatron(prefix, narrow[:3])
    raw = bytearray((tmp_path / "bad.idx").read_bytes())
    raw[9] = 2
    (tmp_path / "bad.idx").write_bytes(bytes(raw))
    with pytest.raises(pinring.SourceError, match="version 2") as e:
        pinring.TokenWindows(str(prefix) + ".bin", 8, format="megatron")
    assert e.value.path.endswith("bad.idx")
    np.save(tmp_path / "f.npy", np.zeros(100, dtype=np.float32))
    with pytest.raises(pinring.SourceError, match="not integer tokens"):
        pinring.TokenWindows(str(tmp_path / "f.npy"), 8, format="npy")
    np.save(tmp_path / "m.npy", np.zeros((10, 10), dtype=np.uint16))
    with pytest.raises(pinring.SourceError, match="1-D"):
        pinring.TokenWindows(str(tmp_path / "m.npy"), 8, format="npy")
    path = write_datatrove(tmp_path / "x.ds", narrow[:3])
    (tmp_path / "x.ds.index").write_bytes(struct.pack("<Q", 5))
    with pytest.raises(pinring.SourceError, match="token_size"):
        pinring.TokenWindows(path, 2, format="datatrove")


def test_datatrove_own_writer(tmp_path):
    """datatrove's TokenizedFile itself, where datatrove is installed."""
    tokenizer = pytest.importorskip("datatrove.pipeline.tokens.tokenizer")
    docs = documents(40, 9, 60_000)
    f = tokenizer.TokenizedFile(str(tmp_path), "00000_unshuffled.ds", token_size=2)
    for doc in docs:
        f.write([int(t) for t in doc], None)
    f.close()
    path = str(tmp_path / "00000_unshuffled.ds")
    ours = write_datatrove(tmp_path / "ours.ds", docs)
    assert open(path, "rb").read() == open(ours, "rb").read()
    assert open(path + ".index", "rb").read() == open(ours + ".index", "rb").read()
    src = pinring.Documents(path, format="datatrove", tokens_per_batch=127, max_seq_len=64)
    first = steps(src, 1)[0]
    assert first[1][1] == min(len(docs[0]), 64)  # the first document, cut at max_seq_len


@pytest.mark.parametrize("token_size", [2, 4])
def test_datatrove_own_megatron_writer(tmp_path, token_size):
    """datatrove's MegatronTokenizedFile (its writer of Megatron's .bin/.idx), where
    datatrove is installed: the same bytes as the writer above, and its documents."""
    megatron = pytest.importorskip("datatrove.pipeline.tokens.megatron_tokenizer")
    docs = documents(40, 10, 60_000 if token_size == 2 else 1 << 30)
    f = megatron.MegatronTokenizedFile(str(tmp_path), "theirs", token_size=token_size)
    for doc in docs:
        f.write([int(t) for t in doc])
    f.close()
    ours = write_megatron(tmp_path / "ours", docs, np.uint16 if token_size == 2 else np.int32)
    for ext in ["bin", "idx"]:
        assert (tmp_path / f"theirs.{ext}").read_bytes() == (tmp_path / f"ours.{ext}").read_bytes(), ext
    src = pinring.Documents(str(tmp_path / "theirs"), format="megatron", tokens_per_batch=127,
                            max_seq_len=64, dtype="int64")
    inputs, cu, _ = steps(src, 1)[0]
    assert cu[1] == min(len(docs[0]), 64)
    assert np.array_equal(inputs[: cu[1]], docs[0][: cu[1]])
