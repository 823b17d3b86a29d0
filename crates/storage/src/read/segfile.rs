//! One segment file of a database, opened as the open mode says (mapped, loaded into
//! memory, or offline: read at positions on demand), and the id arrays and implied node
//! ranges read from it.

use super::*;

pub(crate) enum Backing {
    Mapped(memmap2::Mmap),
    Loaded(Vec<u8>),
    Offline(File),
}

/// One open segment file.
pub(crate) struct SegFile {
    pub(crate) path: PathBuf,
    pub(crate) backing: Backing,
    pub(crate) len: u64,
    pub(crate) trailer: Trailer,
}

/// An id index as read: keys `min .. min + n_ids` implied by position, or sorted keys.
pub(crate) enum IdArrays<'a> {
    Implied(i64, ImpliedNodes<'a>),
    Sorted {
        keys: ColumnChunk<'a>,
        nodes: Packed<'a>,
        n: usize,
    },
}

/// The nodes of implied keys, by position: consecutive from a first node (`dense`), or
/// listed (`dense_keys`).
pub(crate) enum ImpliedNodes<'a> {
    Consecutive(u64),
    Listed(Packed<'a>),
}

impl ImpliedNodes<'_> {
    pub(crate) fn get(&self, pos: u64) -> u32 {
        match self {
            ImpliedNodes::Consecutive(first) => (first + pos) as u32,
            ImpliedNodes::Listed(p) => p.get(pos as usize) as u32,
        }
    }
}

impl SegFile {
    /// The node array of an index: the node of each key, bit-packed.
    pub(crate) fn index_nodes(
        &self,
        what: &'static str,
        (nodes, width): (BlobRef, u32),
        n_entries: u64,
    ) -> Result<Packed<'_>, ReadError> {
        let bytes = self.bytes(what)?;
        let slice = nodes.slice(bytes).map_err(|source| ReadError::Format {
            file: self.path.clone(),
            source,
        })?;
        Packed::new(slice, width, n_entries as usize)
            .ok_or_else(|| corrupted(&self.path, "index nodes"))
    }

    /// The two blobs of an index (id or property): sorted keys as a column chunk and the
    /// node of each key bit-packed; also how many entries both hold.
    pub(crate) fn sorted_keys(
        &self,
        what: &'static str,
        (keys, scalar): (BlobRef, quiver_common::ScalarType),
        nodes: (BlobRef, u32),
        n_entries: u64,
    ) -> Result<(ColumnChunk<'_>, Packed<'_>, usize), ReadError> {
        let bytes = self.bytes(what)?;
        let fmt = |source| ReadError::Format {
            file: self.path.clone(),
            source,
        };
        let dtype = quiver_common::DataType::Scalar(scalar);
        let keys = ColumnChunk::open(keys.slice(bytes).map_err(fmt)?, dtype).map_err(fmt)?;
        let nodes = self.index_nodes(what, nodes, n_entries)?;
        let n = keys.len().min(n_entries as usize);
        Ok((keys, nodes, n))
    }

    pub(crate) fn open<F: serde::de::DeserializeOwned>(
        dir: &Path,
        rel: &str,
        mode: OpenMode,
    ) -> Result<(SegFile, F), OpenError> {
        let path = dir.join(rel);
        let io = |source| OpenError::Io {
            path: path.clone(),
            source,
        };
        let fmt = |source| OpenError::Format {
            file: path.clone(),
            source,
        };
        let mut file = File::open(&path).map_err(io)?;
        let len = file.metadata().map_err(io)?.len();
        let (backing, footer_bytes, trailer) = match mode {
            OpenMode::Mapped | OpenMode::Loaded => {
                let backing = if mode == OpenMode::Mapped {
                    // SAFETY: segment files are immutable once published (crate invariant);
                    // nothing truncates or rewrites them while a reader maps them.
                    Backing::Mapped(unsafe { memmap2::Mmap::map(&file) }.map_err(io)?)
                } else {
                    let mut v = Vec::with_capacity(len as usize);
                    file.read_to_end(&mut v).map_err(io)?;
                    Backing::Loaded(v)
                };
                let bytes: &[u8] = match &backing {
                    Backing::Mapped(m) => m,
                    Backing::Loaded(v) => v,
                    Backing::Offline(_) => unreachable!(),
                };
                let (body, footer, trailer) = segment::open_segment(bytes).map_err(fmt)?;
                if mode == OpenMode::Loaded {
                    segment::verify_body(body, &trailer).map_err(fmt)?;
                }
                let footer = footer.to_vec();
                (backing, footer, trailer)
            }
            OpenMode::Offline => {
                if len < TRAILER_LEN as u64 {
                    return Err(OpenError::Corrupted {
                        file: path.clone(),
                        what: "shorter than its trailer".into(),
                    });
                }
                let mut t = [0u8; TRAILER_LEN];
                file.read_exact_at(&mut t, len - TRAILER_LEN as u64)
                    .map_err(io)?;
                let trailer = Trailer::parse(&t).map_err(fmt)?;
                if trailer.footer_len > len - TRAILER_LEN as u64 {
                    return Err(OpenError::Corrupted {
                        file: path.clone(),
                        what: "footer length".into(),
                    });
                }
                let mut footer = vec![0u8; trailer.footer_len as usize];
                file.read_exact_at(&mut footer, len - TRAILER_LEN as u64 - trailer.footer_len)
                    .map_err(io)?;
                if crc32fast::hash(&footer) != trailer.footer_crc {
                    return Err(OpenError::Corrupted {
                        file: path.clone(),
                        what: "footer checksum mismatch".into(),
                    });
                }
                file.seek(SeekFrom::Start(0)).map_err(io)?;
                (Backing::Offline(file), footer, trailer)
            }
        };
        let footer: F =
            serde_json::from_slice(&footer_bytes).map_err(|e| OpenError::Corrupted {
                file: path.clone(),
                what: format!("footer: {e}"),
            })?;
        Ok((
            SegFile {
                path,
                backing,
                len,
                trailer,
            },
            footer,
        ))
    }

    pub(crate) fn bytes(&self, what: &'static str) -> Result<&[u8], ReadError> {
        match &self.backing {
            Backing::Mapped(m) => Ok(m),
            Backing::Loaded(v) => Ok(v),
            Backing::Offline(_) => Err(ReadError::OfflineRandomAccess { what }),
        }
    }

    /// A blob's bytes: borrowed when mapped or loaded, read from the file when offline.
    pub(crate) fn blob(&self, r: BlobRef) -> Result<Cow<'_, [u8]>, ReadError> {
        let fmt = |source| ReadError::Format {
            file: self.path.clone(),
            source,
        };
        match &self.backing {
            Backing::Mapped(m) => Ok(Cow::Borrowed(r.slice(m).map_err(fmt)?)),
            Backing::Loaded(v) => Ok(Cow::Borrowed(r.slice(v).map_err(fmt)?)),
            Backing::Offline(f) => {
                if r.offset.saturating_add(r.len) > self.len {
                    return Err(fmt(quiver_format::FormatError::Corrupted {
                        what: "blob past end of file".into(),
                    }));
                }
                let mut v = vec![0u8; r.len as usize];
                f.read_exact_at(&mut v, r.offset)
                    .map_err(|source| ReadError::Io {
                        path: self.path.clone(),
                        source,
                    })?;
                Ok(Cow::Owned(v))
            }
        }
    }

    /// A sequential reader over a blob (offline streaming).
    pub(crate) fn blob_reader(&self, r: BlobRef) -> Result<Box<dyn Read + '_>, ReadError> {
        match &self.backing {
            // Positioned reads: several streams of one file (offsets, targets, edge ids)
            // advance independently, which a shared file cursor would not allow.
            Backing::Offline(f) => Ok(Box::new(BufReader::with_capacity(
                1 << 20,
                PositionedReader {
                    file: f,
                    pos: r.offset,
                    end: r.offset + r.len,
                },
            ))),
            _ => Ok(Box::new(std::io::Cursor::new(self.blob(r)?))),
        }
    }

    pub(crate) fn verify(&self) -> Result<(), ReadError> {
        let fmt = |source| ReadError::Format {
            file: self.path.clone(),
            source,
        };
        let body_len = self.len - TRAILER_LEN as u64 - self.trailer.footer_len;
        let mut hasher = crc32fast::Hasher::new();
        let mut r = self.blob_reader(BlobRef {
            offset: 0,
            len: body_len,
        })?;
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = r.read(&mut buf).map_err(|source| ReadError::Io {
                path: self.path.clone(),
                source,
            })?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        if hasher.finalize() != self.trailer.body_crc {
            return Err(fmt(quiver_format::FormatError::Corrupted {
                what: "body checksum mismatch".into(),
            }));
        }
        Ok(())
    }

    pub(crate) fn resident_bytes(&self) -> u64 {
        match &self.backing {
            Backing::Loaded(v) => v.len() as u64,
            _ => 0,
        }
    }
}

pub(crate) struct PositionedReader<'a> {
    pub(crate) file: &'a File,
    pub(crate) pos: u64,
    pub(crate) end: u64,
}

impl Read for PositionedReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = (buf.len() as u64).min(self.end - self.pos) as usize;
        if n == 0 {
            return Ok(0);
        }
        let got = self.file.read_at(&mut buf[..n], self.pos)?;
        self.pos += got as u64;
        Ok(got)
    }
}
