//! Fixed-width bit-packing: value `i` occupies bits `i*w .. i*w+w` of a little-endian bit
//! stream. Random access reads one unaligned `u64` (widths up to 56 bits) or two (57..64),
//! so a packed array is as fast to index as a plain one once it is in cache, at a
//! fraction of the bytes. Buffers carry 8 bytes of zero padding so that the last value can
//! be read with a single unaligned load.

use std::io::{self, Write};

/// Bytes of zero padding after the packed bits.
pub const PADDING: usize = 8;

/// Bits needed to represent `v` (0 for 0).
#[inline]
pub fn bits_for(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// Bytes used by `n` values of `width` bits, padding included.
#[inline]
pub fn packed_len(n: usize, width: u32) -> usize {
    (n * width as usize).div_ceil(8) + PADDING
}

/// Packs `values` at `width` bits each. Each value must fit in `width` bits.
pub fn pack(values: impl IntoIterator<Item = u64>, width: u32, out: &mut Vec<u8>) {
    let mut w = BitWriter::new(width);
    for v in values {
        w.push_to_vec(v, out);
    }
    w.finish_to_vec(out);
}

/// Streaming packer: push values, then finish (which writes the padding).
#[derive(Debug)]
pub struct BitWriter {
    width: u32,
    acc: u128,
    acc_bits: u32,
    bytes_written: u64,
}

impl BitWriter {
    pub fn new(width: u32) -> Self {
        assert!(width <= 64);
        BitWriter {
            width,
            acc: 0,
            acc_bits: 0,
            bytes_written: 0,
        }
    }

    #[inline]
    fn push_acc(&mut self, v: u64) -> Option<u64> {
        debug_assert!(
            self.width == 64 || v >> self.width == 0,
            "value {v} wider than {} bits",
            self.width
        );
        if self.width == 0 {
            return None;
        }
        self.acc |= (v as u128) << self.acc_bits;
        self.acc_bits += self.width;
        if self.acc_bits >= 64 {
            let word = self.acc as u64;
            self.acc >>= 64;
            self.acc_bits -= 64;
            self.bytes_written += 8;
            Some(word)
        } else {
            None
        }
    }

    #[inline]
    pub fn push_to_vec(&mut self, v: u64, out: &mut Vec<u8>) {
        if let Some(word) = self.push_acc(v) {
            out.extend_from_slice(&word.to_le_bytes());
        }
    }

    #[inline]
    pub fn push<W: Write>(&mut self, v: u64, out: &mut W) -> io::Result<()> {
        if let Some(word) = self.push_acc(v) {
            out.write_all(&word.to_le_bytes())?;
        }
        Ok(())
    }

    fn tail(&mut self) -> Vec<u8> {
        let n = (self.acc_bits as usize).div_ceil(8);
        let mut t = (self.acc as u64).to_le_bytes()[..n].to_vec();
        t.extend_from_slice(&[0u8; PADDING]);
        self.bytes_written += t.len() as u64;
        self.acc = 0;
        self.acc_bits = 0;
        t
    }

    pub fn finish_to_vec(mut self, out: &mut Vec<u8>) {
        let t = self.tail();
        out.extend_from_slice(&t);
    }

    /// Writes the remaining bits and the padding; returns the total bytes written.
    pub fn finish<W: Write>(mut self, out: &mut W) -> io::Result<u64> {
        let t = self.tail();
        out.write_all(&t)?;
        Ok(self.bytes_written)
    }
}

/// A validated view of packed values.
#[derive(Debug, Clone, Copy)]
pub struct Packed<'a> {
    bytes: &'a [u8],
    width: u32,
    len: usize,
}

impl<'a> Packed<'a> {
    /// Checks that `bytes` can hold `len` values of `width` bits plus padding.
    pub fn new(bytes: &'a [u8], width: u32, len: usize) -> Option<Self> {
        if width > 64 || bytes.len() < packed_len(len, width) {
            return None;
        }
        Some(Packed { bytes, width, len })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn width(&self) -> u32 {
        self.width
    }

    /// Hints the CPU to bring in entry `i`'s bytes, for a reader that will get it soon
    /// (a graph search names the nodes it will expand a few steps ahead: their
    /// adjacency is otherwise a cache miss each, one after the other).
    #[inline]
    pub fn prefetch(&self, i: usize) {
        #[cfg(target_arch = "x86_64")]
        if let Some(b) = self.bytes.get(i * self.width as usize / 8) {
            // SAFETY: a prefetch is a hint: it reads nothing into the program, never
            // faults and changes no memory, whatever the address; SSE, which it needs,
            // is in every x86_64.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    b as *const u8 as *const i8,
                );
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = i;
    }

    /// Value `i`. Panics (debug) / is unspecified (release) past `len`: callers check.
    #[inline]
    pub fn get(&self, i: usize) -> u64 {
        debug_assert!(i < self.len);
        let w = self.width as usize;
        if w == 0 {
            return 0;
        }
        let bit = i * w;
        let byte = bit / 8;
        let shift = (bit % 8) as u32;
        let lo = read_u64(&self.bytes[byte..byte + 8]);
        if w + shift as usize <= 64 {
            let v = lo >> shift;
            if w == 64 {
                v
            } else {
                v & ((1u64 << w) - 1)
            }
        } else {
            // Width 57..64 straddles nine bytes.
            let hi = self.bytes[byte + 8] as u64;
            let v = (lo >> shift) | (hi << (64 - shift));
            if w == 64 {
                v
            } else {
                v & ((1u64 << w) - 1)
            }
        }
    }

    /// Decodes values `start..start+out.len()` into `out`.
    pub fn decode_into(&self, start: usize, out: &mut [u64]) {
        let mut k = 0;
        self.for_each_in(start, start + out.len(), |v| {
            out[k] = v;
            k += 1;
        });
    }

    /// Calls `f` with values `a..b` in order: `get`'s work in a tight loop, the bit
    /// position carried from value to value (scans decode whole runs this way).
    #[inline]
    pub fn for_each_in(&self, a: usize, b: usize, mut f: impl FnMut(u64)) {
        debug_assert!(a <= b && b <= self.len);
        let w = self.width as usize;
        if w == 0 {
            (a..b).for_each(|_| f(0));
        } else if w <= 56 {
            // One unaligned 8-byte read holds any value of up to 57 bits at any shift;
            // the buffer's padding makes the read in bounds (checked by `new`).
            let mask = (1u64 << w) - 1;
            let mut bit = a * w;
            for _ in a..b {
                let byte = bit >> 3;
                let lo = read_u64(&self.bytes[byte..byte + 8]);
                f((lo >> (bit & 7)) & mask);
                bit += w;
            }
        } else {
            (a..b).for_each(|i| f(self.get(i)));
        }
    }

    /// Writes `f` of values `a..a+out.len()` into `out` (as [`for_each_in`](Self::for_each_in),
    /// into a slice: no capacity test per value). Narrow values (up to 16 bits: flags,
    /// small integers, dictionary codes) are unpacked eight at a time from one read.
    #[inline]
    pub fn map_into<T>(&self, a: usize, out: &mut [T], f: impl Fn(u64) -> T) {
        debug_assert!(a + out.len() <= self.len);
        let w = self.width as usize;
        let end = a + out.len();
        if w == 0 {
            out.iter_mut().for_each(|o| *o = f(0));
            return;
        }
        if w > 56 {
            for (k, o) in out.iter_mut().enumerate() {
                *o = f(self.get(a + k));
            }
            return;
        }
        let mask = (1u64 << w) - 1;
        let one = |i: usize| {
            let bit = i * w;
            (read_u64(&self.bytes[bit >> 3..(bit >> 3) + 8]) >> (bit & 7)) & mask
        };
        let mut i = a;
        if w <= 16 {
            while i < end && i % 8 != 0 {
                out[i - a] = f(one(i));
                i += 1;
            }
            // Eight values from index `i` (a multiple of 8) start on a byte and take
            // `w` bytes: one 16-byte read holds them.
            while i + 8 <= end {
                let byte = i * w / 8;
                let Some(b) = self.bytes.get(byte..byte + 16) else {
                    break;
                };
                let word = u128::from_le_bytes(b.try_into().unwrap_or([0; 16]));
                let dst = &mut out[i - a..i - a + 8];
                for (j, o) in dst.iter_mut().enumerate() {
                    *o = f((word >> (j * w)) as u64 & mask);
                }
                i += 8;
            }
        }
        while i < end {
            out[i - a] = f(one(i));
            i += 1;
        }
    }

    /// Appends bits `a..b` of a width-1 array as booleans, a byte (8 values) at a time.
    pub fn bits_into(&self, a: usize, b: usize, out: &mut Vec<bool>) {
        debug_assert!(self.width == 1 && a <= b && b <= self.len);
        let start = out.len();
        out.resize(start + (b - a), false);
        let out = &mut out[start..];
        let mut i = a;
        while i < b && i % 8 != 0 {
            out[i - a] = self.get(i) == 1;
            i += 1;
        }
        while i + 8 <= b {
            out[i - a..i - a + 8].copy_from_slice(&EXPAND[self.bytes[i / 8] as usize]);
            i += 8;
        }
        while i < b {
            out[i - a] = self.get(i) == 1;
            i += 1;
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.len).map(move |i| self.get(i))
    }
}

/// Each byte's eight bits as booleans, lowest first.
static EXPAND: [[bool; 8]; 256] = {
    let mut t = [[false; 8]; 256];
    let mut b = 0;
    while b < 256 {
        let mut k = 0;
        while k < 8 {
            t[b][k] = (b >> k) & 1 == 1;
            k += 1;
        }
        b += 1;
    }
    t
};

#[inline]
pub fn read_u64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(values: &[u64], width: u32) {
        let mut buf = Vec::new();
        pack(values.iter().copied(), width, &mut buf);
        assert_eq!(buf.len(), packed_len(values.len(), width));
        let p = Packed::new(&buf, width, values.len()).unwrap();
        for (i, v) in values.iter().enumerate() {
            assert_eq!(p.get(i), *v, "index {i} width {width}");
        }
        // Runs decoded from every start, of every length up to 20.
        for a in 0..values.len() {
            for len in 0..=(values.len() - a).min(20) {
                let mut out = vec![0u64; len];
                p.map_into(a, &mut out, |v| v);
                assert_eq!(
                    &out[..],
                    &values[a..a + len],
                    "from {a}, {len}, width {width}"
                );
            }
        }
        let mut streamed = Vec::new();
        let mut w = BitWriter::new(width);
        for v in values {
            w.push(*v, &mut streamed).unwrap();
        }
        let n = w.finish(&mut streamed).unwrap();
        assert_eq!(n as usize, streamed.len());
        assert_eq!(streamed, buf);
    }

    #[test]
    fn edge_widths() {
        check(&[], 0);
        check(&[0, 0, 0], 0);
        check(&[1, 0, 1, 1], 1);
        check(&[u64::MAX, 0, u64::MAX - 1], 64);
        check(&[(1 << 57) - 1, 3, (1 << 57) - 2], 57);
        check(&[(1 << 63) - 1, 5], 63);
    }

    proptest! {
        #[test]
        fn round_trip(values in proptest::collection::vec(any::<u64>(), 0..300), width in 0u32..=64) {
            let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
            let vals: Vec<u64> = values.iter().map(|v| v & mask).collect();
            check(&vals, width);
        }
    }

    #[test]
    fn rejects_short_buffers() {
        assert!(Packed::new(&[0u8; 8], 8, 1).is_none());
        assert!(Packed::new(&[0u8; 9], 8, 1).is_some());
    }
}
