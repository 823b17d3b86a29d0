//! Parallel record-boundary detection by quote parity.
//!
//! A window of bytes starts on a record boundary (outside quotes). It is cut into slices;
//! each slice is scanned in parallel for its number of quote bytes and for the first and
//! last newline seen at even and at odd local quote parity. A sequential prefix XOR then
//! gives each slice's true starting parity, which picks the right newline: the first record
//! boundary at or after the slice start. This is exact (not a heuristic) for RFC 4180 and
//! Excel CSV, where a quote inside a quoted field is written twice. A stray quote inside
//! an unquoted field would break parity, so the tokenizer rejects it as an error at its
//! position rather than guessing.

use rayon::prelude::*;

#[derive(Debug, Clone, Copy, Default)]
struct SliceScan {
    quotes_odd: bool,
    /// First newline (relative to the slice) at even / odd local parity.
    first: [Option<usize>; 2],
    /// Last newline at even / odd local parity.
    last: [Option<usize>; 2],
}

fn scan_slice(bytes: &[u8], quote: Option<u8>) -> SliceScan {
    let mut s = SliceScan::default();
    match quote {
        Some(q) => {
            // 64 bytes at a time: the quote and newline masks, the quotes' prefix XOR
            // (bit i: the parity of the quotes up to i), so the newlines at even and at
            // odd parity are two masks. `memchr2` stopped at every newline: on a file
            // of short records (social's edges, 14 bytes) a call a record.
            let mut parity = 0u64; // all ones at odd parity
            let mut blocks = bytes.chunks_exact(64);
            let mut base = 0usize;
            for block in &mut blocks {
                let block: &[u8; 64] = block.try_into().unwrap_or(&[0; 64]);
                let (qm, nm) = (
                    crate::tokenize::eq_mask64(block, q),
                    crate::tokenize::eq_mask64(block, b'\n'),
                );
                if nm != 0 {
                    let odd = prefix_xor(qm) ^ parity;
                    s.note(0, nm & !odd, base);
                    s.note(1, nm & odd, base);
                }
                if qm.count_ones() % 2 == 1 {
                    parity = !parity;
                }
                base += 64;
            }
            let mut p = (parity & 1) as usize;
            for (i, &b) in blocks.remainder().iter().enumerate() {
                if b == q {
                    p ^= 1;
                } else if b == b'\n' {
                    s.note(p, 1, base + i);
                }
            }
            s.quotes_odd = p == 1;
        }
        None => {
            s.first[0] = memchr::memchr(b'\n', bytes);
            s.last[0] = memchr::memrchr(b'\n', bytes);
        }
    }
    s
}

/// Bit i of the result: the XOR of bits 0..=i of `x`.
#[inline]
fn prefix_xor(mut x: u64) -> u64 {
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x
}

impl SliceScan {
    /// Records the newlines of `mask` (bits of a block at `base`) at parity `p`.
    #[inline]
    fn note(&mut self, p: usize, mask: u64, base: usize) {
        if mask == 0 {
            return;
        }
        if self.first[p].is_none() {
            self.first[p] = Some(base + mask.trailing_zeros() as usize);
        }
        self.last[p] = Some(base + 63 - mask.leading_zeros() as usize);
    }
}

/// Cuts `window` (which starts on a record boundary, outside quotes) into chunks of about
/// `chunk_bytes` that each start and end on record boundaries.
///
/// Returns the chunk end offsets (exclusive; chunks are `0..e0`, `e0..e1`, ...). The last
/// end is the end of the last complete record in the window; bytes after it belong to a
/// record that continues in the next window. With `at_eof`, the tail is a final record
/// without a trailing newline and is included. Returns an empty vector when the window
/// holds no complete record (the caller grows the window). The second value says whether
/// the window ends inside a quoted field (useful at EOF: an unterminated quote).
pub fn split_records(
    window: &[u8],
    chunk_bytes: usize,
    quote: Option<u8>,
    at_eof: bool,
) -> (Vec<usize>, bool) {
    let chunk_bytes = chunk_bytes.max(1);
    let n_slices = window.len().div_ceil(chunk_bytes).max(1);
    let scans: Vec<SliceScan> = if n_slices == 1 {
        vec![scan_slice(window, quote)]
    } else {
        (0..n_slices)
            .into_par_iter()
            .map(|k| {
                let s = k * chunk_bytes;
                let e = (s + chunk_bytes).min(window.len());
                scan_slice(&window[s..e], quote)
            })
            .collect()
    };
    let mut ends = Vec::with_capacity(n_slices);
    let mut parity = 0usize;
    let mut last_boundary = None;
    for (k, sc) in scans.iter().enumerate() {
        let base = k * chunk_bytes;
        // The first boundary in this slice ends the previous chunk (slices after the first).
        if k > 0 {
            if let Some(i) = sc.first[parity] {
                let b = base + i + 1;
                if ends.last().is_none_or(|&l| b > l) {
                    ends.push(b);
                }
            }
        }
        if let Some(i) = sc.last[parity] {
            last_boundary = Some(base + i + 1);
        }
        parity ^= sc.quotes_odd as usize;
    }
    let in_quotes = parity == 1;
    // At the end of the input the tail is the last record, even inside an open quote:
    // the tokenizer then reports the unterminated quote where it opened.
    let end = if at_eof {
        Some(window.len())
    } else {
        last_boundary
    };
    let Some(end) = end else {
        return (Vec::new(), in_quotes);
    };
    ends.retain(|&e| e < end);
    if end > 0 {
        ends.push(end);
    }
    (ends, in_quotes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, chunk: usize, eof: bool) -> Vec<String> {
        let (ends, _) = split_records(input.as_bytes(), chunk, Some(b'"'), eof);
        let mut s = 0;
        ends.iter()
            .map(|&e| {
                let c = input[s..e].to_string();
                s = e;
                c
            })
            .collect()
    }

    #[test]
    fn boundaries_respect_quotes() {
        let input = "a,b\n\"x\ny\",2\nc,3\n\"q\"\"\n\",4\n";
        for chunk in 1..input.len() + 2 {
            let parts = check(input, chunk, true);
            assert_eq!(parts.concat(), input, "chunk {chunk}");
            for p in &parts {
                // Every chunk is whole records: even quotes and ends with a newline.
                assert_eq!(p.matches('"').count() % 2, 0, "chunk {chunk}: {p:?}");
                assert!(p.ends_with('\n'));
            }
        }
    }

    /// The scan as it was (a `memchr2` stop at every quote and newline).
    fn scan_reference(bytes: &[u8], q: u8) -> SliceScan {
        let mut s = SliceScan::default();
        let mut parity = 0usize;
        for i in memchr::memchr2_iter(q, b'\n', bytes) {
            if bytes[i] == q {
                parity ^= 1;
            } else {
                if s.first[parity].is_none() {
                    s.first[parity] = Some(i);
                }
                s.last[parity] = Some(i);
            }
        }
        s.quotes_odd = parity == 1;
        s
    }

    proptest::proptest! {
        #[test]
        fn block_scan_agrees_with_the_byte_scan(
            bytes in proptest::collection::vec(
                proptest::prop_oneof![
                    8 => proptest::prelude::Just(b'a'),
                    2 => proptest::prelude::Just(b'\n'),
                    1 => proptest::prelude::Just(b'"'),
                    1 => proptest::prelude::Just(b','),
                ],
                0..300,
            )
        ) {
            let (a, b) = (scan_slice(&bytes, Some(b'"')), scan_reference(&bytes, b'"'));
            proptest::prop_assert_eq!(a.first, b.first);
            proptest::prop_assert_eq!(a.last, b.last);
            proptest::prop_assert_eq!(a.quotes_odd, b.quotes_odd);
        }
    }

    #[test]
    fn incomplete_tail_is_left() {
        let parts = check("a,b\nc,\"d\ne", 3, false);
        assert_eq!(parts.concat(), "a,b\n");
        let (ends, in_q) = split_records(b"\"abc\ndef", 2, Some(b'"'), true);
        assert!(ends == vec![8] && in_q);
        let parts = check("a\nb", 1, true);
        assert_eq!(parts.concat(), "a\nb");
    }
}
