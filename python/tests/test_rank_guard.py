"""Issue 33: `pinring.RankGuard` over a collective of Python's own — processes as ranks,
their lanes max-reduced by a hub in the test process over pipes (no torch): a rank whose
data ends before the others' is named on every rank at the same check, before it leaves
the loop (windows; a Mixture of Documents whose rank 1 has a shorter corpus); ranks that
agree check quietly to the end; on_problem="warn" warns and reports; a collective that
fails or answers wrong is the check's error; without torch, group mode says so."""

import multiprocessing as mp
import threading

import numpy as np
import pytest

import pinring
from conftest import BOUND, write_shard
from docs_data import write_doc_shards


class Hub:
    """Max-reduces the lanes each rank sends over its pipe, once every rank sent; a rank
    that says it left makes the others' pending and later reduces fail (where a real
    collective would wait for it forever)."""

    def __init__(self, n):
        self.ends = [mp.Pipe() for _ in range(n)]
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        conns = [ours for ours, _ in self.ends]
        left = None
        while True:
            got = []
            for c in conns:
                msg = c.recv()
                if msg == "left" and left is None:
                    left = conns.index(c)
                got.append(msg)
            if all(m == "done" for m in got):
                return
            lanes = [m for m in got if isinstance(m, list)]
            if left is not None or len(lanes) != len(conns):
                reply = ("error", f"rank {left} left the run: the others would wait forever")
            else:
                reply = ("ok", [max(col) for col in zip(*lanes)])
            for c, m in zip(conns, got):
                if isinstance(m, list):
                    c.send(reply)


def pipe_collective(conn):
    def reduce(lanes):
        conn.send(list(lanes))
        status, value = conn.recv()
        if status != "ok":
            raise RuntimeError(value)
        return value
    return reduce


def rank_main(rank, world, make, conn, out, every, on_problem):
    """A trainer's loop on one rank: pop, release, guard.step(); what it ended with to `out`."""
    import warnings
    loader = make(rank, world)
    guard = pinring.RankGuard(loader, every=every, collective=pipe_collective(conn),
                              on_problem=on_problem)
    warned = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            while True:
                batch = loader.pop(timeout=BOUND)
                if batch is None:
                    out.send(("ran_out", loader_step(loader), guard.checks, [str(w.message) for w in caught]))
                    return
                batch.release()
                report = guard.step()
                if report is not None and report["problem"] is not None:
                    warned.append((report["rank"], report["step"]))
                    if on_problem == "warn":
                        assert issubclass(caught[-1].category, pinring.RankWarning)
                        out.send(("warned", warned[0], guard.checks, str(caught[-1].message)))
                        return
    except pinring.RankError as e:
        out.send(("guard", (e.rank, e.kind, e.step), guard.checks, str(e)))
    finally:
        # Every rank leaves: the hub then answers "done" with nothing.
        conn.send("left")
        loader.close()


def loader_step(loader):
    return loader.state_dict()["step"]


def run_ranks(make, world, every=10, on_problem="raise"):
    hub = Hub(world)
    ctx = mp.get_context("spawn")
    outs = [ctx.Pipe() for _ in range(world)]
    procs = [ctx.Process(target=rank_main, args=(r, world, make, hub.ends[r][1], outs[r][1], every, on_problem))
             for r in range(world)]
    for p in procs:
        p.start()
    results = [outs[r][0].recv() for r in range(world)]
    for p in procs:
        p.join(BOUND)
        assert p.exitcode == 0
    return results


def windows_rank(shard, short_rank):
    return WindowsRank(shard, short_rank)


class WindowsRank:
    """A rank's loader over one shard's windows: rank `short` was given 1 epoch, the
    others 2 (picklable, for spawned processes)."""

    def __init__(self, shard, short):
        self.shard, self.short = str(shard), short

    def __call__(self, rank, world):
        src = pinring.TokenWindows(self.shard, seq_len=15, order="shuffled", seed=2,
                                   rank=rank, world_size=world)
        epochs = 1 if rank == self.short else 2
        return pinring.Loader(src, batch_size=2, epochs=epochs, device="cpu")


class MixtureRank:
    """A rank's loader over a Mixture of Documents; rank `short`'s second corpus lacks a
    shard (as a node whose data folder misses one), so its stop rule ends it first."""

    def __init__(self, web, code, code_short, short):
        self.web, self.code, self.code_short, self.short = web, code, code_short, short

    def __call__(self, rank, world):
        code = self.code_short if rank == self.short else self.code
        mix = pinring.Mixture([pinring.Documents(p, tokens_per_batch=256, max_seq_len=96)
                               for p in (self.web, code)],
                              weights=[0.5, 0.5], stop="first", rank=rank, world_size=world)
        return pinring.Loader(mix, device="cpu")


def test_a_rank_whose_windows_end_first_is_named_on_every_rank_before_it_leaves(tmp_path):
    shard = write_shard(tmp_path / "train_000.bin", np.arange(6000))
    make = WindowsRank(shard, short=2)
    results = run_ranks(make, 4, every=10)
    for what, (rank, kind, step), checks, msg in results:
        assert what == "guard", (what, msg)
        assert (rank, kind) == (2, "runs_out"), msg
        assert "rank 2 runs out of data" in msg
    steps = {r[1][2] for r in results}
    assert len(steps) == 1, "every rank stops at the same check"
    (step,) = steps
    # Rank 2 had not run out yet: its epoch holds more steps than were checked.
    per_epoch = len(pinring.Loader(pinring.TokenWindows(str(shard), seq_len=15, rank=2, world_size=4),
                                   batch_size=2, epochs=1, device="cpu"))
    assert step <= per_epoch and step + 20 > per_epoch, (step, per_epoch)


def test_a_mixture_of_documents_rank_with_a_shorter_corpus_is_named(tmp_path):
    web = write_doc_shards(tmp_path / "web", [20000, 20000], seed=1, mean=60)
    code = write_doc_shards(tmp_path / "code", [12000, 12000], seed=2, mean=40)
    short = write_doc_shards(tmp_path / "short", [12000], seed=2, mean=40)
    results = run_ranks(MixtureRank(web, code, short, short=1), 3, every=5)
    for what, (rank, kind, _), _, msg in results:
        assert (what, rank, kind) == ("guard", 1, "runs_out"), msg
    assert len({r[1][2] for r in results}) == 1


def test_ranks_that_agree_check_quietly_to_the_end(tmp_path):
    shard = write_shard(tmp_path / "train_000.bin", np.arange(6000))
    make = WindowsRank(shard, short=None)
    results = run_ranks(make, 3, every=7)
    with make(0, 3) as one:
        per_epoch = len(one)  # batches an epoch
    for what, step, checks, caught in results:
        assert what == "ran_out" and step == 2 * per_epoch, (what, step)
        assert checks == 2 * per_epoch // 7 and caught == []


def test_warn_reports_the_rank_and_goes_on(tmp_path):
    shard = write_shard(tmp_path / "train_000.bin", np.arange(6000))
    results = run_ranks(WindowsRank(shard, short=0), 2, every=10, on_problem="warn")
    for what, (rank, step), checks, msg in results:
        assert (what, rank) == ("warned", 0) and "rank 0 runs out" in msg


def test_a_collective_that_fails_or_answers_wrong_is_the_checks_error(tmp_path):
    shard = write_shard(tmp_path / "train_000.bin", np.arange(2000))
    loader = pinring.Loader(pinring.TokenWindows(shard, seq_len=15), batch_size=2, device="cpu")

    def broken(lanes):
        raise ConnectionError("the group is gone")

    guard = pinring.RankGuard(loader, every=1, collective=broken)
    loader.pop(timeout=BOUND).release()
    with pytest.raises(ConnectionError, match="the group is gone"):
        guard.step()
    guard = pinring.RankGuard(loader, every=1, collective=lambda lanes: lanes[:3])
    with pytest.raises(pinring.RankError, match="returned 3 lanes") as info:
        guard.check()
    assert info.value.kind == "collective" and info.value.rank is None
    # A sum over two ranks instead of a max is caught, not read as ranks.
    guard = pinring.RankGuard(loader, every=1, collective=lambda lanes: [2 * v for v in lanes],
                              rank=0, world_size=2)
    with pytest.raises(pinring.RankError) as info:
        guard.check()
    assert info.value.kind in ("bad_reduction", "versions")
    # Alone (the identity collective): quiet, and the cost of a check is counted.
    guard = pinring.RankGuard(loader, every=2, collective=lambda lanes: lanes)
    assert guard.step() is None or guard.checks == 1
    report = guard.check()
    assert report["problem"] is None and report["rank"] is None and guard.checks >= 1
    assert guard.check_time > 0 and guard.horizon == 4
    for bad in (dict(every=0), dict(rank=3, world_size=2), dict(on_problem="ignore"), dict(wait_ratio=0.5)):
        with pytest.raises(pinring.ConfigError):
            pinring.RankGuard(loader, collective=lambda lanes: lanes, **bad)
    loader.close()


def test_group_mode_without_torch_says_what_to_do(tmp_path):
    try:
        import torch  # noqa: F401
        pytest.skip("torch is installed: scripts/ddp-check.sh runs the group mode")
    except ImportError:
        pass
    shard = write_shard(tmp_path / "train_000.bin", np.arange(2000))
    with pinring.Loader(pinring.TokenWindows(shard, seq_len=15), batch_size=2, device="cpu") as loader:
        with pytest.raises(ImportError, match="collective="):
            pinring.RankGuard(loader)
