//! Declared property indexes: `CREATE INDEX ON :Label(prop)`, `DROP INDEX ON
//! :Label(prop)`, `SHOW INDEXES`.
//!
//! An index is one segment of sorted (value, node) pairs, written in a new generation
//! of the database beside the segments it indexes (which stay where they are) and
//! published atomically with the manifest that lists it; a reader that has the database
//! open keeps its snapshot. A seek is a binary search over the mapped keys: O(log n).

use crate::error::QueryError;
use crate::graph::{chunk_value, Graph};
use crate::memory::account;
use crate::value::Value;
use quiver_common::memory::MemoryBudget;
use quiver_common::types::{DataType, ScalarType};
use quiver_format::column::ColumnBuilder;
use quiver_storage::manifest::{ConstraintMeta, IndexKeyKind, IndexMeta, Manifest};
use quiver_storage::read::{Database, IndexKey};
use quiver_storage::write::{write_prop_index, Staging};
use std::path::Path;
use std::sync::Arc;

/// An index the planner can seek: its position in the manifest and its key kind.
#[derive(Debug)]
pub struct PropIndex {
    pub pos: usize,
    pub kind: IndexKeyKind,
}

/// Which end of a range a bound is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Lo,
    Hi,
}

impl PropIndex {
    /// `key` as a key of this index (`None` when it can match nothing), adjusting a
    /// fractional bound of an integer index to the integers it admits.
    fn key<'v>(
        &self,
        v: &'v Value,
        inclusive: bool,
        end: Option<End>,
    ) -> Option<(IndexKey<'v>, bool)> {
        Some(match (self.kind, v) {
            (IndexKeyKind::Integer, Value::Int(i)) => (IndexKey::Int(*i), inclusive),
            (IndexKeyKind::Integer, Value::Float(f)) if f.fract() == 0.0 => {
                (IndexKey::Int(*f as i64), inclusive)
            }
            (IndexKeyKind::Integer, Value::Float(f)) if f.is_finite() => match end? {
                End::Lo => (IndexKey::Int(f.ceil() as i64), true),
                End::Hi => (IndexKey::Int(f.floor() as i64), true),
            },
            (IndexKeyKind::Integer, Value::Bool(b)) => (IndexKey::Int(*b as i64), inclusive),
            (
                IndexKeyKind::Integer,
                Value::Date(_) | Value::LocalDateTime(_) | Value::DateTime(..),
            ) => (IndexKey::Int(v.column_i64()?), inclusive),
            (IndexKeyKind::Float, Value::Float(f)) if !f.is_nan() => {
                (IndexKey::Float(*f), inclusive)
            }
            (IndexKeyKind::Float, Value::Int(i)) => (IndexKey::Float(*i as f64), inclusive),
            (IndexKeyKind::String, Value::Str(s)) => (IndexKey::Str(s.as_bytes()), inclusive),
            _ => return None,
        })
    }

    /// Nodes whose property equals `key` (none for a key of another type, or null).
    pub fn lookup(&self, g: &Graph, key: &Value) -> Result<Vec<u64>, QueryError> {
        match self.key(key, true, None) {
            Some((k, _)) => Ok(g.db.index_lookup(self.pos, k)?),
            None => Ok(Vec::new()),
        }
    }

    /// Nodes whose property lies in the range (each bound `(value, inclusive)`); a
    /// superset is fine, the planner keeps the predicates as a filter.
    pub fn range(
        &self,
        g: &Graph,
        lo: Option<(&Value, bool)>,
        hi: Option<(&Value, bool)>,
    ) -> Result<Vec<u64>, QueryError> {
        let lo = match lo {
            Some((v, inc)) => match self.key(v, inc, Some(End::Lo)) {
                Some(k) => Some(k),
                None => return Ok(Vec::new()),
            },
            None => None,
        };
        let hi = match hi {
            Some((v, inc)) => match self.key(v, inc, Some(End::Hi)) {
                Some(k) => Some(k),
                None => return Ok(Vec::new()),
            },
            None => None,
        };
        Ok(g.db.index_range(self.pos, lo, hi)?)
    }
}

/// The declared indexes of an open database, by (label, property).
#[derive(Debug, Default)]
pub struct IndexSet {
    entries: Vec<(String, String, Arc<PropIndex>)>,
    /// Uniqueness constraints: (label, property).
    pub unique: Vec<(Arc<str>, Arc<str>)>,
    /// Uniqueness constraints on several properties: (label, properties).
    pub composite: Vec<(Arc<str>, Vec<Arc<str>>)>,
}

fn key_kind(dtype: DataType) -> Option<IndexKeyKind> {
    use ScalarType::*;
    match dtype {
        DataType::Scalar(Byte | Short | Int | Long | Date | LocalDateTime | DateTime | Boolean) => {
            Some(IndexKeyKind::Integer)
        }
        DataType::Scalar(Float | Double) => Some(IndexKeyKind::Float),
        DataType::Scalar(String | Char) => Some(IndexKeyKind::String),
        DataType::Array(_) => None,
    }
}

impl IndexSet {
    pub fn load(db: &Database) -> IndexSet {
        let mut entries = Vec::new();
        let unique = db
            .manifest()
            .indexes
            .iter()
            .filter(|i| i.unique)
            .map(|i| (Arc::from(i.label.as_str()), Arc::from(i.property.as_str())))
            .collect();
        for (pos, ix) in db.manifest().indexes.iter().enumerate() {
            if ix.covers_nodes < db.n_nodes() {
                // Stale (a checkpoint whose index rebuild failed): it would miss the
                // nodes of newer tables, so seeks scan until it is rebuilt.
                continue;
            }
            // The kind follows the first table that has the property.
            let kind = db
                .node_tables()
                .iter()
                .flat_map(|t| t.meta.columns.iter())
                .find(|c| c.name == ix.property)
                .and_then(|c| key_kind(c.dtype))
                // No segment has the property yet (an index declared before any data):
                // it is empty, and seeks find the nodes in the delta.
                .or((ix.n_entries == 0).then_some(IndexKeyKind::String));
            if let Some(kind) = kind {
                entries.push((
                    ix.label.clone(),
                    ix.property.clone(),
                    Arc::new(PropIndex { pos, kind }),
                ));
            }
        }
        let composite = db
            .manifest()
            .constraints
            .iter()
            .filter(|c| c.properties.len() > 1)
            .map(|c| {
                (
                    Arc::from(c.label.as_str()),
                    c.properties.iter().map(|p| Arc::from(p.as_str())).collect(),
                )
            })
            .collect();
        IndexSet {
            entries,
            unique,
            composite,
        }
    }

    /// Whether writing property `key` may break a uniqueness constraint.
    pub fn constrains(&self, key: &str) -> bool {
        self.unique.iter().any(|(_, p)| &**p == key)
            || self
                .composite
                .iter()
                .any(|(_, ps)| ps.iter().any(|p| &**p == key))
    }

    /// Whether nodes with `label` are held to a uniqueness constraint.
    pub fn constrains_label(&self, label: &str) -> bool {
        self.unique.iter().any(|(l, _)| &**l == label)
            || self.composite.iter().any(|(l, _)| &**l == label)
    }

    pub fn get(&self, label: &str, prop: &str) -> Option<Arc<PropIndex>> {
        self.entries
            .iter()
            .find(|(l, p, _)| l == label && p == prop)
            .map(|e| e.2.clone())
    }
}

/// One row of SHOW INDEXES.
pub struct IndexInfo {
    pub label: String,
    pub property: String,
    pub kind: &'static str,
    pub entries: u64,
}

/// The automatic `:ID` indexes and the declared ones.
pub fn show(db: &Database) -> Vec<IndexInfo> {
    let m = db.manifest();
    let mut out = Vec::new();
    for t in &m.node_tables {
        if let (Some(c), Some(s)) = (t.id_column, t.id_space) {
            let label = t
                .labels
                .first()
                .map(|&l| m.labels[l as usize].clone())
                .unwrap_or_default();
            if !out
                .iter()
                .any(|i: &IndexInfo| i.label == label && i.property == t.columns[c].name)
            {
                out.push(IndexInfo {
                    label,
                    property: t.columns[c].name.clone(),
                    kind: "id (automatic)",
                    entries: m.id_spaces[s].n_ids,
                });
            }
        }
    }
    for ix in &m.indexes {
        out.push(IndexInfo {
            label: ix.label.clone(),
            property: ix.property.clone(),
            kind: if ix.unique { "unique" } else { "property" },
            entries: ix.n_entries,
        });
    }
    out
}

/// SHOW INDEXES' `options` column: `{indexProvider, indexConfig}`.
pub fn options_map(provider: &str, config: Vec<(&str, Value)>) -> Value {
    let map = |pairs: Vec<(&str, Value)>| {
        Value::Map(std::sync::Arc::new(
            pairs
                .into_iter()
                .map(|(k, v)| (std::sync::Arc::from(k), v))
                .collect(),
        ))
    };
    map(vec![
        ("indexProvider", Value::str(provider)),
        ("indexConfig", map(config)),
    ])
}

/// The dimensions and similarity function of `OPTIONS {indexConfig: {...}}` (Neo4j's
/// keys `vector.dimensions`, `vector.similarity_function`; cosine by default).
pub fn vector_options(options: &Value) -> Result<(u32, String), QueryError> {
    let get = |m: &Value, k: &str| match m {
        Value::Map(m) => m.iter().find(|(x, _)| &**x == k).map(|(_, v)| v.clone()),
        _ => None,
    };
    let config = get(options, "indexConfig").unwrap_or(Value::Null);
    let dimensions = match get(&config, "vector.dimensions") {
        Some(Value::Int(d)) if (1..=4096).contains(&d) => d as u32,
        // Optional, as in Neo4j 5.23 and later: the vectors' own length.
        None | Some(Value::Null) => 0,
        Some(v) => {
            return Err(QueryError::Index(format!(
                "`vector.dimensions` must be an integer from 1 to 4096, got {}",
                crate::expr::to_string(&v)
            )))
        }
    };
    let similarity = match get(&config, "vector.similarity_function") {
        None | Some(Value::Null) => "cosine".to_string(),
        Some(Value::Str(s)) if s.eq_ignore_ascii_case("cosine") => "cosine".into(),
        Some(Value::Str(s)) if s.eq_ignore_ascii_case("euclidean") => "euclidean".into(),
        Some(v) => {
            return Err(QueryError::Index(format!(
                "`vector.similarity_function` is 'cosine' or 'euclidean', got {}",
                crate::expr::to_string(&v)
            )))
        }
    };
    Ok((dimensions, similarity))
}

/// Builds vector index `meta` over the vectors the segments hold and records it in a
/// new generation.
pub fn vector_create_in(
    dir: &Path,
    db: &Database,
    mut meta: quiver_storage::manifest::VectorIndexMeta,
    held: bool,
    budget: &MemoryBudget,
) -> Result<(), QueryError> {
    let (staging, mut man) = next_generation(dir, db.manifest(), held)?;
    if !meta.relationship {
        crate::vector::build_into(&staging, db, &mut meta, budget)?;
    }
    man.vector_indexes.push(meta);
    publish(staging, &man)?;
    Ok(())
}

/// Records full-text index `meta` in a new generation.
pub fn fulltext_create_in(
    dir: &Path,
    db: &Database,
    meta: quiver_storage::manifest::FulltextIndexMeta,
    held: bool,
) -> Result<(), QueryError> {
    let (staging, mut man) = next_generation(dir, db.manifest(), held)?;
    man.fulltext_indexes.push(meta);
    publish(staging, &man)?;
    Ok(())
}

/// Drops full-text index `name` in a new generation.
pub fn fulltext_drop_in(
    dir: &Path,
    db: &Database,
    name: &str,
    held: bool,
) -> Result<(), QueryError> {
    let (staging, mut man) = next_generation(dir, db.manifest(), held)?;
    man.fulltext_indexes.retain(|v| v.name != name);
    publish(staging, &man)?;
    Ok(())
}

/// Drops vector index `name` in a new generation.
pub fn vector_drop_in(dir: &Path, db: &Database, name: &str, held: bool) -> Result<(), QueryError> {
    let (staging, mut man) = next_generation(dir, db.manifest(), held)?;
    man.vector_indexes.retain(|v| v.name != name);
    publish(staging, &man)?;
    Ok(())
}

/// Builds `:label(prop)` over every node carrying the label and publishes it. Returns the
/// number of entries. `held` when the caller holds the database's lock (an open
/// store); the build's memory comes from `budget`.
pub fn create_in(
    dir: &Path,
    db: &Database,
    label: &str,
    prop: &str,
    held: bool,
    budget: &MemoryBudget,
) -> Result<u64, QueryError> {
    let m = db.manifest();
    if m.indexes
        .iter()
        .any(|i| i.label == label && i.property == prop)
    {
        return Err(QueryError::Index(format!(
            "an index on :{label}({prop}) exists already"
        )));
    }
    // A label or property no node has yet gives an empty index, as in Neo4j: the
    // schema may come before the data. Seeks find later nodes in the delta, and the
    // checkpoint that writes them rebuilds the index.
    let built = build(db, label, prop, budget, None)?.unwrap_or_else(Built::empty);
    let (staging, mut man) = next_generation(dir, m, held)?;
    let meta = built.write(&staging, db, label, prop, false)?;
    let n = meta.n_entries;
    man.indexes.push(meta);
    publish(staging, &man)?;
    Ok(n)
}

/// Rebuilds the indexes that do not cover every node (a checkpoint wrote new node
/// tables since they were built) and publishes them as one new generation; whether it
/// did. `held` as for [`create_in`].
pub fn refresh_in(
    dir: &Path,
    db: &Database,
    held: bool,
    budget: &MemoryBudget,
) -> Result<bool, QueryError> {
    if !stale(db) {
        return Ok(false);
    }
    let m = db.manifest();
    let n = db.n_nodes();
    let (staging, mut man) = next_generation(dir, m, held)?;
    // Vector graphs that miss nodes a checkpoint wrote, or whose column or label it
    // rewrote, are brought up to what the segments hold now.
    for v in man.vector_indexes.iter_mut() {
        if v.covers_nodes < n && !v.relationship {
            crate::vector::refresh_into(&staging, db, v, budget)?;
        }
    }
    let mut kept = Vec::new();
    for mut meta in std::mem::take(&mut man.indexes) {
        if meta.covers_nodes >= n {
            kept.push(meta);
            continue;
        }
        // Only tables were added since it was built: extend it (a fold of its column or
        // label sets `covers_nodes` to 0, and that rebuilds it whole).
        let pos = m.indexes.iter().position(|i| *i == meta);
        let extend = match pos {
            Some(p) if meta.covers_nodes > 0 && meta.n_entries > 0 => Some((p, meta.covers_nodes)),
            _ => None,
        };
        let built = match build(db, &meta.label, &meta.property, budget, extend) {
            // The index's file cannot be read in place (an offline open): rebuild.
            Err(_) if extend.is_some() => build(db, &meta.label, &meta.property, budget, None),
            r => r,
        };
        match built {
            Ok(Some(b)) => {
                kept.push(b.write(&staging, db, &meta.label, &meta.property, meta.unique)?)
            }
            // No node has the property (any more): the old entries are corrected by the
            // delta at every lookup.
            Ok(None) => {
                meta.covers_nodes = n;
                kept.push(meta);
            }
            // The property no longer has one indexable type (written values of another
            // type): a stale index would miss nodes, so it goes.
            Err(_) => {}
        }
    }
    man.indexes = kept;
    publish(staging, &man)?;
    Ok(true)
}

/// An index's sorted keys and nodes, before they are written.
struct Built {
    kind: IndexKeyKind,
    keys: ColumnBuilder,
    nodes: Vec<u64>,
    /// Two nodes with one key, if any: (key, node, node).
    dup: Option<(String, u64, u64)>,
}

impl Built {
    /// The index of a label or property no node has yet.
    fn empty() -> Built {
        Built {
            kind: IndexKeyKind::String,
            keys: ColumnBuilder::new(DataType::Scalar(ScalarType::String)),
            nodes: Vec::new(),
            dup: None,
        }
    }

    fn write(
        self,
        staging: &Staging,
        db: &Database,
        label: &str,
        prop: &str,
        unique: bool,
    ) -> Result<IndexMeta, QueryError> {
        let seg = write_prop_index(
            staging,
            &format!("index-{}-{}.seg", sanitize(label), sanitize(prop)),
            self.kind,
            &self.keys,
            &self.nodes,
            db.n_nodes(),
        )
        .map_err(|e| QueryError::Index(e.to_string()))?;
        Ok(IndexMeta {
            label: label.to_string(),
            property: prop.to_string(),
            n_entries: self.nodes.len() as u64,
            segment: seg,
            covers_nodes: db.n_nodes(),
            unique,
        })
    }
}

/// Bytes an index build holds per entry beyond its key bytes: the (key, node) pair as
/// collected, then the sorted key column and the node column written from it.
const INDEX_ENTRY_BYTES: u64 = 16 + 8 + 8;
/// A string key collected as its own allocation: the `Vec` header and the allocator's
/// overhead, beyond the bytes.
const INDEX_STRING_OVERHEAD: u64 = 24 + 16;

/// Builds `:label(prop)` over the segments; `None` when no node has it. What it
/// collects and sorts is accounted in a grant from `budget` (the database's), so a
/// build that does not fit is a clear error, never memory past the limit.
///
/// With `extend` (the index's position and the nodes it covers: a checkpoint added
/// node tables and changed nothing it indexed), the index's entries are taken as they
/// are, less deleted nodes, and only the new tables are read: a batched load adds a
/// table a batch, and rebuilding the whole index each time made it quadratic.
fn build(
    db: &Database,
    label: &str,
    prop: &str,
    budget: &MemoryBudget,
    extend: Option<(usize, u64)>,
) -> Result<Option<Built>, QueryError> {
    let g = Graph::new(db);
    let Some(lid) = g.label_id(label) else {
        return Ok(None);
    };
    let mut grant = budget.empty_grant("CREATE INDEX");
    let mut held: u64 = 0;
    let mut kind = None;
    let mut pairs_i: Vec<(i64, u64)> = Vec::new();
    let mut pairs_f: Vec<(f64, u64)> = Vec::new();
    let mut pairs_s: Vec<(Vec<u8>, u64)> = Vec::new();
    let covered = extend.map_or(0, |(_, c)| c);
    if let Some((pos, _)) = extend {
        use quiver_storage::read::IndexKey;
        db.index_entries(pos, |k, node| {
            if db.node_deleted(node) {
                return;
            }
            held += match k {
                IndexKey::Int(x) => {
                    kind = Some(IndexKeyKind::Integer);
                    pairs_i.push((x, node));
                    INDEX_ENTRY_BYTES
                }
                IndexKey::Float(x) => {
                    kind = Some(IndexKeyKind::Float);
                    pairs_f.push((x, node));
                    INDEX_ENTRY_BYTES
                }
                IndexKey::Str(b) => {
                    kind = Some(IndexKeyKind::String);
                    pairs_s.push((b.to_vec(), node));
                    INDEX_ENTRY_BYTES + b.len() as u64 * 2 + INDEX_STRING_OVERHEAD
                }
            };
        })
        .map_err(|e| QueryError::Index(e.to_string()))?;
        account(&mut grant, held, "CREATE INDEX")?;
    }
    for (t, check) in g.label_scan(lid).tables {
        let table = &db.node_tables()[t];
        if table.meta.first_node + table.meta.n_rows <= covered {
            continue;
        }
        let Some(col) = table.meta.columns.iter().position(|c| c.name == prop) else {
            continue;
        };
        if Some(col) == table.meta.label_column {
            continue;
        }
        let dtype = table.meta.columns[col].dtype;
        let k = key_kind(dtype).ok_or_else(|| {
            QueryError::Index(format!("{label}.{prop} is a list; lists cannot be indexed"))
        })?;
        if kind.is_some_and(|x| x != k) {
            return Err(QueryError::Index(format!(
                "{prop} has different types in different node files; cannot index it"
            )));
        }
        kind = Some(k);
        let first = table.meta.first_node;
        for (rg, meta) in table.footer.row_groups.iter().enumerate() {
            let base = first + meta.first_row;
            db.with_node_chunk(t, rg, col, |c| -> Result<(), QueryError> {
                for i in 0..c.len() {
                    let node = base + i as u64;
                    if node < covered
                        || check && !g.has_label(node, lid)?
                        || g.db.node_deleted(node)
                    {
                        continue;
                    }
                    let v = chunk_value(c, i, dtype);
                    held += match v.column_i64().map_or(v, Value::Int) {
                        Value::Int(x) => {
                            pairs_i.push((x, node));
                            INDEX_ENTRY_BYTES
                        }
                        Value::Bool(b) => {
                            pairs_i.push((b as i64, node));
                            INDEX_ENTRY_BYTES
                        }
                        Value::Float(f) if !f.is_nan() => {
                            pairs_f.push((f, node));
                            INDEX_ENTRY_BYTES
                        }
                        Value::Str(s) => {
                            pairs_s.push((s.as_bytes().to_vec(), node));
                            INDEX_ENTRY_BYTES + s.len() as u64 * 2 + INDEX_STRING_OVERHEAD
                        }
                        _ => 0,
                    };
                    if i % 4096 == 0 {
                        account(&mut grant, held, "CREATE INDEX")?;
                    }
                }
                Ok(())
            })??;
            account(&mut grant, held, "CREATE INDEX")?;
        }
    }
    let Some(kind) = kind else {
        return Ok(None);
    };
    fn first_dup<K: PartialEq>(
        pairs: &[(K, u64)],
        show: impl Fn(&K) -> String,
    ) -> Option<(String, u64, u64)> {
        pairs
            .windows(2)
            .find(|w| w[0].0 == w[1].0)
            .map(|w| (show(&w[0].0), w[0].1, w[1].1))
    }
    let dup;
    let (keys, nodes) = match kind {
        IndexKeyKind::Integer => {
            pairs_i.sort_unstable();
            dup = first_dup(&pairs_i, |k| k.to_string());
            let mut b = ColumnBuilder::new(DataType::Scalar(ScalarType::Long));
            pairs_i.iter().for_each(|p| b.push_i64(p.0));
            (b, pairs_i.iter().map(|p| p.1).collect::<Vec<_>>())
        }
        IndexKeyKind::Float => {
            pairs_f.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            dup = first_dup(&pairs_f, |k| k.to_string());
            let mut b = ColumnBuilder::new(DataType::Scalar(ScalarType::Double));
            pairs_f.iter().for_each(|p| b.push_f64(p.0));
            (b, pairs_f.iter().map(|p| p.1).collect())
        }
        IndexKeyKind::String => {
            pairs_s.sort_unstable();
            dup = first_dup(&pairs_s, |k| format!("'{}'", String::from_utf8_lossy(k)));
            let mut b = ColumnBuilder::new(DataType::Scalar(ScalarType::String));
            pairs_s.iter().for_each(|p| b.push_bytes(&p.0));
            (b, pairs_s.iter().map(|p| p.1).collect())
        }
    };
    Ok(Some(Built {
        kind,
        keys,
        nodes,
        dup,
    }))
}

/// The name Neo4j would show for a constraint declared without one: made from its
/// label and properties, so that it is the same at every open.
pub fn constraint_name(label: &str, props: &[String]) -> String {
    // FNV-1a: stable across builds and platforms, unlike the std hasher.
    let mut h: u32 = 0x811c_9dc5;
    for b in std::iter::once(label.as_bytes())
        .chain(props.iter().map(|p| p.as_bytes()))
        .flat_map(|b| b.iter().chain(&[0u8]))
    {
        h = (h ^ *b as u32).wrapping_mul(0x0100_0193);
    }
    format!("constraint_{h:08x}")
}

/// Every uniqueness constraint of `db`: (name, label, properties).
pub fn constraints(db: &Database) -> Vec<(String, String, Vec<String>)> {
    let m = db.manifest();
    let named = |label: &str, props: &[String]| {
        m.constraints
            .iter()
            .find(|c| c.label == label && c.properties == props)
            .map_or_else(|| constraint_name(label, props), |c| c.name.clone())
    };
    let mut out: Vec<(String, String, Vec<String>)> = m
        .indexes
        .iter()
        .filter(|i| i.unique)
        .map(|i| {
            let props = vec![i.property.clone()];
            (named(&i.label, &props), i.label.clone(), props)
        })
        .collect();
    out.extend(
        m.constraints
            .iter()
            .filter(|c| c.properties.len() > 1)
            .map(|c| (c.name.clone(), c.label.clone(), c.properties.clone())),
    );
    out
}

/// Adds (`unique`) or removes the uniqueness constraint on `:label(prop)`: adding one
/// builds the index (an empty one when no node has the property yet) and refuses when
/// two nodes already share a value; `name` names it (else [`constraint_name`]). `held`
/// as for [`create_in`].
#[allow(clippy::too_many_arguments)]
pub fn constrain_in(
    dir: &Path,
    db: &Database,
    name: Option<&str>,
    label: &str,
    prop: &str,
    unique: bool,
    held: bool,
    budget: &MemoryBudget,
) -> Result<String, QueryError> {
    let m = db.manifest();
    let at = m
        .indexes
        .iter()
        .position(|i| i.label == label && i.property == prop);
    if !unique && at.is_none_or(|i| !m.indexes[i].unique) {
        return Err(QueryError::Index(format!(
            "there is no uniqueness constraint on :{label}({prop}); SHOW CONSTRAINTS lists them"
        )));
    }
    let (staging, mut man) = next_generation(dir, m, held)?;
    let props = vec![prop.to_string()];
    man.constraints
        .retain(|c| !(c.label == label && c.properties == props));
    let msg = if unique {
        let built = build(db, label, prop, budget, None)?.unwrap_or_else(Built::empty);
        if let Some((k, a, b)) = &built.dup {
            return Err(QueryError::Index(format!(
                "cannot add the constraint: nodes {a} and {b} with label :{label} both have {prop} = {k}"
            )));
        }
        let meta = built.write(&staging, db, label, prop, true)?;
        match at {
            Some(i) => man.indexes[i] = meta,
            None => man.indexes.push(meta),
        }
        let name = name.map_or_else(|| constraint_name(label, &props), str::to_string);
        man.constraints.push(ConstraintMeta {
            name: name.clone(),
            label: label.to_string(),
            properties: props,
        });
        format!("uniqueness constraint {name} on :{label}({prop}) created")
    } else {
        let i = at.expect("checked above");
        man.indexes[i].unique = false;
        format!("uniqueness constraint on :{label}({prop}) dropped (its index stays; DROP INDEX removes it)")
    };
    publish(staging, &man)?;
    Ok(msg)
}

/// Adds (`Some(name)`) or removes (`None`) the uniqueness constraint on several
/// properties of `:label`. Adding one keeps it with the index on its first property,
/// built here when there is none; the caller has checked the data against it.
pub fn constrain_composite_in(
    dir: &Path,
    db: &Database,
    name: Option<&str>,
    label: &str,
    props: &[String],
    held: bool,
    budget: &MemoryBudget,
) -> Result<String, QueryError> {
    let m = db.manifest();
    let shown = format!("(:{label} {{{}}})", props.join(", "));
    let (staging, mut man) = next_generation(dir, m, held)?;
    let before = man.constraints.len();
    man.constraints
        .retain(|c| !(c.label == label && c.properties == props));
    let msg = match name {
        Some(name) => {
            if !man
                .indexes
                .iter()
                .any(|i| i.label == label && i.property == props[0])
            {
                let built = build(db, label, &props[0], budget, None)?.unwrap_or_else(Built::empty);
                man.indexes
                    .push(built.write(&staging, db, label, &props[0], false)?);
            }
            man.constraints.push(ConstraintMeta {
                name: name.to_string(),
                label: label.to_string(),
                properties: props.to_vec(),
            });
            format!("uniqueness constraint {name} on {shown} created")
        }
        None if man.constraints.len() == before => {
            return Err(QueryError::Index(format!(
                "there is no uniqueness constraint on {shown}; SHOW CONSTRAINTS lists them"
            )))
        }
        None => format!("uniqueness constraint on {shown} dropped (the index on :{label}({}) stays; DROP INDEX removes it)", props[0]),
    };
    publish(staging, &man)?;
    Ok(msg)
}

/// A staging generation for index DDL; `held` when the caller holds the database's lock.
/// A staging generation and the manifest it will publish: `m` with its log pinned and
/// the new generation's number (every schema change starts so).
fn next_generation(
    dir: &Path,
    m: &Manifest,
    held: bool,
) -> Result<(Staging, Manifest), QueryError> {
    let staging = begin(dir, held)?;
    let mut man = m.clone();
    man.pin_log();
    man.generation = staging.generation();
    Ok((staging, man))
}

fn publish(staging: Staging, man: &Manifest) -> Result<(), QueryError> {
    staging
        .publish(man)
        .map(|_| ())
        .map_err(|e| QueryError::Index(e.to_string()))
}

fn begin(dir: &Path, held: bool) -> Result<Staging, QueryError> {
    if held {
        Staging::begin_held(dir)
    } else {
        Staging::begin(dir, true)
    }
    .map_err(|e| QueryError::Index(e.to_string()))
}

/// Whether an index misses nodes a checkpoint wrote after it was built.
pub fn stale(db: &Database) -> bool {
    let n = db.n_nodes();
    let m = db.manifest();
    m.indexes.iter().any(|i| i.covers_nodes < n)
        || m.vector_indexes
            .iter()
            .any(|v| v.covers_nodes < n && !v.relationship)
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// Removes `:label(prop)` from the database.
pub fn drop(dir: &Path, db: &Database, label: &str, prop: &str) -> Result<(), QueryError> {
    drop_in(dir, db, label, prop, false)
}

/// [`drop`]; `held` as for [`create_in`].
pub fn drop_in(
    dir: &Path,
    db: &Database,
    label: &str,
    prop: &str,
    held: bool,
) -> Result<(), QueryError> {
    let m = db.manifest();
    if !m
        .indexes
        .iter()
        .any(|i| i.label == label && i.property == prop)
    {
        return Err(QueryError::Index(format!(
            "there is no index on :{label}({prop}); SHOW INDEXES lists them"
        )));
    }
    if let Some(c) = m
        .constraints
        .iter()
        .find(|c| c.properties.len() > 1 && c.label == label && c.properties[0] == prop)
    {
        return Err(QueryError::Index(format!(
            "the uniqueness constraint {} keeps its nodes with the index on :{label}({prop}); DROP CONSTRAINT {} first",
            c.name, c.name
        )));
    }
    let (staging, mut man) = next_generation(dir, m, held)?;
    man.indexes
        .retain(|i| !(i.label == label && i.property == prop));
    publish(staging, &man)?;
    Ok(())
}
