//! Reading a checkpoint's or state's JSON text form: one error for text that does not read
//! ([`SourceError::BadCheckpointText`], naming the line and column), and the words for a
//! text of another version.

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::error::source::SourceError;
use crate::error::Result;

/// `text` read as JSON into a `T`; where it does not read,
/// [`SourceError::BadCheckpointText`] at serde's line and column, saying `why(bare)` (`bare`
/// serde's message without its position).
pub(crate) fn read_text<T: DeserializeOwned>(
    text: &str,
    why: impl FnOnce(&str) -> String,
) -> Result<T> {
    serde_json::from_str(text).map_err(|e| {
        let (line, column) = (e.line(), e.column());
        let message = e.to_string();
        let bare = message
            .strip_suffix(&format!(" at line {line} column {column}"))
            .unwrap_or(&message);
        let why = why(bare);
        SourceError::BadCheckpointText { line, column, why }.into()
    })
}

/// Where `text` is a `kind` (`"a checkpoint"`) of a version other than `current`, why it
/// did not read: that version, and serde's message `bare`.
pub(crate) fn other_version(text: &str, kind: &str, current: u32, bare: &str) -> Option<String> {
    let version = text_version(text).filter(|&v| v != current)?;
    Some(format!(
        "{kind} of version {version}, which this build (version {current}) cannot read: {bare}"
    ))
}

/// The `version` key of a checkpoint's text, when it is JSON with one.
fn text_version(text: &str) -> Option<u32> {
    #[derive(Deserialize)]
    struct Versioned {
        version: u32,
    }
    serde_json::from_str::<Versioned>(text)
        .ok()
        .map(|v| v.version)
}
