//! The database as the executor sees it: labels, properties by name, adjacency.
//!
//! [`Graph`] wraps an open [`Database`] with the lookups a query needs and precomputes
//! them once per query (property name -> column per table, row-group starts). Property
//! reads borrow column chunks from the mapped segments and decode only the one value
//! asked for; a batch of nodes reads each chunk once per run of nodes in the same row
//! group.

use crate::error::QueryError;
use crate::value::{RelRef, Value};
use arc_swap::{ArcSwap, Guard};
use hashbrown::HashMap;
use quiver_common::types::{DataType, ScalarType};
use quiver_cypher::ast::Dir;
use quiver_engine::delta::{overlaid, KeyVal, NodeRec, RelRec};
pub use quiver_engine::segments::chunk_value;

/// Reads entry `i` of a segment's column chunk of type `t` as a (mapped) value.
pub type SegRead<'a> = dyn Fn(&quiver_format::column::ColumnChunk<'_>, usize, DataType) -> Result<Value, QueryError>
    + Sync
    + 'a;
/// Maps a property value from the write layer.
pub type ValMap<'a> = dyn Fn(Value) -> Result<Value, QueryError> + Sync + 'a;
use quiver_engine::{Delta, View};
use quiver_storage::manifest::IdType;
use quiver_storage::read::{Database, Direction, IdKey};

/// How many rows ahead a read of scattered rows hints the next row to the CPU.
const PROP_PREFETCH_AHEAD: usize = 8;
use std::sync::Arc;

struct TableInfo {
    first_node: u64,
    n_rows: u64,
    rg_first: Vec<u64>,
    /// Property name -> column (the `:LABEL` column is not a property).
    props: HashMap<String, usize>,
    /// Properties in column order, for `properties(n)` and output.
    prop_list: Vec<(Arc<str>, usize)>,
    dtypes: Vec<DataType>,
    labels: Vec<u32>,
    label_column: Option<usize>,
    id_column: Option<usize>,
    id_space: Option<usize>,
}

impl TableInfo {
    /// Whether `prop` is this table's `:ID` column.
    fn id_prop_is(&self, prop: &str) -> bool {
        self.id_column.is_some_and(|col| {
            self.prop_list
                .iter()
                .any(|(n, c)| *c == col && **n == *prop)
        })
    }
}

struct RelInfo {
    name: Arc<str>,
    props: HashMap<String, usize>,
    prop_list: Vec<(Arc<str>, usize)>,
    dtypes: Vec<DataType>,
    rg_first: Vec<u64>,
}

/// What a graph reads of its generation's tables, built once per opened generation
/// ([`Database::derived`]) and shared by every query on it.
struct Schema {
    tables: Vec<TableInfo>,
    rels: Vec<RelInfo>,
    label_ids: HashMap<String, u32>,
}

impl Schema {
    fn of(db: &Database) -> Schema {
        let m = db.manifest();
        let tables = db
            .node_tables()
            .iter()
            .map(|t| {
                let meta = &t.meta;
                let prop_list: Vec<(Arc<str>, usize)> = meta
                    .columns
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| Some(*i) != meta.label_column)
                    .map(|(i, c)| (Arc::from(c.name.as_str()), i))
                    .collect();
                TableInfo {
                    first_node: meta.first_node,
                    n_rows: meta.n_rows,
                    rg_first: rg_starts(&t.footer),
                    props: prop_list.iter().map(|(k, i)| (k.to_string(), *i)).collect(),
                    prop_list,
                    dtypes: meta.columns.iter().map(|c| c.dtype).collect(),
                    labels: meta.labels.clone(),
                    label_column: meta.label_column,
                    id_column: meta.id_column,
                    id_space: meta.id_space,
                }
            })
            .collect();
        let rels = db
            .rel_types()
            .iter()
            .map(|r| {
                let prop_list: Vec<(Arc<str>, usize)> = r
                    .meta
                    .columns
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (Arc::from(c.name.as_str()), i))
                    .collect();
                RelInfo {
                    name: Arc::from(r.meta.name.as_str()),
                    props: prop_list.iter().map(|(k, i)| (k.to_string(), *i)).collect(),
                    prop_list,
                    dtypes: r.meta.columns.iter().map(|c| c.dtype).collect(),
                    rg_first: r.props_footer().map(rg_starts).unwrap_or_default(),
                }
            })
            .collect();
        let label_ids = m
            .labels
            .iter()
            .enumerate()
            .map(|(i, l)| (l.clone(), i as u32))
            .collect();
        Schema {
            tables,
            rels,
            label_ids,
        }
    }
}

pub struct Graph<'db> {
    pub db: &'db Database,
    schema: Arc<Schema>,
    /// The delta merged into every read; `None` when there is none (a database as
    /// imported, read at segment speed). A writing statement publishes its
    /// transaction's newest delta here after each batch of writes.
    delta: Option<ArcSwap<Delta>>,
    /// The statement's clock: `datetime()`, `date.statement()` and `timestamp()` read
    /// one instant, taken at the first read, so a statement sees time stand still.
    clock: std::sync::OnceLock<jiff::Timestamp>,
    /// The statement writes (see [`Graph::is_writing`]).
    writing: bool,
}

/// Where the nodes carrying a label are.
pub struct LabelScan {
    /// (table, whether rows must be checked against the `:LABEL` column).
    pub tables: Vec<(usize, bool)>,
}

/// Reading a deleted entity (Cypher's EntityNotFound).
fn deleted(what: &str, id: u64, reading: &str) -> QueryError {
    QueryError::EntityNotFound(format!(
        "{what} {id} was deleted earlier in this transaction; `{reading}` cannot be read from it"
    ))
}

fn rg_starts(footer: &quiver_storage::manifest::TableFooter) -> Vec<u64> {
    footer.row_groups.iter().map(|g| g.first_row).collect()
}

fn rg_of(starts: &[u64], row: u64) -> usize {
    starts.partition_point(|&f| f <= row).saturating_sub(1)
}

/// The storage directions a pattern direction walks.
/// The other direction.
pub fn flip(d: Direction) -> Direction {
    match d {
        Direction::Out => Direction::In,
        Direction::In => Direction::Out,
    }
}

pub fn dirs(d: Dir) -> &'static [Direction] {
    match d {
        Dir::Out => &[Direction::Out],
        Dir::In => &[Direction::In],
        Dir::Both => &[Direction::Out, Direction::In],
    }
}

/// Whether segment node record `r`, of a table that carries `label`, still has it
/// (unchanged labels are its table's).
fn keeps_label(d: &Delta, r: &NodeRec, label: u32) -> bool {
    r.seg_labels
        || d.labels
            .get(label as usize)
            .is_some_and(|name| r.labels.contains(name))
}

impl<'db> Graph<'db> {
    pub fn new(db: &'db Database) -> Graph<'db> {
        Graph {
            db,
            schema: db.derived(Schema::of),
            delta: None,
            clock: std::sync::OnceLock::new(),
            writing: false,
        }
    }

    /// The graph of segments plus `delta` (`None` or an empty delta: segments only,
    /// unless `writing`, when the statement's writes will be published here).
    pub fn with_delta(db: &'db Database, delta: Option<Arc<Delta>>, writing: bool) -> Graph<'db> {
        let mut g = Graph::new(db);
        g.delta = delta.filter(|d| writing || !d.is_empty()).map(ArcSwap::new);
        g.writing = writing;
        g
    }

    /// Reads the statement's clock of `other` (a graph of the same statement on a
    /// newer generation sees the same instant).
    pub fn share_clock(&self, other: &Graph) {
        if let Some(t) = other.clock.get() {
            let _ = self.clock.set(*t);
        }
    }

    /// Whether the statement writes (its delta then changes under the reads).
    pub fn is_writing(&self) -> bool {
        self.writing
    }

    /// `out[i]`: whether node `lo + i` of `lo..hi` is live and, when `table_label` is
    /// given (a range of tables that carry it), still has it. Segment rows are tested a
    /// table at a time against the deletion bitmaps, then corrected by the delta's few
    /// records in the range; created ids one by one.
    pub fn live_mask(&self, lo: u64, hi: u64, table_label: Option<u32>, out: &mut Vec<bool>) {
        let Some(d) = self.delta() else {
            self.db.live_mask(lo, hi, out);
            return;
        };
        let seg_hi = hi.min(d.base_nodes).max(lo);
        self.db.live_mask(lo, seg_hi, out);
        for (&id, r) in d.nodes.range(lo..seg_hi) {
            out[(id - lo) as usize] =
                !r.deleted && table_label.is_none_or(|l| keeps_label(&d, r, l));
        }
        for n in seg_hi..hi {
            out.push(match table_label {
                None => d.node_exists(n),
                Some(l) => self.live_keeping_label(n, l),
            });
        }
    }

    /// Values of the delta's records of nodes in `lo..hi` over a run read from the
    /// segments (`out[base..]` holds `lo..hi`): each record that decides property `name`
    /// replaces its node's value, mapped by `val` (a null stays null).
    fn overlay_range(
        &self,
        d: &Delta,
        lo: u64,
        hi: u64,
        name: &str,
        out: &mut [Value],
        val: &ValMap<'_>,
    ) -> Result<(), QueryError> {
        for (&id, r) in d.nodes.range(lo..hi) {
            if r.deleted {
                continue;
            }
            if let Some(v) = r.get(name) {
                out[(id - lo) as usize] = match v {
                    Value::Null => Value::Null,
                    v => val(v.clone())?,
                };
            }
        }
        Ok(())
    }

    /// Makes `d` the delta later reads see (a writing statement's newest state).
    pub fn publish(&self, d: Arc<Delta>) {
        if let Some(a) = &self.delta {
            a.store(d);
        }
    }

    /// The statement's instant (see `clock`).
    pub fn now(&self) -> jiff::Timestamp {
        *self.clock.get_or_init(jiff::Timestamp::now)
    }

    /// Whether node `n` was deleted in this transaction (or never existed).
    pub fn node_deleted(&self, n: u64) -> bool {
        matches!(self.delta().as_deref().map(|d| d.node(n)), Some(Some(None)))
    }

    /// The delta now, if reads merge one.
    #[inline]
    pub fn delta(&self) -> Option<Guard<Arc<Delta>>> {
        self.delta.as_ref().map(|a| a.load())
    }

    /// The delta, held (for a pass over many of its records).
    pub fn delta_full(&self) -> Option<Arc<Delta>> {
        self.delta.as_ref().map(|a| a.load_full())
    }

    /// Whether record `r` of a segment node leaves it live in a scan of tables that
    /// carry `table_label` (not deleted, the label kept).
    pub fn record_live(d: &Delta, r: &NodeRec, table_label: Option<u32>) -> bool {
        !r.deleted && table_label.is_none_or(|l| keeps_label(d, r, l))
    }

    pub fn has_delta(&self) -> bool {
        self.delta.is_some()
    }

    /// Whether nodes, their labels and relationships are the segments' as imported: no
    /// node deleted at a checkpoint, and no delta or one of node property changes only
    /// ([`Delta::keeps_shape`]).
    pub fn shape_unchanged(&self) -> bool {
        !self.db.has_deleted_nodes() && self.delta().is_none_or(|d| d.keeps_shape())
    }

    /// `Some(f(record))` when the delta holds node `n` (a `None` record: deleted, or an
    /// unused created id); `None` when the segments answer.
    #[inline]
    fn delta_node<R>(&self, n: u64, f: impl FnOnce(Option<&NodeRec>) -> R) -> Option<R> {
        let d = self.delta()?;
        d.node(n).map(f)
    }

    /// Like [`delta_node`](Self::delta_node) for a relationship.
    #[inline]
    fn delta_rel<R>(&self, r: &RelRef, f: impl FnOnce(Option<&RelRec>) -> R) -> Option<R> {
        let d = self.delta()?;
        d.rel_at(r.ty, r.eid, r.src as u64, r.dst as u64).map(f)
    }

    /// Nodes the segments hold a row of (the delta's created ids come after).
    pub fn segment_nodes(&self) -> u64 {
        match self.delta() {
            Some(d) => d.base_nodes,
            None => self.db.n_nodes(),
        }
    }

    pub fn n_nodes(&self) -> u64 {
        match self.delta() {
            Some(d) => d.next_node,
            None => self.db.n_nodes(),
        }
    }

    /// Whether node `n` exists (segment nodes unless a checkpoint's bitmap or the delta
    /// deleted them).
    #[inline]
    pub fn node_live(&self, n: u64) -> bool {
        let seg_live = |n: u64| !self.db.node_deleted(n);
        match self.delta() {
            Some(d) => match d.node(n) {
                Some(r) => r.is_some(),
                None => n < d.base_nodes && seg_live(n),
            },
            None => n < self.db.n_nodes() && seg_live(n),
        }
    }

    /// Whether scans must test each node for life: the delta may have deleted some, or
    /// the segments have deleted rows.
    #[inline]
    pub fn scans_check_life(&self) -> bool {
        self.has_delta() || self.db.has_deleted_nodes()
    }

    /// Whether segment node `n`, in a table that carries `label`, is live and still
    /// has the label (the delta may have deleted it or removed the label).
    #[inline]
    pub fn live_keeping_label(&self, n: u64, label: u32) -> bool {
        let Some(d) = self.delta() else {
            return n < self.db.n_nodes() && !self.db.node_deleted(n);
        };
        match d.node(n) {
            Some(None) => false,
            Some(Some(r)) => keeps_label(&d, r, label),
            None => n < d.base_nodes && !self.db.node_deleted(n),
        }
    }

    /// The database's vector indexes (`CREATE VECTOR INDEX`).
    pub fn vector_indexes(&self) -> &[quiver_storage::manifest::VectorIndexMeta] {
        &self.db.manifest().vector_indexes
    }

    pub fn label_id(&self, name: &str) -> Option<u32> {
        match self.delta() {
            Some(d) => d.label_id(name),
            None => self.schema.label_ids.get(name).copied(),
        }
    }

    pub fn label_name(&self, id: u32) -> Arc<str> {
        match self.delta() {
            Some(d) => d
                .labels
                .get(id as usize)
                .cloned()
                .unwrap_or_else(|| Arc::from("")),
            None => Arc::from(self.db.labels()[id as usize].as_str()),
        }
    }

    pub fn rel_type_id(&self, name: &str) -> Option<u32> {
        match self.delta() {
            Some(d) => d.type_id(name),
            None => self.db.rel_type_index(name).map(|i| i as u32),
        }
    }

    pub fn n_rel_types(&self) -> usize {
        match self.delta() {
            Some(d) => d.types.len(),
            None => self.schema.rels.len(),
        }
    }

    pub fn rel_type_name(&self, ty: u32) -> Arc<str> {
        match self.schema.rels.get(ty as usize) {
            Some(r) => r.name.clone(),
            None => self
                .delta()
                .and_then(|d| d.types.get(ty as usize).cloned())
                .unwrap_or_else(|| Arc::from("")),
        }
    }

    /// Every label name (the database's and the delta's).
    pub fn label_names(&self) -> Vec<String> {
        match self.delta() {
            Some(d) => d.labels.iter().map(|l| l.to_string()).collect(),
            None => self.db.labels().to_vec(),
        }
    }

    /// Every relationship type name.
    pub fn rel_type_names(&self) -> Vec<String> {
        (0..self.n_rel_types() as u32)
            .map(|t| self.rel_type_name(t).to_string())
            .filter(|n| !n.is_empty())
            .collect()
    }

    /// Property names the segments have columns for, and those the delta's entities
    /// hold.
    pub fn property_keys(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .schema
            .tables
            .iter()
            .flat_map(|t| t.props.keys().cloned())
            .chain(
                self.schema
                    .rels
                    .iter()
                    .flat_map(|r| r.props.keys().cloned()),
            )
            .filter(|k| !k.starts_with(':'))
            .collect();
        if let Some(d) = self.delta() {
            for r in d.nodes.values() {
                out.extend(
                    r.props
                        .iter()
                        .filter(|(_, v)| !v.is_null())
                        .map(|(k, _)| k.to_string()),
                );
            }
            for r in d.rels.values() {
                out.extend(
                    r.props
                        .iter()
                        .filter(|(_, v)| !v.is_null())
                        .map(|(k, _)| k.to_string()),
                );
            }
        }
        out
    }

    /// Node id range of table `t`.
    pub fn table_range(&self, t: usize) -> (u64, u64) {
        let ti = &self.schema.tables[t];
        (ti.first_node, ti.first_node + ti.n_rows)
    }

    /// The table and row of a node (storage's lookup).
    fn locate(&self, node: u64) -> Result<(usize, u64), QueryError> {
        Ok(self.db.node_location(node)?)
    }

    /// Tables whose nodes may carry `label`.
    pub fn label_scan(&self, label: u32) -> LabelScan {
        let tables = self
            .schema
            .tables
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                if t.labels.contains(&label) {
                    Some((i, false))
                } else {
                    t.label_column.map(|_| (i, true))
                }
            })
            .collect();
        LabelScan { tables }
    }

    /// The labels of a node (table labels, then its own `:LABEL` values).
    pub fn labels(&self, node: u64) -> Result<Vec<Arc<str>>, QueryError> {
        if let Some(v) = self.delta_node(node, |r| match r {
            None => Some(Vec::new()),
            Some(r) if r.seg_labels => None,
            Some(r) => Some(r.labels.to_vec()),
        }) {
            if let Some(v) = v {
                return Ok(v);
            }
        }
        let (t, row) = self.locate(node)?;
        let ti = &self.schema.tables[t];
        let mut out: Vec<Arc<str>> = ti
            .labels
            .iter()
            .map(|&l| Arc::from(self.db.labels()[l as usize].as_str()))
            .collect();
        if let Some(c) = ti.label_column {
            if let Value::List(l) = self.cell(t, row, c)? {
                for v in l.iter() {
                    if let Value::Str(s) = v {
                        if !out.contains(s) {
                            out.push(s.clone());
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    pub fn has_label(&self, node: u64, label: u32) -> Result<bool, QueryError> {
        if let Some(d) = self.delta() {
            if let Some(r) = d.node(node) {
                let Some(r) = r else { return Ok(false) };
                if !r.seg_labels {
                    let name = d.labels.get(label as usize);
                    return Ok(name.is_some_and(|n| r.labels.contains(n)));
                }
            }
            if label as usize >= self.db.labels().len() {
                return Ok(false);
            }
        }
        if self.db.node_deleted(node) {
            return Ok(false);
        }
        let (t, row) = self.locate(node)?;
        let ti = &self.schema.tables[t];
        if ti.labels.contains(&label) {
            return Ok(true);
        }
        match ti.label_column {
            None => Ok(false),
            Some(c) => {
                let name = &self.db.labels()[label as usize];
                Ok(match self.cell(t, row, c)? {
                    Value::List(l) => l.iter().any(|v| matches!(v, Value::Str(s) if &**s == name)),
                    _ => false,
                })
            }
        }
    }

    fn cell(&self, t: usize, row: u64, col: usize) -> Result<Value, QueryError> {
        let ti = &self.schema.tables[t];
        let rg = rg_of(&ti.rg_first, row);
        let i = (row - ti.rg_first[rg]) as usize;
        let dtype = ti.dtypes[col];
        Ok(self
            .db
            .with_node_chunk(t, rg, col, |c| chunk_value(c, i, dtype))?)
    }

    pub fn node_prop(&self, node: u64, name: &str) -> Result<Value, QueryError> {
        if let Some(v) = self.delta_node(node, |r| r.map(|r| r.get(name).cloned())) {
            // A record that leaves the property to the segment falls through.
            if let Some(v) = v.ok_or_else(|| deleted("node", node, name))? {
                return Ok(v);
            }
        }
        let (t, row) = self.locate(node)?;
        match self.schema.tables[t].props.get(name) {
            Some(&c) => self.cell(t, row, c),
            None => Ok(Value::Null),
        }
    }

    /// `out[i] = nodes[i].name` for a batch (non-nodes give null). Nodes are grouped by
    /// the column chunk that holds them, so each chunk is opened once per batch whatever
    /// the order of the nodes (expansions produce them in neighbour order).
    pub fn node_prop_batch(
        &self,
        nodes: &[Value],
        name: &str,
        out: &mut Vec<Value>,
    ) -> Result<(), QueryError> {
        if let Some((lo, hi)) = self.consecutive_live(nodes) {
            return self.node_prop_range(lo, hi, name, out);
        }
        self.node_prop_scattered(nodes, name, out, &|c, i, t| Ok(chunk_value(c, i, t)), &Ok)
    }

    /// `Some(lo..hi)` when `nodes` are the nodes `lo, lo + 1, ..., hi - 1` in order and
    /// none is deleted in this transaction (a scan's batch): their properties are then
    /// read a column run at a time.
    fn consecutive_live(&self, nodes: &[Value]) -> Option<(u64, u64)> {
        let Some(Value::Node(lo)) = nodes.first() else {
            return None;
        };
        let lo = *lo;
        let run = nodes
            .iter()
            .zip(lo..)
            .all(|(v, n)| matches!(v, Value::Node(m) if *m == n));
        let hi = lo + nodes.len() as u64;
        let live = || {
            self.delta()
                .is_none_or(|d| !d.nodes.range(lo..hi).any(|(_, r)| r.deleted))
        };
        (run && live()).then_some((lo, hi))
    }

    /// As [`node_prop_batch`](Self::node_prop_batch), with each value mapped on its way
    /// out: `seg` reads entry `i` of a segment's column chunk of type `t` (so a caller can
    /// test a string's bytes without making a value of it), `val` maps a value from the
    /// write layer. Rows without the property stay null, unmapped: for operators that give
    /// null on a null operand.
    pub fn node_prop_batch_map(
        &self,
        nodes: &[Value],
        name: &str,
        out: &mut Vec<Value>,
        seg: &SegRead<'_>,
        val: &ValMap<'_>,
    ) -> Result<(), QueryError> {
        match self.consecutive_live(nodes) {
            Some((lo, hi)) => self.node_prop_range_map(lo, hi, name, out, seg, val),
            None => self.node_prop_scattered(nodes, name, out, seg, val),
        }
    }

    /// [`node_prop_batch_map`](Self::node_prop_batch_map) for nodes in any order: grouped
    /// by the column chunk that holds them, each chunk opened once.
    fn node_prop_scattered(
        &self,
        nodes: &[Value],
        name: &str,
        out: &mut Vec<Value>,
        seg: &SegRead<'_>,
        val: &ValMap<'_>,
    ) -> Result<(), QueryError> {
        let base = out.len();
        out.resize(base + nodes.len(), Value::Null);
        let d = self.delta();
        // Column of `name` per table, looked up once.
        let mut cols: Vec<Option<Option<usize>>> = vec![None; self.schema.tables.len()];
        // (table, row group) -> (position in the batch, index in the chunk).
        type Group = ((usize, usize), Vec<(usize, usize)>);
        let mut groups: Vec<Group> = Vec::new();
        for (pos, v) in nodes.iter().enumerate() {
            let Value::Node(n) = *v else { continue };
            if let Some(r) = d.as_ref().and_then(|d| d.node(n)) {
                let r = r.ok_or_else(|| deleted("node", n, name))?;
                if let Some(v) = r.get(name) {
                    if !matches!(v, Value::Null) {
                        out[base + pos] = val(v.clone())?;
                    }
                    continue;
                }
            }
            let (t, row) = self.locate(n)?;
            let ti = &self.schema.tables[t];
            let col = *cols[t].get_or_insert_with(|| ti.props.get(name).copied());
            if col.is_none() {
                continue;
            }
            let rg = rg_of(&ti.rg_first, row);
            let idx = (row - ti.rg_first[rg]) as usize;
            match groups.iter_mut().find(|g| g.0 == (t, rg)) {
                Some(g) => g.1.push((pos, idx)),
                None => groups.push(((t, rg), vec![(pos, idx)])),
            }
        }
        for ((t, rg), items) in groups {
            let Some(Some(col)) = cols[t] else { continue };
            let dtype = self.schema.tables[t].dtypes[col];
            self.db.with_node_chunk(t, rg, col, |c| {
                // Scattered rows miss the cache one by one: hint each a few ahead.
                for (k, &(pos, idx)) in items.iter().enumerate() {
                    if let Some(&(_, ahead)) = items.get(k + PROP_PREFETCH_AHEAD) {
                        c.prefetch(ahead);
                    }
                    out[base + pos] = seg(c, idx, dtype)?;
                }
                Ok::<(), QueryError>(())
            })??;
        }
        Ok(())
    }

    /// `out` gets property `name` of nodes `lo..hi` (null where a table lacks it), read
    /// column chunk by column chunk.
    pub fn node_prop_range(
        &self,
        lo: u64,
        hi: u64,
        name: &str,
        out: &mut Vec<Value>,
    ) -> Result<(), QueryError> {
        self.range_with_delta(lo, hi, name, out, &Ok, &mut |g, a, b, out| {
            g.node_prop_range_seg(a, b, name, out)
        })
    }

    /// Property `name` of nodes `lo..hi` into `out`: segment rows by `seg_rows` (at
    /// column speed), then the delta's records laid over them (mapped by `val`),
    /// created nodes one by one.
    fn range_with_delta(
        &self,
        lo: u64,
        hi: u64,
        name: &str,
        out: &mut Vec<Value>,
        val: &ValMap<'_>,
        seg_rows: &mut dyn FnMut(&Self, u64, u64, &mut Vec<Value>) -> Result<(), QueryError>,
    ) -> Result<(), QueryError> {
        let Some(d) = self.delta() else {
            return seg_rows(self, lo, hi, out);
        };
        let seg_hi = hi.min(d.base_nodes).max(lo);
        let base = out.len();
        seg_rows(self, lo, seg_hi, out)?;
        self.overlay_range(&d, lo, seg_hi, name, &mut out[base..], val)?;
        for n in seg_hi..hi {
            out.push(match d.node(n) {
                Some(Some(r)) => match r.get(name) {
                    Some(Value::Null) | None => Value::Null,
                    Some(v) => val(v.clone())?,
                },
                _ => Value::Null,
            });
        }
        Ok(())
    }

    /// [`node_prop_range`](Self::node_prop_range) over segment rows only.
    fn node_prop_range_seg(
        &self,
        lo: u64,
        hi: u64,
        name: &str,
        out: &mut Vec<Value>,
    ) -> Result<(), QueryError> {
        self.prop_range_chunks(lo, hi, name, |chunk, count| {
            match chunk {
                None => out.extend(std::iter::repeat_n(Value::Null, count)),
                Some((c, dtype, a, b)) => match dtype {
                    DataType::Scalar(
                        ScalarType::Byte | ScalarType::Short | ScalarType::Int | ScalarType::Long,
                    ) => out.extend((a..b).map(|i| c.get_i64(i).map_or(Value::Null, Value::Int))),
                    _ => out.extend((a..b).map(|i| chunk_value(c, i, dtype))),
                },
            }
            Ok(())
        })
    }

    /// As [`node_prop_range`](Self::node_prop_range), with each present value mapped on
    /// its way out: `seg` reads entry `i` of a segment's column chunk of type `t`, `val`
    /// maps a value from the write layer (see
    /// [`node_prop_batch_map`](Self::node_prop_batch_map)). Absent values stay null.
    pub fn node_prop_range_map(
        &self,
        lo: u64,
        hi: u64,
        name: &str,
        out: &mut Vec<Value>,
        seg: &SegRead<'_>,
        val: &ValMap<'_>,
    ) -> Result<(), QueryError> {
        self.range_with_delta(lo, hi, name, out, val, &mut |g, a, b, out| {
            g.prop_range_map_seg(a, b, name, out, seg)
        })
    }

    /// [`node_prop_range_map`](Self::node_prop_range_map) over segment rows only.
    fn prop_range_map_seg(
        &self,
        lo: u64,
        hi: u64,
        name: &str,
        out: &mut Vec<Value>,
        seg: &SegRead<'_>,
    ) -> Result<(), QueryError> {
        self.prop_range_chunks(lo, hi, name, |chunk, count| {
            match chunk {
                None => out.extend(std::iter::repeat_n(Value::Null, count)),
                Some((c, dtype, a, b)) => {
                    for i in a..b {
                        out.push(match c.is_valid(i) {
                            true => seg(c, i, dtype)?,
                            false => Value::Null,
                        });
                    }
                }
            }
            Ok(())
        })
    }

    /// Calls `each` for every run of nodes `lo..hi` (without a delta) in one row group of
    /// one table: with the chunk of `name`, its type and the run's entries `a..b`, or
    /// with `None` when the table lacks the property; and the run's length.
    pub(crate) fn prop_range_chunks(
        &self,
        lo: u64,
        hi: u64,
        name: &str,
        mut each: impl FnMut(
            Option<(
                &quiver_format::column::ColumnChunk<'_>,
                DataType,
                usize,
                usize,
            )>,
            usize,
        ) -> Result<(), QueryError>,
    ) -> Result<(), QueryError> {
        let mut n = lo;
        while n < hi {
            let (t, row) = self.locate(n)?;
            let ti = &self.schema.tables[t];
            let rg = rg_of(&ti.rg_first, row);
            let rg_end = ti.rg_first.get(rg + 1).copied().unwrap_or(ti.n_rows);
            let end_row = rg_end.min(row + (hi - n));
            let count = (end_row - row) as usize;
            match ti.props.get(name) {
                None => each(None, count)?,
                Some(&col) => {
                    let dtype = ti.dtypes[col];
                    let base = ti.rg_first[rg];
                    let (a, b) = ((row - base) as usize, (end_row - base) as usize);
                    self.db
                        .with_node_chunk(t, rg, col, |c| each(Some((c, dtype, a, b)), count))??;
                }
            }
            n += count as u64;
        }
        Ok(())
    }

    /// Every property of a node that is not null, in column order.
    pub fn node_props(&self, node: u64) -> Result<Vec<(Arc<str>, Value)>, QueryError> {
        let mut overlay = None;
        if let Some(d) = self.delta() {
            match d.node(node) {
                Some(None) => return Ok(Vec::new()),
                Some(Some(r)) if r.created => return Ok(r.props.to_vec()),
                Some(Some(r)) => overlay = Some(r.props.clone()),
                None => {}
            }
        }
        let (t, row) = self.locate(node)?;
        let mut out = Vec::with_capacity(self.schema.tables[t].prop_list.len());
        for (name, c) in &self.schema.tables[t].prop_list {
            let v = self.cell(t, row, *c)?;
            if !v.is_null() {
                out.push((name.clone(), v));
            }
        }
        Ok(match overlay {
            Some(o) => overlaid(out, &o),
            None => out,
        })
    }

    /// [`node_props`](Self::node_props) of many nodes at once (a result of whole
    /// nodes): segment nodes are grouped by the row group that holds them, and each of
    /// its column chunks is opened once for the group and read in row order, where one
    /// node at a time opens every column's chunk for a single value. `out[i]` is the
    /// properties of `nodes[i]`.
    pub fn nodes_props(&self, nodes: &[u64]) -> Result<Vec<Vec<(Arc<str>, Value)>>, QueryError> {
        let mut out: Vec<Vec<(Arc<str>, Value)>> = vec![Vec::new(); nodes.len()];
        let d = self.delta();
        // (table, row group, index in the chunk, position in `nodes`), and the delta's
        // changes to lay over a segment node's values.
        let mut at = Vec::with_capacity(nodes.len());
        let mut overlays = Vec::new();
        for (pos, &n) in nodes.iter().enumerate() {
            if let Some(d) = &d {
                match d.node(n) {
                    Some(None) => continue,
                    Some(Some(r)) if r.created => {
                        out[pos] = r.props.to_vec();
                        continue;
                    }
                    Some(Some(r)) => overlays.push((pos, r.props.clone())),
                    None => {}
                }
            }
            let (t, row) = self.locate(n)?;
            let ti = &self.schema.tables[t];
            let rg = rg_of(&ti.rg_first, row);
            at.push((t, rg, (row - ti.rg_first[rg]) as usize, pos));
        }
        at.sort_unstable();
        for group in at.chunk_by(|a, b| (a.0, a.1) == (b.0, b.1)) {
            let (t, rg) = (group[0].0, group[0].1);
            let ti = &self.schema.tables[t];
            for &(.., pos) in group {
                out[pos].reserve_exact(ti.prop_list.len());
            }
            for (name, c) in &ti.prop_list {
                let dtype = ti.dtypes[*c];
                self.db.with_node_chunk(t, rg, *c, |chunk| {
                    for (j, &(_, _, i, pos)) in group.iter().enumerate() {
                        // (The rows lie anywhere in the chunk: hinted a few ahead,
                        // their cache misses overlap, as in `node_prop_scattered`.)
                        if let Some(&(_, _, k, _)) = group.get(j + PROP_PREFETCH_AHEAD) {
                            chunk.prefetch(k);
                        }
                        let v = chunk_value(chunk, i, dtype);
                        if !v.is_null() {
                            out[pos].push((name.clone(), v));
                        }
                    }
                })?;
            }
        }
        for (pos, o) in overlays {
            out[pos] = overlaid(std::mem::take(&mut out[pos]), &o);
        }
        Ok(out)
    }

    pub fn rel_prop(&self, r: &RelRef, name: &str) -> Result<Value, QueryError> {
        if let Some(v) = self.delta_rel(r, |rec| rec.map(|r| r.get(name).cloned())) {
            if let Some(v) = v.ok_or_else(|| deleted("relationship", r.eid, name))? {
                return Ok(v);
            }
        }
        let Some(ri) = self.schema.rels.get(r.ty as usize) else {
            return Ok(Value::Null);
        };
        match ri.props.get(name) {
            Some(&c) => self.rel_cell(r, c),
            None => Ok(Value::Null),
        }
    }

    fn rel_cell(&self, r: &RelRef, col: usize) -> Result<Value, QueryError> {
        let ri = &self.schema.rels[r.ty as usize];
        let rg = rg_of(&ri.rg_first, r.eid);
        let i = (r.eid - ri.rg_first[rg]) as usize;
        let dtype = ri.dtypes[col];
        Ok(self
            .db
            .with_rel_chunk(r.ty as usize, rg, col, |c| chunk_value(c, i, dtype))?)
    }

    pub fn rel_props(&self, r: &RelRef) -> Result<Vec<(Arc<str>, Value)>, QueryError> {
        let mut overlay = None;
        if let Some(d) = self.delta() {
            match d.rel_at(r.ty, r.eid, r.src as u64, r.dst as u64) {
                Some(None) => return Ok(Vec::new()),
                Some(Some(rec)) if rec.created => return Ok(rec.props.to_vec()),
                Some(Some(rec)) => overlay = Some(rec.props.clone()),
                None => {}
            }
        }
        let Some(ri) = self.schema.rels.get(r.ty as usize) else {
            return Ok(overlay
                .map(|o| overlaid(Vec::new(), &o))
                .unwrap_or_default());
        };
        let mut out = Vec::new();
        for (name, c) in &ri.prop_list {
            let v = self.rel_cell(r, *c)?;
            if !v.is_null() {
                out.push((name.clone(), v));
            }
        }
        Ok(match overlay {
            Some(o) => overlaid(out, &o),
            None => out,
        })
    }

    /// An id-index seek for `MATCH (n:Label {prop: key})` when `prop` is the imported
    /// `:ID` column of every table that can hold `Label`: the candidate nodes (still to be
    /// checked for the label). `None` when the index does not apply.
    pub fn id_seek_space(&self, label: u32, prop: &str) -> Option<usize> {
        // Tables that can hold the label without `prop` as their `:ID` column (a
        // checkpoint's table of created nodes of several labels) are scanned beside the
        // index: see `id_seek_residual`.
        let scan = self.label_scan(label);
        let mut space = None;
        for &(t, _) in &scan.tables {
            let ti = &self.schema.tables[t];
            if !ti.id_prop_is(prop) {
                continue;
            }
            let s = ti.id_space?;
            if space.is_some_and(|x| x != s) {
                return None;
            }
            space = Some(s);
        }
        space
    }

    /// The node ranges of the tables that can hold `label` but whose `prop` is not in
    /// id space `space`'s index: an id seek scans them beside its index lookup.
    pub fn id_seek_residual(&self, label: u32, prop: &str, space: usize) -> Vec<(u64, u64)> {
        self.label_scan(label)
            .tables
            .iter()
            .map(|&(t, _)| &self.schema.tables[t])
            .filter(|ti| !(ti.id_space == Some(space) && ti.id_prop_is(prop)))
            .map(|ti| (ti.first_node, ti.first_node + ti.n_rows))
            .collect()
    }

    /// For a node of any label, `{prop: key}`: the one id space whose `:ID` property is
    /// `prop` in some table (`None` when none is, or several are), and the node ranges
    /// of the tables outside its index that have `prop`, to scan beside the lookup.
    pub fn id_seek_any(&self, prop: &str) -> Option<(usize, Vec<(u64, u64)>)> {
        let indexed = |ti: &TableInfo| ti.id_prop_is(prop).then_some(ti.id_space?);
        let mut space = None;
        for ti in &self.schema.tables {
            if let Some(s) = indexed(ti) {
                if space.is_some_and(|x| x != s) {
                    return None;
                }
                space = Some(s);
            }
        }
        let space = space?;
        let residual = self
            .schema
            .tables
            .iter()
            .filter(|ti| indexed(ti) != Some(space) && ti.props.contains_key(prop))
            .map(|ti| (ti.first_node, ti.first_node + ti.n_rows))
            .collect();
        Some((space, residual))
    }

    pub fn id_lookup(&self, space: usize, key: &Value) -> Result<Option<u64>, QueryError> {
        let id_type = self.db.manifest().id_spaces[space].id_type;
        let found = match (id_type, key) {
            (IdType::Integer, Value::Int(k)) => self.db.lookup_id(space, IdKey::Int(*k))?,
            (IdType::Integer, Value::Float(f)) if f.fract() == 0.0 => {
                self.db.lookup_id(space, IdKey::Int(*f as i64))?
            }
            (IdType::String, Value::Str(s)) => {
                self.db.lookup_id(space, IdKey::Str(s.as_bytes()))?
            }
            _ => None,
        };
        Ok(found.map(u64::from))
    }

    /// Neighbours over one type and direction: `f(neighbour, edge id)`.
    #[inline]
    pub fn for_each_neighbour(
        &self,
        ty: u32,
        node: u64,
        dir: Direction,
        mut f: impl FnMut(u32, u64),
    ) -> Result<(), QueryError> {
        if let Some(d) = self.delta() {
            if !Self::ids_raw_with(Some(&d)) {
                // Edge ids come out canonical: the delta's deletions are tested by them.
                View::new(self.db, &d).for_each_rel(ty, node, dir, |nb, eid| f(nb as u32, eid))?;
                return Ok(());
            }
            // Nothing deleted: the segments' adjacency as it is, then the created
            // relationships (whose ids `rel_ref` leaves as they are).
            if node < d.base_nodes && (ty as usize) < self.db.rel_types().len() {
                for (nb, eid) in self.db.neighbours(ty as usize, node as u32, dir)? {
                    f(nb, eid);
                }
            }
            View::new(self.db, &d).for_each_created_rel(ty, node, dir, |nb, eid| f(nb as u32, eid));
            return Ok(());
        }
        for (nb, eid) in self.db.neighbours(ty as usize, node as u32, dir)? {
            f(nb, eid);
        }
        Ok(())
    }

    /// Whether [`for_each_neighbour`](Self::for_each_neighbour) gives the in CSR's edge
    /// ids for relationships met from their target, for [`rel_ref`](Self::rel_ref) to
    /// make canonical (two binary searches an edge, paid only for the edges kept): yes
    /// unless the delta deleted something (its tests need canonical ids at once).
    fn ids_raw_with(d: Option<&Delta>) -> bool {
        d.is_none_or(|d| d.deleted_rels == 0 && d.deleted_nodes == 0)
    }

    fn ids_raw(&self) -> bool {
        let d = self.delta();
        Self::ids_raw_with(d.as_deref().map(|a| &**a))
    }

    /// Nodes whose property `key` equals `v` among those the delta holds.
    pub fn delta_key_nodes(&self, key: &str, v: &Value) -> Vec<u64> {
        self.delta()
            .map(|d| d.index_lookup(key, v))
            .unwrap_or_default()
    }

    /// Whether a segment index's candidate `n` for `key = v` still holds.
    pub fn still_matches(&self, n: u64, key: &str, v: &Value) -> bool {
        self.delta_node(n, |r| match r {
            None => false,
            // Unchanged: the segment index that found it is right.
            Some(r) => match r.get(key) {
                None => true,
                Some(cur) => !cur.is_null() && KeyVal::of(cur) == KeyVal::of(v),
            },
        })
        .unwrap_or(true)
    }

    /// Nodes the delta holds (created or changed), for range seeks over it.
    pub fn delta_nodes(&self) -> Vec<u64> {
        self.delta()
            .map(|d| {
                d.nodes
                    .iter()
                    .filter(|(_, r)| !r.deleted)
                    .map(|(k, _)| *k)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The live nodes that have `label`, in node order within the segments' tables
    /// and then the delta's nodes (created ones, and segment nodes that gained it), at
    /// most `limit`: what a procedure reads of a label (`apoc.meta.data`'s sample,
    /// `apoc.meta.graph`'s counts, a vector search). The planner's scans read the same
    /// nodes by ranges (`Planner::label_ranges`).
    pub fn label_nodes(&self, label: u32, limit: usize) -> Result<Vec<u64>, QueryError> {
        let mut out = Vec::new();
        for (t, check) in self.label_scan(label).tables {
            let (lo, hi) = self.table_range(t);
            for n in lo..hi {
                if out.len() >= limit {
                    return Ok(out);
                }
                if self.node_live(n) && (!check || self.has_label(n, label)?) {
                    out.push(n);
                }
            }
        }
        let tables = out.len();
        for n in self.delta_nodes() {
            if out.len() >= limit {
                break;
            }
            if self.has_label(n, label)? && out[..tables].binary_search(&n).is_err() {
                out.push(n);
            }
        }
        Ok(out)
    }

    /// Neighbours of `node` over every type and direction of a pattern step, as
    /// relationships (with the edge id both directions agree on); an undirected step
    /// meets a self-loop once.
    pub fn step_rels(
        &self,
        types: &[u32],
        dir: Dir,
        node: u64,
        out: &mut Vec<(u64, RelRef)>,
    ) -> Result<(), QueryError> {
        for &ty in types {
            for &d in dirs(dir) {
                let both_in = dir == Dir::Both && d == Direction::In;
                let mut raw = Vec::new();
                self.for_each_neighbour(ty, node, d, |nb, eid| {
                    if !(both_in && nb as u64 == node) {
                        raw.push((nb, eid))
                    }
                })?;
                for (nb, eid) in raw {
                    out.push((nb as u64, self.rel_ref(ty, node, nb, eid, d)?));
                }
            }
        }
        Ok(())
    }

    /// As [`step_rels`](Self::step_rels), but a relationship reached from its target
    /// may keep the in CSR's edge id (flagged `true`) until
    /// [`settle_rel`](Self::settle_rel) makes it the relationship's own: a search that
    /// keeps few of the edges it meets (a shortest path: 41% of its time) pays the
    /// canonical id's binary searches only for those it keeps.
    pub fn step_rels_lazy(
        &self,
        types: &[u32],
        dir: Dir,
        node: u64,
        out: &mut Vec<(u64, RelRef, bool)>,
    ) -> Result<(), QueryError> {
        self.for_each_step_lazy(types, dir, node, |nb, r, raw| out.push((nb, r, raw)))
    }

    /// [`step_rels_lazy`](Self::step_rels_lazy) handing each step to `f` instead of a
    /// list (a shortest path search tests each as it comes: the list's copies were a
    /// fifth of its time).
    #[inline]
    pub fn for_each_step_lazy(
        &self,
        types: &[u32],
        dir: Dir,
        node: u64,
        mut f: impl FnMut(u64, RelRef, bool),
    ) -> Result<(), QueryError> {
        let raw = self.ids_raw();
        for &ty in types {
            for &d in dirs(dir) {
                let both_in = dir == Dir::Both && d == Direction::In;
                self.for_each_neighbour(ty, node, d, |nb, eid| {
                    if both_in && nb as u64 == node {
                        return;
                    }
                    let (src, dst) = match d {
                        Direction::Out => (node as u32, nb),
                        Direction::In => (nb, node as u32),
                    };
                    f(
                        nb as u64,
                        RelRef { ty, src, dst, eid },
                        raw && d == Direction::In,
                    );
                })?;
            }
        }
        Ok(())
    }

    /// The far nodes of [`for_each_step_lazy`](Self::for_each_step_lazy)'s steps
    /// alone, no edge id read where the delta deleted nothing: a search that keeps
    /// only which node reached which, and finds the relationships of the one path it
    /// returns afterwards ([`step_to`](Self::step_to)).
    #[inline]
    pub fn for_each_step_target(
        &self,
        types: &[u32],
        dir: Dir,
        node: u64,
        mut f: impl FnMut(u64),
    ) -> Result<(), QueryError> {
        let delta = self.delta();
        if !Self::ids_raw_with(delta.as_deref().map(|d| &**d)) {
            // (Deletions are tested by edge id.)
            return self.for_each_step_lazy(types, dir, node, |v, _, _| f(v));
        }
        let n_types = self.db.rel_types().len();
        let in_segments = delta.as_ref().is_none_or(|dl| node < dl.base_nodes);
        for &d in dirs(dir) {
            let both_in = dir == Dir::Both && d == Direction::In;
            if in_segments {
                for &ty in types.iter().filter(|&&ty| (ty as usize) < n_types) {
                    let mut it = self.db.neighbours(ty as usize, node as u32, d)?;
                    while let Some(nb) = it.next_target() {
                        if !(both_in && nb as u64 == node) {
                            f(nb as u64);
                        }
                    }
                }
            }
            // The node's created relationships, looked up once for all the types (a
            // lookup a type was 9% of a search over every type beside mgbench's
            // writes).
            if let Some(adj) = delta
                .as_ref()
                .and_then(|dl| dl.adjacency(node, d == Direction::Out))
            {
                for &(ty, _, nb) in adj.iter() {
                    if types.contains(&ty) && !(both_in && nb == node) {
                        f(nb);
                    }
                }
            }
        }
        Ok(())
    }

    /// A relationship of a step from `a` to `b` (as
    /// [`for_each_step_lazy`](Self::for_each_step_lazy) gives them), with its canonical
    /// id, if there is one.
    pub fn step_to(
        &self,
        types: &[u32],
        dir: Dir,
        a: u64,
        b: u64,
    ) -> Result<Option<RelRef>, QueryError> {
        let mut found = None;
        self.for_each_step_lazy(types, dir, a, |v, r, raw| {
            if v == b && found.is_none() {
                found = Some((r, raw));
            }
        })?;
        found.map(|(r, raw)| self.settle_rel(r, raw)).transpose()
    }

    /// Hints the CPU to load the segment adjacency [`for_each_step_lazy`] of `node`
    /// reads: its offsets, or with `targets` its first entries (hint the offsets a few
    /// nodes earlier). A search expanding a front of nodes hints those a few places
    /// ahead, so that their cache misses overlap instead of coming one by one.
    ///
    /// [`for_each_step_lazy`]: Self::for_each_step_lazy
    #[inline]
    pub fn prefetch_steps(&self, types: &[u32], dir: Dir, node: u64, targets: bool) {
        let Ok(n) = u32::try_from(node) else { return };
        for &ty in types {
            for &d in dirs(dir) {
                self.db.prefetch_neighbours(ty as usize, n, d, targets);
            }
        }
        // With the offsets, the word of the delta's bitmap that says whether the node
        // has created relationships (a lookup a node was a tenth of a search beside
        // mgbench's writes).
        if !targets {
            if let Some(d) = self.delta() {
                for &d2 in dirs(dir) {
                    d.prefetch_adjacency(node, d2 == Direction::Out);
                }
            }
        }
    }

    /// The relationship `r` as every other reader names it: a `raw` one (from
    /// [`step_rels_lazy`](Self::step_rels_lazy)) gets its canonical edge id (a created
    /// relationship's is its own already: past every segment's edges, it is kept).
    pub fn settle_rel(&self, r: RelRef, raw: bool) -> Result<RelRef, QueryError> {
        if !raw {
            return Ok(r);
        }
        let eid = quiver_engine::segments::canonical_edge_id(
            self.db,
            r.ty,
            r.dst as u64,
            r.src,
            r.eid,
            Direction::In,
        )?;
        Ok(RelRef { eid, ..r })
    }

    /// Whether a relationship of one of `types` leads from `a` to `b` over `dir`: a
    /// binary search in the segments' adjacency (with a delta, beside `a`'s created
    /// relationships; a walk out of `a` once segment relationships were deleted).
    pub fn has_rel_to(&self, types: &[u32], dir: Dir, a: u64, b: u64) -> Result<bool, QueryError> {
        let delta = self.delta();
        for &ty in types {
            for &d in dirs(dir) {
                if let Some(delta) = &delta {
                    // Created relationships: `a`'s own list in the delta.
                    let view = View::new(self.db, delta);
                    let mut found = false;
                    view.for_each_created_rel(ty, a, d, |nb, _| found |= nb == b);
                    // Segment ones: the probe below holds while no segment relationship
                    // is deleted (both ends are live, being bound); else a walk out of
                    // `a` that skips the deleted.
                    if !found && delta.deleted_rels > 0 {
                        view.for_each_seg_rel(ty, a, d, |nb, _| found |= nb == b)?;
                    } else if !found && a < delta.base_nodes && b < delta.base_nodes {
                        found = self.db.has_neighbour(ty as usize, a as u32, b as u32, d)?;
                    }
                    if found {
                        return Ok(true);
                    }
                } else if a < self.db.n_nodes()
                    && b < self.db.n_nodes()
                    && self.db.has_neighbour(ty as usize, a as u32, b as u32, d)?
                {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// Whether a walk between bound nodes `a` and `b` over `ty` (out of `a` in `d`) is
    /// cheaper from `b`: their degrees in the segments compared (exact without a delta,
    /// an estimate with one, read without walking the delta's lists).
    pub fn far_end_smaller(
        &self,
        ty: u32,
        a: u64,
        b: u64,
        d: Direction,
    ) -> Result<bool, QueryError> {
        let est = |n: u64, d| -> Result<u64, QueryError> {
            if n < self.segment_nodes() {
                self.segment_degree(ty, n, d)
            } else {
                Ok(0)
            }
        };
        Ok(est(b, flip(d))? < est(a, d)?)
    }

    /// Node `node`'s degree over type `ty` in the segments, whatever the delta holds (for
    /// a plan that checked [`shape_unchanged`](Self::shape_unchanged)).
    pub fn segment_degree(&self, ty: u32, node: u64, dir: Direction) -> Result<u64, QueryError> {
        Ok(self.db.degree(ty as usize, node as u32, dir)?)
    }

    pub fn degree(&self, ty: u32, node: u64, dir: Direction) -> Result<u64, QueryError> {
        if self.has_delta() {
            let mut n = 0;
            self.for_each_neighbour(ty, node, dir, |_, _| n += 1)?;
            return Ok(n);
        }
        Ok(self.db.degree(ty as usize, node as u32, dir)?)
    }

    /// The relationship reached from `node` to `nb` over `dir` with edge id `eid` as read
    /// from that direction's CSR, with the edge id both directions agree on.
    pub fn rel_ref(
        &self,
        ty: u32,
        node: u64,
        nb: u32,
        eid: u64,
        dir: Direction,
    ) -> Result<RelRef, QueryError> {
        let (src, dst) = match dir {
            Direction::Out => (node as u32, nb),
            Direction::In => (nb, node as u32),
        };
        // `for_each_neighbour` made edge ids canonical already once the delta deleted
        // something; else they are the CSR's (a created one's is its own: kept).
        let eid = if self.ids_raw() {
            quiver_engine::segments::canonical_edge_id(self.db, ty, node, nb, eid, dir)?
        } else {
            eid
        };
        Ok(RelRef { ty, src, dst, eid })
    }
}
