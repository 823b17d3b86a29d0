//! PackStream v1, Bolt's value encoding: markers for null, booleans, integers (tiny,
//! 8, 16, 32, 64 bit), floats, bytes, strings, lists, maps and tagged structures.
//!
//! The decoder is for untrusted input: it never panics, never allocates more than
//! the bytes it was given could hold (a length is checked against what is left before
//! anything is reserved), and bounds nesting depth.

use thiserror::Error;

/// A PackStream value as it travels.
#[derive(Debug, Clone, PartialEq)]
pub enum Pack {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Bytes(Vec<u8>),
    Str(String),
    List(Vec<Pack>),
    Map(Vec<(String, Pack)>),
    Struct(u8, Vec<Pack>),
}

impl Pack {
    pub fn str(s: impl Into<String>) -> Pack {
        Pack::Str(s.into())
    }

    pub fn map(entries: Vec<(&str, Pack)>) -> Pack {
        Pack::Map(
            entries
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        )
    }

    /// The entry `key` of a map.
    pub fn get(&self, key: &str) -> Option<&Pack> {
        match self {
            Pack::Map(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Pack::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_int(&self) -> Option<i64> {
        match self {
            Pack::Int(i) => Some(*i),
            _ => None,
        }
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum DecodeError {
    #[error("the message ends inside a value")]
    Truncated,
    #[error("unknown PackStream marker 0x{0:02X}")]
    Marker(u8),
    #[error("a string is not valid UTF-8")]
    Utf8,
    #[error("values nested deeper than {0}")]
    Depth(usize),
    #[error("{0} bytes after the value")]
    Trailing(usize),
    #[error("a map key is not a string")]
    Key,
}

/// Deepest nesting the decoder accepts (lists in maps in structures...).
pub const DEPTH_MAX: usize = 64;

/// Most items a list or map reserves room for before they are decoded.
const RESERVE_MAX: usize = 256;

/// Decodes exactly one value filling `b`.
pub fn decode(b: &[u8]) -> Result<Pack, DecodeError> {
    let mut d = Decoder { b, i: 0 };
    let v = d.value(0)?;
    if d.i != b.len() {
        return Err(DecodeError::Trailing(b.len() - d.i));
    }
    Ok(v)
}

struct Decoder<'a> {
    b: &'a [u8],
    i: usize,
}

impl Decoder<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        let end = self.i.checked_add(n).ok_or(DecodeError::Truncated)?;
        let s = self.b.get(self.i..end).ok_or(DecodeError::Truncated)?;
        self.i = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn uint(&mut self, n: usize) -> Result<u64, DecodeError> {
        Ok(self.take(n)?.iter().fold(0u64, |a, &x| a << 8 | x as u64))
    }

    /// A count of items that each take at least one byte: more than the bytes left is
    /// a truncated message, refused before anything is allocated for it.
    fn count(&mut self, n: u64) -> Result<usize, DecodeError> {
        let left = (self.b.len() - self.i) as u64;
        if n > left {
            return Err(DecodeError::Truncated);
        }
        Ok(n as usize)
    }

    fn string(&mut self, n: usize) -> Result<String, DecodeError> {
        let s = self.take(n)?;
        String::from_utf8(s.to_vec()).map_err(|_| DecodeError::Utf8)
    }

    fn value(&mut self, depth: usize) -> Result<Pack, DecodeError> {
        if depth > DEPTH_MAX {
            return Err(DecodeError::Depth(DEPTH_MAX));
        }
        let m = self.u8()?;
        Ok(match m {
            0x00..=0x7F => Pack::Int(m as i64),
            0xF0..=0xFF => Pack::Int(m as i8 as i64),
            0xC0 => Pack::Null,
            0xC2 => Pack::Bool(false),
            0xC3 => Pack::Bool(true),
            0xC1 => Pack::Float(f64::from_bits(self.uint(8)?)),
            0xC8 => Pack::Int(self.uint(1)? as u8 as i8 as i64),
            0xC9 => Pack::Int(self.uint(2)? as u16 as i16 as i64),
            0xCA => Pack::Int(self.uint(4)? as u32 as i32 as i64),
            0xCB => Pack::Int(self.uint(8)? as i64),
            0xCC..=0xCE => {
                let n = self.uint(1 << (m - 0xCC))? as usize;
                Pack::Bytes(self.take(n)?.to_vec())
            }
            0x80..=0x8F => self.string((m & 0x0F) as usize).map(Pack::Str)?,
            0xD0..=0xD2 => {
                let n = self.uint(1 << (m - 0xD0))? as usize;
                Pack::Str(self.string(n)?)
            }
            0x90..=0x9F | 0xD4..=0xD6 => {
                let n = match m {
                    0x90..=0x9F => (m & 0x0F) as u64,
                    _ => self.uint(1 << (m - 0xD4))?,
                };
                let n = self.count(n)?;
                // Reserve little up front: each nesting level could otherwise reserve
                // for all the bytes left (64 levels x 48 bytes x the message, found by
                // the fuzzer); the vector grows with the items actually decoded.
                let mut l = Vec::with_capacity(n.min(RESERVE_MAX));
                for _ in 0..n {
                    l.push(self.value(depth + 1)?);
                }
                Pack::List(l)
            }
            0xA0..=0xAF | 0xD8..=0xDA => {
                let n = match m {
                    0xA0..=0xAF => (m & 0x0F) as u64,
                    _ => self.uint(1 << (m - 0xD8))?,
                };
                // Each entry is at least two bytes.
                let n = self.count(n.saturating_mul(2))? / 2;
                let mut e = Vec::with_capacity(n.min(RESERVE_MAX));
                for _ in 0..n {
                    let Pack::Str(k) = self.value(depth + 1)? else {
                        return Err(DecodeError::Key);
                    };
                    let v = self.value(depth + 1)?;
                    // A repeated key: the last one wins, as in a map literal.
                    match e.iter_mut().find(|(x, _): &&mut (String, Pack)| *x == k) {
                        Some(slot) => slot.1 = v,
                        None => e.push((k, v)),
                    }
                }
                Pack::Map(e)
            }
            0xB0..=0xBF => {
                let n = (m & 0x0F) as usize;
                let tag = self.u8()?;
                let mut f = Vec::with_capacity(n);
                for _ in 0..n {
                    f.push(self.value(depth + 1)?);
                }
                Pack::Struct(tag, f)
            }
            other => return Err(DecodeError::Marker(other)),
        })
    }
}

fn len_marker(out: &mut Vec<u8>, n: usize, tiny: u8, m8: u8) {
    if n < 16 && tiny != 0 {
        out.push(tiny | n as u8);
    } else if n <= u8::MAX as usize {
        out.push(m8);
        out.push(n as u8);
    } else if n <= u16::MAX as usize {
        out.push(m8 + 1);
        out.extend_from_slice(&(n as u16).to_be_bytes());
    } else {
        out.push(m8 + 2);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    }
}

/// Appends a string (for writers that encode without building a [`Pack`]).
pub fn encode_str(s: &str, out: &mut Vec<u8>) {
    len_marker(out, s.len(), 0x80, 0xD0);
    out.extend_from_slice(s.as_bytes());
}

/// Appends the header of a list of `n` items (the items follow).
pub fn list_header(n: usize, out: &mut Vec<u8>) {
    len_marker(out, n, 0x90, 0xD4);
}

/// Appends the header of a map of `n` entries (key, value pairs follow).
pub fn map_header(n: usize, out: &mut Vec<u8>) {
    len_marker(out, n, 0xA0, 0xD8);
}

/// Appends the header of a structure `tag` of `n` (at most 15) fields.
pub fn struct_header(n: usize, tag: u8, out: &mut Vec<u8>) {
    out.push(0xB0 | n.min(15) as u8);
    out.push(tag);
}

/// Appends the encoding of `v` (the smallest form of each integer and length).
pub fn encode(v: &Pack, out: &mut Vec<u8>) {
    match v {
        Pack::Null => out.push(0xC0),
        Pack::Bool(b) => out.push(if *b { 0xC3 } else { 0xC2 }),
        Pack::Int(i) => encode_int(*i, out),
        Pack::Float(f) => {
            out.push(0xC1);
            out.extend_from_slice(&f.to_bits().to_be_bytes());
        }
        Pack::Bytes(b) => {
            len_marker(out, b.len(), 0, 0xCC);
            out.extend_from_slice(b);
        }
        Pack::Str(s) => {
            len_marker(out, s.len(), 0x80, 0xD0);
            out.extend_from_slice(s.as_bytes());
        }
        Pack::List(l) => {
            len_marker(out, l.len(), 0x90, 0xD4);
            for x in l {
                encode(x, out);
            }
        }
        Pack::Map(m) => {
            len_marker(out, m.len(), 0xA0, 0xD8);
            for (k, x) in m {
                len_marker(out, k.len(), 0x80, 0xD0);
                out.extend_from_slice(k.as_bytes());
                encode(x, out);
            }
        }
        Pack::Struct(tag, fields) => {
            out.push(0xB0 | fields.len().min(15) as u8);
            out.push(*tag);
            for x in fields.iter().take(15) {
                encode(x, out);
            }
        }
    }
}

/// Appends an integer in its smallest form.
pub fn encode_int(i: i64, out: &mut Vec<u8>) {
    if (-16..=127).contains(&i) {
        out.push(i as i8 as u8);
    } else if i8::try_from(i).is_ok() {
        out.push(0xC8);
        out.push(i as i8 as u8);
    } else if let Ok(x) = i16::try_from(i) {
        out.push(0xC9);
        out.extend_from_slice(&x.to_be_bytes());
    } else if let Ok(x) = i32::try_from(i) {
        out.push(0xCA);
        out.extend_from_slice(&x.to_be_bytes());
    } else {
        out.push(0xCB);
        out.extend_from_slice(&i.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round(v: &Pack) -> Pack {
        let mut b = Vec::new();
        encode(v, &mut b);
        decode(&b).unwrap()
    }

    #[test]
    fn spec_examples() {
        let enc = |v: &Pack| {
            let mut b = Vec::new();
            encode(v, &mut b);
            b
        };
        assert_eq!(enc(&Pack::Int(1)), [0x01]);
        assert_eq!(enc(&Pack::Int(-16)), [0xF0]);
        assert_eq!(enc(&Pack::Int(-17)), [0xC8, 0xEF]);
        assert_eq!(enc(&Pack::Int(128)), [0xC9, 0x00, 0x80]);
        assert_eq!(enc(&Pack::Int(1 << 40)).len(), 9);
        assert_eq!(enc(&Pack::str("A")), [0x81, 0x41]);
        assert_eq!(enc(&Pack::List(vec![Pack::Int(1)])), [0x91, 0x01]);
        assert_eq!(
            enc(&Pack::map(vec![("a", Pack::Int(1))])),
            [0xA1, 0x81, 0x61, 0x01]
        );
        assert_eq!(enc(&Pack::Struct(0x70, vec![])), [0xB0, 0x70]);
    }

    #[test]
    fn lengths_larger_than_the_message_allocate_nothing() {
        // A list claiming 2^32-1 items in a 5-byte message.
        assert_eq!(
            decode(&[0xD6, 0xFF, 0xFF, 0xFF, 0xFF]),
            Err(DecodeError::Truncated)
        );
        assert_eq!(
            decode(&[0xDA, 0xFF, 0xFF, 0xFF, 0xFF]),
            Err(DecodeError::Truncated)
        );
        assert_eq!(
            decode(&[0xD2, 0xFF, 0xFF, 0xFF, 0xFF]),
            Err(DecodeError::Truncated)
        );
        let deep = vec![0x91; 10_000];
        assert!(matches!(decode(&deep), Err(DecodeError::Depth(_))));
    }

    fn pack() -> impl Strategy<Value = Pack> {
        let leaf = prop_oneof![
            Just(Pack::Null),
            any::<bool>().prop_map(Pack::Bool),
            any::<i64>().prop_map(Pack::Int),
            any::<f64>()
                .prop_filter("NaN != NaN", |f| !f.is_nan())
                .prop_map(Pack::Float),
            proptest::collection::vec(any::<u8>(), 0..300).prop_map(Pack::Bytes),
            ".{0,40}".prop_map(Pack::Str),
        ];
        leaf.prop_recursive(4, 64, 20, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..20).prop_map(Pack::List),
                proptest::collection::btree_map("[a-z]{1,5}", inner.clone(), 0..20)
                    .prop_map(|m| Pack::Map(m.into_iter().collect())),
                (any::<u8>(), proptest::collection::vec(inner, 0..15))
                    .prop_map(|(t, f)| Pack::Struct(t, f)),
            ]
        })
    }

    proptest! {
        #[test]
        fn round_trips(v in pack()) {
            prop_assert_eq!(round(&v), v);
        }

        /// Random and cut-short input: an error or a value, never a panic.
        #[test]
        fn random_input_never_panics(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode(&b);
        }

        #[test]
        fn truncated_values_are_errors(v in pack(), cut in 0usize..1000) {
            let mut b = Vec::new();
            encode(&v, &mut b);
            if cut < b.len() {
                prop_assert!(decode(&b[..cut]).is_err());
            }
        }
    }
}
