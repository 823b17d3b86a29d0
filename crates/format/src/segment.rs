//! Framing of a segment file: a body of blobs, a JSON footer that says what the blobs
//! are, and a fixed 28-byte trailer:
//!
//! ```text
//! [blob 0][blob 1]...[footer JSON][footer_len u64][footer_crc u32][body_crc u32][version u32]["QUIVSEG\0"]
//! ```
//!
//! The footer is read first (from the end), so a mapped open touches two pages; the body
//! checksum covers every blob and is verified by a loaded open or `quiver check`.

use crate::error::{corrupted, FormatError};
use crate::FORMAT_VERSION;
use serde::{Deserialize, Serialize};
use std::io::{self, Write};

pub const MAGIC: &[u8; 8] = b"QUIVSEG\0";
pub const TRAILER_LEN: usize = 28;

/// Where a blob lives in its file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct BlobRef {
    pub offset: u64,
    pub len: u64,
}

impl BlobRef {
    /// The blob's bytes within the whole file, or `Corrupted` if out of range.
    pub fn slice<'a>(&self, file: &'a [u8]) -> Result<&'a [u8], FormatError> {
        let end = self
            .offset
            .checked_add(self.len)
            .ok_or_else(|| corrupted("blob range"))?;
        if end as usize > file.len() {
            return Err(corrupted(format!(
                "blob {}..{} past end of file ({} bytes)",
                self.offset,
                end,
                file.len()
            )));
        }
        Ok(&file[self.offset as usize..end as usize])
    }
}

/// Writes blobs and then the footer; checksums as it goes.
pub struct SegmentWriter<W: Write> {
    out: W,
    crc: crc32fast::Hasher,
    pos: u64,
}

impl<W: Write> SegmentWriter<W> {
    pub fn new(out: W) -> Self {
        SegmentWriter {
            out,
            crc: crc32fast::Hasher::new(),
            pos: 0,
        }
    }

    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Writes raw bytes as part of the current blob (streaming writers).
    pub fn write_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.out.write_all(bytes)?;
        self.crc.update(bytes);
        self.pos += bytes.len() as u64;
        Ok(())
    }

    /// Writes a whole blob.
    pub fn write_blob(&mut self, bytes: &[u8]) -> io::Result<BlobRef> {
        let offset = self.pos;
        self.write_raw(bytes)?;
        Ok(BlobRef {
            offset,
            len: bytes.len() as u64,
        })
    }

    /// Writes the footer and trailer; returns the writer and the file length.
    pub fn finish<F: Serialize>(mut self, footer: &F) -> io::Result<(W, u64)> {
        let body_crc = self.crc.clone().finalize();
        let json = serde_json::to_vec(footer).map_err(io::Error::other)?;
        let footer_crc = crc32fast::hash(&json);
        self.out.write_all(&json)?;
        self.out.write_all(&(json.len() as u64).to_le_bytes())?;
        self.out.write_all(&footer_crc.to_le_bytes())?;
        self.out.write_all(&body_crc.to_le_bytes())?;
        self.out.write_all(&FORMAT_VERSION.to_le_bytes())?;
        self.out.write_all(MAGIC)?;
        let len = self.pos + json.len() as u64 + TRAILER_LEN as u64;
        Ok((self.out, len))
    }
}

/// What the trailer says.
#[derive(Debug, Clone, Copy)]
pub struct Trailer {
    pub footer_len: u64,
    pub footer_crc: u32,
    pub body_crc: u32,
    pub version: u32,
}

impl Trailer {
    pub fn parse(t: &[u8]) -> Result<Trailer, FormatError> {
        if t.len() != TRAILER_LEN || &t[20..28] != MAGIC {
            return Err(corrupted("not a quiver segment (bad magic)"));
        }
        let u32_at = |o: usize| u32::from_le_bytes([t[o], t[o + 1], t[o + 2], t[o + 3]]);
        let trailer = Trailer {
            footer_len: u64::from_le_bytes(t[0..8].try_into().map_err(|_| corrupted("trailer"))?),
            footer_crc: u32_at(8),
            body_crc: u32_at(12),
            version: u32_at(16),
        };
        if trailer.version > FORMAT_VERSION {
            return Err(FormatError::UnsupportedVersion {
                found: trailer.version,
                supported: FORMAT_VERSION,
            });
        }
        Ok(trailer)
    }
}

/// Splits a whole segment file into (body, footer JSON), checking the footer checksum.
pub fn open_segment(file: &[u8]) -> Result<(&[u8], &[u8], Trailer), FormatError> {
    if file.len() < TRAILER_LEN {
        return Err(corrupted(format!(
            "segment of {} bytes is shorter than its trailer",
            file.len()
        )));
    }
    let t = Trailer::parse(&file[file.len() - TRAILER_LEN..])?;
    let rest = file.len() - TRAILER_LEN;
    if t.footer_len as usize > rest {
        return Err(corrupted("footer length past start of file"));
    }
    let body_len = rest - t.footer_len as usize;
    let footer = &file[body_len..rest];
    if crc32fast::hash(footer) != t.footer_crc {
        return Err(corrupted("footer checksum mismatch"));
    }
    Ok((&file[..body_len], footer, t))
}

/// Verifies the body checksum (reads every byte).
pub fn verify_body(body: &[u8], t: &Trailer) -> Result<(), FormatError> {
    if crc32fast::hash(body) != t.body_crc {
        return Err(corrupted("body checksum mismatch"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_round_trip_and_corruption() {
        let mut w = SegmentWriter::new(Vec::new());
        let a = w.write_blob(b"hello").unwrap();
        let b = w.write_blob(b"world!").unwrap();
        let (file, len) = w.finish(&vec![a, b]).unwrap();
        assert_eq!(file.len() as u64, len);
        let (body, footer, t) = open_segment(&file).unwrap();
        verify_body(body, &t).unwrap();
        let refs: Vec<BlobRef> = serde_json::from_slice(footer).unwrap();
        assert_eq!(refs[1].slice(&file).unwrap(), b"world!");
        let mut bad = file.clone();
        bad[2] ^= 1;
        let (body, _, t) = open_segment(&bad).unwrap();
        assert!(verify_body(body, &t).is_err());
        let mut bad = file.clone();
        let n = bad.len();
        bad[n - 30] ^= 1;
        assert!(open_segment(&bad).is_err());
        for cut in 0..file.len() {
            assert!(open_segment(&file[..cut]).is_err() || cut == file.len());
        }
    }
}
