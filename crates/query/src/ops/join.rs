//! `ValueHashJoin`: binds a node found by a property equal to a value its input row
//! computes (`MATCH (a:A), (b:B) WHERE b.k = a.k`), where no index answers the
//! equality. Without it each input row scans every `B` (a nested loop, rows x nodes).
//!
//! The operator hashes the scanned side once: each node's value of the property goes
//! into a table of `(hash, node)` sorted by hash, with a directory of buckets by the
//! hash's top bits (16 bytes a node, plus 4 a bucket). Each input row then probes it.
//! Every value `=` calls equal hashes alike (integers and floats by their numeric
//! value). Whole numbers up to 2^53 hash by a bijection, so between them an equal hash
//! is equality; any other match is checked against the node's value before it leaves,
//! so a collision costs a property read, never a wrong row.
//!
//! - **Small inputs** (a few rows, then the end of the input): the rows' hashes are the
//!   table instead and the scan streams past them, as the nested loop it replaces did.
//! - **Past the grant**: when the table does not fit, the input rows go to
//!   [`PARTITIONS`] files by their hash (`spill.rs`), and each partition is then
//!   answered by a table of the nodes whose hash falls in it (a grace hash join).
//!
//! The planner uses it only in statements that do not write: the table is the graph as
//! the operator first saw it.

use super::spill::{Partition, Partitions, PARTITIONS};
use super::*;
use quiver_common::memory::prefetch;
use std::hash::{BuildHasher, Hash, Hasher};

/// Input rows at most for which the scanned side streams past the rows' hashes instead
/// of being hashed itself.
const SMALL_INPUT: usize = 16;

/// Nodes the build scan reads at once.
const SCAN_CHUNK: u64 = 1 << 16;

/// The hasher of join keys: fixed, so that the input's rows and the table agree, and
/// a partition's rows are found again by the same bits.
fn hasher() -> foldhash::fast::FixedState {
    foldhash::fast::FixedState::with_seed(0x5157_4a4f_494e_0001)
}

/// A number as the float `=` compares it by (`None` for anything else).
fn as_float(v: &Value) -> Option<f64> {
    match *v {
        Value::Int(i) => Some(i as f64),
        Value::Float(f) => Some(f),
        _ => None,
    }
}

/// Hashes `v` so that values `=` calls equal hash alike; false when `v = x` is never
/// true (null, NaN, a list holding one of them).
fn join_hash<H: Hasher>(v: &Value, h: &mut H) -> bool {
    match v {
        Value::Null => return false,
        Value::Bool(b) => (1u8, *b).hash(h),
        // `=` compares a float and an integer as floats: hash every number as one.
        Value::Int(_) | Value::Float(_) => match as_float(v) {
            Some(f) if !f.is_nan() => (2u8, if f == 0.0 { 0 } else { f.to_bits() }).hash(h),
            _ => return false,
        },
        Value::Str(s) => (3u8, s.as_bytes()).hash(h),
        Value::List(l) => {
            (4u8, l.len()).hash(h);
            for x in l.iter() {
                if !join_hash(x, h) {
                    return false;
                }
            }
        }
        Value::Node(n) => (5u8, n).hash(h),
        Value::Rel(r) => (6u8, r.ty, r.eid).hash(h),
        Value::Date(d) => (7u8, d).hash(h),
        Value::LocalTime(t) => (8u8, t).hash(h),
        Value::LocalDateTime(s) => (9u8, s.secs, s.nanos).hash(h),
        Value::Bytes(b) => (10u8, b.as_ref()).hash(h),
        // Equal in ways a hash of their fields would not follow (entries in any order,
        // instants in any offset, durations, paths): one hash per kind.
        other => (11u8, std::mem::discriminant(other)).hash(h),
    }
    true
}

/// Largest integer a float holds exactly, and its neighbours too.
const EXACT: f64 = 9_007_199_254_740_992.0;

/// A bijection of 64-bit words (xor-shifts and odd multipliers), so that two integers
/// share a hash only when they are equal.
fn mix(mut x: u64) -> u64 {
    x ^= x >> 32;
    x = x.wrapping_mul(0xd6e8_feb8_6659_fd93);
    x ^= x >> 32;
    x = x.wrapping_mul(0xd6e8_feb8_6659_fd93);
    x ^ (x >> 32)
}

/// Kinds of exact hashes: two values of one kind share a hash exactly when `=` calls
/// them equal. 0 is none (a match must be checked).
const INEXACT: u8 = 0;
const WHOLE_NUMBER: u8 = 1;
const DATE: u8 = 2;
const LOCAL_TIME: u8 = 3;
const WHOLE_SECOND: u8 = 4;

/// The join hash of `v` and its exact kind: whole numbers of at most 2^53 in
/// magnitude, dates, local times and local datetimes on a whole second are hashed by a
/// bijection of one word (see the kinds above). `None` when `v` can equal nothing.
fn key_hash(v: &Value) -> Option<(u64, u8)> {
    match *v {
        Value::Int(_) | Value::Float(_) => {
            let f = as_float(v).filter(|f| !f.is_nan())?;
            // Hashed by the float `=` compares (an integer past 2^53 rounds to its
            // neighbour's float, and equals it): exact only when nothing was rounded.
            if f.fract() == 0.0 && f.abs() <= EXACT {
                let exact = match *v {
                    Value::Int(i) => i.unsigned_abs() <= 1 << 53,
                    _ => true,
                };
                let kind = if exact { WHOLE_NUMBER } else { INEXACT };
                return Some((mix(f as i64 as u64), kind));
            }
        }
        Value::Date(d) => return Some((mix(d as u64), DATE)),
        Value::LocalTime(t) => return Some((mix(t as u64), LOCAL_TIME)),
        Value::LocalDateTime(s) if s.nanos == 0 => return Some((mix(s.secs as u64), WHOLE_SECOND)),
        _ => {}
    }
    let mut h = hasher().build_hasher();
    join_hash(v, &mut h).then(|| (h.finish(), INEXACT))
}

/// The exact kind shared by every hash so far (`None`: none yet), after one of `kind`.
fn shared_kind(acc: Option<u8>, kind: u8) -> Option<u8> {
    match acc {
        Some(a) if a != kind => Some(INEXACT),
        _ => Some(kind),
    }
}

/// Whether a match of a key of exact kind `key` in hashes of shared kind `table` is
/// certain without reading the node's value.
fn certain(key: u8, table: Option<u8>) -> bool {
    key != INEXACT && table == Some(key)
}

/// The partition of a hash when the join spills (low bits; buckets use the top ones).
fn partition_of(hash: u64) -> usize {
    (hash as usize) % PARTITIONS
}

/// `(hash, node)` of every node of `ranges` that has property `prop`, read a column
/// run at a time, `SCAN_CHUNK` nodes per call.
struct BuildScan {
    range: usize,
    node: u64,
    vals: Vec<Value>,
    live: Vec<bool>,
    /// The exact kind every value read so far shares (see [`key_hash`]).
    kind: Option<u8>,
}

impl BuildScan {
    fn new(ranges: &[ScanRange]) -> BuildScan {
        BuildScan {
            range: 0,
            node: ranges.first().map_or(0, |r| r.lo),
            vals: Vec::new(),
            live: Vec::new(),
            kind: None,
        }
    }

    /// Appends the next chunk's entries to `out`; false once every range is read.
    fn next_chunk(
        &mut self,
        cx: &Cx,
        ranges: &[ScanRange],
        prop: &str,
        out: &mut Vec<(u64, u64)>,
    ) -> Result<bool, QueryError> {
        let g = cx.env.g;
        let Some(r) = ranges.get(self.range) else {
            return Ok(false);
        };
        let hi = r.hi.min(g.n_nodes());
        let lo = self.node.min(hi);
        let end = hi.min(lo + SCAN_CHUNK);
        self.vals.clear();
        g.node_prop_range(lo, end, prop, &mut self.vals)?;
        self.live.clear();
        if r.label.is_none() && g.scans_check_life() {
            g.live_mask(lo, end, r.table_label, &mut self.live);
        }
        for (i, v) in self.vals.iter().enumerate() {
            let n = lo + i as u64;
            if matches!(v, Value::Null) || self.live.get(i) == Some(&false) {
                continue;
            }
            if let Some(l) = r.label {
                if !g.has_label(n, l)? {
                    continue;
                }
            }
            if let Some((h, kind)) = key_hash(v) {
                self.kind = shared_kind(self.kind, kind);
                out.push((h, n));
            }
        }
        self.node = end;
        if end >= hi {
            self.range += 1;
            self.node = ranges.get(self.range).map_or(0, |r| r.lo);
        }
        Ok(true)
    }
}

/// The hashed side: entries sorted by hash, and where each bucket of the top `bits`
/// bits starts.
struct Table {
    entries: Vec<(u64, u64)>,
    starts: Vec<u32>,
    bits: u32,
    /// The exact kind every hashed value shares.
    kind: Option<u8>,
}

impl Table {
    fn bytes_for(entries: usize) -> u64 {
        let buckets = entries.next_power_of_two().max(2);
        (entries * 16 + buckets * 4 + 4) as u64
    }

    /// Bytes [`Table::new`] holds at once while it orders `entries` (a second array).
    fn peak_bytes_for(entries: usize) -> u64 {
        Self::bytes_for(entries) + entries as u64 * 16
    }

    /// The table of `entries`: placed by bucket (a counting sort on the top bits, two
    /// passes), then each bucket of several sorted by hash.
    fn new(entries: Vec<(u64, u64)>, kind: Option<u8>) -> Table {
        let bits = entries.len().next_power_of_two().max(2).trailing_zeros();
        let bucket = |h: u64| (h >> (64 - bits)) as usize;
        let mut starts = vec![0u32; (1usize << bits) + 1];
        for &(h, _) in &entries {
            starts[bucket(h) + 1] += 1;
        }
        for i in 1..starts.len() {
            starts[i] += starts[i - 1];
        }
        let mut at = starts.clone();
        let mut placed = vec![(0u64, 0u64); entries.len()];
        for e in entries {
            let b = bucket(e.0);
            placed[at[b] as usize] = e;
            at[b] += 1;
        }
        drop(at);
        for w in starts.windows(2) {
            if w[1] - w[0] > 1 {
                placed[w[0] as usize..w[1] as usize].sort_unstable();
            }
        }
        Table {
            entries: placed,
            starts,
            bits,
            kind,
        }
    }

    fn bucket(&self, hash: u64) -> usize {
        (hash >> (64 - self.bits)) as usize
    }

    /// Where the entries of `hash` start and end.
    fn find(&self, hash: u64) -> (usize, usize) {
        let b = self.bucket(hash);
        let (lo, hi) = (self.starts[b] as usize, self.starts[b + 1] as usize);
        let bucket = &self.entries[lo..hi];
        let a = bucket.partition_point(|e| e.0 < hash);
        let z = bucket.partition_point(|e| e.0 <= hash);
        (lo + a, lo + z)
    }
}

/// An input batch being answered from a table: each row's matches, one at a time.
struct Probe {
    batch: Batch,
    /// Each row's value, and whether a match must be checked against the node's.
    keys: Vec<(Value, bool)>,
    /// Each row's entries in the table.
    spans: Vec<(usize, usize)>,
    row: usize,
}

/// Drops the rows of `out` whose node (the last column) does not have `prop` equal
/// to their key: `check` holds (row of `out`, key) for the rows a hash alone does not
/// decide.
fn verify(
    cx: &Cx,
    prop: &str,
    out: &mut Batch,
    check: &[(usize, &Value)],
) -> Result<(), QueryError> {
    if check.is_empty() {
        return Ok(());
    }
    let col = out.width() - 1;
    let nodes: Vec<Value> = check
        .iter()
        .map(|&(r, _)| out.cols[col][r].clone())
        .collect();
    let mut vals = Vec::with_capacity(nodes.len());
    cx.env.g.node_prop_batch(&nodes, prop, &mut vals)?;
    let mut keep = vec![true; out.len];
    let mut dropped = false;
    for (&(r, key), v) in check.iter().zip(&vals) {
        if key.eq3(v) != Some(true) {
            keep[r] = false;
            dropped = true;
        }
    }
    if dropped {
        out.filter(&keep);
    }
    Ok(())
}

/// The input of one pass (for a join under an `Optional`, one argument batch).
enum Phase {
    /// Nothing read yet.
    Start,
    /// A few rows, then the end: the scan streams past their hashes.
    Stream {
        rows: Batch,
        /// The rows' hashes, sorted, with the row and its key's exact kind.
        hashes: Vec<(u64, usize, u8)>,
        keys: Vec<Value>,
        scan: BuildScan,
        found: Vec<(u64, u64)>,
    },
    /// Probing the table with the input's batches.
    Probing,
    /// The input went to partition files; `parts` are answered one after another.
    Partitioned {
        parts: std::vec::IntoIter<Partition>,
        cur: Option<Partition>,
        width: usize,
    },
}

pub struct ValueHashJoin {
    pub input: BoxOp,
    /// The nodes that may match (a label scan's ranges).
    pub ranges: Vec<ScanRange>,
    /// Their property the input's value must equal.
    pub prop: Arc<str>,
    /// The value, computed from the input row.
    pub key: CExpr,
    table: Option<Table>,
    /// The table did not fit: every pass partitions its input.
    spills: bool,
    phase: Phase,
    probe: Option<Probe>,
    /// Input batches read ahead of the table being made.
    ahead: Vec<Batch>,
    grant: Option<Grant>,
}

impl ValueHashJoin {
    pub fn new(input: BoxOp, ranges: Vec<ScanRange>, prop: Arc<str>, key: CExpr) -> Self {
        ValueHashJoin {
            input,
            ranges,
            prop,
            key,
            table: None,
            spills: false,
            phase: Phase::Start,
            probe: None,
            ahead: Vec::new(),
            grant: None,
        }
    }

    fn grant<'a>(grant: &'a mut Option<Grant>, cx: &Cx) -> &'a mut Grant {
        grant.get_or_insert_with(|| cx.budget.empty_grant("ValueHashJoin"))
    }

    /// Hashes the scanned side whole, if the grant allows it (`false`: it spills).
    fn build(&mut self, cx: &mut Cx) -> Result<bool, QueryError> {
        let can_spill = cx.temp_dir.is_some();
        let mut entries = Vec::new();
        let mut scan = BuildScan::new(&self.ranges);
        while scan.next_chunk(cx, &self.ranges, &self.prop, &mut entries)? {
            cx.check_cancel()?;
            let bytes = Table::bytes_for(entries.capacity());
            let grant = Self::grant(&mut self.grant, cx);
            if can_spill {
                if !account_or_spill(grant, bytes, "ValueHashJoin")? {
                    grant.force_resize(0);
                    return Ok(false);
                }
            } else {
                account(grant, bytes, "ValueHashJoin")?;
            }
        }
        let n = entries.len();
        let grant = Self::grant(&mut self.grant, cx);
        if can_spill {
            if !account_or_spill(grant, Table::peak_bytes_for(n), "ValueHashJoin")? {
                grant.force_resize(0);
                return Ok(false);
            }
        } else {
            account(grant, Table::peak_bytes_for(n), "ValueHashJoin")?;
        }
        self.table = Some(Table::new(entries, scan.kind));
        Self::grant(&mut self.grant, cx).force_resize(Table::bytes_for(n));
        Ok(true)
    }

    /// The table of the nodes whose hash falls in partition `p`.
    fn build_partition(&mut self, cx: &mut Cx, p: usize) -> Result<(), QueryError> {
        self.table = None;
        let mut entries = Vec::new();
        let mut chunk = Vec::new();
        let mut scan = BuildScan::new(&self.ranges);
        while scan.next_chunk(cx, &self.ranges, &self.prop, &mut chunk)? {
            cx.check_cancel()?;
            entries.extend(chunk.drain(..).filter(|e| partition_of(e.0) == p));
            let bytes = Table::bytes_for(entries.capacity());
            account(Self::grant(&mut self.grant, cx), bytes, "ValueHashJoin")?;
        }
        let peak = Table::peak_bytes_for(entries.len());
        account(Self::grant(&mut self.grant, cx), peak, "ValueHashJoin")?;
        self.table = Some(Table::new(entries, scan.kind));
        Ok(())
    }

    /// Starts answering `b` from the table.
    fn start_probe(&mut self, cx: &Cx, b: Batch) -> Result<(), QueryError> {
        let table = self.table.as_ref().expect("built");
        let keys = eval_col(&cx.env, &self.key, &b)?;
        let hashes: Vec<Option<(u64, u8)>> = keys.iter().map(key_hash).collect();
        // The table is bigger than the caches: ask for every row's bucket, then its
        // entries, before reading any, so that the misses overlap.
        for &(h, _) in hashes.iter().flatten() {
            prefetch(&table.starts[table.bucket(h)]);
        }
        for &(h, _) in hashes.iter().flatten() {
            let lo = table.starts[table.bucket(h)] as usize;
            if let Some(e) = table.entries.get(lo) {
                prefetch(e);
            }
        }
        let spans = hashes
            .iter()
            .map(|h| h.map_or((0, 0), |(h, _)| table.find(h)))
            .collect();
        let keys = keys
            .into_iter()
            .zip(&hashes)
            .map(|(k, h)| {
                let sure = h.is_some_and(|(_, kind)| certain(kind, table.kind));
                (k, !sure)
            })
            .collect();
        self.probe = Some(Probe {
            batch: b,
            keys,
            spans,
            row: 0,
        });
        Ok(())
    }

    /// The next rows of the batch being probed (`None` once it is answered).
    fn emit_probe(&mut self, cx: &Cx) -> Result<Option<Batch>, QueryError> {
        let Some(p) = self.probe.as_mut() else {
            return Ok(None);
        };
        let table = self.table.as_ref().expect("a probe has its table");
        loop {
            let mut out = Batch::empty(p.batch.width() + 1);
            let mut check = Vec::new();
            while p.row < p.batch.len && out.len < BATCH_ROWS {
                let (a, z) = &mut p.spans[p.row];
                if a == z {
                    p.row += 1;
                    continue;
                }
                let take = (*z - *a).min(BATCH_ROWS - out.len);
                let (key, unsure) = &p.keys[p.row];
                for &(_, n) in &table.entries[*a..*a + take] {
                    if *unsure {
                        check.push((out.len, key));
                    }
                    out.push_row_from(&p.batch, p.row, &[Value::Node(n)]);
                }
                *a += take;
            }
            verify(cx, &self.prop, &mut out, &check)?;
            let done = p.row >= p.batch.len;
            if out.len > 0 || done {
                if done {
                    self.probe = None;
                }
                return Ok((out.len > 0).then_some(out));
            }
        }
    }

    /// Sends the rest of the input, `first` included, to partition files by hash.
    fn partition(&mut self, cx: &mut Cx, first: Vec<Batch>) -> Result<Phase, QueryError> {
        let dir = cx.temp_dir.clone().ok_or_else(|| {
            QueryError::Argument(
                "ValueHashJoin could not spill: no temporary directory (--temp-dir)".into(),
            )
        })?;
        let grant = Self::grant(&mut self.grant, cx);
        let mut parts = Partitions::new(&dir, 0, "ValueHashJoin", grant.budget().limit_bytes())?;
        grant.force_resize(parts.buffer_bytes());
        let mut width = 0;
        let mut pending = first.into_iter();
        loop {
            let b = match pending.next() {
                Some(b) => b,
                None => match cx.full(|cx| self.input.next(cx))? {
                    Some(b) => b,
                    None => break,
                },
            };
            cx.check_cancel()?;
            width = b.width();
            let keys = eval_col(&cx.env, &self.key, &b)?;
            for (row, k) in keys.iter().enumerate() {
                if let Some((h, _)) = key_hash(k) {
                    parts.write_to(partition_of(h), b.cols.iter().map(|c| &c[row]))?;
                }
            }
        }
        Ok(Phase::Partitioned {
            parts: parts.finish(width)?.into_iter(),
            cur: None,
            width,
        })
    }

    /// The next batch of a partitioned pass; `None` when every partition is answered.
    fn next_partitioned(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        loop {
            if let Some(b) = self.emit_probe(cx)? {
                return Ok(Some(b));
            }
            let Phase::Partitioned { parts, cur, width } = &mut self.phase else {
                unreachable!("called in the partitioned phase")
            };
            let width = *width;
            if cur.is_none() {
                let Some(p) = parts.next() else {
                    self.table = None;
                    return Ok(None);
                };
                let index = p.index;
                *cur = Some(p);
                self.build_partition(cx, index)?;
            }
            let Phase::Partitioned { cur, .. } = &mut self.phase else {
                unreachable!()
            };
            let part = cur.as_mut().expect("set above");
            let mut b = Batch::empty(width);
            while b.len < BATCH_ROWS {
                let Some(rec) = part.next_record()? else {
                    *cur = None;
                    break;
                };
                for (c, v) in b.cols.iter_mut().zip(rec) {
                    c.push(v);
                }
                b.len += 1;
            }
            if b.len > 0 {
                self.start_probe(cx, b)?;
            }
        }
    }

    /// The next batch of a streamed pass; `None` when the scan is done.
    fn next_streamed(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        let Phase::Stream {
            rows,
            hashes,
            keys,
            scan,
            found,
        } = &mut self.phase
        else {
            unreachable!("called in the streaming phase")
        };
        loop {
            found.clear();
            if !scan.next_chunk(cx, &self.ranges, &self.prop, found)? {
                return Ok(None);
            }
            cx.check_cancel()?;
            let mut out = Batch::empty(rows.width() + 1);
            let mut check = Vec::new();
            for &(h, n) in found.iter() {
                let a = hashes.partition_point(|e| e.0 < h);
                for &(_, row, kind) in hashes[a..].iter().take_while(|e| e.0 == h) {
                    if !certain(kind, scan.kind) {
                        check.push((out.len, &keys[row]));
                    }
                    out.push_row_from(rows, row, &[Value::Node(n)]);
                }
            }
            verify(cx, &self.prop, &mut out, &check)?;
            if out.len > 0 {
                return Ok(Some(out));
            }
        }
    }
}

impl Op for ValueHashJoin {
    fn mem_peak(&self) -> u64 {
        self.grant.as_ref().map_or(0, |g| g.bytes())
    }

    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        loop {
            match self.phase {
                Phase::Stream { .. } => match self.next_streamed(cx)? {
                    Some(b) => return Ok(Some(b)),
                    None => {
                        self.phase = Phase::Start;
                        return Ok(None);
                    }
                },
                Phase::Partitioned { .. } => match self.next_partitioned(cx)? {
                    Some(b) => return Ok(Some(b)),
                    None => {
                        self.phase = Phase::Start;
                        return Ok(None);
                    }
                },
                Phase::Probing => {
                    if let Some(b) = self.emit_probe(cx)? {
                        return Ok(Some(b));
                    }
                    let b = match self.ahead.pop() {
                        Some(b) => b,
                        None => match self.input.next(cx)? {
                            Some(b) => b,
                            None => {
                                self.phase = Phase::Start;
                                return Ok(None);
                            }
                        },
                    };
                    self.start_probe(cx, b)?;
                }
                Phase::Start => {
                    // A pass begins: read a little of the input to decide how to answer it.
                    let Some(first) = self.input.next(cx)? else {
                        return Ok(None);
                    };
                    let mut ahead = vec![first];
                    if self.table.is_none() && !self.spills && ahead[0].len <= SMALL_INPUT {
                        match self.input.next(cx)? {
                            Some(b) => ahead.push(b),
                            None => {
                                let rows = ahead.pop().expect("one batch");
                                let keys = eval_col(&cx.env, &self.key, &rows)?;
                                let mut hashes: Vec<(u64, usize, u8)> = keys
                                    .iter()
                                    .enumerate()
                                    .filter_map(|(i, k)| key_hash(k).map(|(h, e)| (h, i, e)))
                                    .collect();
                                hashes.sort_unstable();
                                self.phase = Phase::Stream {
                                    rows,
                                    hashes,
                                    keys,
                                    scan: BuildScan::new(&self.ranges),
                                    found: Vec::new(),
                                };
                                continue;
                            }
                        }
                    }
                    if self.table.is_none() && !self.spills && !self.build(cx)? {
                        self.spills = true;
                    }
                    if self.spills {
                        self.phase = self.partition(cx, ahead)?;
                        continue;
                    }
                    ahead.reverse();
                    self.ahead = ahead;
                    self.phase = Phase::Probing;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn num() -> impl Strategy<Value = Value> {
        prop_oneof![
            (-4i64..4).prop_map(Value::Int),
            (-4i64..4).prop_map(|i| Value::Float(i as f64)),
            prop_oneof![
                Just(0.5),
                Just(-0.0),
                Just(f64::NAN),
                Just(9.007199254740993e15)
            ]
            .prop_map(Value::Float),
            Just(Value::Int((1 << 53) + 1)),
            Just(Value::Null),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        prop_oneof![
            num(),
            "[ab]{0,2}".prop_map(|s| Value::Str(s.into())),
            any::<bool>().prop_map(Value::Bool),
            proptest::collection::vec(num(), 0..3).prop_map(|l| Value::List(l.into())),
            (-3i64..3).prop_map(Value::Date),
            (-3i64..3).prop_map(Value::LocalTime),
            (-3i64..3, prop_oneof![Just(0u32), Just(5)]).prop_map(|(secs, nanos)| {
                Value::LocalDateTime(crate::value::Stamp { secs, nanos })
            }),
        ]
    }

    proptest! {
        /// Values `=` calls equal share a hash; a value with no hash equals nothing.
        #[test]
        fn equal_values_hash_alike(a in value(), b in value()) {
            let (ha, hb) = (key_hash(&a), key_hash(&b));
            if a.eq3(&b) == Some(true) {
                prop_assert!(ha.is_some());
                prop_assert_eq!(ha.map(|h| h.0), hb.map(|h| h.0));
            }
            if ha.is_none() {
                prop_assert_ne!(a.eq3(&b), Some(true));
            }
            // Two exact hashes of one kind are equal only for equal values.
            if let (Some((x, k)), Some((y, l))) = (ha, hb) {
                if certain(k, Some(l)) {
                    prop_assert_eq!(x == y, a.eq3(&b) == Some(true));
                }
            }
        }
    }

    #[test]
    fn table_finds_every_entry_of_a_hash() {
        let entries: Vec<(u64, u64)> = (0..1000u64)
            .map(|i| (key_hash(&Value::Int((i % 37) as i64)).unwrap().0, i))
            .collect();
        let t = Table::new(entries, Some(WHOLE_NUMBER));
        for k in 0..37i64 {
            let (a, z) = t.find(key_hash(&Value::Int(k)).unwrap().0);
            let mut nodes: Vec<u64> = t.entries[a..z].iter().map(|e| e.1).collect();
            nodes.sort_unstable();
            let want: Vec<u64> = (0..1000u64).filter(|i| (i % 37) as i64 == k).collect();
            assert_eq!(nodes, want);
        }
        let (a, z) = t.find(key_hash(&Value::Int(99)).unwrap().0);
        assert_eq!(a, z);
    }
}
