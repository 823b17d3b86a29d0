//! FSST-compressed string chunks: every value is compressed on its own against one
//! symbol table per chunk (up to 255 symbols of 1-8 bytes; code 255 escapes one literal
//! byte), so any value decodes alone, in O(its length), and random access stays O(1).
//!
//! Training and compression are the `fsst-rs` crate's (the algorithm of Boncz, Neumann
//! and Leis, VLDB 2020). Decoding is ours: it is a dozen lines, and the crate's decoder
//! trusts its input, while a reader of this format must not panic or read out of bounds
//! on corrupted bytes (a bad code decodes to nothing; the segment checksum reports it).
//!
//! Layout after the chunk header (see docs/format.md):
//! `n_symbols: u8, 7 pad, symbols: n_symbols × u64 LE, lengths: n_symbols × u8,
//!  data_len: u64, data: data_len bytes, offsets: n + 1, blocked`.
//! The data comes before its offsets so that the encoder streams codes straight into the
//! output and writes the offsets after (a chunk whose data would outgrow the plain data
//! is written plain instead).

use crate::error::{corrupted, FormatError};
use crate::offsets::{Cursor, Offsets};
pub use fsst::Compressor;
use fsst::ESCAPE_CODE;
use rayon::prelude::*;

/// Chunks with less string data than this stay plain: the symbol table (up to 2.3 KiB)
/// and the training would not pay for themselves.
pub(crate) const MIN_DATA_BYTES: usize = 16 << 10;
/// The sample the symbol table is trained on: the paper's 16 KiB, taken from values
/// spread over the chunk. The saving is judged on as many bytes of other values, taken
/// between the training ones: judged on its own training sample a table looks better
/// than it is (random letters saved 10% there and 6% on the chunk).
const SAMPLE_BYTES: usize = 16 << 10;
/// Bytes taken from any one sampled value (a few long values must not fill the sample).
const SAMPLE_VALUE_MAX: usize = 256;
/// FSST is chosen when the held-out values compress to at most this fraction (in 1/100)
/// of their size. Compressing runs at about 300-500 MB/s per core (the import pays it
/// once), decoding at about a GB/s (every read pays it). Measured on the dolt table:
/// random letters save 6% (119 to 112 MiB, as in DuckDB's FSST) and cost 30% more import
/// time (0.70 to 0.93 s), so they stay plain; hex strings save 43% and words 70%.
const MAX_RATIO_PERCENT: usize = 90;

/// Upper bound of the bytes FSST adds beside the data and offsets of a plain chunk.
pub const OVERHEAD_BOUND: usize = 8 + 255 * 9 + 16;

/// A trained compressor, when the sample says FSST saves enough on these values.
/// `value(i)` returns value `i` of `n`; `data_len` is their total size.
pub fn worthwhile<'v>(
    n: usize,
    data_len: usize,
    value: impl Fn(usize) -> &'v [u8],
) -> Option<Compressor> {
    if n == 0 || data_len < MIN_DATA_BYTES {
        return None;
    }
    // Evenly spaced values, clipped, until both samples are full: the even ones train
    // the table, the odd ones judge it.
    let avg = (data_len / n).clamp(1, SAMPLE_VALUE_MAX);
    let want = (2 * SAMPLE_BYTES / avg).clamp(1, n);
    let step = n / want;
    let clip = |k: usize| {
        let v = value(k * step);
        &v[..v.len().min(SAMPLE_VALUE_MAX)]
    };
    let train: Vec<&[u8]> = (0..want)
        .step_by(2)
        .map(clip)
        .filter(|v| !v.is_empty())
        .collect();
    if train.is_empty() {
        return None;
    }
    let c = Compressor::train(&train);
    let mut buf = Vec::new();
    let (mut plain, mut packed) = (0usize, 0usize);
    // A single value judges itself.
    let judge: Vec<&[u8]> = match want {
        1 => train.clone(),
        _ => (1..want).step_by(2).map(clip).collect(),
    };
    for v in judge {
        compress_one(&c, v, &mut buf);
        plain += v.len();
        packed += buf.len();
    }
    if plain == 0 {
        return None;
    }
    (packed * 100 <= plain * MAX_RATIO_PERCENT).then_some(c)
}

/// Compresses `v` into `buf` (replacing its contents).
fn compress_one(c: &Compressor, v: &[u8], buf: &mut Vec<u8>) {
    buf.clear();
    if v.is_empty() {
        return;
    }
    // Every byte may become an escape: two output bytes.
    buf.reserve(2 * v.len() + 8);
    // SAFETY: `buf` has room for the worst case (all escapes), as `compress_into` asks.
    unsafe { c.compress_into(v, buf) };
}

/// Writes the FSST payload of `n` values whose plain data is `data_len` bytes to `out`.
/// Returns false, with `out` unchanged, when the compressed data would be larger than
/// the plain data (the sample misjudged the chunk); the caller then writes it plain.
pub fn encode<'v>(
    c: &Compressor,
    n: usize,
    data_len: usize,
    value: impl Fn(usize) -> &'v [u8] + Sync,
    out: &mut Vec<u8>,
) -> bool {
    let start = out.len();
    let symbols = c.symbol_table();
    let lengths = c.symbol_lengths();
    out.push(symbols.len() as u8);
    out.extend_from_slice(&[0; 7]);
    for s in symbols {
        out.extend_from_slice(&s.to_u64().to_le_bytes());
    }
    out.extend_from_slice(lengths);
    let len_pos = out.len();
    out.extend_from_slice(&[0; 8]);
    let data_start = out.len();
    // Compressed lengths, for the offsets written after the data.
    let mut lens: Vec<u32> = Vec::with_capacity(n);
    // Compression runs at about half a GB/s per core, so a big chunk is cut into pieces
    // of ~1 MiB compressed in parallel, a wave of a few at a time written in order: the
    // waiting copies are a few MiB, not a second copy of the chunk.
    let pieces = piece_bounds(n, data_len, &value);
    let wave = rayon::current_num_threads().max(1) * 2;
    for group in pieces.windows(2).collect::<Vec<_>>().chunks(wave) {
        let done: Vec<(Vec<u8>, Vec<u32>)> = group
            .par_iter()
            .map(|r| {
                let mut data = Vec::new();
                let mut lens = Vec::with_capacity(r[1] - r[0]);
                let mut buf = Vec::new();
                for i in r[0]..r[1] {
                    compress_one(c, value(i), &mut buf);
                    data.extend_from_slice(&buf);
                    // A value past 2 GiB compressed cannot be listed; it stays plain.
                    lens.push(u32::try_from(buf.len()).unwrap_or(u32::MAX));
                }
                (data, lens)
            })
            .collect();
        for (data, piece_lens) in done {
            if out.len() - data_start + data.len() > data_len || piece_lens.contains(&u32::MAX) {
                out.truncate(start);
                return false;
            }
            out.extend_from_slice(&data);
            lens.extend_from_slice(&piece_lens);
        }
    }
    let compressed = (out.len() - data_start) as u64;
    out[len_pos..len_pos + 8].copy_from_slice(&compressed.to_le_bytes());
    let ends = std::iter::once(0u64).chain(lens.iter().scan(0u64, |acc, &l| {
        *acc += l as u64;
        Some(*acc)
    }));
    crate::offsets::encode_offsets(ends, out);
    true
}

/// Row bounds `0 = b0 < b1 < ... = n` of pieces of about `PIECE_BYTES` of plain data.
fn piece_bounds<'v>(n: usize, data_len: usize, value: &impl Fn(usize) -> &'v [u8]) -> Vec<usize> {
    let mut bounds = vec![0];
    if data_len <= PIECE_BYTES {
        bounds.push(n);
        return bounds;
    }
    let mut acc = 0;
    for i in 0..n {
        acc += value(i).len();
        if acc >= PIECE_BYTES {
            bounds.push(i + 1);
            acc = 0;
        }
    }
    if *bounds.last().unwrap_or(&0) != n {
        bounds.push(n);
    }
    bounds
}

/// Plain bytes per piece compressed on one thread.
const PIECE_BYTES: usize = 1 << 20;

/// A zero-copy view of an FSST payload.
#[derive(Debug, Clone, Copy)]
pub struct FsstView<'a> {
    symbols: &'a [u8],
    lengths: &'a [u8],
    offsets: Offsets<'a>,
    data: &'a [u8],
}

impl<'a> FsstView<'a> {
    /// Opens the payload of `n` values at the cursor. O(number of symbols).
    pub(crate) fn open(c: &mut Cursor<'a>, n: usize, blocked: bool) -> Result<Self, FormatError> {
        let n_sym = c.take(8)?[0] as usize;
        if n_sym > ESCAPE_CODE as usize {
            return Err(corrupted(format!("FSST table of {n_sym} symbols")));
        }
        let symbols = c.take(n_sym * 8)?;
        let lengths = c.take(n_sym)?;
        if let Some(l) = lengths.iter().find(|&&l| !(1..=8).contains(&l)) {
            return Err(corrupted(format!("FSST symbol of length {l}")));
        }
        if !blocked {
            return Err(corrupted("FSST chunk without blocked offsets"));
        }
        let data_len = c.u64()?;
        let data = c.take(usize::try_from(data_len).map_err(|_| corrupted("FSST data length"))?)?;
        let offsets = Offsets::open(c, n + 1, true)?;
        Ok(FsstView {
            symbols,
            lengths,
            offsets,
            data,
        })
    }

    /// The compressed codes of value `i` (empty when its offsets are corrupted).
    #[inline]
    fn codes(&self, i: usize) -> &'a [u8] {
        let s = self.offsets.get(i) as usize;
        let e = self.offsets.get(i + 1) as usize;
        self.data.get(s..e).unwrap_or(&[])
    }

    /// Appends value `i`, decoded, to `out`.
    #[inline]
    pub fn decode_into(&self, i: usize, out: &mut Vec<u8>) {
        let codes = self.codes(i);
        let n_sym = self.lengths.len();
        // Each code yields at most 8 bytes. Whole 8-byte symbols are written and the
        // cursor advances by their length; the room is reserved first, so the writes
        // stay inside the allocation, and only the bytes written become the length.
        out.reserve(codes.len() * 8 + 8);
        let start = out.len();
        let base = out.as_mut_ptr();
        let mut p = start;
        let mut k = 0;
        while k < codes.len() {
            let c = codes[k] as usize;
            if c < n_sym {
                // `open` checked symbols.len() == 8 * n_sym and lengths.len() == n_sym.
                let sym = &self.symbols[c * 8..c * 8 + 8];
                // SAFETY: p + 8 <= start + 8 * k + 8 <= the reserved capacity, since
                // every code so far advanced p by at most 8.
                unsafe { std::ptr::copy_nonoverlapping(sym.as_ptr(), base.add(p), 8) };
                p += self.lengths[c] as usize;
                k += 1;
            } else if c == ESCAPE_CODE as usize {
                if let Some(&b) = codes.get(k + 1) {
                    // SAFETY: as above (an escape advances p by 1 for 2 codes).
                    unsafe { base.add(p).write(b) };
                    p += 1;
                }
                k += 2;
            } else {
                // A code past the table: corrupted bytes, which decode to nothing.
                k += 1;
            }
        }
        // SAFETY: bytes start..p were written above; p is within the capacity.
        unsafe { out.set_len(p) };
    }
}
