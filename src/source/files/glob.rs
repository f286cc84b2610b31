//! File-name patterns: `*` and `?` in a path's last component, matches sorted by name.

use std::path::{Path, PathBuf};

use crate::error::source::{FileProblem, SourceError};

/// The files `pattern` names, sorted. `*` matches any run of characters, `?` any one,
/// in the last component only (`data/fineweb_train_*.bin`); names starting with `.` match
/// only a pattern that starts with `.`. A pattern without wildcards names itself.
pub(crate) fn expand(pattern: &Path) -> Result<Vec<PathBuf>, SourceError> {
    let bad = |why| SourceError::BadPattern {
        pattern: pattern.to_owned(),
        why,
    };
    let text = pattern
        .to_str()
        .ok_or_else(|| bad("it is not valid UTF-8"))?;
    let is_wild = |s: &str| s.contains(['*', '?']);
    if !is_wild(text) {
        return Ok(vec![pattern.to_owned()]);
    }
    let name = pattern
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| is_wild(n))
        .ok_or_else(|| bad("wildcards are supported in the file name only"))?;
    let dir = match pattern.parent() {
        Some(p) if p.as_os_str().is_empty() => Path::new("."),
        Some(p) => p,
        None => Path::new("."),
    };
    if dir.to_str().is_some_and(is_wild) {
        return Err(bad("wildcards are supported in the file name only"));
    }
    let entries = std::fs::read_dir(dir).map_err(|e| SourceError::file(dir, FileProblem::Io(e)))?;
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| SourceError::file(dir, FileProblem::Io(e)))?;
        let file_name = entry.file_name();
        let Some(candidate) = file_name.to_str() else {
            continue;
        };
        if candidate.starts_with('.') && !name.starts_with('.') {
            continue;
        }
        if matches(name.as_bytes(), candidate.as_bytes()) {
            found.push(pattern.with_file_name(candidate));
        }
    }
    if found.is_empty() {
        return Err(SourceError::NoMatch {
            pattern: pattern.to_owned(),
        });
    }
    found.sort();
    Ok(found)
}

/// Whether `name` matches `pattern` (`*`: any run, `?`: any one byte of a character).
fn matches(pattern: &[u8], name: &[u8]) -> bool {
    // The classic greedy match with one backtrack point: linear for one `*`, and never
    // worse than quadratic.
    let (mut p, mut n) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, n));
                p += 1;
            }
            Some(&c) if c == b'?' || c == name[n] => {
                if c == b'?' {
                    // Skip a whole UTF-8 character.
                    n += utf8_len(name[n]);
                } else {
                    n += 1;
                }
                p += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&c| c == b'*')
}

fn utf8_len(first: u8) -> usize {
    match first {
        0xF0..=0xFF => 4,
        0xE0..=0xEF => 3,
        0xC0..=0xDF => 2,
        _ => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn wildcards() {
        let m = |p: &str, n: &str| matches(p.as_bytes(), n.as_bytes());
        assert!(m("*.bin", "a.bin"));
        assert!(m("train_*.bin", "train_000001.bin"));
        assert!(!m("train_*.bin", "val_000001.bin"));
        assert!(m("a?c", "abc"));
        assert!(m("a?c", "aéc"));
        assert!(!m("a?c", "ac"));
        assert!(m("*", ""));
        assert!(m("**x*", "aaxbb"));
        assert!(!m("*.bin", "a.bin.tmp"));
        assert!(m("*a*b", "xaxaxb"));
    }
}
