// Kernels of the GPU suite (tests/gpu) and the GPU benchmark (benches/gpu/), which embed
// tests/gpu/kernels/gpu_check.ptx, the checked-in result of
//     nvcc -ptx -arch=compute_75 tests/gpu/kernels/gpu_check.cu -o tests/gpu/kernels/gpu_check.ptx
// (run on the GPU machine: this one has no nvcc).

// Holds the stream (and so the batch it reads next) for `cycles` SM clock cycles.
extern "C" __global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}

// Holds the stream for `ns` nanoseconds of the GPU's global timer: unlike `spin`, its
// length does not follow the SM clock (which moves with load and power), so a benchmark
// can set a kernel as long as a measured copy.
extern "C" __global__ void hold(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}

// Word `word` of sample `sample`, as the suite's decoder writes it.
__device__ __forceinline__ unsigned int pattern(unsigned long long sample, unsigned int word) {
    unsigned int x = (unsigned int)((sample * 0x9E3779B97F4A7C15ull) >> 32) ^ (word * 0x85EBCA6Bu);
    return x ^ (x >> 15);
}

// Counts the words of a batch that differ from the pattern into *errors, and adds one to
// *visits per block (so the host can tell the check ran).
extern "C" __global__ void check(const unsigned int* data, unsigned long long first_sample,
                                 unsigned int words_per_sample, unsigned long long words,
                                 unsigned int* errors, unsigned int* visits) {
    unsigned int bad = 0;
    unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < words;
         i += stride) {
        unsigned long long sample = first_sample + i / words_per_sample;
        unsigned int word = (unsigned int)(i % words_per_sample);
        if (data[i] != pattern(sample, word)) {
            bad++;
        }
    }
    if (bad != 0) {
        atomicAdd(errors, bad);
    }
    if (threadIdx.x == 0) {
        atomicAdd(visits, 1u);
    }
}

// Faults the context (sticky error), to check that a CUDA error reaches the consumer.
extern "C" __global__ void fault() {
    asm volatile("trap;");
}
