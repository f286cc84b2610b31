//! The README's burn recipe, compiled and run (feature `burn`): burn's `DataLoader` over a
//! pinring loader of token windows, each batch's typed view copied into a `TensorData` of
//! burn's ndarray backend and the batch released; its batches are the loader's, and a
//! slice of it is the same steps.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use burn::backend::NdArray;
use burn::data::dataloader::{DataLoader, DataLoaderIterator, Progress};
use burn::tensor::backend::Backend;
use burn::tensor::{Int, Tensor, TensorData};
use pinring::source::{write_shard, Order, TokenShards, TokenType, TokenWindows};
use pinring::{Fence, Loader};

/// burn batches of `[batch_size, T + 1]` `i64` token windows, one epoch, from step
/// `start` to `end` (a slice of the epoch, in whole batches).
struct PinringLoader<B: Backend> {
    source: TokenWindows,
    batch_size: u64,
    window: usize,
    start: u64,
    end: u64,
    device: B::Device,
    /// The error that ended an iteration, if one did (DataLoader has no error channel).
    error: Arc<Mutex<Option<pinring::Error>>>,
}

struct Batches<B: Backend> {
    loader: Option<Loader<TokenWindows>>,
    shape: [usize; 2],
    step: u64,
    end: u64,
    batch_size: u64,
    device: B::Device,
    error: Arc<Mutex<Option<pinring::Error>>>,
}

impl<B: Backend> Iterator for Batches<B> {
    type Item = Tensor<B, 2, Int>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.step >= self.end {
            return None;
        }
        let popped = self.loader.as_mut()?.pop();
        let batch = match popped {
            Ok(Some(batch)) => batch,
            Ok(None) => return None,
            Err(e) => {
                *self.error.lock().unwrap() = Some(e);
                return None;
            }
        };
        // decode_as(TokenType::I64): the batch's bytes are the windows' i64 tokens.
        let ids = batch.bytes_as::<i64>().map(<[i64]>::to_vec);
        batch.release(Fence::Sync).ok()?;
        self.step += 1;
        let data = TensorData::new(ids.ok()?, self.shape);
        Some(Tensor::from_data(data, &self.device))
    }
}

impl<B: Backend> DataLoaderIterator<Tensor<B, 2, Int>> for Batches<B> {
    fn progress(&self) -> Progress {
        Progress::new(
            (self.step * self.batch_size) as usize,
            (self.end * self.batch_size) as usize,
        )
    }
}

impl<B: Backend> DataLoader<B, Tensor<B, 2, Int>> for PinringLoader<B> {
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<Tensor<B, 2, Int>> + 'a> {
        let built = Loader::builder(self.source.clone())
            .batch_size(self.batch_size)
            .epochs(1)
            .start_step(self.start)
            .decode_threads(1)
            .build();
        let loader = match built {
            Ok(loader) => Some(loader),
            Err(e) => {
                *self.error.lock().unwrap() = Some(e);
                None
            }
        };
        Box::new(Batches::<B> {
            loader,
            shape: [self.batch_size as usize, self.window],
            step: self.start,
            end: self.end,
            batch_size: self.batch_size,
            device: self.device.clone(),
            error: self.error.clone(),
        })
    }

    fn num_items(&self) -> usize {
        ((self.end - self.start) * self.batch_size) as usize
    }

    fn to_device(&self, device: &B::Device) -> Arc<dyn DataLoader<B, Tensor<B, 2, Int>>> {
        Arc::new(PinringLoader::<B> {
            device: device.clone(),
            error: Arc::default(),
            ..self.same()
        })
    }

    /// Items `start..end`, in whole batches (as burn's own loaders slice).
    fn slice(&self, start: usize, end: usize) -> Arc<dyn DataLoader<B, Tensor<B, 2, Int>>> {
        let (start, end) = (start as u64 / self.batch_size, end as u64 / self.batch_size);
        Arc::new(PinringLoader::<B> {
            start: self.start + start,
            end: (self.start + end).min(self.end),
            error: Arc::default(),
            ..self.same()
        })
    }
}

impl<B: Backend> PinringLoader<B> {
    fn new(source: TokenWindows, batch_size: u64, window: usize, device: B::Device) -> Self {
        let end = source.epoch_len() / batch_size;
        PinringLoader {
            source,
            batch_size,
            window,
            start: 0,
            end,
            device,
            error: Arc::default(),
        }
    }

    fn same(&self) -> Self {
        PinringLoader {
            source: self.source.clone(),
            batch_size: self.batch_size,
            window: self.window,
            start: self.start,
            end: self.end,
            device: self.device.clone(),
            error: Arc::default(),
        }
    }
}

fn shard(dir: &Path) -> PathBuf {
    let path = dir.join("train_000.bin");
    write_shard(&path, &(0..5000u16).collect::<Vec<_>>()).unwrap();
    path
}

#[test]
fn burn_batches_are_the_loaders_and_slice_by_batch() {
    let dir = std::env::temp_dir().join(format!("pinring-burn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = TokenShards::open([shard(&dir)])
        .unwrap()
        .decode_as(TokenType::I64)
        .windows(33)
        .order(Order::Shuffled { seed: 4 })
        .build()
        .unwrap();
    let loader = PinringLoader::<NdArray>::new(source.clone(), 8, 33, Default::default());
    let got: Vec<Vec<i64>> = loader
        .iter()
        .map(|t| t.into_data().to_vec::<i64>().unwrap())
        .collect();
    // The same windows a pinring loader pops.
    let mut plain = Loader::builder(source)
        .batch_size(8)
        .epochs(1)
        .build()
        .unwrap();
    let mut want = Vec::new();
    while let Some(b) = plain.pop().unwrap() {
        want.push(b.bytes_as::<i64>().unwrap().to_vec());
        b.release(Fence::Sync).unwrap();
    }
    assert_eq!(got.len(), 4999 / 32 / 8);
    assert_eq!(got, want[..got.len()]);
    assert_eq!(loader.num_items(), got.len() * 8);
    let part = loader.slice(16, 40);
    let sliced: Vec<Vec<i64>> = part
        .iter()
        .map(|t| t.into_data().to_vec::<i64>().unwrap())
        .collect();
    assert_eq!(sliced, got[2..5]);
    assert!(loader.error.lock().unwrap().is_none());
    std::fs::remove_dir_all(&dir).unwrap();
}
