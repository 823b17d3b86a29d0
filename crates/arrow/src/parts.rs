//! A database built in parts by many writers: the tasks of a Spark job (or any other
//! processes) each turn their share of the graph, as Arrow batches, into segment files
//! in one shared folder, and one publish names them all in a manifest.
//!
//! The distributed engine does what it is made for: numbering nodes, joining
//! relationship endpoints to them, the shuffles by source and by target and their
//! sorts. This module does what Quiver does: a node or property table part
//! ([`write_table_part`]), a CSR part over a range of nodes ([`write_csr_part`]), the id
//! index ([`write_id_index_part`]), and the publish ([`publish_parts`]), which moves
//! the parts into a new generation, opens it to check that they fit together before
//! `CURRENT` names it, and leaves the database as it was when anything is wrong.
//!
//! Each writer returns a [`PartInfo`] (its file, size, rows, columns), which the caller
//! hands back to the publish in a [`BuildSpec`].

use crate::encode::{quiver_type, Col};
use arrow_array::{Array, RecordBatch};
use arrow_buffer::NullBuffer;
use arrow_schema::ArrowError;
use quiver_common::limits::ROW_GROUP_ROWS_MAX;
use quiver_common::types::DataType;
use quiver_format::column::ColumnBuilder;
use quiver_storage::manifest::{
    IdSpaceMeta, IdType, Manifest, NodeTableMeta, PropertyMeta, RelSegmentMeta, RelTypeMeta,
    SegmentMeta,
};
use quiver_storage::write::{write_id_index, CsrPartOf, CsrWriter, Staging, TableWriter};
use quiver_storage::{Database, OpenMode};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Why a part could not be written or the parts not published.
#[derive(Debug)]
pub enum PartError {
    /// The batches could not be read or cast.
    Arrow(ArrowError),
    /// A file could not be written or moved.
    Write(quiver_storage::WriteError),
    /// The published generation would not open: the parts do not fit together.
    Open(quiver_storage::OpenError),
    /// The input breaks what the part needs (order, ranges, types, agreement).
    Invalid(String),
}

impl std::fmt::Display for PartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PartError::Arrow(e) => write!(f, "reading the batches: {e}"),
            PartError::Write(e) => write!(f, "{e}"),
            PartError::Open(e) => write!(f, "the parts do not make a database: {e}"),
            PartError::Invalid(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for PartError {}

impl From<ArrowError> for PartError {
    fn from(e: ArrowError) -> Self {
        PartError::Arrow(e)
    }
}

impl From<quiver_storage::WriteError> for PartError {
    fn from(e: quiver_storage::WriteError) -> Self {
        PartError::Write(e)
    }
}

fn invalid(s: impl Into<String>) -> PartError {
    PartError::Invalid(s.into())
}

/// One written part.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PartInfo {
    /// File name inside the parts folder.
    pub file: String,
    pub bytes: u64,
    /// Rows of a table part, entries of a CSR part, ids of an index.
    pub rows: u64,
    /// A table part's columns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<PropertyMeta>,
    /// A CSR part's node range.
    #[serde(default)]
    pub first_node: u64,
    #[serde(default)]
    pub n_nodes: u64,
    /// An id index's key type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_type: Option<IdType>,
    /// Seconds the writer worked (not counting waits for the next batch).
    #[serde(default)]
    pub seconds: f64,
}

/// Batches, with the time spent waiting for them.
struct Timed<I> {
    inner: I,
    waited: std::time::Duration,
    started: std::time::Instant,
}

impl<I: Iterator> Timed<I> {
    fn new(inner: I) -> Self {
        Timed {
            inner,
            waited: std::time::Duration::ZERO,
            started: std::time::Instant::now(),
        }
    }

    /// Seconds since the start, less the waits.
    fn worked(&self) -> f64 {
        (self.started.elapsed().saturating_sub(self.waited)).as_secs_f64()
    }
}

impl<I: Iterator> Iterator for Timed<I> {
    type Item = I::Item;
    fn next(&mut self) -> Option<I::Item> {
        let t = std::time::Instant::now();
        let x = self.inner.next();
        self.waited += t.elapsed();
        x
    }
}

impl PartInfo {
    fn of(seg: SegmentMeta, rows: u64) -> PartInfo {
        let file = Path::new(&seg.file)
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or(seg.file);
        PartInfo {
            file,
            bytes: seg.bytes,
            rows,
            columns: Vec::new(),
            first_node: 0,
            n_nodes: 0,
            id_type: None,
            seconds: 0.0,
        }
    }
}

/// Part names are plain file names: no folder, nothing hidden.
fn check_name(name: &str) -> Result<(), PartError> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(invalid(format!(
            "part name {name:?}: use letters, digits, '-', '_' and '.' (a file name, no folder)"
        )))
    }
}

/// Value `i` of `c` (whose validity is `valid`) appended to `b`.
fn push(
    c: &Col,
    valid: Option<&NullBuffer>,
    i: usize,
    b: &mut ColumnBuilder,
) -> Result<(), PartError> {
    if valid.is_some_and(|v| v.is_null(i)) {
        b.push_null();
        return Ok(());
    }
    match c {
        Col::Null(_) => b.push_null(),
        Col::I64(a) => b.push_i64(a.value(i)),
        Col::U64(a) => {
            let v = a.value(i);
            let v = i64::try_from(v)
                .map_err(|_| invalid(format!("{v} does not fit a 64-bit signed integer")))?;
            b.push_i64(v)
        }
        Col::F64(a) => b.push_f64(a.value(i)),
        Col::Bool(a) => b.push_bool(a.value(i)),
        Col::Str(a) => b.push_bytes(a.value(i).as_bytes()),
        Col::LargeStr(a) => b.push_bytes(a.value(i).as_bytes()),
        Col::View(a) => b.push_bytes(a.value(i).as_bytes()),
        Col::Date(a) => b.push_i64(a.value(i) as i64),
        Col::Ts(a, _) => b.push_i64(a.value(i)),
        Col::List(l, inner) => {
            if matches!(**inner, Col::List(..)) {
                return Err(invalid("a list of lists has no property type"));
            }
            let inner_valid = inner.validity();
            let offs = l.value_offsets();
            let child = b
                .list_child()
                .ok_or_else(|| invalid("a list where the column holds single values"))?;
            for j in offs[i] as usize..offs[i + 1] as usize {
                push(inner, inner_valid.as_ref(), j, child)?;
            }
            b.end_list();
        }
    }
    Ok(())
}

/// The columns of a batch's schema as properties.
fn columns_of(batch: &RecordBatch) -> Result<Vec<PropertyMeta>, PartError> {
    batch
        .schema()
        .fields()
        .iter()
        .map(|f| {
            let dtype = quiver_type(f.data_type())
                .map_err(|e| invalid(format!("column {:?}: {e}", f.name())))?;
            Ok(PropertyMeta {
                name: f.name().clone(),
                dtype,
            })
        })
        .collect()
}

/// A table part (a node table's rows, or a relationship type's property rows in edge-id
/// order): every column of the batches, typed by their schema, in row groups of at most
/// [`ROW_GROUP_ROWS_MAX`] rows (one row group's rows are what it holds). No batch at
/// all writes an empty part with no columns.
pub fn write_table_part(
    dir: &Path,
    name: &str,
    batches: impl Iterator<Item = Result<RecordBatch, ArrowError>>,
) -> Result<PartInfo, PartError> {
    check_name(name)?;
    let staging = Staging::parts(dir)?;
    let mut w: Option<(TableWriter, Vec<ColumnBuilder>)> = None;
    let mut columns = Vec::new();
    let mut rows = 0u64;
    let mut batches = Timed::new(batches);
    for batch in &mut batches {
        let batch = batch?;
        let (tw, builders) = match &mut w {
            Some(x) => x,
            None => {
                columns = columns_of(&batch)?;
                let tw = TableWriter::create(&staging, name, columns.clone())?;
                let b = columns
                    .iter()
                    .map(|c| ColumnBuilder::new(c.dtype))
                    .collect();
                w.insert((tw, b))
            }
        };
        if columns_of(&batch)? != columns {
            return Err(invalid(format!(
                "{name}: a batch's columns differ from the first batch's"
            )));
        }
        let cols: Vec<Col> = batch
            .columns()
            .iter()
            .map(Col::of)
            .collect::<Result<_, _>>()?;
        let valid: Vec<Option<NullBuffer>> = cols.iter().map(Col::validity).collect();
        let mut start = 0;
        while start < batch.num_rows() {
            let room = ROW_GROUP_ROWS_MAX - builders.first().map_or(0, |b| b.len());
            let end = batch.num_rows().min(start + room);
            for ((c, v), b) in cols.iter().zip(&valid).zip(builders.iter_mut()) {
                for i in start..end {
                    push(c, v.as_ref(), i, b)?;
                }
            }
            if builders
                .first()
                .is_some_and(|b| b.len() == ROW_GROUP_ROWS_MAX)
            {
                tw.write_row_group(builders)?;
                builders.iter_mut().for_each(|b| b.clear());
            }
            start = end;
        }
        rows += batch.num_rows() as u64;
    }
    let (mut tw, builders) = match w {
        Some(x) => x,
        None => (TableWriter::create(&staging, name, Vec::new())?, Vec::new()),
    };
    if builders.first().is_some_and(|b| !b.is_empty()) {
        tw.write_row_group(&builders)?;
    }
    let mut info = PartInfo::of(tw.finish()?, rows);
    info.columns = columns;
    info.seconds = batches.worked();
    Ok(info)
}

/// Integer column `i` of a batch, without nulls.
fn ints(batch: &RecordBatch, i: usize, what: &str) -> Result<Vec<i64>, PartError> {
    let a = batch
        .columns()
        .get(i)
        .ok_or_else(|| invalid(format!("the batches need a column {i} ({what})")))?;
    if a.null_count() > 0 {
        return Err(invalid(format!("column {i} ({what}) holds nulls")));
    }
    let a = arrow_cast::cast(a, &arrow_schema::DataType::Int64)?;
    let a = a
        .as_any()
        .downcast_ref::<arrow_array::Int64Array>()
        .ok_or_else(|| invalid(format!("column {i} ({what}) is not integers")))?;
    Ok(a.values().to_vec())
}

/// One part of a CSR: the entries of nodes `first_node .. first_node + n_nodes`, from
/// batches of (node, neighbour) or (node, neighbour, edge id) in any order, in a CSR over
/// `whole`'s nodes and edges. The entries wait in memory (8 bytes each, 16 with edge
/// ids) until the last batch, then are sorted by node (a counting sort), then neighbour
/// and edge id within a node, and written. Edge ids are needed unless an entry's id is
/// its position.
pub fn write_csr_part(
    dir: &Path,
    name: &str,
    first_node: u64,
    n_nodes: u64,
    whole: CsrPartOf,
    with_edge_ids: bool,
    batches: impl Iterator<Item = Result<RecordBatch, ArrowError>>,
) -> Result<PartInfo, PartError> {
    check_name(name)?;
    if first_node + n_nodes > whole.n_nodes {
        return Err(invalid(format!(
            "{name}: nodes {first_node}..{} pass the {} nodes of the graph",
            first_node + n_nodes,
            whole.n_nodes
        )));
    }
    let staging = Staging::parts(dir)?;
    // (local node, neighbour) and the edge ids, in arrival order.
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    let mut eids: Vec<u64> = Vec::new();
    let mut degrees = vec![0u32; n_nodes as usize];
    let mut batches = Timed::new(batches);
    for batch in &mut batches {
        let batch = batch?;
        let node = ints(&batch, 0, "node")?;
        let nb = ints(&batch, 1, "neighbour")?;
        let eid = if with_edge_ids {
            Some(ints(&batch, 2, "edge id")?)
        } else {
            None
        };
        for k in 0..node.len() {
            let (n, t) = (node[k], nb[k]);
            if n < first_node as i64 || n >= (first_node + n_nodes) as i64 {
                return Err(invalid(format!(
                    "{name}: node {n} is outside the part's nodes {first_node}..{}",
                    first_node + n_nodes
                )));
            }
            if t < 0 || t as u64 >= whole.n_nodes {
                return Err(invalid(format!(
                    "{name}: neighbour {t} is not one of the {} nodes",
                    whole.n_nodes
                )));
            }
            if let Some(e) = &eid {
                if e[k] < 0 || e[k] as u64 >= whole.n_edges {
                    return Err(invalid(format!(
                        "{name}: edge id {} is not one of the {} edges",
                        e[k], whole.n_edges
                    )));
                }
                eids.push(e[k] as u64);
            }
            let local = (n as u64 - first_node) as u32;
            let d = &mut degrees[local as usize];
            *d = d
                .checked_add(1)
                .ok_or_else(|| invalid(format!("{name}: node {n} has over 4 billion entries")))?;
            pairs.push((local, t as u32));
        }
    }
    // Counting sort by node, then each node's entries by (neighbour, edge id).
    let mut start = Vec::with_capacity(degrees.len() + 1);
    let mut acc = 0usize;
    for &d in &degrees {
        start.push(acc);
        acc += d as usize;
    }
    start.push(acc);
    let mut slot = start.clone();
    let mut sorted: Vec<(u32, u64)> = vec![(0, 0); pairs.len()];
    for (i, &(local, t)) in pairs.iter().enumerate() {
        let at = &mut slot[local as usize];
        sorted[*at] = (t, eids.get(i).copied().unwrap_or(0));
        *at += 1;
    }
    drop(pairs);
    drop(eids);
    for w in start.windows(2) {
        sorted[w[0]..w[1]].sort_unstable();
    }
    let whole = CsrPartOf {
        first_node,
        ..whole
    };
    let n = sorted.len() as u64;
    let mut w = CsrWriter::create_part(&staging, name, &degrees, n, whole, with_edge_ids)?;
    for &(t, e) in &sorted {
        w.push(t, e)?;
    }
    let mut info = PartInfo::of(w.finish()?, n);
    info.first_node = first_node;
    info.n_nodes = n_nodes;
    info.seconds = batches.worked();
    Ok(info)
}

/// The id index: batches of (id, node) sorted by id, each id once; integer ids give an
/// integer id space, strings a string one.
pub fn write_id_index_part(
    dir: &Path,
    name: &str,
    n_nodes_total: u64,
    batches: impl Iterator<Item = Result<RecordBatch, ArrowError>>,
) -> Result<PartInfo, PartError> {
    check_name(name)?;
    let staging = Staging::parts(dir)?;
    let mut keys: Option<ColumnBuilder> = None;
    let mut nodes: Vec<u32> = Vec::new();
    let mut batches = Timed::new(batches);
    for batch in &mut batches {
        let batch = batch?;
        let key = batch
            .columns()
            .first()
            .ok_or_else(|| invalid("the id batches need an id column"))?;
        if key.null_count() > 0 {
            return Err(invalid("an id is null"));
        }
        let dtype = quiver_type(key.data_type()).map_err(invalid)?;
        let b = keys.get_or_insert_with(|| ColumnBuilder::new(dtype));
        if b.dtype != dtype {
            return Err(invalid("the id column changes type between batches"));
        }
        let col = Col::of(key)?;
        for i in 0..batch.num_rows() {
            push(&col, None, i, b)?;
        }
        for n in ints(&batch, 1, "node")? {
            if n < 0 || n as u64 >= n_nodes_total {
                return Err(invalid(format!(
                    "node {n} is not one of the {n_nodes_total} nodes"
                )));
            }
            nodes.push(n as u32);
        }
    }
    let keys = keys.unwrap_or_else(|| {
        ColumnBuilder::new(DataType::Scalar(quiver_common::types::ScalarType::Long))
    });
    let id_type = match keys.dtype {
        DataType::Scalar(quiver_common::types::ScalarType::Long) => IdType::Integer,
        DataType::Scalar(quiver_common::types::ScalarType::String) => IdType::String,
        other => {
            return Err(invalid(format!(
                "ids must be integers or strings, not {other:?}"
            )))
        }
    };
    // Sorted, each once: what the index's binary search needs.
    for i in 1..keys.len() {
        let ord = match id_type {
            IdType::Integer => keys.i64_values()[i - 1].cmp(&keys.i64_values()[i]),
            IdType::String => keys.bytes_at(i - 1).cmp(keys.bytes_at(i)),
        };
        match ord {
            std::cmp::Ordering::Less => {}
            std::cmp::Ordering::Equal => {
                let k = match id_type {
                    IdType::Integer => keys.i64_values()[i].to_string(),
                    IdType::String => String::from_utf8_lossy(keys.bytes_at(i)).to_string(),
                };
                return Err(invalid(format!("id {k} is given to two nodes")));
            }
            std::cmp::Ordering::Greater => {
                return Err(invalid(
                    "ids must come sorted ascending (strings by their UTF-8 bytes)",
                ))
            }
        }
    }
    let seg = write_id_index(&staging, name, id_type, &keys, &nodes, n_nodes_total)?;
    let mut info = PartInfo::of(seg, nodes.len() as u64);
    info.id_type = Some(id_type);
    info.seconds = batches.worked();
    Ok(info)
}

/// A node label's table: its parts in node order.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabelParts {
    pub label: String,
    /// The column that holds the node's id (in the id index).
    pub id_column: Option<String>,
    pub parts: Vec<PartInfo>,
}

/// A relationship type: its out CSR parts and in CSR parts in node order, and its
/// property parts in edge-id order (none when it has no properties).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RelParts {
    pub name: String,
    pub out: Vec<PartInfo>,
    pub r#in: Vec<PartInfo>,
    #[serde(default)]
    pub props: Vec<PartInfo>,
}

/// What a build wrote: node tables in node-id order (labels in that order), the id
/// index of their one id space, relationship types.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BuildSpec {
    pub labels: Vec<LabelParts>,
    pub id_index: Option<PartInfo>,
    #[serde(default)]
    pub rel_types: Vec<RelParts>,
}

/// What a publish made.
#[derive(Debug, Clone, Serialize)]
pub struct Published {
    pub nodes: u64,
    pub relationships: u64,
    pub files: usize,
    pub bytes: u64,
}

/// Moves a part into the generation (a rename; a copy across file systems).
fn take(
    parts_dir: &Path,
    staging: &Staging,
    p: &PartInfo,
    moved: &mut Vec<(PathBuf, PathBuf)>,
) -> Result<SegmentMeta, PartError> {
    check_name(&p.file)?;
    let from = parts_dir.join(&p.file);
    let (to, rel) = staging.file(&p.file);
    if to.exists() {
        return Err(invalid(format!("part {} is named twice", p.file)));
    }
    let io = |source| quiver_storage::WriteError::Io {
        path: from.clone(),
        source,
    };
    if std::fs::rename(&from, &to).is_err() {
        std::fs::copy(&from, &to).map_err(io)?;
    }
    moved.push((to, from));
    Ok(SegmentMeta {
        file: rel,
        bytes: p.bytes,
    })
}

/// Publishes the parts in `parts_dir` that `spec` names as the database `db` (a new one,
/// or replacing one when `overwrite`): they move into a new generation, which is opened
/// and checked (parts that follow one another, row and edge counts that agree) before
/// `CURRENT` names it. On any error the parts go back where they were and `db` is as
/// it was.
pub fn publish_parts(
    db: &Path,
    parts_dir: &Path,
    spec: &BuildSpec,
    overwrite: bool,
) -> Result<Published, PartError> {
    let staging = Staging::begin(db, overwrite)?;
    let mut moved = Vec::new();
    let result = stage(parts_dir, &staging, spec, &mut moved);
    let manifest = match result {
        Ok(m) => m,
        Err(e) => {
            for (to, from) in moved {
                let _ = std::fs::rename(&to, &from);
            }
            return Err(e);
        }
    };
    let published = Published {
        nodes: manifest.n_nodes,
        relationships: manifest.rel_types.iter().map(|r| r.n_edges).sum(),
        files: manifest.files().len(),
        bytes: spec_bytes(spec),
    };
    staging.publish(&manifest)?;
    let _ = std::fs::remove_dir(parts_dir);
    Ok(published)
}

fn spec_bytes(spec: &BuildSpec) -> u64 {
    let l = spec.labels.iter().flat_map(|l| &l.parts);
    let r = spec
        .rel_types
        .iter()
        .flat_map(|r| r.out.iter().chain(&r.r#in).chain(&r.props));
    l.chain(r).chain(&spec.id_index).map(|p| p.bytes).sum()
}

fn stage(
    parts_dir: &Path,
    staging: &Staging,
    spec: &BuildSpec,
    moved: &mut Vec<(PathBuf, PathBuf)>,
) -> Result<Manifest, PartError> {
    let mut m = Manifest::empty(
        staging.generation(),
        format!("quiver {}", env!("CARGO_PKG_VERSION")),
    );
    let id_type = spec.id_index.as_ref().and_then(|p| p.id_type);
    if let Some(ix) = &spec.id_index {
        let index = take(parts_dir, staging, ix, moved)?;
        m.id_spaces.push(IdSpaceMeta {
            name: None,
            id_type: id_type.unwrap_or(IdType::Integer),
            n_ids: ix.rows,
            index,
        });
    }
    let mut first_node = 0u64;
    for (li, l) in spec.labels.iter().enumerate() {
        if m.labels.contains(&l.label) {
            return Err(invalid(format!("label {} is given twice", l.label)));
        }
        m.labels.push(l.label.clone());
        let Some(p0) = l.parts.iter().find(|p| p.rows > 0).or(l.parts.first()) else {
            return Err(invalid(format!("label {} has no part", l.label)));
        };
        let columns = p0.columns.clone();
        let mut segments = Vec::new();
        let mut n_rows = 0;
        for p in &l.parts {
            if p.rows == 0 {
                // An empty partition's part holds nothing (and may have no columns).
                continue;
            }
            if p.columns != columns {
                return Err(invalid(format!(
                    "label {}: part {} has other columns than part {}",
                    l.label, p.file, p0.file
                )));
            }
            segments.push(take(parts_dir, staging, p, moved)?);
            n_rows += p.rows;
        }
        let id_column = match &l.id_column {
            Some(c) => Some(columns.iter().position(|x| &x.name == c).ok_or_else(|| {
                invalid(format!("label {}: no column {c:?} holds the ids", l.label))
            })?),
            None => None,
        };
        m.node_tables.push(NodeTableMeta {
            name: l.label.clone(),
            first_node,
            n_rows,
            labels: vec![li as u32],
            label_column: None,
            id_column,
            id_space: (id_column.is_some() && !m.id_spaces.is_empty()).then_some(0),
            columns,
            segments,
            patches: Vec::new(),
            deleted: None,
        });
        first_node += n_rows;
    }
    m.n_nodes = first_node;
    if let Some(ix) = &spec.id_index {
        let with_ids: u64 = m
            .node_tables
            .iter()
            .filter(|t| t.id_column.is_some())
            .map(|t| t.n_rows)
            .sum();
        if ix.rows != with_ids {
            return Err(invalid(format!(
                "the id index holds {} ids for {with_ids} nodes with an id column",
                ix.rows
            )));
        }
    }
    for r in &spec.rel_types {
        let mut csr = |parts: &[PartInfo], side: &str| -> Result<Vec<SegmentMeta>, PartError> {
            let mut next = 0;
            let mut out = Vec::new();
            for p in parts {
                if p.first_node != next {
                    return Err(invalid(format!(
                        "{} {side}: part {} starts at node {}, the parts before end at {next}",
                        r.name, p.file, p.first_node
                    )));
                }
                next += p.n_nodes;
                out.push(take(parts_dir, staging, p, moved)?);
            }
            if next != m.n_nodes || out.is_empty() {
                return Err(invalid(format!(
                    "{} {side}: the parts cover nodes 0..{next} of {}",
                    r.name, m.n_nodes
                )));
            }
            Ok(out)
        };
        let out = csr(&r.out, "out")?;
        let inc = csr(&r.r#in, "in")?;
        let n_edges: u64 = r.out.iter().map(|p| p.rows).sum();
        let n_in: u64 = r.r#in.iter().map(|p| p.rows).sum();
        if n_in != n_edges {
            return Err(invalid(format!(
                "{}: {n_edges} entries out, {n_in} in",
                r.name
            )));
        }
        let p0 = r.props.iter().find(|p| p.rows > 0);
        let columns = p0.map(|p| p.columns.clone()).unwrap_or_default();
        let mut props = Vec::new();
        let mut prop_rows = 0;
        if !columns.is_empty() {
            for p in r.props.iter().filter(|p| p.rows > 0) {
                if p.columns != columns {
                    return Err(invalid(format!(
                        "{}: property part {} has other columns than the first",
                        r.name, p.file
                    )));
                }
                props.push(take(parts_dir, staging, p, moved)?);
                prop_rows += p.rows;
            }
            if prop_rows != n_edges {
                return Err(invalid(format!(
                    "{}: {prop_rows} property rows for {n_edges} relationships",
                    r.name
                )));
            }
        }
        let mut seg = RelSegmentMeta::new(
            n_edges,
            out[0].clone(),
            inc[0].clone(),
            props.first().cloned(),
            None,
        );
        seg.out_parts = out[1..].to_vec();
        seg.in_parts = inc[1..].to_vec();
        seg.props_parts = props.get(1..).map(|p| p.to_vec()).unwrap_or_default();
        let space = (!m.id_spaces.is_empty()).then_some(0);
        m.rel_types.push(RelTypeMeta {
            name: r.name.clone(),
            n_edges,
            columns,
            segments: vec![seg],
            start_space: space,
            end_space: space,
            patches: Vec::new(),
        });
    }
    // Open what would be published: every footer read, the parts checked to follow
    // one another and to hold the edges they claim.
    let root = staging.root();
    let opened = Database::with_manifest(&root, m.clone(), OpenMode::Mapped, &root)
        .map_err(PartError::Open)?;
    for (t, meta) in opened.node_tables().iter().zip(&m.node_tables) {
        if t.footer.n_rows != meta.n_rows {
            return Err(invalid(format!(
                "label {}: its parts hold {} rows, not {}",
                meta.name, t.footer.n_rows, meta.n_rows
            )));
        }
    }
    Ok(m)
}
