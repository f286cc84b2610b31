"""Helpers of the packed-documents tests (test_documents.py, test_gpu.py): shards of
BOS-delimited documents written with numpy, and the documents they hold, read back with
numpy alone. (python/benches/pop_breakdown.py writes its shard with write_tokens: this
module needs numpy only.)"""

import pathlib

import numpy as np

GPT2_BOS, LLAMA3_BOS = 50256, 128000
_FORMATS = {False: (20240520, 1, "<u2"), True: (20240801, 7, "<u4")}


def write_tokens(path, tokens, u32=False):
    """An llm.c shard: 256 int32 [magic, version, ntokens, 0...], then the tokens (uint16,
    or uint32 for LLaMA-3's format)."""
    magic, version, dtype = _FORMATS[u32]
    header = np.zeros(256, dtype="<i4")
    header[:3] = [magic, version, len(tokens)]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype=dtype).tobytes())
    return str(path)


def read_tokens(path):
    raw = pathlib.Path(path).read_bytes()
    header = np.frombuffer(raw[:1024], dtype="<i4")
    dtype = "<u4" if header[0] == 20240801 else "<u2"
    return np.frombuffer(raw[1024:], dtype=dtype)[: header[2]]


def make_docs(rng, n, bos=GPT2_BOS, mean=150, vocab=1000, lead=3, long_every=0.03):
    """`n` tokens: `lead` tokens before the first BOS (never used), then documents of
    geometric lengths (a few far longer than a typical max_seq_len), each starting with
    `bos`; other tokens are below `vocab` (never `bos`)."""
    toks = rng.integers(0, vocab, n)
    pos = lead
    while pos < n:
        toks[pos] = bos
        pos += int(rng.geometric(1 / mean))
        if rng.random() < long_every:
            pos += int(rng.integers(500, 3000))  # a long document
    return toks


def write_doc_shards(folder, sizes, seed=7, bos=GPT2_BOS, u32=False, vocab=1000, mean=150):
    """Shards `train_000.bin`, ... of `sizes` tokens of documents; returns the glob."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for s, n in enumerate(sizes):
        write_tokens(folder / f"train_{s:03d}.bin", make_docs(rng, n, bos=bos, vocab=vocab, mean=mean), u32=u32)
    return str(folder / "train_*.bin")


class Corpus:
    """Every shard of a glob, read with numpy: the tokens end to end, and each document as
    (id, shard, length) where the id is the global offset of its BOS token."""

    def __init__(self, pattern, bos=GPT2_BOS):
        paths = sorted(pathlib.Path(pattern).parent.glob(pathlib.Path(pattern).name))
        self.shards = [read_tokens(p) for p in paths]
        self.tokens = np.concatenate(self.shards).astype(np.int64)
        self.docs = {}  # id -> (shard, length to the next BOS or the shard's end)
        self.shard_docs = []  # per shard: its documents' ids in order
        first = 0
        for s, t in enumerate(self.shards):
            starts = np.nonzero(t == bos)[0]
            ends = np.append(starts[1:], len(t))
            ids = [first + int(a) for a in starts]
            for i, a, b in zip(ids, starts, ends):
                self.docs[i] = (s, int(b - a))
            self.shard_docs.append(ids)
            first += len(t)
