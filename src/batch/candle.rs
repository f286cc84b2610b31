//! A batch, or its fields, as `candle_core::Tensor`s (feature `candle`): on candle's cpu
//! device a plain tensor of the slot's bytes (one copy, as any candle tensor made from host
//! data); on its cuda device (feature `candle-cuda`) a device-to-device copy on candle's
//! stream into a slice candle owns, and the batch released fenced on that stream, with no
//! host sync. candle cannot wrap a borrowed buffer (`CudaStorage::wrap_cuda_slice` takes
//! ownership and frees), so a copy is the sound path on either device.

use candle_core::{DType, Device, Tensor};

use super::{Batch, FieldAt};
use crate::backend::cpu::Cpu;
use crate::backend::fence::Fence;
use crate::error::view::ViewError;
use crate::fields::Dtype;

/// The candle dtype a field's elements are, where candle has one (it has no `u16`: decode
/// as [`TokenType::U32`](crate::source::TokenType::U32) or `I64` for candle).
fn candle_dtype(dtype: Dtype) -> candle_core::Result<DType> {
    match dtype {
        Dtype::U8 => Ok(DType::U8),
        Dtype::I32 => Ok(DType::I32),
        Dtype::U32 => Ok(DType::U32),
        Dtype::I64 => Ok(DType::I64),
        Dtype::U16 => Err(candle_core::Error::msg(
            "candle has no u16 tensors: decode the tokens as uint32 (what index_select and \
             gather take) or int64",
        )),
    }
}

fn no_field(name: &str) -> candle_core::Error {
    candle_core::Error::wrap(ViewError::NoField {
        name: name.to_owned(),
    })
}

impl Batch<Cpu> {
    /// The fields named in `names`, each as a 1-D candle tensor of its own dtype on
    /// candle's cpu device (its bytes copied once, after the batch's copy), then the batch
    /// released (the tensors own their data). A name the batch has no field of, or a `u16`
    /// field (candle has no `u16`), is an error, and the batch is released all the same.
    ///
    /// ```
    /// use pinring::source::{write_shard, Documents, TokenShards, TokenType};
    /// use pinring::Loader;
    /// # let dir = std::env::temp_dir().join(format!("pinring-candle-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let tokens: Vec<u16> = (0..400).map(|i| if i % 40 == 0 { 50256 } else { i }).collect();
    /// write_shard(dir.join("a.bin"), &tokens)?;
    /// let docs = Documents::builder(TokenShards::open([dir.join("a.bin")])?)
    ///     .tokens_per_batch(63).max_seq_len(64).token_type(TokenType::U32).build()?;
    /// let mut loader = Loader::builder(docs).build()?;
    /// let batch = loader.pop()?.expect("a step");
    /// let t = batch.into_candle(&["inputs", "cu_seqlens"]).unwrap();
    /// assert_eq!(t[0].dims(), [63]);
    /// assert_eq!(t[0].dtype(), candle_core::DType::U32);
    /// assert_eq!(t[1].to_vec1::<i32>().unwrap()[..2], [0, 40]);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn into_candle(self, names: &[&str]) -> candle_core::Result<Vec<Tensor>> {
        let tensors = names
            .iter()
            .map(|name| self.field_to_candle(name))
            .collect();
        self.release(Fence::Sync)
            .map_err(|e| candle_core::Error::wrap(e.error))?;
        tensors
    }

    /// The field named `name` as a 1-D candle tensor on candle's cpu device (its bytes
    /// copied), the batch kept.
    pub fn field_to_candle(&self, name: &str) -> candle_core::Result<Tensor> {
        let at = self.field(name).ok_or_else(|| no_field(name))?;
        let bytes = self.field_bytes(name).ok_or_else(|| no_field(name))?;
        let dtype = candle_dtype(at.dtype)?;
        Tensor::from_raw_buffer(bytes, dtype, &[at.len], &Device::Cpu)
    }

    /// The batch's bytes as a candle tensor of `dtype` and `shape` on candle's cpu device
    /// (copied), for a batch without fields: token windows decoded as
    /// [`TokenType::U32`](crate::source::TokenType::U32) are `(samples, T + 1)` of
    /// [`Dtype::U32`]. The bytes must be exactly the shape's elements.
    pub fn to_candle(&self, dtype: Dtype, shape: &[usize]) -> candle_core::Result<Tensor> {
        Tensor::from_raw_buffer(self.bytes(), candle_dtype(dtype)?, shape, &Device::Cpu)
    }
}

/// The place and dtype of field `name` of a batch.
#[cfg_attr(not(feature = "candle-cuda"), allow(dead_code))]
fn field_at<B: crate::backend::contract::Backend>(
    batch: &Batch<B>,
    name: &str,
) -> candle_core::Result<(FieldAt, DType)> {
    let at = batch.field(name).ok_or_else(|| no_field(name))?;
    let dtype = candle_dtype(at.dtype)?;
    Ok((at, dtype))
}

#[cfg(feature = "candle-cuda")]
mod on_cuda {
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::{CudaDevice, CudaStorage};
    use candle_core::op::BackpropOp;
    use candle_core::{DType, Storage, Tensor};
    use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut, DeviceRepr};

    use super::field_at;
    use crate::backend::cuda::backend::Cuda;
    use crate::backend::cuda::handles::CuStream;
    use crate::batch::Batch;
    use crate::fields::Dtype;
    use crate::sync::native::Arc;

    fn wrap(e: impl std::fmt::Display + Send + Sync + 'static) -> candle_core::Error {
        candle_core::Error::wrap(e)
    }

    /// `len` elements of `T` at `src` (in a leased device slot) copied on `stream` into a
    /// slice candle's `device` owns: one `cuMemcpyDtoDAsync` on the slot's address (no
    /// cudarc slice is made of the slot, which would create and destroy two events a call).
    fn copied<T: DeviceRepr>(
        device: &CudaDevice,
        stream: &Arc<CudaStream>,
        src: cudarc::driver::sys::CUdeviceptr,
        len: usize,
    ) -> candle_core::Result<CudaSlice<T>> {
        // SAFETY: the slice is written whole by the copy below before any use on this
        // stream (stream order), so its uninitialized contents are never read.
        let mut dst = unsafe { device.alloc::<T>(len) }?;
        // `written` records the slice's write on `stream` when dropped (cudarc's tracking).
        let (dst_ptr, written) = dst.device_ptr_mut(stream);
        // SAFETY: `src..src + len * size_of::<T>()` lies in the batch's device slot, valid
        // while the batch is leased (the caller holds it until the release fenced on
        // `stream` after this copy); `dst_ptr` is `len` elements candle just allocated; both
        // in candle's context, which `alloc` bound to this thread.
        unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                dst_ptr,
                src,
                len * std::mem::size_of::<T>(),
                stream.cu_stream(),
            )
        }
        .map_err(wrap)?;
        drop(written);
        Ok(dst)
    }

    /// `len` elements of `dtype` at `src` (in a leased device slot) copied on `stream` into
    /// a slice candle's `device` owns, as candle storage.
    fn stored(
        device: &CudaDevice,
        stream: &Arc<CudaStream>,
        src: cudarc::driver::sys::CUdeviceptr,
        len: usize,
        dtype: DType,
    ) -> candle_core::Result<CudaStorage> {
        let storage = match dtype {
            DType::U8 => CudaStorage::wrap_cuda_slice(
                copied::<u8>(device, stream, src, len)?,
                device.clone(),
            ),
            DType::U32 => CudaStorage::wrap_cuda_slice(
                copied::<u32>(device, stream, src, len)?,
                device.clone(),
            ),
            DType::I32 => CudaStorage::wrap_cuda_slice(
                copied::<i32>(device, stream, src, len)?,
                device.clone(),
            ),
            _ => CudaStorage::wrap_cuda_slice(
                copied::<i64>(device, stream, src, len)?,
                device.clone(),
            ),
        };
        debug_assert_eq!(storage.dtype(), dtype);
        Ok(storage)
    }

    impl Batch<Cuda> {
        /// The fields named in `names`, each as a 1-D candle tensor of its own dtype on
        /// candle's cuda `device`: candle's stream waits for the batch (stream-side), each
        /// field is copied device to device on that stream into a slice candle owns, and the
        /// batch is released fenced on that stream. The host never waits. CI does not build
        /// it (candle's `cuda` feature builds its kernels with nvcc):
        /// `scripts/candle-cuda.sh` builds it and runs `examples/candle_train.rs` on a GPU.
        pub fn into_candle(
            mut self,
            names: &[&str],
            device: &CudaDevice,
        ) -> candle_core::Result<Vec<Tensor>> {
            let stream = device.cuda_stream();
            self.wait_on(&CuStream::from(&stream)).map_err(wrap)?;
            let base = self.device_ptr();
            let tensors = names
                .iter()
                .map(|name| {
                    let (at, dtype) = field_at(&self, name)?;
                    let storage = stored(device, &stream, base + at.offset as u64, at.len, dtype)?;
                    Ok(Tensor::from_storage(
                        Storage::Cuda(storage),
                        at.len,
                        BackpropOp::none(),
                        false,
                    ))
                })
                .collect();
            // Fenced on candle's stream: the slot is reused only after the copies above.
            self.release_on(&stream).map_err(|e| wrap(e.error))?;
            tensors
        }

        /// The batch's bytes as one candle tensor of `dtype` and `shape` on candle's cuda
        /// `device`, for a batch without fields (token windows decoded as
        /// [`TokenType::U32`](crate::source::TokenType::U32) are `(samples, T + 1)` of
        /// [`Dtype::U32`](crate::Dtype::U32)): candle's stream waits for the batch, the
        /// bytes are copied device to device on it into a slice candle owns, and the batch
        /// is released fenced on that stream. The host never waits. The bytes must be
        /// exactly the shape's elements; otherwise it is an error, and the batch is released
        /// all the same.
        pub fn into_candle_as(
            mut self,
            dtype: Dtype,
            shape: &[usize],
            device: &CudaDevice,
        ) -> candle_core::Result<Tensor> {
            let candle = super::candle_dtype(dtype)?;
            let elements: usize = shape.iter().product();
            if elements * dtype.size() != self.len() {
                // Nothing was enqueued on the slot: a release that waits for nothing.
                let len = self.len();
                self.release(super::Fence::Sync)
                    .map_err(|e| wrap(e.error))?;
                return Err(candle_core::Error::msg(format!(
                    "the batch holds {len} bytes, not the {elements} {dtype:?} elements of \
                     shape {shape:?}"
                )));
            }
            let stream = device.cuda_stream();
            self.wait_on(&CuStream::from(&stream)).map_err(wrap)?;
            let storage = stored(device, &stream, self.device_ptr(), elements, candle)?;
            // Fenced on candle's stream: the slot is reused only after the copy above.
            self.release_on(&stream).map_err(|e| wrap(e.error))?;
            Ok(Tensor::from_storage(
                Storage::Cuda(storage),
                shape,
                BackpropOp::none(),
                false,
            ))
        }
    }
}
