//! Compiles pinring's cuda backend beside a cudarc in `dynamic-linking` mode.

/// Whether CUDA can be used, through pinring, in a graph where cudarc links libcuda.
pub fn cuda_usable() -> bool {
    pinring::Cuda::device_count().is_ok_and(|n| n > 0)
}

/// The same cudarc types reach both crates.
pub fn same_cudarc(ctx: &std::sync::Arc<cudarc::driver::CudaContext>) -> usize {
    let stream = ctx.default_stream();
    let _ = pinring::CuStream::from(&stream);
    ctx.ordinal()
}
