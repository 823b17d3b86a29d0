//! What a checkpoint writes for the entities created since the segments: created nodes
//! as new node tables over their id range, split by label set (`label_pieces`), the
//! rows an append or a direct write staged taken in around them, and the id index of
//! created ids.

use super::*;

/// Writes rows of property maps as a table (with a trailing `:LABEL` column when
/// `label_column`); returns the segment and the columns written. Values that do not fit
/// their column go to `misfits` as `(row, key, value)` for the op file.
pub(crate) fn write_rows(
    staging: &Staging,
    name: &str,
    columns: &[PropertyMeta],
    label_column: bool,
    rows: &mut dyn Iterator<Item = (Option<&[(Arc<str>, Value)]>, Option<Vec<Arc<str>>>)>,
    misfits: &mut Vec<(u64, Arc<str>, Value)>,
) -> Result<(SegmentMeta, Vec<PropertyMeta>), EngineError> {
    use rayon::prelude::*;
    let mut metas = columns.to_vec();
    if label_column {
        metas.push(PropertyMeta {
            name: ":LABEL".into(),
            dtype: DataType::Array(ScalarType::String),
        });
    }
    let mut w = TableWriter::create(staging, name, metas.clone())?;
    let at: hashbrown::HashMap<&str, usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| (c.name.as_str(), i))
        .collect();
    let mut first_row = 0u64;
    let mut group: Vec<(Option<&[(Arc<str>, Value)]>, Option<Vec<Arc<str>>>)> = Vec::new();
    loop {
        group.clear();
        group.extend((&mut *rows).take(ROW_GROUP_ROWS_MAX));
        if group.is_empty() {
            break;
        }
        // Each column is built from the whole row group on its own thread; the rows'
        // property lists are short, so a scan per row finds the column's value.
        let group_ref = &group;
        let b: Vec<ColumnBuilder> = metas
            .par_iter()
            .enumerate()
            .map(|(c, meta)| {
                let mut cb = ColumnBuilder::new(meta.dtype);
                if c == columns.len() {
                    for (_, labels) in group_ref {
                        let l = labels
                            .as_ref()
                            .map(|l| Value::list(l.iter().cloned().map(Value::Str).collect()));
                        push_value(&mut cb, l.as_ref());
                    }
                    return cb;
                }
                let key = meta.name.as_str();
                for (props, _) in group_ref {
                    let v = props
                        .and_then(|p| p.iter().find(|(k, _)| &**k == key))
                        .map(|(_, v)| v)
                        .filter(|v| dtype_of(v) == Some(meta.dtype));
                    push_value(&mut cb, v);
                }
                cb
            })
            .collect();
        // Values whose key has no column or whose type is not the column's.
        for (i, (props, _)) in group.iter().enumerate() {
            for (k, v) in props.iter().flat_map(|p| p.iter()) {
                match at.get(&**k) {
                    Some(&c) if dtype_of(v) == Some(columns[c].dtype) => {}
                    _ => misfits.push((first_row + i as u64, k.clone(), v.clone())),
                }
            }
        }
        // A table without columns has its rows in the manifest only.
        if !b.is_empty() {
            w.write_row_group(&b)?;
        }
        first_row += group.len() as u64;
    }
    Ok((w.finish()?, metas))
}

/// Created nodes `lo..hi` of the delta, as one table (see [`Store::write_generation`]):
/// `tag` names its files apart from another's of the same checkpoint; with `index`,
/// their ids join an id space's index when they can.
pub(crate) struct Created {
    pub(crate) lo: u64,
    pub(crate) hi: u64,
    pub(crate) tag: &'static str,
    pub(crate) index: bool,
}

pub(crate) fn write_created(
    db: &Database,
    delta: &Delta,
    staging: &Staging,
    m: &mut Manifest,
    Created {
        lo,
        hi: node_end,
        tag,
        index,
    }: Created,
    carried: &mut Vec<Op>,
    report: &mut CheckpointReport,
) -> Result<(), EngineError> {
    if node_end <= lo {
        return Ok(());
    }
    let live = |id: u64| delta.nodes.get(&id).filter(|r| r.created && !r.deleted);
    let recs: Vec<_> = (lo..node_end).map(live).collect();
    let mut tables = Vec::new();
    for (k, (a, b)) in label_pieces(&recs).into_iter().enumerate() {
        let piece = match k {
            0 => tag.to_string(),
            k => format!("{tag}-{k}"),
        };
        let t = write_created_table(
            staging,
            m,
            lo + a as u64,
            &recs[a..b],
            &piece,
            carried,
            report,
        )?;
        tables.push((t, &recs[a..b]));
    }
    m.n_nodes = node_end;
    if index {
        report.ids_indexed += index_created_ids(db, staging, m, &tables)?;
    }
    Ok(())
}

/// Runs of created nodes with one label set at least this long get a table of their
/// own (shorter runs share one, with a `:LABEL` column).
const LABEL_RUN_MIN: usize = 1024;

/// How the created nodes `recs` (in id order; `None`: a hole) split into tables, as
/// ranges of `recs`: each run of one label set of at least [`LABEL_RUN_MIN`] nodes alone
/// (its table carries the labels, so a scan of another label skips it whole and one of
/// its label reads no label column), and what lies between such runs together. Holes
/// join the run they are in. Tables cover consecutive ids, so a run cannot gather the
/// nodes of its label set from elsewhere; there are at most twice as many tables as
/// long runs, plus one.
fn label_pieces(recs: &[Option<&NodeRec>]) -> Vec<(usize, usize)> {
    // Runs: (start, end, label set).
    let mut runs: Vec<(usize, usize, Vec<&str>)> = Vec::new();
    for (i, r) in recs.iter().enumerate() {
        let Some(r) = r else {
            continue;
        };
        let mut set: Vec<&str> = r.labels.iter().map(|l| &**l).collect();
        set.sort_unstable();
        set.dedup();
        match runs.last_mut() {
            Some(run) if run.2 == set => run.1 = i + 1,
            _ => {
                if let Some(run) = runs.last_mut() {
                    run.1 = i;
                }
                let start = if runs.is_empty() { 0 } else { i };
                runs.push((start, i + 1, set));
            }
        }
    }
    let Some(last) = runs.last_mut() else {
        return vec![(0, recs.len())];
    };
    last.1 = recs.len();
    let mut pieces: Vec<(usize, usize)> = Vec::new();
    let mut mixed: Option<(usize, usize)> = None;
    for (a, b, _) in runs {
        if b - a >= LABEL_RUN_MIN {
            pieces.extend(mixed.take());
            pieces.push((a, b));
        } else {
            mixed = Some(match mixed {
                Some((x, _)) => (x, b),
                None => (a, b),
            });
        }
    }
    pieces.extend(mixed);
    pieces
}

/// A table of created nodes `recs` from node id `first` (holes are deleted rows);
/// returns its index in the manifest.
fn write_created_table(
    staging: &Staging,
    m: &mut Manifest,
    first: u64,
    recs: &[Option<&NodeRec>],
    tag: &str,
    carried: &mut Vec<Op>,
    report: &mut CheckpointReport,
) -> Result<usize, EngineError> {
    let columns = choose_columns(recs.iter().flatten().map(|r| &r.props[..]));
    let mut common: Option<Vec<Arc<str>>> = None;
    for r in recs.iter().flatten() {
        common = Some(match common {
            None => r.labels.to_vec(),
            Some(c) => c.into_iter().filter(|l| r.labels.contains(l)).collect(),
        });
    }
    let common = common.unwrap_or_default();
    let extra = recs
        .iter()
        .flatten()
        .any(|r| r.labels.iter().any(|l| !common.contains(l)));
    let mut misfits = Vec::new();
    let (seg, metas) = write_rows(
        staging,
        &format!("nodes-delta{tag}.seg"),
        &columns,
        extra,
        &mut recs.iter().map(|r| match r {
            Some(r) => (
                Some(&r.props[..]),
                Some(
                    r.labels
                        .iter()
                        .filter(|l| !common.contains(l))
                        .cloned()
                        .collect(),
                ),
            ),
            None => (None, None),
        }),
        &mut misfits,
    )?;
    for (row, key, value) in misfits {
        carried.push(Op::SetNodeProp {
            id: first + row,
            key,
            value,
        });
    }
    // Ids never committed or deleted since: deleted rows of the new table.
    let mut holes = Bits::new(recs.len() as u64);
    for (i, r) in recs.iter().enumerate() {
        if r.is_none() {
            holes.set(i as u64);
        } else {
            report.nodes_written += 1;
        }
    }
    let n_cols = columns.len();
    m.node_tables.push(NodeTableMeta {
        name: format!("delta-{}{tag}", m.generation),
        first_node: first,
        n_rows: recs.len() as u64,
        labels: common
            .iter()
            .filter_map(|l| m.labels.iter().position(|x| **x == **l))
            .map(|i| i as u32)
            .collect(),
        label_column: extra.then_some(n_cols),
        id_column: None,
        id_space: None,
        columns: metas,
        segments: vec![seg],
        patches: Vec::new(),
        deleted: None,
    });
    let t = m.node_tables.len() - 1;
    if holes.count() > 0 {
        m.node_tables[t].deleted = Some(write_deleted(
            staging,
            &format!("nodes-{t:04}-deleted.seg"),
            &[&holes],
        )?);
        // (Every id of the range collected or rolled back: only the ids are kept.)
        super::changes::compact_if_dead(staging, m, t)?;
    }
    Ok(t)
}

/// A live append's nodes (files already in the generation) into `m`, after its nodes
/// so far: the node tables at their reserved range (labels by name) and the id indexes
/// it rewrote. Returns its relationship types, for [`take_appended_rels`].
pub(crate) fn take_appended_nodes(
    m: &mut Manifest,
    p: Prebuilt,
    report: &mut CheckpointReport,
) -> Result<Vec<RelTypeMeta>, EngineError> {
    if m.n_nodes != p.first_node {
        return Err(EngineError::Refused(format!(
            "the append's nodes start at id {}, the database's next table at {}",
            p.first_node, m.n_nodes
        )));
    }
    for mut t in p.node_tables {
        let mut labels = Vec::new();
        for &l in &t.labels {
            let Some(name) = p.labels.get(l as usize) else {
                continue;
            };
            let i = match m.labels.iter().position(|x| x == name) {
                Some(i) => i,
                None => {
                    m.labels.push(name.clone());
                    m.labels.len() - 1
                }
            };
            labels.push(i as u32);
        }
        t.labels = labels;
        m.n_nodes = t.first_node + t.n_rows;
        report.nodes_written += t.n_rows;
        m.node_tables.push(t);
    }
    m.n_nodes = m.n_nodes.max(p.first_node + p.n_nodes);
    for (i, s) in p.id_spaces {
        let n = m.id_spaces.len();
        match m.id_spaces.get_mut(i) {
            Some(x) => *x = s,
            None if i == n => m.id_spaces.push(s),
            None => {
                return Err(EngineError::Refused(
                    "the append's id spaces do not follow the database's".into(),
                ))
            }
        }
    }
    Ok(p.rel_types)
}

/// A live append's relationship segments into `m`, after each type's others.
pub(crate) fn take_appended_rels(
    m: &mut Manifest,
    rel_types: Vec<RelTypeMeta>,
    report: &mut CheckpointReport,
) -> Result<(), EngineError> {
    for r in rel_types {
        report.relationships_written += r.n_edges;
        m.add_rel_segments(r).map_err(EngineError::Refused)?;
    }
    Ok(())
}

/// The `:LABEL` value of segment node `id` with `labels`: those its table does not give
/// every row (null when none), or `None` when it lost one of those (a column cannot
/// take a table label away from one row).
pub(crate) fn extra_labels(
    db: &Database,
    id: u64,
    labels: &[Arc<str>],
) -> Result<Option<Value>, EngineError> {
    let (t, _) = db.node_location(id)?;
    let fixed: Vec<&str> = db.node_tables()[t]
        .meta
        .labels
        .iter()
        .map(|&l| db.labels()[l as usize].as_str())
        .collect();
    if !fixed.iter().all(|f| labels.iter().any(|l| **l == **f)) {
        return Ok(None);
    }
    let extra: Vec<Value> = labels
        .iter()
        .filter(|l| !fixed.contains(&&***l))
        .map(|l| Value::Str(l.clone()))
        .collect();
    Ok(Some(if extra.is_empty() {
        Value::Null
    } else {
        Value::list(extra)
    }))
}

/// An id key owned (created nodes' ids, sorted before they are merged into an index).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
enum IdOwned {
    Int(i64),
    Str(Arc<str>),
}

impl IdOwned {
    fn key(&self) -> IdKey<'_> {
        match self {
            IdOwned::Int(i) => IdKey::Int(*i),
            IdOwned::Str(s) => IdKey::Str(s.as_bytes()),
        }
    }
}

/// Gives the created nodes of new tables (`tables`: each table's index and its `recs`,
/// one per row) entries in an id space's index. A table's space is the one whose
/// imported tables' labels some of its created nodes carry (all of them) and whose id
/// property the table has; every row with that property must hold a value of the
/// space's type, and all go in (rows without it have nothing to be found by). The ids
/// of all the tables of one space must be unique among them and not in the index
/// already; then each such table's id column is that property, `MATCH (n:L {id: ..})`
/// stays an index seek and `import --append` finds them; a table of several labels (users
/// and the events a LOAD CSV made beside them) included. Otherwise (no one space, a
/// value of another type, a repeated id) the tables have no id column, as before, and
/// seeks scan them beside the index. One index write a space. Returns how many ids it
/// indexed.
fn index_created_ids(
    db: &Database,
    staging: &Staging,
    m: &mut Manifest,
    tables: &[(usize, &[Option<&NodeRec>])],
) -> Result<u64, EngineError> {
    use quiver_storage::manifest::IdType;
    // Per space: its tables (with their id column) and their (id, node) pairs.
    type Space = (Vec<(usize, usize)>, Vec<(IdOwned, u32)>);
    let mut spaces: std::collections::BTreeMap<usize, Option<Space>> = Default::default();
    let Some(first_new) = tables.iter().map(|(t, _)| *t).min() else {
        return Ok(0);
    };
    'tables: for &(t, recs) in tables {
        let table = &m.node_tables[t];
        // The one id space whose imported tables' labels some created node carries.
        let mut found: Option<(usize, String)> = None;
        for it in &m.node_tables[..first_new] {
            let (Some(s), Some(c)) = (it.id_space, it.id_column) else {
                continue;
            };
            let labels: Vec<&str> = it
                .labels
                .iter()
                .map(|&l| m.labels[l as usize].as_str())
                .collect();
            let carried = !labels.is_empty()
                && recs
                    .iter()
                    .flatten()
                    .any(|r| labels.iter().all(|l| r.labels.iter().any(|x| **x == **l)));
            if !carried {
                continue;
            }
            let name = it.columns[c].name.clone();
            match &found {
                Some((fs, fname)) if *fs != s || *fname != name => continue 'tables,
                _ => found = Some((s, name)),
            }
        }
        let Some((space, name)) = found else {
            continue;
        };
        let Some(col) = table.columns.iter().position(|c| c.name == name) else {
            continue;
        };
        let entry = spaces
            .entry(space)
            .or_insert_with(|| Some((Vec::new(), Vec::new())));
        let Some((owners, new)) = entry else {
            continue;
        };
        let id_type = m.id_spaces[space].id_type;
        let first = table.first_node;
        for (i, r) in recs.iter().enumerate() {
            let Some(r) = r else { continue };
            let key = match (id_type, crate::delta::prop_get(&r.props, &name)) {
                (_, None) => continue,
                (IdType::Integer, Some(Value::Int(k))) => IdOwned::Int(*k),
                (IdType::String, Some(Value::Str(k))) => IdOwned::Str(k.clone()),
                _ => {
                    // The space's ids are not all of its type: none of its tables go in.
                    *entry = None;
                    continue 'tables;
                }
            };
            new.push((key, (first + i as u64) as u32));
        }
        owners.push((t, col));
    }
    let mut indexed = 0;
    for (space, found) in spaces {
        let Some((owners, mut new)) = found else {
            continue;
        };
        new.sort_unstable();
        if new.is_empty() || new.windows(2).any(|w| w[0].0 == w[1].0) {
            continue;
        }
        let mut known = false;
        for (k, _) in &new {
            if db.lookup_id(space, k.key())?.is_some() {
                known = true;
                break;
            }
        }
        if known {
            continue;
        }
        let end = owners
            .iter()
            .map(|&(t, _)| m.node_tables[t].first_node + m.node_tables[t].n_rows)
            .max()
            .unwrap_or(0);
        let (seg, n) = quiver_storage::write::write_id_index_merged(
            staging,
            &format!("ids-{space:04}.seg"),
            db,
            space,
            new.len(),
            &|j| (new[j].0.key(), new[j].1),
            m.n_nodes.max(end),
        )?;
        m.id_spaces[space].index = seg;
        m.id_spaces[space].n_ids = n;
        for (t, col) in owners {
            let table = &mut m.node_tables[t];
            table.id_column = Some(col);
            table.id_space = Some(space);
        }
        indexed += new.len() as u64;
    }
    Ok(indexed)
}
