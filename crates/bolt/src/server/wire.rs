//! Bolt on the wire: the message tags, the version handshake (and the manifest
//! negotiation of Bolt 5.7+), and chunked messages read and written within a size bound.

use super::*;

pub(crate) const HELLO: u8 = 0x01;

pub(crate) const GOODBYE: u8 = 0x02;

pub(crate) const RESET: u8 = 0x0F;

pub(crate) const RUN: u8 = 0x10;

pub(crate) const BEGIN: u8 = 0x11;

pub(crate) const COMMIT: u8 = 0x12;

pub(crate) const ROLLBACK: u8 = 0x13;

pub(crate) const DISCARD: u8 = 0x2F;

pub(crate) const PULL: u8 = 0x3F;

pub(crate) const TELEMETRY: u8 = 0x54;

pub(crate) const ROUTE: u8 = 0x66;

pub(crate) const LOGON: u8 = 0x6A;

pub(crate) const LOGOFF: u8 = 0x6B;

pub(crate) const SUCCESS: u8 = 0x70;

pub(crate) const RECORD: u8 = 0x71;

pub(crate) const IGNORED: u8 = 0x7E;

pub(crate) const FAILURE: u8 = 0x7F;

/// The Bolt versions served: 5.1 (the first with LOGON) to 5.4.
pub(crate) const VERSIONS: (u8, u8) = (1, 4);

/// The v1 manifest marker a proposal holds when the client speaks it.
pub(crate) const MANIFEST: [u8; 4] = [0, 0, 1, 0xFF];

/// What the server answers a client's preamble and four proposals.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Hello {
    /// Not Bolt (an HTTP request...): nothing is answered.
    NotBolt,
    /// No version in common: zeros are answered and the connection closes.
    Refused,
    /// This 5.x minor version is answered.
    Version(u8),
    /// The client offered the v1 manifest: the server answers it (`MANIFEST_REPLY`),
    /// then reads the client's pick ([`manifest_pick`]).
    Manifest,
}

/// The server's manifest: the marker, one range (5.hi down to 5.lo), no capabilities.
pub(crate) const MANIFEST_REPLY: [u8; 10] = [
    0,
    0,
    1,
    0xFF,
    1,
    0,
    VERSIONS.1 - VERSIONS.0,
    VERSIONS.1,
    5,
    0,
];

/// Chooses from the 20 bytes a client opens with: the preamble and four proposals. A
/// proposal is `[0, range, minor, major]`: versions `major.minor` down to
/// `major.(minor - range)`.
pub(crate) fn hello(b: &[u8; 20]) -> Hello {
    if b[..4] != [0x60, 0x60, 0xB0, 0x17] {
        return Hello::NotBolt;
    }
    if b[4..].chunks(4).any(|p| p == MANIFEST) {
        return Hello::Manifest;
    }
    for p in b[4..].chunks(4) {
        let (range, minor, major) = (p[1], p[2], p[3]);
        if major != 5 {
            continue;
        }
        let lo = minor.saturating_sub(range);
        let pick = minor.min(VERSIONS.1);
        if pick >= lo.max(VERSIONS.0) {
            return Hello::Version(pick);
        }
    }
    Hello::Refused
}

/// After the manifest: the client's pick (4 bytes) and its capabilities (a varint of
/// at most 10 bytes, none understood). `None` while `b` holds less than both; else the
/// version (`None` when outside what was offered) and the bytes taken.
pub(crate) fn manifest_pick(b: &[u8]) -> Option<(Option<(u8, u8)>, usize)> {
    if b.len() < 5 {
        return None;
    }
    let caps = b[4..].iter().take(10).position(|c| c & 0x80 == 0);
    let used = match caps {
        Some(i) => 4 + i + 1,
        None if b.len() >= 14 => 14,
        None => return None,
    };
    let (minor, major) = (b[2], b[3]);
    let (lo, hi) = VERSIONS;
    Some((
        (major == 5 && (lo..=hi).contains(&minor)).then_some((5, minor)),
        used,
    ))
}

/// The handshake over a blocking stream: reads the client's preamble and proposals;
/// answers the version chosen (or zero, and `None`). When the client offers the v1
/// manifest (`00 00 01 FF`, which drivers for Bolt 5.7+ send first), the server
/// answers with it and reads the version the client picked. (The server speaks it over
/// its non-blocking sockets in `net`, with the same [`hello`] and [`manifest_pick`].)
pub fn handshake(s: &mut (impl Read + Write)) -> io::Result<Option<(u8, u8)>> {
    let mut b = [0u8; 20];
    s.read_exact(&mut b)?;
    match hello(&b) {
        Hello::NotBolt => Ok(None),
        Hello::Refused => {
            s.write_all(&[0, 0, 0, 0])?;
            s.flush()?;
            Ok(None)
        }
        Hello::Version(minor) => {
            s.write_all(&[0, 0, minor, 5])?;
            s.flush()?;
            Ok(Some((5, minor)))
        }
        Hello::Manifest => {
            s.write_all(&MANIFEST_REPLY)?;
            s.flush()?;
            let mut got = Vec::new();
            loop {
                if let Some((v, _)) = manifest_pick(&got) {
                    return Ok(v);
                }
                let mut one = [0u8; 1];
                s.read_exact(&mut one)?;
                got.push(one[0]);
            }
        }
    }
}

/// Reads one chunked message (chunks until a zero-length one), refusing more than
/// `max` bytes. `Ok(None)` at a clean end of stream. A client's reader (the tests');
/// the server takes messages out of what arrived with [`take_message`].
pub fn read_message(r: &mut impl Read, max: usize) -> io::Result<Option<Vec<u8>>> {
    let mut msg = Vec::new();
    loop {
        let mut h = [0u8; 2];
        match r.read_exact(&mut h) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof && msg.is_empty() => {
                return Ok(None)
            }
            Err(e) => return Err(e),
        }
        let n = u16::from_be_bytes(h) as usize;
        if n == 0 {
            if msg.is_empty() {
                continue; // a NOOP chunk (keep-alive)
            }
            return Ok(Some(msg));
        }
        if msg.len() + n > max {
            return Err(too_large(max));
        }
        let at = msg.len();
        msg.resize(at + n, 0);
        r.read_exact(&mut msg[at..])?;
    }
}

pub(crate) fn too_large(max: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("a message larger than {max} bytes"),
    )
}

/// The first whole chunked message at the start of `buf`, and the bytes it and the
/// NOOP chunks before it take; `None` while it has not all arrived. Refuses a message
/// whose chunks declare more than `max` bytes as soon as their headers are in, so an
/// incomplete one never makes the server buffer more.
pub fn take_message(buf: &[u8], max: usize) -> io::Result<Option<(Vec<u8>, usize)>> {
    let mut at = 0;
    let mut size = 0usize;
    let mut first = None; // where the message's first chunk starts
    loop {
        let Some(h) = buf.get(at..at + 2) else {
            return Ok(None);
        };
        let n = u16::from_be_bytes([h[0], h[1]]) as usize;
        if n == 0 {
            at += 2;
            match first {
                None => continue, // a NOOP chunk (keep-alive)
                Some(start) => {
                    let mut msg = Vec::with_capacity(size);
                    let mut p = start;
                    while p + 2 < at {
                        let n = u16::from_be_bytes([buf[p], buf[p + 1]]) as usize;
                        msg.extend_from_slice(&buf[p + 2..p + 2 + n]);
                        p += 2 + n;
                    }
                    return Ok(Some((msg, at)));
                }
            }
        }
        first.get_or_insert(at);
        size += n;
        if size > max {
            return Err(too_large(max));
        }
        if buf.len() < at + 2 + n {
            return Ok(None);
        }
        at += 2 + n;
    }
}

/// Appends `v` as one chunked message.
pub fn write_message(out: &mut Vec<u8>, v: &Pack) {
    let mut body = Vec::new();
    encode(v, &mut body);
    write_chunked(out, &body);
}

/// Appends an encoded message `body` in chunks, then the end marker.
pub fn write_chunked(out: &mut Vec<u8>, body: &[u8]) {
    for c in body.chunks(u16::MAX as usize) {
        out.extend_from_slice(&(c.len() as u16).to_be_bytes());
        out.extend_from_slice(c);
    }
    out.extend_from_slice(&[0, 0]);
}
