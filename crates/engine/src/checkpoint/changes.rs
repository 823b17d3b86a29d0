//! What a checkpoint does with changes to entities of earlier segments: property and
//! label changes folded into patch files ([`crate::fold`]), deletions as bitmaps, and
//! what neither takes (the diff of a record against its segment row) carried as ops.

use super::*;

/// Folds property changes to entities of `db`'s segments, and label changes of nodes
/// (`labels`: node, its new `:LABEL` value, the ops to carry if it does not fold), into
/// patch files of their tables (see [`crate::fold`]); what does not fold is carried.
/// Returns how many values folded and the names of the columns rewritten.
pub(crate) fn fold_changes(
    db: &Database,
    staging: &Staging,
    m: &mut Manifest,
    changes: Vec<Op>,
    labels: Vec<(u64, Value, Vec<Op>)>,
    carried: &mut Vec<Op>,
) -> Result<(u64, Vec<Arc<str>>), EngineError> {
    use crate::fold::{fold_table, split_ops, RowSet, Target, LABEL_KEY};
    use quiver_storage::TableRef;
    let mut split = split_ops(db, changes, carried);
    let mut label_ops: HashMap<u64, Vec<Op>> = HashMap::new();
    for (id, value, ops) in labels {
        let (t, row) = db.node_location(id)?;
        split.nodes.entry(t).or_default().push(RowSet {
            row,
            key: Arc::from(LABEL_KEY),
            value,
        });
        label_ops.insert(id, ops);
    }
    let mut n = 0u64;
    let mut names: Vec<Arc<str>> = Vec::new();
    let mut tables: Vec<_> = split.nodes.into_iter().collect();
    tables.sort_by_key(|(t, _)| *t);
    for (t, sets) in tables {
        let table = &db.node_tables()[t];
        let meta = &mut m.node_tables[t];
        let first = meta.first_node;
        let total = sets.len() as u64;
        let frozen = meta.id_column.into_iter().collect();
        let (left, keys) = fold_table(
            db,
            staging,
            Target {
                tref: TableRef::Node(t),
                tag: format!("nodes-{t:04}"),
                footer: &table.footer,
                columns: &mut meta.columns,
                patches: &mut meta.patches,
                frozen,
            },
            sets,
        )?;
        n += total - left.len() as u64;
        if meta.label_column.is_none() {
            meta.label_column = meta.columns.iter().position(|c| c.name == LABEL_KEY);
        }
        for s in left {
            if &*s.key == LABEL_KEY {
                carried.extend(label_ops.remove(&(first + s.row)).unwrap_or_default());
                continue;
            }
            carried.push(Op::SetNodeProp {
                id: first + s.row,
                key: s.key,
                value: s.value,
            });
        }
        names.extend(keys);
    }
    let mut rels: Vec<_> = split.rels.into_iter().collect();
    rels.sort_by_key(|(t, _)| *t);
    for (t, sets) in rels {
        let r = &db.rel_types()[t];
        let Some(footer) = r.props_footer() else {
            continue;
        };
        let ends: HashMap<u64, (u64, u64)> =
            sets.iter().map(|(s, a, z)| (s.row, (*a, *z))).collect();
        let sets: Vec<_> = sets.into_iter().map(|(s, _, _)| s).collect();
        let total = sets.len() as u64;
        let meta = &mut m.rel_types[t];
        let (left, keys) = fold_table(
            db,
            staging,
            Target {
                tref: TableRef::Rel(t),
                tag: format!("rels-{t:04}"),
                footer,
                columns: &mut meta.columns,
                patches: &mut meta.patches,
                frozen: Vec::new(),
            },
            sets,
        )?;
        n += total - left.len() as u64;
        for s in left {
            let (src, dst) = ends[&s.row];
            carried.push(Op::SetRelProp {
                ty: Arc::from(meta.name.as_str()),
                eid: s.row,
                src,
                dst,
                key: s.key,
                value: s.value,
            });
        }
        names.extend(keys);
    }
    Ok((n, names))
}

/// Writes a deletion file of `maps` (bitmaps of one length).
pub(crate) fn write_deleted(
    staging: &Staging,
    name: &str,
    maps: &[&Bits],
) -> Result<DeletedMeta, EngineError> {
    let len = maps.first().map_or(0, |b| b.len());
    let held: Vec<_> = maps.iter().map(|b| b.words()).collect();
    let words: Vec<&[u64]> = held.iter().map(|w| &w[..]).collect();
    let file = quiver_storage::write::write_bitmaps(staging, name, len, &words)?;
    Ok(DeletedMeta {
        count: maps.first().map_or(0, |b| b.count()),
        file,
    })
}

/// Rewrites node table `t` of `m` without its rows' data when every row is deleted: no
/// columns, no patches, no labels (label scans no longer visit it), one empty segment;
/// its deletion bitmap stays, so its ids stay dead (node ids are positions: the rows
/// cannot leave the id space, but their bytes can). The old files leave the disk with
/// their generation's other unreferenced files ([`Staging`]). A table in an id space's
/// index keeps its rows (the index names them).
pub(crate) fn compact_if_dead(
    staging: &Staging,
    m: &mut Manifest,
    t: usize,
) -> Result<bool, EngineError> {
    let table = &m.node_tables[t];
    let dead = table
        .deleted
        .as_ref()
        .is_some_and(|d| d.count >= table.n_rows);
    let holds_data = !table.columns.is_empty()
        || !table.patches.is_empty()
        || !table.labels.is_empty()
        || table.segments.len() != 1;
    if !dead || !holds_data || table.id_space.is_some() || table.n_rows == 0 {
        return Ok(false);
    }
    let mut rows = std::iter::repeat_with(|| (None, None)).take(table.n_rows as usize);
    let (seg, _) = super::created::write_rows(
        staging,
        &format!("nodes-{t:04}-compacted.seg"),
        &[],
        false,
        &mut rows,
        &mut Vec::new(),
    )?;
    let table = &mut m.node_tables[t];
    table.columns.clear();
    table.patches.clear();
    table.labels.clear();
    table.label_column = None;
    table.id_column = None;
    table.segments = vec![seg];
    Ok(true)
}

/// Compacts node table `t` (its bitmap `dead`, now): emptied when every row died
/// ([`compact_if_dead`]), else rewritten when at least `min_share` of its rows died
/// ([`rewrite_without_dead`]). Whether it was.
pub(crate) fn compact_table(
    db: &Database,
    staging: &Staging,
    m: &mut Manifest,
    t: usize,
    dead: &Bits,
    min_share: f64,
) -> Result<bool, EngineError> {
    Ok(
        compact_if_dead(staging, m, t)?
            || rewrite_without_dead(db, staging, m, t, dead, min_share)?,
    )
}

/// A table at least this share dead (of 1) is rewritten without its dead rows' data.
pub(crate) const REWRITE_DEAD_SHARE: f64 = 0.5;

/// Rewrites node table `t` when at least `min_share` of its rows (and one) are dead
/// (`dead`, its bitmap now): one new segment, each row group's chunks decoded (the
/// newest patch's or the segment's), the dead rows made nulls and encoded again, so
/// their bytes leave the disk while every row keeps its position (node ids are
/// positions); the table's patch files are folded in and dropped. Only a table this
/// checkpoint did not fold changes into (its patches and columns as `db` has them):
/// one it did is rewritten at a later checkpoint. Row groups are done a few at a time
/// on all threads.
fn rewrite_without_dead(
    db: &Database,
    staging: &Staging,
    m: &mut Manifest,
    t: usize,
    dead: &Bits,
    min_share: f64,
) -> Result<bool, EngineError> {
    use quiver_storage::TableRef;
    use rayon::prelude::*;
    let (Some(old), Some(table)) = (db.manifest().node_tables.get(t), db.node_tables().get(t))
    else {
        return Ok(false);
    };
    let meta = &m.node_tables[t];
    let n_rows = meta.n_rows;
    let share = dead.count() as f64 / n_rows.max(1) as f64;
    if share < min_share
        || dead.count() == 0
        || meta.columns.is_empty()
        || meta.patches != old.patches
        || meta.columns != old.columns
        || table.footer.row_groups.is_empty()
    {
        return Ok(false);
    }
    let columns = meta.columns.clone();
    let footer = &table.footer;
    let tref = TableRef::Node(t);
    let mut w = TableWriter::create(
        staging,
        &format!("nodes-{t:04}-rewritten.seg"),
        columns.clone(),
    )?;
    let width = rayon::current_num_threads().max(1);
    let groups: Vec<usize> = (0..footer.row_groups.len()).collect();
    for batch in groups.chunks(width) {
        let encoded: Vec<Result<(u64, Vec<Vec<u8>>), EngineError>> = batch
            .par_iter()
            .map(|&rg| {
                let g = &footer.row_groups[rg];
                let mut chunks = Vec::with_capacity(columns.len());
                for (c, col) in columns.iter().enumerate() {
                    let old = db.with_chunk(tref, rg, c, |ch| ch.to_builder())?;
                    let mut b = ColumnBuilder::new(col.dtype);
                    for i in 0..g.n_rows {
                        if dead.get(g.first_row + i) {
                            b.push_null();
                        } else {
                            b.push_row_from(&old, i as usize);
                        }
                    }
                    let mut out = Vec::with_capacity(b.encoded_len_bound());
                    b.encode(&mut out);
                    chunks.push(out);
                }
                Ok((g.n_rows, chunks))
            })
            .collect();
        for e in encoded {
            let (n, chunks) = e?;
            w.copy_row_group(n, &chunks)?;
        }
    }
    let seg = w.finish()?;
    let meta = &mut m.node_tables[t];
    meta.segments = vec![seg];
    meta.patches.clear();
    Ok(true)
}

/// Deletions of entities of `db`'s segments into the deletion bitmaps of their tables
/// and relationship segments (each rewritten whole: the old bits and the new). A
/// relationship whose entries cannot be found is carried as an op. Returns how many
/// entities were marked.
pub(crate) fn fold_deletions(
    db: &Database,
    staging: &Staging,
    m: &mut Manifest,
    nodes: &[u64],
    rels: &[(usize, u64, u64, u64)],
    delta: &Delta,
    carried: &mut Vec<Op>,
    min_share: f64,
    compacted: &mut u64,
) -> Result<u64, EngineError> {
    let mut marked = 0u64;
    let mut tables: std::collections::BTreeMap<usize, Vec<u64>> = Default::default();
    for &id in nodes {
        let (t, row) = db.node_location(id)?;
        tables.entry(t).or_default().push(row);
    }
    for (t, rows) in tables {
        let table = &db.node_tables()[t];
        let mut bits = table
            .deleted
            .clone()
            .unwrap_or_else(|| Bits::new(table.meta.n_rows));
        for row in rows {
            bits.set(row);
            marked += 1;
        }
        m.node_tables[t].deleted = Some(write_deleted(
            staging,
            &format!("nodes-{t:04}-deleted.seg"),
            &[&bits],
        )?);
        if compact_table(db, staging, m, t, &bits, min_share)? {
            *compacted += 1;
        }
    }
    // Positions to mark per (type, segment): in the out CSR, in the in CSR.
    type Marks = (Vec<u64>, Vec<u64>);
    let mut segs: std::collections::BTreeMap<(usize, usize), Marks> = Default::default();
    // A deleted node's segment relationships die with it (the delta holds no record
    // of them): every entry at the node and towards it. Many nodes: one pass over
    // each segment; a few: searched from each node.
    if !nodes.is_empty() && nodes.len() as u64 * 256 >= db.n_nodes() {
        let mut dead = Bits::new(db.n_nodes());
        for &id in nodes {
            dead.set(id);
        }
        for t in 0..db.rel_types().len() {
            for seg in 0..db.manifest().rel_types[t].segments.len() {
                let e = segs.entry((t, seg)).or_default();
                db.entries_of_nodes(t, seg, Direction::Out, &dead, |p| e.0.push(p))?;
                db.entries_of_nodes(t, seg, Direction::In, &dead, |p| e.1.push(p))?;
            }
        }
    } else {
        for &id in nodes {
            for t in 0..db.rel_types().len() {
                db.node_edge_positions(t, id as u32, |seg, o, i| {
                    let e = segs.entry((t, seg)).or_default();
                    e.0.push(o);
                    e.1.push(i);
                })?;
            }
        }
    }
    for &(t, eid, src, dst) in rels {
        match db.edge_positions(t, src, dst, eid)? {
            Some((seg, o, i)) => {
                let e = segs.entry((t, seg)).or_default();
                e.0.push(o);
                e.1.push(i);
            }
            None => carried.push(Op::DeleteRel {
                ty: delta.types[t].clone(),
                eid,
                src,
                dst,
            }),
        }
    }
    for ((t, seg), (outs, ins)) in segs {
        if outs.is_empty() && ins.is_empty() {
            continue;
        }
        let meta = &m.rel_types[t].segments[seg];
        let n = meta.n_edges;
        let [mut out, mut inc] = db
            .edge_deletions(t, seg)
            .cloned()
            .unwrap_or_else(|| [Bits::new(n), Bits::new(n)]);
        for o in outs {
            if !out.get(o) {
                marked += 1;
            }
            out.set(o);
        }
        for i in ins {
            inc.set(i);
        }
        m.rel_types[t].segments[seg].deleted = Some(write_deleted(
            staging,
            &format!("rels-{t:04}-{seg:04}-deleted.seg"),
            &[&out, &inc],
        )?);
    }
    Ok(marked)
}

/// The ops that turn segment node `id` into record `r` (an overlay of its changed
/// properties): label changes to `label_ops` (the segment's labels are read only when
/// the record's differ), properties to `out`.
pub(crate) fn diff_node(
    db: &Database,
    id: u64,
    r: &NodeRec,
    label_ops: &mut Vec<Op>,
    out: &mut Vec<Op>,
) -> Result<(), EngineError> {
    let old_labels = if r.seg_labels {
        Vec::new()
    } else {
        segments::node_labels(db, id)?
    };
    let new_labels = &r.labels;
    for l in new_labels {
        if !old_labels.contains(l) {
            label_ops.push(Op::AddLabel {
                id,
                label: l.clone(),
            });
        }
    }
    for l in &old_labels {
        if !new_labels.contains(l) {
            label_ops.push(Op::RemoveLabel {
                id,
                label: l.clone(),
            });
        }
    }
    for (k, v) in &r.props {
        // Removing a property the segment never had changes nothing.
        if v.is_null() && segments::node_prop(db, id, k)?.is_null() {
            continue;
        }
        out.push(Op::SetNodeProp {
            id,
            key: k.clone(),
            value: v.clone(),
        });
    }
    Ok(())
}

/// The ops that give segment relationship `eid` of type `t` (`ty`) record `r`'s changed
/// properties.
pub(crate) fn diff_rel(
    db: &Database,
    t: usize,
    ty: &Arc<str>,
    eid: u64,
    r: &RelRec,
    out: &mut Vec<Op>,
) -> Result<(), EngineError> {
    for (k, v) in &r.props {
        if v.is_null() && segments::rel_prop(db, t, eid, k)?.is_null() {
            continue;
        }
        out.push(Op::SetRelProp {
            ty: ty.clone(),
            eid,
            src: r.src,
            dst: r.dst,
            key: k.clone(),
            value: v.clone(),
        });
    }
    Ok(())
}
