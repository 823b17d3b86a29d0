//! A zero-copy record tokenizer over a chunk of CSV that starts on a record boundary.
//!
//! Hand-written rather than `csv-core` because it is the hot loop of the product: it finds
//! field ends with `memchr3` (delimiter, quote, newline), returns field slices borrowed
//! from the chunk, copies only fields that contain doubled quotes, and counts lines as it
//! goes so that every error has a line and column without a second pass. The `csv` crate
//! is its reference in the property tests.
//!
//! Rules (RFC 4180 / Excel): `\n` or `\r\n` ends a record; blank lines are skipped; a field
//! that starts with the quote is quoted, may hold delimiters and newlines, and writes a
//! quote as two quotes; after a closing quote only a delimiter or line end may follow; a
//! quote inside an unquoted field is an error (it would make the file ambiguous).

use crate::{Dialect, Position};

/// What went wrong in a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenError {
    /// A quoted field that never closes; `position` is where it opened.
    UnterminatedQuote,
    /// A quote in the middle of an unquoted field.
    StrayQuote,
    /// Something other than a delimiter or line end after a closing quote.
    AfterClosingQuote(u8),
}

impl std::fmt::Display for TokenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenError::UnterminatedQuote => write!(f, "unterminated quoted field (it opens here)"),
            TokenError::StrayQuote => write!(
                f,
                "quote character inside an unquoted field; quote the whole field and double the quote, or pass --quote none"
            ),
            TokenError::AfterClosingQuote(b) => write!(
                f,
                "unexpected '{}' after a closing quote; expected a delimiter or the end of the line",
                (*b as char).escape_default()
            ),
        }
    }
}

/// A tokenizer error with its place in the chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenFailure {
    pub error: TokenError,
    /// Line relative to the chunk start, column within that line.
    pub position: Position,
    /// Byte offset within the chunk where the failing record starts.
    pub record_start: usize,
    /// Byte offset where the tokenizer resumed (start of the next record).
    pub resume_at: usize,
}

#[derive(Debug, Clone, Copy)]
struct FieldRef {
    start: u32,
    end: u32,
    /// Byte column of the field start in its line.
    column: u32,
    scratch: bool,
}

/// The fields of the current record.
#[derive(Debug, Default)]
pub struct Fields {
    refs: Vec<FieldRef>,
    scratch: Vec<u8>,
}

impl Fields {
    pub fn len(&self) -> usize {
        self.refs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }

    /// The bytes of field `i`, unescaped.
    #[inline]
    pub fn get<'a>(&'a self, chunk: &'a [u8], i: usize) -> &'a [u8] {
        let r = self.refs[i];
        let src = if r.scratch { &self.scratch[..] } else { chunk };
        &src[r.start as usize..r.end as usize]
    }

    /// 0-based byte column of field `i` in its line.
    pub fn column(&self, i: usize) -> u64 {
        self.refs[i].column as u64
    }

    fn clear(&mut self) {
        self.refs.clear();
        self.scratch.clear();
    }

    /// Records a field at `start..end` of the chunk (or of the scratch buffer).
    #[inline]
    fn push(&mut self, start: usize, end: usize, column: u32, scratch: bool) {
        self.refs.push(FieldRef {
            start: start as u32,
            end: end as u32,
            column,
            scratch,
        });
    }
}

/// Where a record sits in the chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordSpan {
    pub start: usize,
    pub end: usize,
    /// Line (relative to the chunk) where the record starts.
    pub line: u64,
}

/// Finds structural bytes (delimiter, newline, quote) 64 bytes at a time: a block is
/// classified with SIMD compares into a bit mask, and positions come out by counting
/// trailing zeros. Per record this costs a few instructions per byte plus a few per field,
/// where a `memchr` call per field costs dozens on short fields (measured with callgrind
/// on the social edges file: 446 instructions per record with `memchr3`).
struct Structural {
    delim: u8,
    quote: u8,
    /// Block start (multiple of 64 from the chunk start) and its mask.
    block: usize,
    mask: u64,
}

impl Structural {
    fn new(delim: u8, quote: Option<u8>) -> Self {
        Structural {
            delim,
            quote: quote.unwrap_or(delim),
            block: usize::MAX,
            mask: 0,
        }
    }

    #[inline]
    fn classify(&self, buf: &[u8], block: usize) -> u64 {
        let end = (block + 64).min(buf.len());
        let bytes = &buf[block..end];
        if bytes.len() == 64 {
            classify64(bytes.try_into().expect("64 bytes"), self.delim, self.quote)
        } else {
            let mut mask = 0u64;
            for (i, &b) in bytes.iter().enumerate() {
                if b == self.delim || b == b'\n' || b == self.quote {
                    mask |= 1 << i;
                }
            }
            mask
        }
    }

    /// The first structural byte at or after `from`, or `None` at the end of `buf`.
    #[inline]
    fn next(&mut self, buf: &[u8], from: usize) -> Option<usize> {
        let mut block = from & !63;
        if block != self.block {
            if block >= buf.len() {
                return None;
            }
            self.block = block;
            self.mask = self.classify(buf, block);
        }
        let mut m = self.mask & (u64::MAX << (from - block));
        loop {
            if m != 0 {
                return Some(block + m.trailing_zeros() as usize);
            }
            block += 64;
            if block >= buf.len() {
                return None;
            }
            self.block = block;
            self.mask = self.classify(buf, block);
            m = self.mask;
        }
    }
}

/// Bit `i` set where `bytes[i]` is `b` (the record splitter's scan).
#[inline]
pub(crate) fn eq_mask64(bytes: &[u8; 64], b: u8) -> u64 {
    mask64(bytes, [b])
}

/// Bit `i` set where `bytes[i]` is `a`, `b` or `\n`.
#[inline]
fn classify64(bytes: &[u8; 64], a: u8, b: u8) -> u64 {
    mask64(bytes, [a, b, b'\n'])
}

/// Bit `i` set where `bytes[i]` is one of `set`: each 16 bytes compared with every
/// member, the hits OR-ed, one move-mask a 16 bytes.
#[inline(always)]
fn mask64<const N: usize>(bytes: &[u8; 64], set: [u8; N]) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // SAFETY: SSE2 is part of the x86_64 baseline; loads are unaligned and within the
        // 64-byte array.
        unsafe {
            let mut mask = 0u64;
            for k in 0..4 {
                let v = _mm_loadu_si128(bytes.as_ptr().add(k * 16) as *const __m128i);
                let mut hit = _mm_setzero_si128();
                for &c in &set {
                    hit = _mm_or_si128(hit, _mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8)));
                }
                mask |= ((_mm_movemask_epi8(hit) as u32 as u64) & 0xffff) << (k * 16);
            }
            mask
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut mask = 0u64;
        for (i, c) in bytes.iter().enumerate() {
            if set.contains(c) {
                mask |= 1 << i;
            }
        }
        mask
    }
}

/// Reads records from one chunk. Chunks are at most 4 GiB (offsets are `u32`).
pub struct Tokenizer<'a> {
    buf: &'a [u8],
    pos: usize,
    line: u64,
    line_start: usize,
    delim: u8,
    quote: Option<u8>,
    structural: Structural,
}

impl<'a> Tokenizer<'a> {
    pub fn new(buf: &'a [u8], dialect: &Dialect) -> Self {
        debug_assert!(buf.len() <= u32::MAX as usize);
        Tokenizer {
            buf,
            pos: 0,
            line: 0,
            line_start: 0,
            delim: dialect.delimiter,
            quote: dialect.quote,
            structural: Structural::new(dialect.delimiter, dialect.quote),
        }
    }

    /// A tokenizer that starts at `pos` of `buf`, a record boundary on line `line`
    /// (a reader that read the records before it its own way).
    pub fn resume(buf: &'a [u8], dialect: &Dialect, pos: usize, line: u64) -> Self {
        let mut t = Tokenizer::new(buf, dialect);
        t.pos = pos.min(buf.len());
        t.line = line;
        t.line_start = t.pos;
        t
    }

    /// Lines passed so far (relative to the chunk start).
    pub fn line(&self) -> u64 {
        self.line
    }

    pub fn offset(&self) -> usize {
        self.pos
    }

    fn newline_at(&mut self, i: usize) {
        self.line += 1;
        self.line_start = i + 1;
    }

    fn fail(
        &mut self,
        error: TokenError,
        at: usize,
        line: u64,
        line_start: usize,
        record_start: usize,
    ) -> TokenFailure {
        let column = (at - line_start) as u64;
        // Resynchronise after the failing record: at the next newline after `at` (this is
        // the record end unless the error is an unterminated quote, in which case the rest
        // of the chunk is lost anyway).
        let resume = match error {
            TokenError::UnterminatedQuote => self.buf.len(),
            _ => memchr::memchr(b'\n', &self.buf[at..]).map_or(self.buf.len(), |i| at + i + 1),
        };
        self.line = line + memchr::memchr_iter(b'\n', &self.buf[line_start..resume]).count() as u64;
        self.line_start = resume;
        self.pos = resume;
        TokenFailure {
            error,
            position: Position { line, column },
            record_start,
            resume_at: resume,
        }
    }

    /// Reads the next record into `fields`. `Ok(None)` at the end of the chunk.
    pub fn next_record(&mut self, fields: &mut Fields) -> Result<Option<RecordSpan>, TokenFailure> {
        fields.clear();
        let buf = self.buf;
        // Skip blank lines.
        loop {
            if self.pos >= buf.len() {
                return Ok(None);
            }
            match buf[self.pos] {
                b'\n' => {
                    self.newline_at(self.pos);
                    self.pos += 1;
                }
                b'\r' if buf.get(self.pos + 1) == Some(&b'\n') => {
                    self.newline_at(self.pos + 1);
                    self.pos += 2;
                }
                _ => break,
            }
        }
        let record_start = self.pos;
        let record_line = self.line;
        let done = |end: usize| {
            Some(RecordSpan {
                start: record_start,
                end,
                line: record_line,
            })
        };
        let q = self.quote.unwrap_or(self.delim);
        let quoting = self.quote.is_some();
        loop {
            let field_start = self.pos;
            let column = (field_start - self.line_start) as u32;
            if quoting && buf.get(field_start) == Some(&q) {
                // Quoted field.
                let content = field_start + 1;
                let (open_line, open_line_start) = (self.line, self.line_start);
                let mut i = content;
                let mut escaped = false;
                let close;
                loop {
                    match self.structural.next(buf, i) {
                        None => {
                            return Err(self.fail(
                                TokenError::UnterminatedQuote,
                                field_start,
                                open_line,
                                open_line_start,
                                record_start,
                            ))
                        }
                        Some(at) if buf[at] == q => {
                            if buf.get(at + 1) == Some(&q) {
                                escaped = true;
                                i = at + 2;
                            } else {
                                close = at;
                                break;
                            }
                        }
                        Some(at) => {
                            // A delimiter or newline inside the quotes is data.
                            if buf[at] == b'\n' {
                                self.newline_at(at);
                            }
                            i = at + 1;
                        }
                    }
                }
                if escaped {
                    let s = fields.scratch.len();
                    let raw = &buf[content..close];
                    let mut j = 0;
                    while j < raw.len() {
                        fields.scratch.push(raw[j]);
                        j += if raw[j] == q { 2 } else { 1 };
                    }
                    fields.push(s, fields.scratch.len(), column, true);
                } else {
                    fields.push(content, close, column, false);
                }
                let after = close + 1;
                match buf.get(after) {
                    None => {
                        self.pos = after;
                        return Ok(done(after));
                    }
                    Some(&b) if b == self.delim => {
                        self.pos = after + 1;
                        if self.pos >= buf.len() {
                            // Trailing delimiter at EOF: one more empty field.
                            fields.push(0, 0, column + 1, true);
                            return Ok(done(self.pos));
                        }
                    }
                    Some(b'\n') => {
                        self.newline_at(after);
                        self.pos = after + 1;
                        return Ok(done(self.pos));
                    }
                    Some(b'\r') if buf.get(after + 1) == Some(&b'\n') => {
                        self.newline_at(after + 1);
                        self.pos = after + 2;
                        return Ok(done(self.pos));
                    }
                    Some(&b) => {
                        let (l, ls) = (self.line, self.line_start);
                        return Err(self.fail(
                            TokenError::AfterClosingQuote(b),
                            after,
                            l,
                            ls,
                            record_start,
                        ));
                    }
                }
            } else {
                // Unquoted field: up to the delimiter, a newline, or (an error) a quote.
                // Without quoting, the scanner's quote byte is the delimiter (see
                // `Structural::new`), so a hit is never a quote.
                match self
                    .structural
                    .next(buf, field_start)
                    .map(|at| at - field_start)
                {
                    None => {
                        let mut end = buf.len();
                        if end > field_start && buf[end - 1] == b'\r' {
                            end -= 1;
                        }
                        fields.push(field_start, end, column, false);
                        self.pos = buf.len();
                        return Ok(done(buf.len()));
                    }
                    Some(k) => {
                        let at = field_start + k;
                        let b = buf[at];
                        if b == self.delim {
                            fields.push(field_start, at, column, false);
                            self.pos = at + 1;
                            if self.pos >= buf.len() {
                                fields.push(0, 0, column + 1 + k as u32, true);
                                return Ok(done(self.pos));
                            }
                        } else if b == b'\n' {
                            let end = if at > field_start && buf[at - 1] == b'\r' {
                                at - 1
                            } else {
                                at
                            };
                            fields.push(field_start, end, column, false);
                            self.newline_at(at);
                            self.pos = at + 1;
                            return Ok(done(self.pos));
                        } else {
                            let (l, ls) = (self.line, self.line_start);
                            return Err(self.fail(TokenError::StrayQuote, at, l, ls, record_start));
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tokenize_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, TokenFailure> {
        let d = Dialect::default();
        let mut t = Tokenizer::new(input, &d);
        let mut f = Fields::default();
        let mut out = Vec::new();
        while let Some(_) = t.next_record(&mut f)? {
            out.push((0..f.len()).map(|i| f.get(input, i).to_vec()).collect());
        }
        Ok(out)
    }

    fn reference(input: &[u8]) -> Vec<Vec<Vec<u8>>> {
        let mut r = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(input);
        r.byte_records()
            .map(|rec| rec.unwrap().iter().map(|f| f.to_vec()).collect())
            .collect()
    }

    #[test]
    fn basic_records() {
        let got = tokenize_all(b"a,b,c\r\n\"x,1\",\"he said \"\"hi\"\"\",\n\n\"multi\nline\",2,3")
            .unwrap();
        assert_eq!(
            got,
            vec![
                vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()],
                vec![b"x,1".to_vec(), b"he said \"hi\"".to_vec(), b"".to_vec()],
                vec![b"multi\nline".to_vec(), b"2".to_vec(), b"3".to_vec()],
            ]
        );
    }

    #[test]
    fn errors_have_positions() {
        let e = tokenize_all(b"a,b\nc,d\"e\n").unwrap_err();
        assert_eq!(e.error, TokenError::StrayQuote);
        assert_eq!(e.position, Position { line: 1, column: 3 });
        let e = tokenize_all(b"a,b\nc,\"d\nxx\n").unwrap_err();
        assert_eq!(e.error, TokenError::UnterminatedQuote);
        assert_eq!(e.position, Position { line: 1, column: 2 });
        let e = tokenize_all(b"a\n\"b\"x,c\n").unwrap_err();
        assert_eq!(e.error, TokenError::AfterClosingQuote(b'x'));
        assert_eq!(e.position, Position { line: 1, column: 3 });
    }

    #[test]
    fn lines_are_counted_across_quoted_newlines() {
        let input = b"\"a\nb\nc\",1\nx,y\n";
        let d = Dialect::default();
        let mut t = Tokenizer::new(input, &d);
        let mut f = Fields::default();
        assert_eq!(t.next_record(&mut f).unwrap().unwrap().line, 0);
        assert_eq!(t.next_record(&mut f).unwrap().unwrap().line, 3);
        assert_eq!(t.line(), 4);
    }

    fn field() -> impl Strategy<Value = String> {
        prop_oneof!["[a-z0-9 ]{0,6}", "[a-z,\"\n ]{0,8}".prop_map(|s| s),]
    }

    fn render(rows: &[Vec<String>], crlf: bool) -> String {
        let mut s = String::new();
        for r in rows {
            let line: Vec<String> = r
                .iter()
                .map(|f| {
                    if f.contains(['"', ',', '\n', '\r']) || f.is_empty() && r.len() == 1 {
                        format!("\"{}\"", f.replace('"', "\"\""))
                    } else {
                        f.clone()
                    }
                })
                .collect();
            s.push_str(&line.join(","));
            s.push_str(if crlf { "\r\n" } else { "\n" });
        }
        s
    }

    proptest! {
        // The tokenizer and the `csv` crate agree on every valid RFC 4180 input, and
        // the parallel splitter cuts it only on record boundaries at any chunk size.
        #[test]
        fn agrees_with_reference_at_any_chunking(
            rows in proptest::collection::vec(proptest::collection::vec(field(), 1..5), 0..30),
            crlf in any::<bool>(),
            chunk in 1usize..64,
        ) {
            let input = render(&rows, crlf);
            let whole = tokenize_all(input.as_bytes()).unwrap();
            prop_assert_eq!(&whole, &reference(input.as_bytes()));
            let (ends, in_q) = crate::split::split_records(input.as_bytes(), chunk, Some(b'"'), true);
            prop_assert!(!in_q);
            let mut s = 0;
            let mut pieced = Vec::new();
            for e in ends {
                pieced.extend(tokenize_all(&input.as_bytes()[s..e]).unwrap());
                s = e;
            }
            prop_assert_eq!(s, input.len());
            prop_assert_eq!(pieced, whole);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(prop_oneof![Just(b'"'), Just(b','), Just(b'\n'), Just(b'\r'), Just(b'a')], 0..64)) {
            let d = Dialect::default();
            let mut t = Tokenizer::new(&bytes, &d);
            let mut f = Fields::default();
            for _ in 0..200 {
                match t.next_record(&mut f) { Ok(None) => break, _ => {} }
            }
        }
    }
}
