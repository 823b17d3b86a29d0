//! The rejects file: one CSV line per skipped row (file, line, column, reason, message,
//! raw row), streamed to disk so that collecting rejects costs no memory.

use crate::error::{IoAt, ReadError};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

pub struct Rejects {
    path: PathBuf,
    writer: Option<csv::Writer<BufWriter<File>>>,
    pub count: u64,
}

impl Rejects {
    pub fn new(path: PathBuf) -> Self {
        Rejects {
            path,
            writer: None,
            count: 0,
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn write(
        &mut self,
        file: &Path,
        line: u64,
        column: u64,
        reason: &str,
        message: &str,
        raw: &[u8],
    ) -> Result<(), ReadError> {
        if self.writer.is_none() {
            if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).at(dir)?;
            }
            let f = File::create(&self.path).at(&self.path)?;
            let mut w = csv::Writer::from_writer(BufWriter::new(f));
            w.write_record(["file", "line", "column", "reason", "message", "raw"])
                .map_err(|e| ReadError::Io {
                    path: self.path.clone(),
                    source: e.into(),
                })?;
            self.writer = Some(w);
        }
        let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let w = self.writer.as_mut().expect("writer was just created");
        w.write_record([
            file.display().to_string().as_bytes(),
            (line + 1).to_string().as_bytes(),
            (column + 1).to_string().as_bytes(),
            reason.as_bytes(),
            message.as_bytes(),
            raw,
        ])
        .map_err(|e| ReadError::Io {
            path: self.path.clone(),
            source: e.into(),
        })?;
        self.count += 1;
        Ok(())
    }

    pub fn finish(&mut self) -> Result<(), ReadError> {
        if let Some(w) = self.writer.as_mut() {
            w.flush().at(&self.path)?;
        }
        Ok(())
    }
}
