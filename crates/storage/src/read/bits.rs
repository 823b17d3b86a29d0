//! Bitmaps over node or edge numbers (deletion files, label tests): dense words or a
//! sparse list, with rank and iteration.

use super::*;

/// A deletion bitmap: a bit per row or CSR entry. In a mapped database it is read in
/// place from its file (an open reads none of it: after 10% of social 1 was
/// detach-deleted, 7.6 MB of relationship bitmaps made an open 2x a fresh import's);
/// otherwise, and once changed, its words are held.
#[derive(Debug, Clone, Default)]
pub struct Bits {
    pub(crate) words: Words,
    pub(crate) len: u64,
}

#[derive(Clone)]
pub(crate) enum Words {
    Owned(Vec<u64>),
    /// Little-endian words at `offset` of a mapped deletion file (shared by its maps).
    Mapped {
        map: Arc<memmap2::Mmap>,
        offset: usize,
        n: usize,
    },
}

impl Default for Words {
    fn default() -> Self {
        Words::Owned(Vec::new())
    }
}

impl std::fmt::Debug for Words {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Words::Owned(w) => write!(f, "{} words", w.len()),
            Words::Mapped { n, .. } => write!(f, "{n} mapped words"),
        }
    }
}

impl Words {
    pub(crate) fn len(&self) -> usize {
        match self {
            Words::Owned(w) => w.len(),
            Words::Mapped { n, .. } => *n,
        }
    }

    /// Word `k` (0 past the end).
    #[inline]
    pub(crate) fn get(&self, k: usize) -> u64 {
        match self {
            Words::Owned(w) => w.get(k).copied().unwrap_or(0),
            Words::Mapped { map, offset, n } if k < *n => {
                let at = offset + k * 8;
                u64::from_le_bytes(map[at..at + 8].try_into().unwrap_or([0; 8]))
            }
            Words::Mapped { .. } => 0,
        }
    }

    /// The words, held (a mapped map is copied once, to be changed).
    pub(crate) fn owned(&mut self) -> &mut Vec<u64> {
        if let Words::Mapped { .. } = self {
            *self = Words::Owned((0..self.len()).map(|k| self.get(k)).collect());
        }
        match self {
            Words::Owned(w) => w,
            Words::Mapped { .. } => unreachable!("made owned above"),
        }
    }
}

impl Bits {
    /// `len` bits, none set.
    pub fn new(len: u64) -> Bits {
        Bits {
            words: Words::Owned(vec![0; len.div_ceil(64) as usize]),
            len,
        }
    }

    #[inline]
    pub fn get(&self, i: u64) -> bool {
        self.words.get((i / 64) as usize) >> (i % 64) & 1 == 1
    }

    pub fn set(&mut self, i: u64) {
        if i < self.len {
            self.words.owned()[(i / 64) as usize] |= 1 << (i % 64);
        }
    }

    pub fn clear(&mut self, i: u64) {
        if i < self.len {
            self.words.owned()[(i / 64) as usize] &= !(1 << (i % 64));
        }
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The words (copied out of a mapped file).
    pub fn words(&self) -> Cow<'_, [u64]> {
        match &self.words {
            Words::Owned(w) => Cow::Borrowed(w),
            m => Cow::Owned((0..m.len()).map(|k| m.get(k)).collect()),
        }
    }

    /// Appends, for each bit of `a..b`, whether it is clear (a live row of a deletion
    /// bitmap), a word at a time.
    pub fn clear_into(&self, a: u64, b: u64, out: &mut Vec<bool>) {
        out.reserve((b - a) as usize);
        let mut i = a;
        while i < b {
            let w = self.words.get((i / 64) as usize);
            let (from, to) = (i % 64, (b - (i - i % 64)).min(64));
            out.extend((from..to).map(|k| w >> k & 1 == 0));
            i += to - from;
        }
    }

    /// The first clear bit in `a..b` (`b` when every bit there is set), a word at a
    /// time: a scan skips a run of deleted rows at 64 a step.
    pub fn next_clear(&self, a: u64, b: u64) -> u64 {
        let mut i = a;
        while i < b {
            // Set bits from `i` on read as zeros after the inversion.
            let w = !self.words.get((i / 64) as usize) >> (i % 64);
            if w != 0 {
                return (i + w.trailing_zeros() as u64).min(b);
            }
            i += 64 - i % 64;
        }
        b
    }

    /// Set bits in `a..b`.
    pub fn count_range(&self, a: u64, b: u64) -> u64 {
        (a..b.min(self.len)).filter(|&i| self.get(i)).count() as u64
    }

    pub fn count(&self) -> u64 {
        (0..self.words.len())
            .map(|k| self.words.get(k).count_ones() as u64)
            .sum()
    }

    /// Reads the maps of a deletion file.
    pub(crate) fn open(
        dir: &Path,
        meta: &crate::manifest::DeletedMeta,
        mode: OpenMode,
    ) -> Result<Vec<Bits>, OpenError> {
        let rel = &meta.file.file;
        let (file, f): (SegFile, crate::manifest::BitmapFooter) = SegFile::open(dir, rel, mode)?;
        let n = f.len.div_ceil(64) as usize;
        let mut out = Vec::new();
        if let Backing::Mapped(map) = file.backing {
            // Read in place: the bounds checked now, the bits when a read asks.
            let map = Arc::new(map);
            for r in &f.maps {
                let bytes = r.slice(&map).map_err(|e| OpenError::Corrupted {
                    file: dir.join(rel),
                    what: e.to_string(),
                })?;
                if (bytes.len() as u64) < n as u64 * 8 {
                    return Err(OpenError::Corrupted {
                        file: dir.join(rel),
                        what: "deletion bitmap shorter than its length".into(),
                    });
                }
                out.push(Bits {
                    words: Words::Mapped {
                        map: map.clone(),
                        offset: r.offset as usize,
                        n,
                    },
                    len: f.len,
                });
            }
            return Ok(out);
        }
        for r in &f.maps {
            let bytes = file.blob(*r).map_err(|e| OpenError::Corrupted {
                file: dir.join(rel),
                what: e.to_string(),
            })?;
            if (bytes.len() as u64) < f.len.div_ceil(64) * 8 {
                return Err(OpenError::Corrupted {
                    file: dir.join(rel),
                    what: "deletion bitmap shorter than its length".into(),
                });
            }
            let words = bytes
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect();
            out.push(Bits {
                words: Words::Owned(words),
                len: f.len,
            });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_clear_skips_runs_of_set_bits() {
        let mut b = Bits::new(1000);
        for i in 10..700 {
            b.set(i);
        }
        b.set(999);
        // Every start, against a bit-by-bit search.
        for a in 0..1000 {
            for hi in [a, a + 1, 64, 128, 640, 700, 701, 999, 1000] {
                if hi < a {
                    continue;
                }
                let want = (a..hi).find(|&i| !b.get(i)).unwrap_or(hi);
                assert_eq!(b.next_clear(a, hi), want, "next_clear({a}, {hi})");
            }
        }
    }
}
