"""modded-nanogpt's loader, both of its modes and all five outputs (issue 31): master's own
generator code (``modded_master_code``: extracted from the vendored ``train_gpt.py`` text
of f411b3d, run on the cpu) against the numpy copy (``modded_master``), and that copy
against ``pinring.Documents`` and ``pinring.modded.distributed_data_generator`` — W in
{1, 2, 8}, G in {1, 2, 8}, the short track's three-stage schedule and a taper, the medium
track's ``max_docs``, the sequence cap, over shards whose ends fall mid-step."""

import numpy as np
import pytest

import dropin_soak
import modded_master as master
import modded_master_code
import numpy_torch
import pinring
import pinring.modded
from conftest import BOUND
from docs_data import GPT2_BOS, write_doc_shards

V = master.BIGRAM_VOCAB_SIZE
# Optimizer steps of (from_step, num_tokens over all ranks, max_seq_len): three stages up,
# then a taper down. Every num_tokens divides by W * G = 64, and leaves each rank at least
# 300 tokens a send (below that master's max_num_docs is 0, which it cannot use).
STAGES = [(0, 64 * 320, 512), (3, 64 * 384, 768), (6, 64 * 448, 1024), (9, 64 * 320, 512)]
STEPS = 12
PLACES = [(w, g) for w in (1, 2, 8) for g in (1, 2, 8)]
try:
    import torch  # noqa: F401

    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False


@pytest.fixture(scope="module")
def pattern(tmp_path_factory):
    # Tokens up to 50255 (so the hash's products wrap); four shards, whose ends fall
    # mid-step at these sizes.
    return write_doc_shards(tmp_path_factory.mktemp("speedrun"), [100_000, 61_000, 143_000, 330_000, 300_000],
                            vocab=GPT2_BOS, mean=400)


def send_args(stages, step):
    """What master's training loop sends at optimizer step ``step`` (every micro-step of
    it): the stage's sizes where they change there, else None."""
    for from_step, num_tokens, max_seq_len in stages[1:]:
        if from_step == step:
            return num_tokens, max_seq_len
    return None


def drive(gen, stages, steps, g):
    """Sends to ``gen`` as master's loop does: ``send(args)`` for each of the G micro-steps
    of each optimizer step; the outputs as numpy."""
    out = []
    for step in range(steps):
        args = send_args(stages, step)
        for _ in range(g):
            got = gen.send(None if args is None or (step == 0) else (args[0], args[1], g))
            out.append(tuple(np.asarray(x).copy() for x in got))
    gen.close()
    return out


def masters_copy(pattern, w, r, g, stages=STAGES, steps=STEPS, align=True, **kw):
    gen = master.distributed_data_generator(pattern, stages[0][1], stages[0][2], g, align,
                                            rank=r, world_size=w, **kw)
    return drive(gen, stages, steps, g)


def masters_code(pattern, w, r, g, stages=STAGES, steps=STEPS, align=True):
    ns, _ = modded_master_code.load(V, rank=r, world_size=w)
    gen = ns["distributed_data_generator"](pattern, stages[0][1], stages[0][2], grad_accum_steps=g,
                                           align_to_bos=align)
    return drive(gen, stages, steps, g)


def documents(pattern, w, r, g, stages=STAGES, align=True, **kw):
    per = w * g
    return pinring.Documents(
        pattern, tokens_per_batch=stages[0][1] // per, max_seq_len=stages[0][2],
        schedule=[(s, t // per, m) for s, t, m in stages[1:]],
        rank=r, world_size=w, grad_accum_steps=g, align_to_bos=align,
        targets_dtype="int64", bigram_vocab_size=V, **kw)


def pinring_pops(src, n):
    out = []
    with pinring.Loader(src, device="cpu") as loader:
        for _ in range(n):
            b = loader.pop(timeout=BOUND)
            host = b.host("bigram_inputs")
            out.append((
                (np.from_dlpack(b["inputs"]).copy(), np.from_dlpack(b["targets"]).copy(),
                 np.from_dlpack(b["cu_seqlens"]).copy(), np.from_dlpack(b["bigram_inputs"]).copy(),
                 host.copy()),
                (b.step, b.micro_step),
            ))
            b.release()
    return out


def same(a, b, what):
    assert len(a) == len(b), what
    for i, (x, y) in enumerate(zip(a, b)):
        for k, name in enumerate(("inputs", "targets", "cu_seqlens", "bigram_inputs", "bigram_cpu")):
            assert x[k].dtype == y[k].dtype, f"{what}: send {i} {name} dtype {x[k].dtype} vs {y[k].dtype}"
            np.testing.assert_array_equal(x[k], y[k], err_msg=f"{what}: send {i} {name}")


@pytest.mark.parametrize("align", [True, False], ids=["train", "validation"])
def test_the_numpy_copy_is_masters_own_code(pattern, align):
    for w, g in [(1, 1), (2, 8), (8, 1), (8, 2)]:
        for r in sorted({0, w - 1}):
            stages = STAGES if align else [(0, 64 * 320, -1)]
            steps = STEPS if align else 10
            same(masters_code(pattern, w, r, g, stages, steps, align),
                 masters_copy(pattern, w, r, g, stages, steps, align),
                 f"W={w} G={g} rank {r} align={align}")


def test_masters_code_runs_on_what_it_runs_on():
    ns, which = modded_master_code.load(V)
    assert which == ("torch" if HAVE_TORCH else "numpy_torch")
    # master's hash at position 1 takes M as the previous token (its out[0] is set first).
    x = np.array([17, 40000, 3], dtype=np.int32)
    torch_like = modded_master_code._torch()[0]
    got = np.asarray(ns["get_bigram_hash"](torch_like.tensor(x)))
    m = V - 1
    want1 = (np.array([40000], np.int32) * 36313 ^ np.array([m], np.int32) * 27191) % m
    assert got[0] == m and got[1] == want1[0]
    np.testing.assert_array_equal(got, master.get_bigram_hash(x))


@pytest.mark.parametrize("w,g", PLACES)
def test_documents_is_masters_training_walk(pattern, w, g):
    for r in sorted({0, w - 1}):
        want = masters_copy(pattern, w, r, g)
        got = pinring_pops(documents(pattern, w, r, g), len(want))
        same([x for x, _ in got], want, f"W={w} G={g} rank {r}")
        assert [s for _, s in got] == [(i // g, i % g) for i in range(len(want))]


@pytest.mark.parametrize("w,g", PLACES)
def test_documents_is_masters_validation_walk(pattern, w, g):
    stages = [(0, 64 * 320, -1)]
    for r in sorted({0, w - 1}):
        want = masters_copy(pattern, w, r, g, stages, 14, align=False)
        src = pinring.Documents(pattern, tokens_per_batch=64 * 320 // (w * g), max_seq_len=1,
                                align_to_bos=False, rank=r, world_size=w, grad_accum_steps=g,
                                targets_dtype="int64", bigram_vocab_size=V)
        got = pinring_pops(src, len(want))
        same([x for x, _ in got], want, f"W={w} G={g} rank {r}")


def test_the_medium_tracks_max_docs_and_the_cap(pattern):
    formula = lambda n: master.next_multiple_of_n(n // 300, n=128)  # noqa: E731
    for w, g in [(1, 1), (2, 2), (8, 1)]:
        r = w - 1
        want = masters_copy(pattern, w, r, g, max_num_docs_rule=formula)
        got = pinring_pops(documents(pattern, w, r, g, max_docs="formula"), len(want))
        same([x for x, _ in got], want, f"formula W={w} G={g}")
        # The cap: every segment longer than 100 split from its start (tokens unchanged).
        wanted = masters_copy(pattern, w, r, g, max_num_docs_rule=lambda n: 512)
        capped = [(i, t, master.capped(c, len(i), 100), b, h) for i, t, c, b, h in wanted]
        got = pinring_pops(documents(pattern, w, r, g, max_docs=512, seq_cap=100), len(wanted))
        same([x for x, _ in got], capped, f"cap W={w} G={g}")
        assert any(not np.array_equal(a[2], b[2]) for a, b in zip(capped, wanted)), "the cap split nothing"


def dropin(pattern, w, r, g, stages=STAGES, steps=STEPS, align=True, **kw):
    gen = pinring.modded.distributed_data_generator(
        pattern, stages[0][1], stages[0][2], g, align, rank=r, world_size=w, device="cpu", **kw)
    return drive(gen, stages, steps, g)


@pytest.fixture
def torch_or_numpy(monkeypatch):
    """The drop-in on torch where it is installed, else on the numpy stand-in (which
    checks everything but the tensors' type)."""
    if not HAVE_TORCH:
        monkeypatch.setattr(pinring.modded, "_torch", lambda: numpy_torch)


@pytest.mark.parametrize("w,g", [(1, 1), (2, 8), (8, 1), (8, 2), (1, 8)])
def test_the_drop_in_yields_masters_five_tuple(pattern, torch_or_numpy, w, g):
    r = w - 1
    same(dropin(pattern, w, r, g), masters_copy(pattern, w, r, g), f"train W={w} G={g}")
    stages = [(0, 64 * 320, -1)]
    same(dropin(pattern, w, r, g, stages, 6, align=False), masters_copy(pattern, w, r, g, stages, 6, False),
         f"validation W={w} G={g}")


def test_the_drop_in_passes_the_medium_tracks_max_docs_through(pattern, torch_or_numpy):
    formula = lambda n: master.next_multiple_of_n(n // 300, n=128)  # noqa: E731
    same(dropin(pattern, 2, 1, 2, max_docs="formula"),
         masters_copy(pattern, 2, 1, 2, max_num_docs_rule=formula), "formula")


def test_the_drop_in_views_its_slots_once_on_the_cpu(pattern, torch_or_numpy):
    """On the cpu the drop-in yields the loader's fixed views: a device slot's four tensors
    are made once and come back as the same objects when the slot comes round (two device
    slots: every other step), holding that step's data; no DLPack export a step."""
    gen = pinring.modded.distributed_data_generator(pattern, 64 * 320, 512, 1, device="cpu", device_slots=2)
    steps = [gen.send(None) for _ in range(4)]
    for k in range(2):
        assert all(a is b for a, b in zip(steps[k][:4], steps[k + 2][:4])), "slot's views made again"
        assert steps[k][0] is not steps[k + 1][0]
    gen.close()
    want = masters_copy(pattern, 1, 0, 1, [(0, 64 * 320, 512)], 4)
    gen = pinring.modded.distributed_data_generator(pattern, 64 * 320, 512, 1, device="cpu", device_slots=2)
    for k in range(4):
        got = gen.send(None)
        np.testing.assert_array_equal(np.asarray(got[0]), want[k][0])  # read before the next send
    gen.close()


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed: the drop-in's torch tensors are "
                    "checked where it is (the numpy stand-in checks their values above)")
def test_the_drop_in_yields_torch_tensors_and_a_numpy_host_view(pattern):
    import torch

    gen = pinring.modded.distributed_data_generator(pattern, 64 * 320, 512, 1, device="cpu")
    inputs, targets, cu, bigram, bigram_cpu = gen.send(None)
    assert (inputs.dtype, targets.dtype, cu.dtype, bigram.dtype) == (torch.int32, torch.int64, torch.int32,
                                                                   torch.int32)
    assert isinstance(bigram_cpu, np.ndarray) and bigram_cpu.dtype == np.int32
    np.testing.assert_array_equal(bigram.numpy(), bigram_cpu)
    gen.close()


def test_the_drop_in_refuses_sizes_that_do_not_divide(pattern, torch_or_numpy):
    with pytest.raises(pinring.ConfigError, match="multiple of world_size"):
        next(pinring.modded.distributed_data_generator(pattern, 1000, 512, 8, world_size=3, rank=0,
                                                       device="cpu"))
    gen = pinring.modded.distributed_data_generator(pattern, 64 * 320, 512, 2, rank=0, world_size=2,
                                                    device="cpu")
    next(gen)
    with pytest.raises(pinring.ConfigError, match="multiple of world_size"):
        gen.send((1001, 512, 2))


def test_host_views_stay_valid_until_release_while_host_slots_are_reused(pattern):
    src = documents(pattern, 1, 0, 1)
    want = masters_copy(pattern, 1, 0, 1, steps=6)
    with pinring.Loader(src, device="cpu", host_slots=2, device_slots=6) as loader:
        held = [loader.pop(timeout=BOUND) for _ in range(6)]
        views = [b.host("bigram_inputs") for b in held]
        for k, (b, v) in enumerate(zip(held, views)):
            np.testing.assert_array_equal(v, want[k][4], err_msg=f"batch {k}")
            assert not v.flags.writeable
        # Every field's host bytes are kept, views too.
        for k, b in enumerate(held):
            np.testing.assert_array_equal(b.host("inputs"), want[k][0])
            np.testing.assert_array_equal(b.host("targets"), want[k][1])
            np.testing.assert_array_equal(b.host("cu_seqlens"), want[k][2])
        with pytest.raises(KeyError):
            held[0].host("bigram")
        for b in held:
            b.release()
        with pytest.raises(BufferError):
            held[0].host("bigram_inputs")


def test_host_views_are_one_array_a_slot_with_fixed_views(pattern):
    """With fixed views, batch.host(name) is made once per device slot and field and comes
    back as the same read-only array when the slot comes round, showing that batch's
    bytes (as long as its view; one size of step, so every batch's fields are whole)."""
    one = [(0, 64 * 320, 512)]
    src = documents(pattern, 1, 0, 1, stages=one)
    want = masters_copy(pattern, 1, 0, 1, one, steps=6)
    with pinring.Loader(src, device="cpu", device_slots=2, fixed_views=np.from_dlpack) as loader:
        seen = []
        for k in range(6):
            b = loader.pop(timeout=BOUND)
            h = b.host("bigram_inputs")
            np.testing.assert_array_equal(h, want[k][4], err_msg=f"batch {k}")
            assert not h.flags.writeable
            for name in ("inputs", "cu_seqlens"):
                assert len(b.host(name)) == len(np.asarray(b.view(name))), name
            seen.append(h)
            b.release()
        assert seen[0] is seen[2] is seen[4] and seen[1] is seen[3] and seen[0] is not seen[1]


def test_bad_speedrun_arguments_are_config_errors(pattern):
    base = dict(tokens_per_batch=320, max_seq_len=512)
    cases = [
        (dict(grad_accum_steps=0), "grad_accum_steps"),
        (dict(seq_cap=0), "seq_cap"),
        (dict(bigram_vocab_size=1), "bigram_vocab_size"),
        (dict(bigram_vocab_size=2**31 + 1), "bigram_vocab_size"),
        (dict(targets_dtype="uint16"), "targets_dtype"),
        (dict(align_to_bos=False, order="shuffled"), "align_to_bos"),
        (dict(max_docs="table"), "max_docs"),
    ]
    for extra, argument in cases:
        with pytest.raises(pinring.ConfigError) as e:
            pinring.Documents(pattern, **base, **extra)
        assert e.value.argument == argument, (extra, str(e.value))


def test_a_mixture_refuses_sources_with_the_speedrun_settings(pattern):
    plain = pinring.Documents(pattern, tokens_per_batch=320, max_seq_len=512)
    hashed = pinring.Documents(pattern, tokens_per_batch=320, max_seq_len=512, bigram_vocab_size=V)
    with pytest.raises(pinring.ConfigError, match="bigram_vocab_size, which a mixture does not take"):
        pinring.Mixture([plain, hashed], weights=[1, 1])


# The drop-in's soak (test_gpu.py runs it on cuda, a few thousand sends with a kernel holding
# each step): the same comparison, dropin_soak's, on the cpu.

# (optimizer steps, num_tokens, max_seq_len, grad_accum_steps): G=2, then a send that
# changes every size, G included; and validation's walk (no sends).
SOAK_TRAIN = [(60, 2 * 2 * 320, 512, 2), (60, 2 * 640, 768, 1)]
SOAK_VALIDATION = [(50, 2 * 2 * 640, -1, 2)]


@pytest.mark.parametrize("align,phases", [(True, SOAK_TRAIN), (False, SOAK_VALIDATION)],
                         ids=["train", "validation"])
def test_the_drop_in_soak_comparison_on_the_cpu(pattern, torch_or_numpy, align, phases):
    """dropin_soak.compare, as test_gpu.py's drop-in soak runs it, on the cpu: rank 1 of 2,
    every send's five outputs equal to master's own code's, 0 wrong."""
    steps = dropin_soak.master_steps(pattern, phases, align, 1, 2, V)
    dropin_soak.assert_steps_differ(steps)
    expected = dropin_soak.Expected(steps, dropin_soak.NUMPY)
    gen = pinring.modded.distributed_data_generator(pattern, *dropin_soak.start_args(phases), align, rank=1,
                                                    world_size=2, device="cpu")
    got = dropin_soak.compare(gen, dropin_soak.plan(phases), expected, dropin_soak.NUMPY)
    assert got == dict.fromkeys(got, 0), got


def test_the_drop_in_soak_comparison_can_fail(pattern, torch_or_numpy):
    """The same comparison against master's steps one send ahead: every output counted
    wrong."""
    phases = [(40, 2 * 2 * 320, 512, 2)]
    steps = dropin_soak.master_steps(pattern, phases, True, 1, 2, V)
    ahead = dropin_soak.Expected(steps[1:], dropin_soak.NUMPY)
    gen = pinring.modded.distributed_data_generator(pattern, *dropin_soak.start_args(phases), True, rank=1,
                                                    world_size=2, device="cpu")
    got = dropin_soak.compare(gen, dropin_soak.plan(phases)[:-1], ahead, dropin_soak.NUMPY)
    assert all(got[name] > 0 for name in (*dropin_soak.NAMES, "bigram_cpu")), got
    assert (got["dtype"], got["device"], got["shape"]) == (0, 0, 0), got
