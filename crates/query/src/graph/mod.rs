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

use std::sync::Arc;

mod props;
mod steps;

pub use steps::{dirs, flip};

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

    /// The first node of `n..end` (segment ids) a scan must test: rows the segments
    /// hold deleted are skipped a run at a time, unless the delta brings one back (a
    /// node created into a checkpoint's hole).
    pub fn next_scan_candidate(&self, n: u64, end: u64) -> u64 {
        let next = self.db.next_live_node(n, end);
        if next > n {
            if let Some(d) = self.delta() {
                if d.relabels_segment_nodes() {
                    if let Some((&x, _)) = d
                        .nodes
                        .range(n..next)
                        .find(|(_, r)| r.created && !r.deleted)
                    {
                        return x;
                    }
                }
            }
        }
        next
    }

    /// Up to `max` created nodes of `from..hi` (ids past the segments' rows) that live
    /// and, with `label`, carry it, into `out`; returns where to go on (`hi` when done).
    /// The delta's records are walked, not the ids: a created id without a live record
    /// (collected, rolled back, or deleted) costs nothing.
    pub fn created_nodes(
        &self,
        from: u64,
        hi: u64,
        label: Option<u32>,
        max: usize,
        out: &mut Vec<u64>,
    ) -> u64 {
        let Some(d) = self.delta() else {
            return hi;
        };
        let name = match label {
            // (No created node carries it: nothing to walk.)
            Some(l) if d.created_with_label(l) == 0 => return hi,
            Some(l) => match d.labels.get(l as usize) {
                Some(n) => Some(n.clone()),
                None => return hi,
            },
            None => None,
        };
        // (A walk of the records tests each one's labels, about 10 ns a record: an index
        // of created nodes by label cost batched creations 12% in instructions.)
        let mut taken = 0;
        for (&n, r) in d.nodes.range(from.max(d.base_nodes)..hi) {
            if taken == max {
                return n;
            }
            if r.deleted
                || name
                    .as_ref()
                    .is_some_and(|l| !r.labels.iter().any(|x| Arc::ptr_eq(x, l) || x == l))
            {
                continue;
            }
            out.push(n);
            taken += 1;
        }
        hi
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
}
