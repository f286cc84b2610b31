"""Where the Python consumer's per-batch time goes: loader.pop(), torch.from_dlpack(batch)
(with pinring's own __dlpack__ alone beside it) and batch.release(event=stream), p50 and
p90 over 5,000 calls with the pipeline ahead, at the default slots and at H64 D16; and, for
reference, what torch itself costs for from_dlpack of a torch tensor, an event record and
torch.cuda.current_stream().cuda_stream. Needs torch and a CUDA device; run from the repo
root:  python3 python/benches/pop_breakdown.py
"""
import sys, time
import numpy as np, torch, pinring
sys.path.insert(0, "python/tests")
from conftest import write_shard
import tempfile, os
d = tempfile.mkdtemp()
path = write_shard(os.path.join(d, "s.bin"), np.arange(4_000_000) % 50000)
src = pinring.TokenWindows(path, seq_len=4096, dtype="int32", order="random", seed=1)
stream = torch.cuda.current_stream()
def pct(xs): xs = sorted(xs); return f"p50 {xs[len(xs)//2]*1e6:.1f} us  p90 {xs[int(len(xs)*0.9)]*1e6:.1f}"
for hs, ds in [(4, 2), (64, 16)]:
    loader = pinring.Loader(src, batch_size=16, device="cuda:0", epochs=None, host_slots=hs, device_slots=ds)
    for _ in range(200):
        b = loader.pop(); x = torch.from_dlpack(b); b.release(event=stream); del x
    T = {k: [] for k in ["pop", "from_dlpack", "release", "dlpack_capsule", "getattrs", "all"]}
    for i in range(5000):
        if i % 50 == 0:
            torch.cuda.synchronize(); time.sleep(0.002)  # let the pipeline get ahead
        t0 = time.perf_counter(); b = loader.pop(); t1 = time.perf_counter()
        x = torch.from_dlpack(b); t2 = time.perf_counter()
        b.release(event=stream); t3 = time.perf_counter()
        del x
        T["pop"].append(t1 - t0); T["from_dlpack"].append(t2 - t1); T["release"].append(t3 - t2); T["all"].append(t3 - t0)
    for i in range(2000):
        b = loader.pop()
        t0 = time.perf_counter(); c = b.__dlpack__(stream=1); t1 = time.perf_counter()
        _ = (b.seq, b.shape, b.dtype); t2 = time.perf_counter()
        del c; b.release(event=stream)
        T["dlpack_capsule"].append(t1 - t0); T["getattrs"].append(t2 - t1)
    print(f"H{hs} D{ds}: " + "; ".join(f"{k} {pct(v)}" for k, v in T.items()))
    loader.close()
t = torch.zeros(16, 4097, dtype=torch.int32, device="cuda")
ref = []
for i in range(5000):
    t0 = time.perf_counter(); y = torch.from_dlpack(t); ref.append(time.perf_counter() - t0)
print("torch.from_dlpack(torch tensor):", pct(ref))
ev = torch.cuda.Event(); ref = []
for i in range(5000):
    t0 = time.perf_counter(); ev.record(stream); ref.append(time.perf_counter() - t0)
print("torch Event.record(stream):", pct(ref))
ref = []
for i in range(5000):
    t0 = time.perf_counter(); s = torch.cuda.current_stream(); h = s.cuda_stream; ref.append(time.perf_counter() - t0)
print("current_stream().cuda_stream:", pct(ref))
