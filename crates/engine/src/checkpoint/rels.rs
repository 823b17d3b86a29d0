//! Relationship segments a checkpoint writes: a direct write's relationships as a CSR
//! segment of their type (`write_bulk_rels`), created relationships per type, and the
//! merge of a type's newest segments once it has more than four (`merge_rel_segments`).

use super::*;

/// The CSR both ways of `rels` (renumbered `0..`, relative to the segment).
/// Writes relationships `bulk` (shape `k` of a bulk write) as a new segment of its
/// type: CSR out and in, and property rows in the type's columns (a new type takes the
/// shape's). Values that fit no column are carried as ops. Returns the count.
pub(crate) fn write_bulk_rels(
    staging: &Staging,
    m: &mut Manifest,
    k: usize,
    mut bulk: BulkRels,
    carried: &mut Vec<Op>,
) -> Result<u64, EngineError> {
    let n = bulk.ends.len() as u64;
    if let Some(&(a, z)) = bulk
        .ends
        .iter()
        .find(|&&(a, z)| a >= m.n_nodes || z >= m.n_nodes)
    {
        return Err(EngineError::Refused(format!(
            "a relationship from node {a} to node {z} names a node past the last one ({})",
            m.n_nodes
        )));
    }
    let existing = m.rel_types.iter().position(|r| *r.name == *bulk.ty);
    let first_edge = existing.map_or(0, |i| m.rel_types[i].n_edges);
    let columns: Vec<PropertyMeta> = match existing {
        Some(i) => m.rel_types[i].columns.clone(),
        None => bulk
            .keys
            .iter()
            .enumerate()
            .map(|(c, key)| PropertyMeta {
                name: key.to_string(),
                dtype: bulk
                    .groups
                    .iter()
                    .find_map(|(g, _)| g[c].as_ref().map(|b| b.dtype))
                    .unwrap_or(DataType::Scalar(ScalarType::String)),
            })
            .collect(),
    };
    let carry = |carried: &mut Vec<Op>, row: u64, key: &Arc<str>, value: Value| {
        let (src, dst) = bulk.ends[row as usize];
        carried.push(Op::SetRelProp {
            ty: bulk.ty.clone(),
            eid: first_edge + row,
            src,
            dst,
            key: key.clone(),
            value,
        });
    };
    // Values outside the columns: a key without one, or a group of another type.
    let mut first = 0u64;
    for (group, len) in &bulk.groups {
        for (c, key) in bulk.keys.iter().enumerate() {
            let Some(b) = &group[c] else { continue };
            let fits = columns
                .iter()
                .any(|col| *col.name == **key && col.dtype == b.dtype);
            if !fits {
                for i in 0..*len {
                    let v = value_at(b, i);
                    if !v.is_null() {
                        carry(carried, first + i as u64, key, v);
                    }
                }
            }
        }
        first += *len as u64;
    }
    let props = if columns.is_empty() {
        None
    } else {
        let name = format!("rels-bulk-{k:04}-props.seg");
        let mut w = TableWriter::create(staging, &name, columns.clone())?;
        let mut first = 0u64;
        let no_groups = bulk.groups.is_empty();
        for (mut group, len) in std::mem::take(&mut bulk.groups) {
            let mut out = Vec::with_capacity(columns.len());
            for col in &columns {
                let at = bulk.keys.iter().position(|k| **k == *col.name);
                match at.and_then(|c| group[c].take()) {
                    Some(b) if b.dtype == col.dtype => out.push(b),
                    _ => out.push(ColumnBuilder::nulls(col.dtype, len)),
                }
            }
            w.write_row_group(&out)?;
            first += len as u64;
        }
        if no_groups {
            // A shape without keys under a type with columns: rows of nulls.
            let mut left = n;
            while left > 0 {
                let len = left.min(ROW_GROUP_ROWS_MAX as u64) as usize;
                let out: Vec<ColumnBuilder> = columns
                    .iter()
                    .map(|col| ColumnBuilder::nulls(col.dtype, len))
                    .collect();
                w.write_row_group(&out)?;
                left -= len as u64;
            }
        }
        debug_assert!(no_groups || first == n);
        Some(w.finish()?)
    };
    for (row, key, value) in bulk.misfits {
        carry(carried, row, &key, value);
    }
    let seg = write_rel_segment(
        staging,
        &format!("rels-bulk-{k:04}"),
        m.n_nodes,
        &bulk.ends,
        None,
        props,
    )?;
    add_rel_segment(m, existing, &bulk.ty, columns, seg);
    Ok(n)
}

/// A type's segments are merged only once it has more than this many: expansions
/// read up to this many segments a node, and each merge rewrites what it merges
/// (measured on 1M relationships loaded in 100k batches: merging at every second
/// batch cost a fifth of the load).
const MERGE_SEGMENTS_MIN: usize = 4;

/// Bytes a merge holds per relationship: its ends in edge-id order (16) and one
/// direction's sorted entries at a time (24).
const MERGE_BYTES_PER_EDGE: u64 = 40;

/// Merges the newest segments of each relationship type into one, as an LSM merges
/// its runs: every direct write of relationships (a batch of `CALL { } IN
/// TRANSACTIONS`, a LOAD CSV, `import --append`) adds a segment, and each segment has
/// CSR offsets over every node, so many small ones cost disk and a lookup each per
/// expansion. Walking back from the newest segment that `db` holds unchanged, a
/// segment joins the run while it has no more than twice the edges of the segments
/// after it: sizes then grow geometrically, a type keeps a logarithmic number of
/// segments, and each edge is rewritten a bounded number of times.
///
/// Merged: segments with explicit edge ids (written by a write or a checkpoint; an
/// imported property-less segment numbers edges by position, which a merge would make
/// explicit and bigger) that all have a property file (holding a prefix of the type's
/// columns) or, for a type without columns, none. Edge ids stay the same (the merged segment lists its edges in edge-id
/// order), deletions carry over by edge id, property row groups are copied as stored
/// (the type's patches apply to them by row group as before). A merge that would not
/// fit the memory limit is left to a later checkpoint. Returns how many segments went
/// into merged ones.
pub(crate) fn merge_rel_segments(
    db: &Database,
    staging: &Staging,
    m: &mut Manifest,
    memory: &quiver_common::memory::MemoryBudget,
) -> Result<u64, EngineError> {
    let mut merged = 0;
    let n_nodes = m.n_nodes;
    for (t, rt) in m.rel_types.iter_mut().enumerate() {
        let (Some(old), Some(open)) = (db.manifest().rel_types.get(t), db.rel_types().get(t))
        else {
            continue;
        };
        if old.name != rt.name {
            continue;
        }
        let footers: Vec<bool> = open
            .csr_footers()
            .map(|(o, i)| o.edge_ids.is_some() && i.edge_ids.is_some())
            .collect();
        let props_ok = |s: usize| match &rt.segments[s].props {
            None => rt.columns.is_empty(),
            Some(_) => db
                .rel_segment_prop_columns(t, s)
                .is_some_and(|n| n <= rt.columns.len()),
        };
        let held = rt
            .segments
            .iter()
            .zip(&old.segments)
            .take_while(|(a, b)| a == b)
            .count();
        let ok = |i: usize| footers.get(i) == Some(&true) && props_ok(i);
        if rt.segments.len() <= MERGE_SEGMENTS_MIN || held < 2 || !ok(held - 1) {
            continue;
        }
        let mut i = held - 1;
        let mut acc = rt.segments[i].n_edges;
        while i > 0 && ok(i - 1) && rt.segments[i - 1].n_edges <= 2 * acc {
            i -= 1;
            acc += rt.segments[i].n_edges;
        }
        if held - i < 2 {
            continue;
        }
        let Ok(_grant) =
            memory.try_grant(acc * MERGE_BYTES_PER_EDGE, "merging relationship segments")
        else {
            continue;
        };
        let mut ends = Vec::with_capacity(acc as usize);
        let mut dead = Bits::new(acc);
        for s in i..held {
            let (e, d) = db.rel_segment_ends(t, s)?;
            let base = ends.len() as u64;
            for k in 0..e.len() as u64 {
                if d.get(k) {
                    dead.set(base + k);
                }
            }
            ends.extend(e);
        }
        let tag = format!("rels-{t:04}-merged-{i:04}");
        let props = if rt.columns.is_empty() {
            None
        } else {
            let mut w =
                TableWriter::create(staging, &format!("{tag}-props.seg"), rt.columns.clone())?;
            for s in i..held {
                let Some(groups) = db.rel_segment_prop_chunks(t, s)? else {
                    return Err(EngineError::Refused(format!(
                        "relationship type {} segment {s} has no property file to merge",
                        rt.name
                    )));
                };
                for (n, mut chunks) in groups {
                    // Columns added after the segment was written: the type's patch
                    // files hold their chunks for every row group; null ones stand here.
                    for col in &rt.columns[chunks.len().min(rt.columns.len())..] {
                        let mut b = Vec::new();
                        ColumnBuilder::nulls(col.dtype, n as usize).encode(&mut b);
                        chunks.push(b);
                    }
                    w.copy_row_group(n, &chunks)?;
                }
            }
            Some(w.finish()?)
        };
        let seg = write_rel_segment(
            staging,
            &tag,
            n_nodes,
            &ends,
            (dead.count() > 0).then_some(&dead),
            props,
        )?;
        drop(ends);
        merged += (held - i) as u64;
        rt.segments.splice(i..held, [seg]);
    }
    Ok(merged)
}

/// A relationship segment over `ends` (edge ids: their positions) in files named after
/// `tag`: CSR both ways, the deletion bitmaps of `dead` (by edge id), `props` as given.
pub(crate) fn write_rel_segment(
    staging: &Staging,
    tag: &str,
    n_nodes: u64,
    ends: &[(u64, u64)],
    dead: Option<&Bits>,
    props: Option<SegmentMeta>,
) -> Result<RelSegmentMeta, EngineError> {
    let (out, inc, dead_at) = write_csr(staging, tag, n_nodes, ends, dead)?;
    let deleted = match dead_at {
        Some([o, i]) => Some(write_deleted(
            staging,
            &format!("{tag}-deleted.seg"),
            &[&o, &i],
        )?),
        None => None,
    };
    Ok(RelSegmentMeta::new(
        ends.len() as u64,
        out,
        inc,
        props,
        deleted,
    ))
}

/// Adds `seg` to relationship type `existing` (its position in the manifest), or as the
/// first segment of a new type `name` with `columns`.
pub(crate) fn add_rel_segment(
    m: &mut Manifest,
    existing: Option<usize>,
    name: &str,
    columns: Vec<PropertyMeta>,
    seg: RelSegmentMeta,
) {
    match existing {
        Some(i) => {
            m.rel_types[i].n_edges += seg.n_edges;
            m.rel_types[i].segments.push(seg);
        }
        None => m.rel_types.push(RelTypeMeta {
            name: name.to_string(),
            n_edges: seg.n_edges,
            columns,
            segments: vec![seg],
            start_space: None,
            end_space: None,
            patches: Vec::new(),
        }),
    }
}

/// A CSR segment per direction over relationships `ends` (edge ids: their positions),
/// in files named after `tag`; with `dead` (by edge id), the deletion bitmaps of both
/// directions (by entry position).
#[allow(clippy::type_complexity)]
fn write_csr(
    staging: &Staging,
    tag: &str,
    n_nodes: u64,
    ends: &[(u64, u64)],
    dead: Option<&Bits>,
) -> Result<(SegmentMeta, SegmentMeta, Option<[Bits; 2]>), EngineError> {
    let mut metas = Vec::new();
    let mut maps = Vec::new();
    for dir in [Direction::Out, Direction::In] {
        let mut entries: Vec<(u64, u64, u64)> = ends
            .iter()
            .enumerate()
            .map(|(i, &(src, dst))| match dir {
                Direction::Out => (src, dst, i as u64),
                Direction::In => (dst, src, i as u64),
            })
            .collect();
        entries.sort_unstable();
        if let Some(dead) = dead {
            let mut bits = Bits::new(entries.len() as u64);
            for (pos, e) in entries.iter().enumerate() {
                if dead.get(e.2) {
                    bits.set(pos as u64);
                }
            }
            maps.push(bits);
        }
        let mut degrees = vec![0u32; n_nodes as usize];
        for e in &entries {
            degrees[e.0 as usize] += 1;
        }
        let name = match dir {
            Direction::Out => format!("{tag}-out.seg"),
            Direction::In => format!("{tag}-in.seg"),
        };
        let mut w = CsrWriter::create(staging, &name, &degrees, entries.len() as u64, true)?;
        for (_, nb, eid) in entries {
            w.push(nb as u32, eid)?;
        }
        metas.push(w.finish()?);
    }
    let inc = metas.pop().expect("two directions");
    let out = metas.pop().expect("two directions");
    let dead = match (maps.pop(), maps.pop()) {
        (Some(i), Some(o)) => Some([o, i]),
        _ => None,
    };
    Ok((out, inc, dead))
}
