//! Writers of Megatron-LM's, datatrove's and numpy's token files for the format tests,
//! each following its project's own writer line by line (cited at each): what those
//! projects' tools leave on disk, byte for byte.

use std::path::{Path, PathBuf};

/// Megatron-LM's `IndexedDatasetBuilder` + `_IndexWriter`
/// (`megatron/core/datasets/indexed_dataset.py`): `add_document(tokens, lengths)` for each
/// document (its sequences' lengths), then `finalize`. `code` is the `DType` code (8
/// `uint16`, 4 `int32`), `modes` a multimodal dataset's mode per sequence.
pub struct MegatronWriter {
    prefix: PathBuf,
    code: u8,
    data: Vec<u8>,
    sequence_lengths: Vec<i32>,
    document_indices: Vec<i64>,
    pub modes: Option<Vec<i8>>,
}

impl MegatronWriter {
    pub fn new(prefix: &Path, code: u8) -> Self {
        MegatronWriter {
            prefix: prefix.to_owned(),
            code,
            data: Vec::new(),
            sequence_lengths: Vec::new(),
            // `self.document_indices = [0]`
            document_indices: vec![0],
            modes: None,
        }
    }

    /// `add_document`: the tokens (`numpy.array(tensor, dtype=self.dtype).tobytes()`), the
    /// sequences' lengths, then the document's end index.
    pub fn add_document(&mut self, tokens: &[u32], lengths: &[usize]) {
        assert_eq!(lengths.iter().sum::<usize>(), tokens.len());
        for &t in tokens {
            match self.code {
                8 => self.data.extend(u16::try_from(t).unwrap().to_le_bytes()),
                4 => self.data.extend(i32::try_from(t).unwrap().to_le_bytes()),
                c => panic!("code {c}"),
            }
        }
        self.sequence_lengths
            .extend(lengths.iter().map(|&l| l as i32));
        self.document_indices
            .push(self.sequence_lengths.len() as i64);
        if let Some(modes) = &mut self.modes {
            modes.extend(std::iter::repeat_n(0, lengths.len()));
        }
    }

    /// `finalize`: the `.bin`, then `_IndexWriter`'s header and `write`.
    pub fn finalize(self) -> PathBuf {
        let (bin, idx) = (
            self.prefix.with_extension("bin"),
            self.prefix.with_extension("idx"),
        );
        std::fs::write(&bin, &self.data).unwrap();
        let size = if self.code == 8 { 2 } else { 4 };
        let mut out = b"MMIDIDX\x00\x00".to_vec();
        out.extend(1u64.to_le_bytes());
        out.push(self.code);
        out.extend((self.sequence_lengths.len() as u64).to_le_bytes());
        out.extend((self.document_indices.len() as u64).to_le_bytes());
        for l in &self.sequence_lengths {
            out.extend(l.to_le_bytes());
        }
        // `_sequence_pointers`: each sequence's byte offset.
        let mut ptr = 0i64;
        for &l in &self.sequence_lengths {
            out.extend(ptr.to_le_bytes());
            ptr += i64::from(l) * size;
        }
        for d in &self.document_indices {
            out.extend(d.to_le_bytes());
        }
        if let Some(modes) = &self.modes {
            out.extend(modes.iter().map(|&m| m as u8));
        }
        std::fs::write(&idx, out).unwrap();
        bin
    }
}

/// datatrove's `TokenizedFile` (`datatrove/pipeline/tokens/tokenizer.py`): `write` packs
/// each document's tokens as `"<H"` (`token_size` 2) or `"<I"` (4) and appends its end (in
/// tokens); `close` writes the ends to `<name>.index` as `"<Q"`.
pub fn datatrove(path: &Path, documents: &[Vec<u32>], token_size: usize) -> PathBuf {
    let mut tokens = Vec::new();
    let mut doc_ends = Vec::new();
    let mut write_idx = 0u64;
    for doc in documents {
        for &t in doc {
            match token_size {
                2 => tokens.extend(u16::try_from(t).unwrap().to_le_bytes()),
                _ => tokens.extend(t.to_le_bytes()),
            }
        }
        write_idx += doc.len() as u64;
        doc_ends.push(write_idx);
    }
    std::fs::write(path, tokens).unwrap();
    let index: Vec<u8> = doc_ends.iter().flat_map(|e| e.to_le_bytes()).collect();
    let mut index_path = path.as_os_str().to_owned();
    index_path.push(".index");
    std::fs::write(PathBuf::from(index_path), index).unwrap();
    path.to_owned()
}

/// numpy's `write_array` (`numpy/lib/format.py`): magic, version, the header dict padded
/// with spaces so that magic + length + header is a multiple of 64 (`ARRAY_ALIGN`), ended
/// by a newline, then the array's bytes. `descr` as numpy writes it (`'<u2'`, ...).
pub fn npy(path: &Path, descr: &str, shape: &str, major: u8, data: &[u8]) {
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    let prelude = if major == 1 { 10 } else { 12 };
    let mut header = dict.into_bytes();
    let total = prelude + header.len() + 1;
    header.extend(std::iter::repeat_n(
        b' ',
        total.next_multiple_of(64) - total,
    ));
    header.push(b'\n');
    let mut out = b"\x93NUMPY".to_vec();
    out.extend([major, 0]);
    if major == 1 {
        out.extend((header.len() as u16).to_le_bytes());
    } else {
        out.extend((header.len() as u32).to_le_bytes());
    }
    out.extend(header);
    out.extend(data);
    std::fs::write(path, out).unwrap();
}
