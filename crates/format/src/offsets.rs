//! What both string encodings of a column chunk (plain and FSST) stand on: the
//! bounds-checked reader over a chunk's bytes (`Cursor`) and string offsets, flat or
//! blocked (`encode_offsets`, `Offsets`). `column` and `fsst` both use this; it uses
//! neither, which keeps the dependency one way (column -> fsst -> offsets).

use crate::bitpack::{self, bits_for, Packed};
use crate::error::{corrupted, FormatError};

/// Offsets per block of blocked offsets (a power of two).
pub(crate) const OFFSET_BLOCK_SHIFT: u32 = 4;

/// Writes `n` non-decreasing offsets blocked: the first offset of every block of
/// 2^OFFSET_BLOCK_SHIFT packed at one width, then each offset minus its block's first at
/// another (`u8 base_width, u8 rel_width, 6 pad, bases, rel`). Offsets grow by a value
/// length each, so within a block they span a few hundred bytes: 8-12 bits an offset
/// where flat offsets take 20-30, and a read is still two O(1) loads.
pub(crate) fn encode_offsets(offsets: impl Iterator<Item = u64> + Clone, out: &mut Vec<u8>) {
    let block = 1usize << OFFSET_BLOCK_SHIFT;
    let (mut max_base, mut max_rel, mut base) = (0u64, 0u64, 0u64);
    for (i, v) in offsets.clone().enumerate() {
        if i % block == 0 {
            base = v;
            max_base = v;
        }
        max_rel = max_rel.max(v.wrapping_sub(base));
    }
    let (bw, rw) = (bits_for(max_base), bits_for(max_rel));
    out.push(bw as u8);
    out.push(rw as u8);
    out.extend_from_slice(&[0; 6]);
    bitpack::pack(offsets.clone().step_by(block), bw, out);
    let mut base = 0;
    bitpack::pack(
        offsets.enumerate().map(|(i, v)| {
            if i % block == 0 {
                base = v;
            }
            v - base
        }),
        rw,
        out,
    );
}

pub(crate) struct Cursor<'a> {
    pub(crate) bytes: &'a [u8],
    pub(crate) pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], FormatError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| corrupted(format!("column chunk truncated at byte {}", self.pos)))?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    #[inline]
    pub(crate) fn u8(&mut self) -> Result<u8, FormatError> {
        Ok(self.take(1)?[0])
    }
    #[inline]
    pub(crate) fn u32(&mut self) -> Result<u32, FormatError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().unwrap_or([0; 4]),
        ))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, FormatError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().unwrap_or([0; 8]),
        ))
    }
    #[inline]
    pub(crate) fn packed(&mut self, n: usize, width: u32) -> Result<Packed<'a>, FormatError> {
        if width > 64 {
            return Err(corrupted(format!("bit width {width}")));
        }
        let bytes = self.take(bitpack::packed_len(n, width))?;
        Packed::new(bytes, width, n).ok_or_else(|| corrupted("packed array"))
    }
}

/// Offsets of `n` strings (`n + 1` entries): flat, or blocked (see [`encode_offsets`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Offsets<'a> {
    Flat(Packed<'a>),
    Blocked { bases: Packed<'a>, rel: Packed<'a> },
}

impl<'a> Offsets<'a> {
    /// Reads `n` offsets from the cursor, in the layout `blocked` says.
    pub(crate) fn open(c: &mut Cursor<'a>, n: usize, blocked: bool) -> Result<Self, FormatError> {
        if !blocked {
            let w = c.take(8)?[0] as u32;
            return Ok(Offsets::Flat(c.packed(n, w)?));
        }
        let h = c.take(8)?;
        let (bw, rw) = (h[0] as u32, h[1] as u32);
        let bases = c.packed(n.div_ceil(1 << OFFSET_BLOCK_SHIFT), bw)?;
        let rel = c.packed(n, rw)?;
        Ok(Offsets::Blocked { bases, rel })
    }

    #[inline]
    pub(crate) fn get(&self, i: usize) -> u64 {
        match self {
            Offsets::Flat(p) => p.get(i),
            Offsets::Blocked { bases, rel } => {
                bases.get(i >> OFFSET_BLOCK_SHIFT).wrapping_add(rel.get(i))
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Offsets::Flat(p) => p.len(),
            Offsets::Blocked { rel, .. } => rel.len(),
        }
    }
}
