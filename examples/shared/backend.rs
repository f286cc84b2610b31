//! `--cuda N`: the backend a tool's batches go to, CUDA device N, else the cpu backend.

use pinring::{Config, ConfigBuilder, Cpu};

/// A config built for the backend `--cuda` chose.
#[derive(Debug)]
pub enum Built {
    /// No `--cuda`: the cpu backend (device slots in ordinary memory).
    Cpu(Config<Cpu>),
    /// `--cuda N`: CUDA device N (its ordinal).
    #[cfg(feature = "cuda")]
    Cuda(Config<pinring::Cuda>, usize),
}

impl Built {
    /// How the header names the device: "cuda:N", or "the cpu backend".
    pub fn device(&self) -> String {
        match self {
            Built::Cpu(_) => "the cpu backend".to_owned(),
            #[cfg(feature = "cuda")]
            Built::Cuda(_, ordinal) => format!("cuda:{ordinal}"),
        }
    }
}

/// `builder`, built for CUDA device `cuda` when given (an error in a build without the
/// `cuda` feature), else for the cpu backend.
pub fn build(
    builder: ConfigBuilder,
    cuda: Option<usize>,
) -> Result<Built, Box<dyn std::error::Error>> {
    match cuda {
        #[cfg(feature = "cuda")]
        Some(ordinal) => Ok(Built::Cuda(
            builder
                .cuda(pinring::CudaOptions::ordinal(ordinal))
                .build()?,
            ordinal,
        )),
        #[cfg(not(feature = "cuda"))]
        Some(_) => Err(pinring::Error::Backend {
            call: "--cuda",
            message: "this build has no cuda feature".into(),
            source: None,
        }
        .into()),
        None => Ok(Built::Cpu(builder.build()?)),
    }
}
