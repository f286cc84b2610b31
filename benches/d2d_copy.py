"""Device-to-device copy at a step's size: the copy engine's way against a kernel's.

`Batch<Cuda>::into_candle` copies a slot into memory candle owns with one
`cuMemcpyDtoDAsync` on candle's stream (src/batch/candle.rs). This measures what that copy
costs on the device, and what a copy kernel (an elementwise kernel, one 8-byte word a
thread) costs for the same bytes, at the sizes a training step hands over, so that the choice is a measured one.

    python3 benches/d2d_copy.py            # on the GPU machine (CuPy)

Per size: the median over 7 passes of the device time of 200 back-to-back copies on one
stream (CUDA events), as microseconds a copy and GB/s. Each pass is queued behind a 20 ms
spin kernel, so that the copies run back to back at the device's pace and the events do not
time how fast Python enqueues them.
"""

import statistics
import sys

try:
    import cupy as cp
except ImportError:  # pragma: no cover - the GPU machine has CuPy
    sys.exit("this benchmark needs CuPy and a GPU")

SIZES = {
    "8 KiB (32 x 65 u32)": 32 * 65 * 4,
    "64 KiB (64 x 257 u32)": 64 * 257 * 4,
    "256 KiB (16 x 4097 i32)": 16 * 4097 * 4,
    "4 MiB (one packed step, 8 x 131072 i32)": 8 * 131072 * 4,
    "32 MiB (64 x 131073 i32)": 64 * 131073 * 4,
}
COPIES, PASSES = 200, 7


SPIN = cp.RawKernel(
    r"""
extern "C" __global__ void pinring_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
""",
    "pinring_spin",
)


def hold(stream, ms=20):
    """Keeps `stream` busy for about `ms` milliseconds (one thread spinning on the clock)."""
    rate_khz = cp.cuda.runtime.getDeviceProperties(0)["clockRate"]
    SPIN((1,), (1,), (cp.int64(rate_khz * ms),), stream=stream)


def timed(stream, launch):
    """Device microseconds a copy: COPIES launches between two events, median of PASSES."""
    for _ in range(10):
        launch()
    per = []
    for _ in range(PASSES):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        hold(stream)
        start.record(stream)
        for _ in range(COPIES):
            launch()
        end.record(stream)
        end.synchronize()
        per.append(cp.cuda.get_elapsed_time(start, end) * 1e3 / COPIES)
    return statistics.median(per)


def main():
    copy_words = cp.ElementwiseKernel("T x", "T y", "y = x", "pinring_copy_words")
    stream = cp.cuda.Stream(non_blocking=True)
    kind = cp.cuda.runtime.memcpyDeviceToDevice
    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"{name}; device time a copy, median of {PASSES} passes of {COPIES} copies")
    print("| size | cuMemcpyDtoDAsync | copy kernel | faster |")
    print("| --- | --- | --- | --- |")
    with stream:
        for label, nbytes in SIZES.items():
            src = cp.arange(nbytes // 4, dtype=cp.uint32)
            dst = cp.empty_like(src)

            def engine():
                cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, kind, stream.ptr)

            src64, dst64 = src.view(cp.uint64), dst.view(cp.uint64)

            def kernel():
                copy_words(src64, dst64)

            e, k = timed(stream, engine), timed(stream, kernel)
            cp.cuda.runtime.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, kind, stream.ptr)
            stream.synchronize()
            assert bool((dst == src).all()), "the engine's copy is wrong"
            dst.fill(0)
            kernel()
            assert bool((dst == src).all()), "the kernel's copy is wrong"
            gb = lambda us: nbytes / us / 1e3  # noqa: E731
            print(
                f"| {label} | {e:.2f} us ({gb(e):.0f} GB/s) | {k:.2f} us ({gb(k):.0f} GB/s) "
                f"| {'memcpy' if e <= k else 'kernel'} |"
            )


if __name__ == "__main__":
    main()
