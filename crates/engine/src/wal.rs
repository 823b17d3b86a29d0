//! The write-ahead log: numbered files `wal-<n>.log` of committed transactions. A commit
//! returns after its record is on disk (`fdatasync`); opening the database replays, onto
//! the generation's delta, the log file its manifest names (`Manifest::log_start`) and
//! every later one, in order. A checkpoint starts a new file (under the commit lock, after
//! syncing the old one), goes on writing segments while commits append to the new file,
//! and publishes a generation whose manifest names the new file: the old one is then
//! stale. Whichever step a crash interrupts, the published manifest and the files from
//! its first log on hold every acknowledged commit exactly once.
//!
//! Layout: a 24-byte header (`QVWAL001`, the log's number, a CRC-32 of those 16 bytes),
//! then records `[payload length u32][CRC-32 of payload u32][payload]`. A payload is the
//! commit timestamp and the transaction's ops. A record that is cut short or fails its
//! checksum ends the log: it and anything after it are cut off at open (a torn write of
//! the last commit, which was never acknowledged). The file is preallocated ahead of its
//! records (`PREALLOC`, zeros): zeros end the log too, and are kept.

use crate::delta::{Op, Props};
use crate::value::{zone_id, Dur, Stamp, Value};
use quiver_storage::fsio::{self, DurableFile};
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

const MAGIC: &[u8; 8] = b"QVWAL001";
pub(crate) const HEADER: usize = 24;
/// A record larger than this is corruption, not a transaction (a big write goes to
/// segments, not the log).
const RECORD_MAX: usize = 1 << 31;

#[derive(Debug, thiserror::Error)]
pub enum WalError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {what}")]
    Corrupt { path: PathBuf, what: String },
}

pub fn path(dir: &Path, generation: u64) -> PathBuf {
    dir.join(format!("wal-{generation:06}.log"))
}

/// An open log, appended to by commits.
pub struct Wal {
    /// The file's number (`wal-<n>.log`).
    number: u64,
    path: PathBuf,
    file: DurableFile,
    /// The same open file, for `fdatasync` outside the commit lock.
    sync: Arc<DurableFile>,
    /// Bytes of the log (header included): where the next record goes.
    pub bytes: u64,
    /// The file's length: past `bytes` it is zeros, preallocated so that a commit's
    /// sync does not also journal a new file size (see `DurableFile::allocate`).
    allocated: u64,
    /// Set once the file system refused to preallocate: appends grow the file.
    no_prealloc: bool,
}

/// How far ahead the log's file is preallocated: a few thousand commits, and little to
/// read past the records at open.
const PREALLOC: u64 = 1 << 20;

/// What replay found.
pub struct Replay {
    pub records: Vec<(u64, Vec<Op>)>,
    /// Bytes cut from a torn or corrupted tail.
    pub cut_bytes: u64,
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> WalError + '_ {
    move |source| WalError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn header(n: u64) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..8].copy_from_slice(MAGIC);
    h[8..16].copy_from_slice(&n.to_le_bytes());
    let crc = crc32fast::hash(&h[..16]);
    h[16..20].copy_from_slice(&crc.to_le_bytes());
    h
}

impl Wal {
    /// Opens the log that starts at file `first`: replays it and every later file in
    /// order, cuts a torn tail of the last (the one commits append to; created when
    /// there is none), and removes the files before `first`.
    pub fn open(dir: &Path, first: u64) -> Result<(Wal, Replay), WalError> {
        let mut replay = Replay {
            records: Vec::new(),
            cut_bytes: 0,
        };
        let mut n = first;
        while path(dir, n + 1).exists() {
            // An earlier file of the chain was synced whole before the next one began.
            let p = path(dir, n);
            let bytes = match std::fs::read(&p) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
                Err(e) => return Err(io(&p)(e)),
            };
            records(&bytes, n, &mut replay.records);
            n += 1;
        }
        let (wal, last) = Wal::open_one(dir, n)?;
        replay.records.extend(last.records);
        replay.cut_bytes = last.cut_bytes;
        remove_logs_before(dir, first);
        Ok((wal, replay))
    }

    /// Opens (creating if needed) log file `n`, replays it and cuts a torn tail.
    fn open_one(dir: &Path, n: u64) -> Result<(Wal, Replay), WalError> {
        let p = path(dir, n);
        let mut replay = Replay {
            records: Vec::new(),
            cut_bytes: 0,
        };
        let exists = p.exists();
        let mut file = DurableFile::open_with(
            &p,
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false),
        )
        .map_err(io(&p))?;
        let mut bytes = Vec::new();
        file.file().read_to_end(&mut bytes).map_err(io(&p))?;
        let mut good = records(&bytes, n, &mut replay.records);
        // Zeros after the records are the preallocated end of the file, not a torn
        // record (a torn one leaves bytes that are not all zero).
        let mut allocated = bytes.len() as u64;
        if good == 0 && exists && bytes.len() >= HEADER {
            return Err(WalError::Corrupt {
                path: p,
                what: "not a log file of this database (bad header)".into(),
            });
        }
        if good < HEADER {
            // New, empty or torn while its header was written.
            file.file().set_len(0).map_err(io(&p))?;
            file.write_all(&header(n)).map_err(io(&p))?;
            file.sync_all().map_err(io(&p))?;
            fsync_dir(dir)?;
            good = HEADER;
            allocated = HEADER as u64;
        } else if good < bytes.len() && bytes[good..].iter().any(|&b| b != 0) {
            replay.cut_bytes = (bytes.len() - good) as u64;
            file.file().set_len(good as u64).map_err(io(&p))?;
            file.sync_all().map_err(io(&p))?;
            allocated = good as u64;
        }
        use std::io::Seek;
        file.seek(std::io::SeekFrom::Start(good as u64))
            .map_err(io(&p))?;
        let sync = Arc::new(file.try_clone().map_err(io(&p))?);
        Ok((
            Wal {
                number: n,
                path: p,
                file,
                sync,
                bytes: good as u64,
                allocated,
                no_prealloc: false,
            },
            replay,
        ))
    }

    /// The next log file, empty, for the commits after this one's (a checkpoint's start:
    /// the caller has synced this one and holds the commit lock).
    pub fn rotate(&self, dir: &Path) -> Result<Wal, WalError> {
        let n = self.number + 1;
        let p = path(dir, n);
        // A file of that number is not part of any chain (it would have been opened as
        // the last): whatever it holds is stale.
        let _ = std::fs::remove_file(&p);
        Ok(Wal::open_one(dir, n)?.0)
    }

    /// This file's number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The records of this file (what commits appended since it began), read back.
    pub fn read_back(&self) -> Result<Vec<(u64, Vec<Op>)>, WalError> {
        let bytes = std::fs::read(&self.path).map_err(io(&self.path))?;
        let mut out = Vec::new();
        records(&bytes, self.number, &mut out);
        Ok(out)
    }

    /// Appends one committed transaction and waits until it is on disk.
    pub fn append(&mut self, ts: u64, ops: &[Op]) -> Result<(), WalError> {
        self.append_record(OpLog::of(ops).finish(ts))
    }

    /// Appends a record built by an [`OpLog`] and waits until it is on disk.
    pub fn append_record(&mut self, rec: &[u8]) -> Result<(), WalError> {
        self.write_record(rec)?;
        self.sync_handle().sync_data().map_err(io(&self.path))
    }

    /// Appends a record without waiting for the disk: group commit writes each commit's
    /// record under the commit lock and syncs outside it, one sync for every record
    /// written meanwhile (see [`crate::store`]).
    pub fn write_record(&mut self, rec: &[u8]) -> Result<(), WalError> {
        let end = self.bytes + rec.len() as u64;
        if end > self.allocated && !self.no_prealloc {
            // The next stretch of the file, zeros until commits fill it.
            let to = end.next_multiple_of(PREALLOC);
            match self.file.allocate(self.allocated, to - self.allocated) {
                Ok(true) => self.allocated = to,
                Ok(false) => self.no_prealloc = true,
                Err(e) => return Err(io(&self.path)(e)),
            }
        }
        if let Err(e) = self.file.write_all(rec) {
            // Leave no half record behind for the next commit to follow.
            let _ = self.file.file().set_len(self.bytes);
            self.allocated = self.bytes;
            use std::io::Seek;
            let _ = self.file.seek(std::io::SeekFrom::Start(self.bytes));
            return Err(io(&self.path)(e));
        }
        self.bytes = end;
        self.allocated = self.allocated.max(end);
        Ok(())
    }

    /// A handle to the log file to sync without holding the log (it shares the file).
    pub fn sync_handle(&self) -> Arc<DurableFile> {
        self.sync.clone()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Reads the log that starts at file `first` without changing it (another process owns
/// it): the records of each file up to its first incomplete one.
pub fn read_only(dir: &Path, first: u64) -> Result<Replay, WalError> {
    let mut replay = Replay {
        records: Vec::new(),
        cut_bytes: 0,
    };
    let mut n = first;
    loop {
        let p = path(dir, n);
        let bytes = match std::fs::read(&p) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(replay),
            Err(e) => return Err(io(&p)(e)),
        };
        records(&bytes, n, &mut replay.records);
        n += 1;
    }
}

/// Decodes the records of log file `n` up to the first incomplete or damaged one;
/// returns where they end (0 when the header is not that file's).
fn records(bytes: &[u8], n: u64, out: &mut Vec<(u64, Vec<Op>)>) -> usize {
    if bytes.len() < HEADER || bytes[..HEADER] != header(n) {
        return 0;
    }
    let mut at = HEADER;
    while let Some((ts, ops, next)) = read_record(bytes, at) {
        out.push((ts, ops));
        at = next;
    }
    at
}

/// One log record, `[payload length][CRC-32][ts, op count, ops]`, built as a
/// transaction writes: its ops encoded as they come (a transaction holds its log record,
/// not copies of its ops): the record is framed at commit, when its timestamp is known.
#[derive(Debug)]
pub struct OpLog {
    buf: Vec<u8>,
    n: u32,
}

impl Default for OpLog {
    fn default() -> Self {
        OpLog {
            buf: vec![0; 20],
            n: 0,
        }
    }
}

impl OpLog {
    pub fn push(&mut self, op: &Op) {
        encode_op(&mut self.buf, op);
        self.n += 1;
    }

    pub fn of(ops: &[Op]) -> OpLog {
        let mut l = OpLog::default();
        for op in ops {
            l.push(op);
        }
        l
    }

    /// Bytes the encoded ops hold.
    pub fn bytes(&self) -> u64 {
        self.buf.capacity() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Ops written.
    pub fn len(&self) -> usize {
        self.n as usize
    }

    pub fn clear(&mut self) {
        self.buf.truncate(20);
        self.n = 0;
    }

    /// Whether the record still fits the log's record size limit.
    pub fn fits(&self) -> bool {
        self.buf.len() - 8 <= RECORD_MAX
    }

    /// The framed record with timestamp `ts`.
    pub fn finish(&mut self, ts: u64) -> &[u8] {
        self.buf[8..16].copy_from_slice(&ts.to_le_bytes());
        self.buf[16..20].copy_from_slice(&self.n.to_le_bytes());
        let payload = &self.buf[8..];
        let (len, crc) = (payload.len() as u32, crc32fast::hash(payload));
        self.buf[0..4].copy_from_slice(&len.to_le_bytes());
        self.buf[4..8].copy_from_slice(&crc.to_le_bytes());
        &self.buf
    }

    /// The ops back (to replay them on a newer head).
    pub fn ops(&mut self) -> Vec<Op> {
        read_record(self.finish(0), 0)
            .map(|(_, ops, _)| ops)
            .unwrap_or_default()
    }
}

/// Writes `ops` as a one-record file in the log's format (a generation's op file);
/// returns its size.
pub fn write_ops_file(p: &Path, ops: &[Op]) -> Result<u64, WalError> {
    let mut out = header(0).to_vec();
    out.extend_from_slice(OpLog::of(ops).finish(0));
    // Synced with the rest of the generation when it is published.
    DurableFile::create(p)
        .and_then(|mut f| f.write_all(&out))
        .map_err(io(p))?;
    Ok(out.len() as u64)
}

/// Reads an op file written by [`write_ops_file`]; any damage is an error (it is part
/// of a published generation).
pub fn read_ops_file(p: &Path) -> Result<Vec<Op>, WalError> {
    let bytes = std::fs::read(p).map_err(io(p))?;
    let mut recs = Vec::new();
    let end = records(&bytes, 0, &mut recs);
    match recs.pop() {
        Some((_, ops)) if recs.is_empty() && end == bytes.len() => Ok(ops),
        _ => Err(WalError::Corrupt {
            path: p.to_path_buf(),
            what: "bad header, checksum mismatch or truncated".into(),
        }),
    }
}

fn fsync_dir(dir: &Path) -> Result<(), WalError> {
    fsio::sync_dir(dir).map_err(io(dir))
}

/// Removes the log files numbered before `first` (stale: the manifest starts after them).
pub fn remove_logs_before(dir: &Path, first: u64) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let n = e.file_name().to_string_lossy().to_string();
        if let Some(g) = n
            .strip_prefix("wal-")
            .and_then(|x| x.strip_suffix(".log"))
            .and_then(|x| x.parse::<u64>().ok())
        {
            if g < first {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

fn read_record(b: &[u8], at: usize) -> Option<(u64, Vec<Op>, usize)> {
    let len = u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(b.get(at + 4..at + 8)?.try_into().ok()?);
    if len > RECORD_MAX {
        return None;
    }
    let payload = b.get(at + 8..at + 8 + len)?;
    if crc32fast::hash(payload) != crc {
        return None;
    }
    let mut r = Reader { b: payload, at: 0 };
    let ts = r.u64()?;
    let n = r.u32()? as usize;
    let mut ops = Vec::with_capacity(n.min(1 << 20));
    for _ in 0..n {
        ops.push(r.op()?);
    }
    Some((ts, ops, at + 8 + len))
}

// ---------------------------------------------------------------------------------------
// Encoding

fn put_u32(o: &mut Vec<u8>, x: u32) {
    o.extend_from_slice(&x.to_le_bytes());
}

fn put_u64(o: &mut Vec<u8>, x: u64) {
    o.extend_from_slice(&x.to_le_bytes());
}

fn put_str(o: &mut Vec<u8>, s: &str) {
    put_u32(o, s.len() as u32);
    o.extend_from_slice(s.as_bytes());
}

fn put_value(o: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Bool(b) => {
            o.push(1);
            o.push(*b as u8);
        }
        Value::Int(i) => {
            o.push(2);
            put_u64(o, *i as u64);
        }
        Value::Float(f) => {
            o.push(3);
            put_u64(o, f.to_bits());
        }
        Value::Str(s) => {
            o.push(4);
            put_str(o, s);
        }
        Value::List(l) => {
            o.push(5);
            put_u32(o, l.len() as u32);
            for x in l.iter() {
                put_value(o, x);
            }
        }
        Value::Date(d) => {
            o.push(6);
            put_u64(o, *d as u64);
        }
        // Tags 7 and 8 (microseconds) are still read from older logs.
        Value::LocalDateTime(s) => {
            o.push(9);
            put_u64(o, s.secs as u64);
            put_u32(o, s.nanos);
        }
        Value::DateTime(s, offset, zone) => {
            o.push(10);
            put_u64(o, s.secs as u64);
            put_u32(o, s.nanos);
            put_u32(o, *offset as u32);
            put_str(o, &crate::value::zone_name(*zone).unwrap_or_default());
        }
        Value::LocalTime(t) => {
            o.push(11);
            put_u64(o, *t as u64);
        }
        Value::Time(t, offset) => {
            o.push(12);
            put_u64(o, *t as u64);
            put_u32(o, *offset as u32);
        }
        Value::Bytes(b) => {
            o.push(14);
            put_u32(o, b.len() as u32);
            o.extend_from_slice(b);
        }
        Value::Duration(d) => {
            o.push(13);
            put_u64(o, d.months as u64);
            put_u64(o, d.days as u64);
            put_u64(o, d.secs as u64);
            put_u32(o, d.nanos as u32);
        }
        // Property values are checked before they reach the log: what follows is
        // written only by [`encode_value`] (rows a query spills to disk).
        Value::Map(m) => {
            o.push(15);
            put_u32(o, m.len() as u32);
            for (k, x) in m.iter() {
                put_str(o, k);
                put_value(o, x);
            }
        }
        Value::Node(n) => {
            o.push(16);
            put_u64(o, *n);
        }
        Value::Rel(r) => {
            o.push(17);
            put_rel(o, r);
        }
        Value::Path(p) => {
            o.push(18);
            put_u32(o, p.nodes.len() as u32);
            for &n in &p.nodes {
                put_u64(o, n);
            }
            for r in &p.rels {
                put_rel(o, r);
            }
        }
        Value::Null => o.push(0),
    }
}

fn put_rel(o: &mut Vec<u8>, r: &crate::value::RelRef) {
    put_u32(o, r.ty);
    put_u32(o, r.src);
    put_u32(o, r.dst);
    put_u64(o, r.eid);
}

/// Appends any value in the log's encoding (nodes, relationships, paths and maps too):
/// the rows a query spills to disk.
pub fn encode_value(o: &mut Vec<u8>, v: &Value) {
    put_value(o, v);
}

/// Reads a value [`encode_value`] wrote at `*at`, moving `at` past it; `None` when the
/// bytes are not one.
pub fn decode_value(b: &[u8], at: &mut usize) -> Option<Value> {
    let mut r = Reader { b, at: *at };
    let v = r.value(0)?;
    *at = r.at;
    Some(v)
}

fn put_props(o: &mut Vec<u8>, p: &Props) {
    put_u32(o, p.len() as u32);
    for (k, v) in p {
        put_str(o, k);
        put_value(o, v);
    }
}

fn encode_op(o: &mut Vec<u8>, op: &Op) {
    match op {
        Op::CreateNode { id, labels, props } => {
            o.push(1);
            put_u64(o, *id);
            put_u32(o, labels.len() as u32);
            for l in labels {
                put_str(o, l);
            }
            put_props(o, props);
        }
        Op::DeleteNode { id } => {
            o.push(2);
            put_u64(o, *id);
        }
        Op::SetNodeProp { id, key, value } => {
            o.push(3);
            put_u64(o, *id);
            put_str(o, key);
            put_value(o, value);
        }
        Op::AddLabel { id, label } => {
            o.push(4);
            put_u64(o, *id);
            put_str(o, label);
        }
        Op::RemoveLabel { id, label } => {
            o.push(5);
            put_u64(o, *id);
            put_str(o, label);
        }
        Op::CreateRel {
            ty,
            eid,
            src,
            dst,
            props,
        } => {
            o.push(6);
            put_str(o, ty);
            put_u64(o, *eid);
            put_u64(o, *src);
            put_u64(o, *dst);
            put_props(o, props);
        }
        Op::DeleteRel { ty, eid, src, dst } => {
            o.push(7);
            put_str(o, ty);
            put_u64(o, *eid);
            put_u64(o, *src);
            put_u64(o, *dst);
        }
        Op::SetRelProp {
            ty,
            eid,
            src,
            dst,
            key,
            value,
        } => {
            o.push(8);
            put_str(o, ty);
            put_u64(o, *eid);
            put_u64(o, *src);
            put_u64(o, *dst);
            put_str(o, key);
            put_value(o, value);
        }
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.b.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn rel(&mut self) -> Option<crate::value::RelRef> {
        Some(crate::value::RelRef {
            ty: self.u32()?,
            src: self.u32()?,
            dst: self.u32()?,
            eid: self.u64()?,
        })
    }
    fn str(&mut self) -> Option<Arc<str>> {
        let n = self.u32()? as usize;
        Some(Arc::from(std::str::from_utf8(self.take(n)?).ok()?))
    }
    fn value(&mut self, depth: u32) -> Option<Value> {
        Some(match self.u8()? {
            0 => Value::Null,
            1 => Value::Bool(self.u8()? != 0),
            2 => Value::Int(self.u64()? as i64),
            3 => Value::Float(f64::from_bits(self.u64()?)),
            4 => Value::Str(self.str()?),
            5 if depth < 32 => {
                let n = self.u32()? as usize;
                let mut l = Vec::with_capacity(n.min(1 << 16));
                for _ in 0..n {
                    l.push(self.value(depth + 1)?);
                }
                Value::list(l)
            }
            6 => Value::Date(self.u64()? as i64),
            7 => Value::local_datetime_us(self.u64()? as i64),
            8 => Value::datetime_us(self.u64()? as i64),
            9 => Value::LocalDateTime(Stamp {
                secs: self.u64()? as i64,
                nanos: self.u32()?.min(999_999_999),
            }),
            10 => {
                let (secs, nanos, offset) = (self.u64()? as i64, self.u32()?, self.u32()? as i32);
                let zone = self.str()?;
                Value::DateTime(
                    Stamp {
                        secs,
                        nanos: nanos.min(999_999_999),
                    },
                    offset,
                    if zone.is_empty() { 0 } else { zone_id(&zone) },
                )
            }
            11 => Value::LocalTime(self.u64()? as i64),
            14 => {
                let n = self.u32()? as usize;
                Value::Bytes(Arc::from(self.take(n)?))
            }
            12 => Value::Time(self.u64()? as i64, self.u32()? as i32),
            13 => Value::Duration(Arc::new(Dur {
                months: self.u64()? as i64,
                days: self.u64()? as i64,
                secs: self.u64()? as i64,
                nanos: (self.u32()? as i32).clamp(0, 999_999_999),
            })),
            15 if depth < 32 => {
                let n = self.u32()? as usize;
                let mut m = Vec::with_capacity(n.min(1 << 16));
                for _ in 0..n {
                    let k = self.str()?;
                    m.push((k, self.value(depth + 1)?));
                }
                Value::Map(Arc::new(m))
            }
            16 => Value::Node(self.u64()?),
            17 => Value::Rel(self.rel()?),
            18 => {
                let n = self.u32()? as usize;
                if n == 0 {
                    return None;
                }
                let mut nodes = Vec::with_capacity(n.min(1 << 16));
                for _ in 0..n {
                    nodes.push(self.u64()?);
                }
                let mut rels = Vec::with_capacity((n - 1).min(1 << 16));
                for _ in 1..n {
                    rels.push(self.rel()?);
                }
                Value::Path(Arc::new(crate::value::PathVal { nodes, rels }))
            }
            _ => return None,
        })
    }
    fn props(&mut self) -> Option<Props> {
        let n = self.u32()? as usize;
        let mut p = Vec::with_capacity(n.min(1 << 16));
        for _ in 0..n {
            let k = self.str()?;
            p.push((k, self.value(0)?));
        }
        Some(p)
    }
    fn op(&mut self) -> Option<Op> {
        Some(match self.u8()? {
            1 => {
                let id = self.u64()?;
                let n = self.u32()? as usize;
                let mut labels = Vec::with_capacity(n.min(1024));
                for _ in 0..n {
                    labels.push(self.str()?);
                }
                Op::CreateNode {
                    id,
                    labels,
                    props: self.props()?,
                }
            }
            2 => Op::DeleteNode { id: self.u64()? },
            3 => Op::SetNodeProp {
                id: self.u64()?,
                key: self.str()?,
                value: self.value(0)?,
            },
            4 => Op::AddLabel {
                id: self.u64()?,
                label: self.str()?,
            },
            5 => Op::RemoveLabel {
                id: self.u64()?,
                label: self.str()?,
            },
            6 => Op::CreateRel {
                ty: self.str()?,
                eid: self.u64()?,
                src: self.u64()?,
                dst: self.u64()?,
                props: self.props()?,
            },
            7 => Op::DeleteRel {
                ty: self.str()?,
                eid: self.u64()?,
                src: self.u64()?,
                dst: self.u64()?,
            },
            8 => Op::SetRelProp {
                ty: self.str()?,
                eid: self.u64()?,
                src: self.u64()?,
                dst: self.u64()?,
                key: self.str()?,
                value: self.value(0)?,
            },
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(i: u64) -> Vec<Op> {
        vec![
            Op::CreateNode {
                id: i,
                labels: vec![Arc::from("User")],
                props: vec![
                    (Arc::from("id"), Value::Int(i as i64)),
                    (Arc::from("name"), Value::str("Ada")),
                    (
                        Arc::from("tags"),
                        Value::list(vec![Value::str("a"), Value::Float(1.5)]),
                    ),
                ],
            },
            Op::CreateRel {
                ty: Arc::from("FOLLOWS"),
                eid: i,
                src: i,
                dst: 0,
                props: vec![(Arc::from("since"), Value::Date(18000))],
            },
        ]
    }

    #[test]
    fn round_trip_and_torn_tail() {
        let d = tempfile::tempdir().unwrap();
        let end = {
            let (mut w, r) = Wal::open(d.path(), 3).unwrap();
            assert!(r.records.is_empty());
            for i in 0..10 {
                w.append(i + 1, &ops(i)).unwrap();
            }
            w.bytes as usize
        };
        let p = path(d.path(), 3);
        // The records, without the preallocated zeros after them.
        let full = std::fs::read(&p).unwrap()[..end].to_vec();
        // Every cut inside the last record loses exactly that record.
        let (_, r) = Wal::open(d.path(), 3).unwrap();
        assert_eq!(r.records.len(), 10);
        assert_eq!(r.records[4], (5, ops(4)));
        let last_len = full.len() - {
            let mut at = HEADER;
            for _ in 0..9 {
                let len = u32::from_le_bytes(full[at..at + 4].try_into().unwrap()) as usize;
                at += 8 + len;
            }
            at
        };
        for cut in 1..last_len {
            std::fs::write(&p, &full[..full.len() - cut]).unwrap();
            let (_, r) = Wal::open(d.path(), 3).unwrap();
            assert_eq!(r.records.len(), 9, "cut {cut}");
            assert_eq!(
                std::fs::metadata(&p).unwrap().len() as usize,
                full.len() - last_len
            );
        }
        // A flipped byte in record 6 ends the log there.
        let mut bad = full.clone();
        let mut at = HEADER;
        for _ in 0..6 {
            let len = u32::from_le_bytes(bad[at..at + 4].try_into().unwrap()) as usize;
            at += 8 + len;
        }
        bad[at + 12] ^= 0x40;
        std::fs::write(&p, &bad).unwrap();
        let (_, r) = Wal::open(d.path(), 3).unwrap();
        assert_eq!(r.records.len(), 6);
        assert!(r.cut_bytes > 0);
    }

    /// The file runs ahead of its records (zeros, preallocated): an open keeps them and
    /// cuts nothing, the next commit goes right after the last record, and a torn record
    /// before the zeros is still cut.
    #[test]
    fn preallocated_zeros_end_the_log_and_stay() {
        let d = tempfile::tempdir().unwrap();
        let p = path(d.path(), 1);
        let end = {
            let (mut w, _) = Wal::open(d.path(), 1).unwrap();
            for i in 0..5 {
                w.append(i + 1, &ops(i)).unwrap();
            }
            w.bytes
        };
        let len = std::fs::metadata(&p).unwrap().len();
        #[cfg(target_os = "linux")]
        assert!(len > end, "preallocated: {len} > {end}");
        let (mut w, r) = Wal::open(d.path(), 1).unwrap();
        assert_eq!(r.records.len(), 5);
        assert_eq!(r.cut_bytes, 0);
        assert_eq!(w.bytes, end);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), len);
        w.append(6, &ops(5)).unwrap();
        let end = w.bytes;
        drop(w);
        let (_, r) = Wal::open(d.path(), 1).unwrap();
        assert_eq!(r.records.len(), 6);
        assert_eq!(r.records[5], (6, ops(5)));
        // A record torn among the zeros: its first bytes written, the rest not.
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[end as usize..end as usize + 5].copy_from_slice(&[40, 0, 0, 0, 7]);
        std::fs::write(&p, &bytes).unwrap();
        let (w, r) = Wal::open(d.path(), 1).unwrap();
        assert_eq!(r.records.len(), 6);
        assert!(r.cut_bytes > 0);
        assert_eq!(w.bytes, end);
    }

    #[test]
    fn other_generations_are_removed() {
        let d = tempfile::tempdir().unwrap();
        drop(Wal::open(d.path(), 1).unwrap());
        assert!(path(d.path(), 1).exists());
        drop(Wal::open(d.path(), 2).unwrap());
        assert!(!path(d.path(), 1).exists());
    }
}
