"""The drop-in's five outputs, send by send, against master's own generator code (issue 31).

``pinring.modded.distributed_data_generator`` driven the way master's training loop drives
its generator (a plan of ``.send()`` arguments: gradient accumulation, a change of sizes),
every yielded 5-tuple compared with what master's own code (``modded_master_code``: the
vendored ``train_gpt.py`` text, run on the cpu) yields for the same sends. Master's steps are
computed on the host first and staged once where the comparison runs (``Expected``); the four
tensors are compared where they live, each counting its wrong elements in a counter of its
own there (on a GPU: a device tensor, no host sync a step), and the fifth output, the numpy
host view, on the host.

Written once for both backends, so that the logic the GPU soak runs (``test_gpu.py``: torch
tensors on cuda, a kernel holding each step) is the logic CI runs on the cpu
(``test_speedrun.py``: ``NUMPY``, the drop-in on the cpu with torch or the numpy stand-in).
"""

import types

import numpy as np

import modded_master_code

NAMES = ("inputs", "targets", "cu_seqlens", "bigram_inputs")
DTYPES = ("int32", "int64", "int32", "int32")

#: The cpu backend: the drop-in's cpu outputs (torch cpu tensors or the numpy stand-in's
#: arrays) read as numpy; counters are Python ints.
NUMPY = types.SimpleNamespace(
    stage=lambda a: a,
    wide=lambda x: np.asarray(x).astype(np.int64),
    zero=lambda: 0,
    on_device=lambda x: str(getattr(x, "device", "cpu")) == "cpu",
)


def plan(phases):
    """The ``.send()`` arguments of master's training loop, one a micro-step. ``phases``:
    ``[(optimizer_steps, num_tokens, max_seq_len, grad_accum_steps), ...]``; each optimizer
    step is ``grad_accum_steps`` sends. The very first send is None (it starts the
    generator); every micro-step of the first optimizer step of a later phase sends that
    phase's ``(num_tokens, max_seq_len, grad_accum_steps)`` (master's loop sends the new
    sizes at each micro-step of the step where they change); all other sends are None."""
    sends = []
    for p, (steps, num_tokens, max_seq_len, g) in enumerate(phases):
        for s in range(steps):
            for _ in range(g):
                sends.append((num_tokens, max_seq_len, g) if p > 0 and s == 0 else None)
    return sends


def start_args(phases):
    """``(num_tokens, max_seq_len, grad_accum_steps)`` the generator is made with."""
    return tuple(phases[0][1:])


def master_steps(pattern, phases, align_to_bos, rank, world_size, bigram_vocab_size):
    """What master's own code yields for ``plan(phases)``, rank ``rank`` of ``world_size``:
    a numpy 5-tuple a send (copies). Fails, saying so, where the data ends first."""
    ns, _ = modded_master_code.load(bigram_vocab_size, rank=rank, world_size=world_size)
    num_tokens, max_seq_len, g = start_args(phases)
    gen = ns["distributed_data_generator"](pattern, num_tokens, max_seq_len, grad_accum_steps=g,
                                           align_to_bos=align_to_bos)
    out = []
    try:
        for args in plan(phases):
            out.append(tuple(np.asarray(x).copy() for x in gen.send(args)))
    except (StopIteration, RuntimeError, TypeError) as e:
        raise AssertionError(f"the test's shards end after {len(out)} of master's sends "
                             f"({type(e).__name__}): give them more tokens") from e
    finally:
        gen.close()
    return out


def differs(a, b):
    return a.shape != b.shape or not np.array_equal(a, b)


def assert_steps_differ(steps):
    """The comparison can tell steps apart: every send's inputs, targets and bigram inputs
    differ from the next send's (a loader repeating or skipping a step, or serving a stale
    slot, is seen), and so do at least half of the sends' cu_seqlens (a send within one
    document, or that starts one longer than itself, has the same as the next such send)."""
    for k in range(len(steps) - 1):
        for i in (0, 1, 3):
            assert differs(steps[k][i], steps[k + 1][i]), f"master's sends {k} and {k + 1} have equal {NAMES[i]}"
    cu = sum(differs(steps[k][2], steps[k + 1][2]) for k in range(len(steps) - 1))
    assert cu >= 0.5 * (len(steps) - 1), f"only {cu} of master's {len(steps)} sends differ from the next in cu_seqlens"


class Expected:
    """Master's steps staged once where the comparison runs: each of the four tensor
    outputs of every send end to end, int64 (``backend.stage`` moves a numpy array there),
    with the offsets of each send's piece; the host views' values stay on the host."""

    def __init__(self, steps, backend):
        self.steps = steps
        self.host_views = [s[4] for s in steps]
        self.at = [np.concatenate([[0], np.cumsum([len(s[i]) for s in steps])]).astype(np.int64) for i in range(4)]
        self.fields = [backend.stage(np.concatenate([s[i] for s in steps]).astype(np.int64)) for i in range(4)]

    def __len__(self):
        return len(self.steps)

    def span(self, k, i):
        return int(self.at[i][k]), int(self.at[i][k + 1])


def dtype_name(x):
    return str(x.dtype).removeprefix("torch.")


def compare(gen, sends, expected, backend, hold=None):
    """Drives ``gen`` with ``sends`` (send ``k`` must yield ``expected``'s step ``k``) and
    counts what differs. Each send: ``hold()`` if given (on a GPU, a kernel that holds the
    step on the current stream: a slot refilled before the reads below would show), then
    each tensor compared with its expected piece where it lives (its count of wrong
    elements added to its own counter there), its dtype, place and length checked on the
    host, and the host view (5th output) compared on the host. The generator is closed at
    the end. Returns the counts: one per tensor (``NAMES``), ``bigram_cpu`` (host views not
    equal to master's, or not int32 numpy), ``dtype``, ``device`` and ``shape`` (outputs
    of the wrong dtype, place or length: a tensor of the wrong length is not compared)."""
    assert len(sends) <= len(expected)
    wrong = [backend.zero() for _ in NAMES]
    host = {"bigram_cpu": 0, "dtype": 0, "device": 0, "shape": 0}
    try:
        for k, args in enumerate(sends):
            got = gen.send(args)
            if len(got) != 5:
                host["shape"] += 1
                continue
            if hold is not None:
                hold()
            for i, x in enumerate(got[:4]):
                host["dtype"] += dtype_name(x) != DTYPES[i]
                host["device"] += not backend.on_device(x)
                a, e = expected.span(k, i)
                if tuple(x.shape) != (e - a,):
                    host["shape"] += 1
                    continue
                wrong[i] = wrong[i] + (backend.wide(x) != expected.fields[i][a:e]).sum()
            view, want = got[4], expected.host_views[k]
            host["bigram_cpu"] += not (isinstance(view, np.ndarray) and view.dtype == np.int32
                                       and np.array_equal(view, want))
            del got, view, x  # nothing of this step is held past the next send
    finally:
        gen.close()
    return {**{name: int(w) for name, w in zip(NAMES, wrong)}, **host}
