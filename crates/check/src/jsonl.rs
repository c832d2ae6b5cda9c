//! Reading and writing a [`History`] as JSON lines, one [`Op`] per line.
//!
//! Reading validates every operation ([`Op::validate`]) so that a bad history fails loudly at the line that is
//! wrong instead of being checked under a wrong interpretation. Blank lines are skipped.

use crate::history::{History, Op, OpError};
use std::io::{self, BufRead, Write};

/// Why a JSON-lines history could not be read; `line` is 1-based.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("line {line}: cannot read: {source}")]
    Io { line: usize, source: io::Error },
    #[error("line {line}, column {column}: {message}")]
    Json { line: usize, column: usize, message: String },
    #[error("line {line}: {source}")]
    Invalid { line: usize, source: OpError },
}

impl History {
    /// Parses a JSON-lines history, rejecting the first line that is malformed or violates the format.
    pub fn read_jsonl(reader: impl BufRead) -> Result<History, HistoryError> {
        let mut ops = Vec::new();
        for (index, text) in reader.lines().enumerate() {
            let line = index + 1;
            let text = text.map_err(|source| HistoryError::Io { line, source })?;
            if !text.trim().is_empty() {
                ops.push(parse_line(line, &text)?);
            }
        }
        Ok(History { ops })
    }

    /// Writes one JSON object per line, in the order of `ops`.
    pub fn write_jsonl(&self, mut writer: impl Write) -> io::Result<()> {
        for op in &self.ops {
            serde_json::to_writer(&mut writer, op)?;
            writer.write_all(b"\n")?;
        }
        writer.flush()
    }
}

fn parse_line(line: usize, text: &str) -> Result<Op, HistoryError> {
    let op: Op = serde_json::from_str(text).map_err(|err| json_error(line, &err))?;
    op.validate().map_err(|source| HistoryError::Invalid { line, source })?;
    Ok(op)
}

/// serde_json appends "at line 1 column N" (the line within the one-line document); the file line replaces it.
fn json_error(line: usize, err: &serde_json::Error) -> HistoryError {
    let full = err.to_string();
    let position = format!(" at line {} column {}", err.line(), err.column());
    let message = full.strip_suffix(&position).unwrap_or(&full).to_string();
    HistoryError::Json { line, column: err.column(), message }
}
