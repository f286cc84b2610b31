//! [`MegatronIndex`]: a `.idx` file, its header checked when opened against Megatron-LM's
//! `_IndexWriter` (and against the `.bin` beside it), and the document starts it gives.

use super::problem::MegatronProblem;
use crate::error::source::SourceError;
use crate::source::files::source_file::SourceFile;
use crate::source::tokens::document_index::{starts_of_ends, DocumentIndex, EndsProblem};
use crate::source::tokens::ShardFormat;

/// The `.idx` magic (`_INDEX_HEADER`).
pub(super) const MAGIC: &[u8; 9] = b"MMIDIDX\x00\x00";
/// The one version Megatron writes and reads.
const VERSION: u64 = 1;
/// Bytes before the arrays: magic, version, dtype code, the two counts.
const HEADER_BYTES: u64 = 9 + 8 + 1 + 8 + 8;

/// What a `.idx` says, checked against the `.bin` it indexes.
#[derive(Debug)]
pub(super) struct MegatronIndex {
    file: SourceFile,
    width: ShardFormat,
    /// Sequences (`S`).
    sequences: u64,
    /// Document indices (`D`: one more than the documents).
    documents: u64,
    /// Tokens in the `.bin`.
    tokens: u64,
}

/// The dtype a code names (`DType` in `indexed_dataset.py`), and whether it is an integer.
fn dtype(code: u8) -> Option<(&'static str, bool)> {
    Some(match code {
        1 => ("uint8", true),
        2 => ("int8", true),
        3 => ("int16", true),
        4 => ("int32", true),
        5 => ("int64", true),
        6 => ("float64", false),
        7 => ("float32", false),
        8 => ("uint16", true),
        _ => return None,
    })
}

impl MegatronIndex {
    /// Reads and checks the header of `file` (a `.idx`) and its size, and the size of `bin`
    /// against its last sequence.
    pub(super) fn open(file: SourceFile, bin: &SourceFile) -> Result<Self, SourceError> {
        let fail = |problem: MegatronProblem| SourceError::file(file.path(), problem);
        let len = file.len();
        if len < HEADER_BYTES {
            return Err(fail(MegatronProblem::TruncatedHeader { len }));
        }
        let mut head = [0u8; HEADER_BYTES as usize];
        file.read_exact_at(0, &mut head)?;
        let u64_at = |i: usize| u64::from_le_bytes(head[i..i + 8].try_into().expect("8 bytes"));
        if head[..9] != MAGIC[..] {
            return Err(fail(MegatronProblem::BadMagic { found: head[..9].to_vec() }));
        }
        let version = u64_at(9);
        if version != VERSION {
            return Err(fail(MegatronProblem::BadVersion { found: version }));
        }
        let code = head[17];
        let width = match (code, dtype(code)) {
            (8, _) => ShardFormat::U16,
            (4, _) => ShardFormat::U32,
            (_, Some((name, true))) => {
                return Err(fail(MegatronProblem::UnsupportedTokenType { code, name }));
            }
            (_, Some((name, false))) => {
                return Err(fail(MegatronProblem::NotIntegerTokens { code, name }));
            }
            (_, None) => return Err(fail(MegatronProblem::UnknownDtype { code })),
        };
        let (sequences, documents) = (u64_at(18), u64_at(26));
        let text = sequences
            .checked_mul(12)
            .and_then(|b| b.checked_add(documents.checked_mul(8)?))
            .and_then(|b| b.checked_add(HEADER_BYTES));
        let multimodal = text.and_then(|t| t.checked_add(sequences));
        let size = |expected: Option<u64>| MegatronProblem::IndexSize {
            len,
            expected: expected.unwrap_or(u64::MAX),
            sequences,
            documents,
        };
        if text != Some(len) && multimodal != Some(len) {
            return Err(fail(size(text)));
        }
        if documents == 0 {
            return Err(fail(MegatronProblem::NoDocumentIndices));
        }
        let index = MegatronIndex {
            width,
            sequences,
            documents,
            tokens: bin.len() / width.token_bytes() as u64,
            file,
        };
        if multimodal == Some(len) && text != Some(len) {
            index.check_modes()?;
        }
        index.check_bin(bin)?;
        Ok(index)
    }

    /// The format's name in a checkpoint.
    pub(super) fn name(&self) -> &'static str {
        match self.width {
            ShardFormat::U16 => "megatron-u16",
            ShardFormat::U32 => "megatron-i32",
        }
    }

    /// The tokens' width.
    pub(super) fn width(&self) -> ShardFormat {
        self.width
    }

    /// Tokens in the `.bin`.
    pub(super) fn tokens(&self) -> u64 {
        self.tokens
    }

    fn lengths_at(&self) -> u64 {
        HEADER_BYTES
    }

    fn pointers_at(&self) -> u64 {
        HEADER_BYTES + 4 * self.sequences
    }

    fn documents_at(&self) -> u64 {
        HEADER_BYTES + 12 * self.sequences
    }

    fn fail(&self, problem: MegatronProblem) -> SourceError {
        SourceError::file(self.file.path(), problem)
    }

    /// `count` little-endian words of `W` bytes from `offset`.
    fn words<const W: usize>(&self, offset: u64, count: u64) -> Result<Vec<[u8; W]>, SourceError> {
        let mut bytes = vec![0u8; (count as usize) * W];
        self.file.read_exact_at(offset, &mut bytes)?;
        Ok(bytes.chunks_exact(W).map(|c| c.try_into().expect("W bytes")).collect())
    }

    /// A multimodal index's modes: every sequence must be text (mode 0) to be read as
    /// tokens.
    fn check_modes(&self) -> Result<(), SourceError> {
        let modes = self.words::<1>(self.documents_at() + 8 * self.documents, self.sequences)?;
        match modes.iter().position(|m| m[0] != 0) {
            Some(sequence) => Err(self.fail(MegatronProblem::NotText {
                sequence: sequence as u64,
                mode: modes[sequence][0] as i8,
            })),
            None => Ok(()),
        }
    }

    /// The `.bin`'s size against the index: a whole number of tokens, the first sequence at
    /// 0 and the last ending at the file's end.
    fn check_bin(&self, bin: &SourceFile) -> Result<(), SourceError> {
        let width = self.width.token_bytes() as u64;
        let expected = match self.sequences {
            0 => 0,
            s => {
                let first = self.words::<8>(self.pointers_at(), 1)?[0];
                if i64::from_le_bytes(first) != 0 {
                    let found = i64::from_le_bytes(first);
                    return Err(self.fail(MegatronProblem::Pointer { sequence: 0, found, expected: 0 }));
                }
                let last = i64::from_le_bytes(self.words::<8>(self.pointers_at() + 8 * (s - 1), 1)?[0]);
                let length = i32::from_le_bytes(self.words::<4>(self.lengths_at() + 4 * (s - 1), 1)?[0]);
                (last as u64).wrapping_add((length as i64 as u64).wrapping_mul(width))
            }
        };
        if bin.len() != expected || !bin.len().is_multiple_of(width) {
            return Err(SourceError::file(
                bin.path(),
                MegatronProblem::BinSize { len: bin.len(), expected, width: self.width },
            ));
        }
        Ok(())
    }
}

impl DocumentIndex for MegatronIndex {
    fn file(&self) -> &SourceFile {
        &self.file
    }

    /// Every sequence's length and offset (each offset the lengths before it in bytes, as
    /// `_IndexWriter` writes them), then the document indices (`0`, non-decreasing, the last
    /// `S`): a document starts at its first sequence's first token.
    fn starts(&self) -> Result<Vec<u32>, SourceError> {
        let lengths = self.words::<4>(self.lengths_at(), self.sequences)?;
        let pointers = self.words::<8>(self.pointers_at(), self.sequences)?;
        let width = self.width.token_bytes() as i64;
        // Token offset of each sequence's start, and of the end.
        let mut first_token = Vec::with_capacity(lengths.len() + 1);
        let mut at = 0u64;
        for (sequence, (length, pointer)) in lengths.iter().zip(&pointers).enumerate() {
            let (length, pointer) = (i32::from_le_bytes(*length), i64::from_le_bytes(*pointer));
            // Saturating: a crafted index of absurd lengths is refused, not an overflow.
            let expected = (at as i64).saturating_mul(width);
            if pointer != expected {
                let sequence = sequence as u64;
                return Err(self.fail(MegatronProblem::Pointer { sequence, found: pointer, expected }));
            }
            if length < 0 {
                let sequence = sequence as u64;
                return Err(self.fail(MegatronProblem::NegativeLength { sequence, length }));
            }
            first_token.push(at);
            at = at.saturating_add(length as u64);
        }
        first_token.push(at);
        let indices = self.words::<8>(self.documents_at(), self.documents)?;
        let mut ends = Vec::with_capacity(indices.len().saturating_sub(1));
        for (document, index) in indices.iter().enumerate() {
            let index = i64::from_le_bytes(*index);
            let bad = || MegatronProblem::DocumentIndex {
                document: document as u64,
                index,
                sequences: self.sequences,
            };
            if document == 0 {
                if index != 0 {
                    return Err(self.fail(bad()));
                }
                continue;
            }
            let Some(&end) = usize::try_from(index).ok().and_then(|i| first_token.get(i)) else {
                return Err(self.fail(bad()));
            };
            ends.push(end);
        }
        starts_of_ends(ends, self.tokens).map_err(|problem| {
            self.fail(match problem {
                EndsProblem::Decreasing { document, .. } => MegatronProblem::DocumentIndex {
                    document: document + 1,
                    index: i64::from_le_bytes(indices[document as usize + 1]),
                    sequences: self.sequences,
                },
                EndsProblem::LastNotTokens { .. } => MegatronProblem::DocumentIndex {
                    document: self.documents - 1,
                    index: i64::from_le_bytes(indices[self.documents as usize - 1]),
                    sequences: self.sequences,
                },
            })
        })
    }
}
