//! Vector indexes over node properties: their HNSW graphs (`quiver_vector`), built from
//! the columns when an index is created and again when a checkpoint rewrote what they
//! cover, opened once per file, and searched together with what the delta changed since
//! (those nodes, and nodes past the graph, are scored exactly).

use crate::error::QueryError;
use crate::graph::Graph;
use crate::ops::account;
use crate::value::Value;
use quiver_common::memory::MemoryBudget;
use quiver_format::column::ColumnChunk;
use quiver_storage::manifest::{SegmentMeta, VectorIndexMeta};
use quiver_storage::read::Database;
use quiver_storage::write::Staging;
use quiver_storage::OpenMode;
use quiver_vector::{Metric, Params, VectorIndex};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Candidates a search keeps (at least `k`): recall@10 of 0.95 and more on clustered
/// embeddings of 128 dimensions (`bench/vector_bench.py`).
pub const EF_SEARCH: usize = 100;

pub fn metric(meta: &VectorIndexMeta) -> Metric {
    Metric::parse(&meta.similarity).unwrap_or(Metric::Cosine)
}

/// Appends to `out` the vector of row `i` of list chunk `c` as `f32`s when it holds
/// exactly `dims` numbers; false otherwise (nothing appended).
fn chunk_vector(c: &ColumnChunk<'_>, i: usize, dims: usize, out: &mut Vec<f32>) -> bool {
    let (Some((s, e)), Some(child)) = (c.get_list(i), c.list_child()) else {
        return false;
    };
    if e - s != dims {
        return false;
    }
    let start = out.len();
    for j in s..e {
        match child
            .get_f64(j)
            .or_else(|| child.get_i64(j).map(|x| x as f64))
        {
            Some(x) => out.push(x as f32),
            None => {
                out.truncate(start);
                return false;
            }
        }
    }
    true
}

/// A property value as a vector of `dims` numbers, or `None`.
pub fn value_vector(v: &Value, dims: usize) -> Option<Vec<f32>> {
    match v {
        Value::List(l) if l.len() == dims => l
            .iter()
            .map(|x| match x {
                Value::Float(f) => Some(*f as f32),
                Value::Int(i) => Some(*i as f32),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// Builds the graph of `meta` over the vectors the segments of `db` hold (the delta is
/// not read: DDL checkpoints first, and a checkpoint's refresh runs on its generation),
/// written into `staging`. Sets `file`, `covers_nodes` and `entries`.
pub fn build_into(
    staging: &Staging,
    db: &Database,
    meta: &mut VectorIndexMeta,
    budget: &MemoryBudget,
) -> Result<(), QueryError> {
    let dims = meta.dimensions as usize;
    let metric = metric(meta);
    let g = Graph::new(db);
    let mut ids = Vec::new();
    let mut vecs: Vec<f32> = Vec::new();
    let mut grant = budget.empty_grant("CREATE VECTOR INDEX");
    let params = Params::default();
    if let Some(lid) = g.label_id(&meta.label) {
        for (t, check) in g.label_scan(lid).tables {
            let table = &db.node_tables()[t];
            let Some(col) = table
                .meta
                .columns
                .iter()
                .position(|c| c.name == meta.property)
            else {
                continue;
            };
            if Some(col) == table.meta.label_column {
                continue;
            }
            let first = table.meta.first_node;
            for (rg, rgm) in table.footer.row_groups.iter().enumerate() {
                let base = first + rgm.first_row;
                db.with_node_chunk(t, rg, col, |c| -> Result<(), QueryError> {
                    for i in 0..c.len() {
                        let node = base + i as u64;
                        if check && !g.has_label(node, lid)? || db.node_deleted(node) {
                            continue;
                        }
                        let at = vecs.len();
                        if chunk_vector(c, i, dims, &mut vecs) {
                            if metric.prepare(&mut vecs[at..]) {
                                ids.push(node);
                            } else {
                                vecs.truncate(at);
                            }
                        }
                    }
                    Ok(())
                })??;
                // The build's peak, for what is gathered so far.
                let need = quiver_vector::build_bytes(ids.len() as u64, dims as u64, &params);
                let held = grant.bytes();
                if need > held {
                    account(&mut grant, need - held, "CREATE VECTOR INDEX")?;
                }
            }
        }
    }
    let n = ids.len() as u64;
    let built = quiver_vector::build(dims, metric, ids, vecs, &params, None, &|_| {})
        .map_err(|e| QueryError::Index(e.to_string()))?;
    let name: String = meta
        .name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let (path, rel) = staging.file(&format!("vector-{name}.hnsw"));
    let bytes = built
        .write(&path)
        .map_err(|e| QueryError::Index(e.to_string()))?;
    meta.file = Some(SegmentMeta { file: rel, bytes });
    meta.covers_nodes = db.n_nodes();
    meta.entries = n;
    Ok(())
}

/// Open graphs by file (files are immutable, so the path names one graph): a few, the
/// least recently used dropped first.
static OPEN: Mutex<Vec<(PathBuf, Arc<VectorIndex>)>> = Mutex::new(Vec::new());
const OPEN_KEPT: usize = 8;

/// The graph of `meta`, opened as the database is (mapped, or read whole); `None`
/// when it has none that covers anything.
pub fn open(db: &Database, meta: &VectorIndexMeta) -> Result<Option<Arc<VectorIndex>>, QueryError> {
    let Some(f) = &meta.file else {
        return Ok(None);
    };
    if meta.covers_nodes == 0 {
        return Ok(None);
    }
    let path = db.dir().join(&f.file);
    let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = open.iter().position(|(p, _)| *p == path) {
        let e = open.remove(i);
        let ix = e.1.clone();
        open.push(e);
        return Ok(Some(ix));
    }
    let ix = Arc::new(
        VectorIndex::open(&path, db.mode() == OpenMode::Mapped)
            .map_err(|e| QueryError::Index(e.to_string()))?,
    );
    if open.len() >= OPEN_KEPT {
        open.remove(0);
    }
    open.push((path, ix.clone()));
    Ok(Some(ix))
}

/// The `k` nodes of `meta`'s label whose vectors are nearest `q`, best first, with
/// Neo4j's scores. The graph answers for the nodes it covers that the delta has not
/// changed; those the delta holds (changed or created) and those past the graph are
/// scored exactly.
pub fn query_nodes(
    g: &Graph,
    meta: &VectorIndexMeta,
    q: &[f64],
    k: usize,
) -> Result<Vec<(f64, u64)>, QueryError> {
    let dims = meta.dimensions as usize;
    let metric = metric(meta);
    let mut qv: Vec<f32> = q.iter().map(|x| *x as f32).collect();
    if !metric.prepare(&mut qv) {
        return Ok(Vec::new());
    }
    let Some(label) = g.label_id(&meta.label) else {
        return Ok(Vec::new());
    };
    let ix = open(g.db, meta)?.filter(|ix| ix.dims() == dims && ix.metric() == metric);
    let covers = ix.as_ref().map_or(0, |_| meta.covers_nodes);
    let delta = g.delta_full();
    let mut found: Vec<(f32, u64)> = Vec::new();
    if let Some(ix) = &ix {
        let accept = |n: u64| {
            n < covers
                && !g.db.node_deleted(n)
                && delta.as_ref().is_none_or(|d| d.node(n).is_none())
        };
        found = ix.search(&qv, k, EF_SEARCH.max(k), &accept);
    }
    // Exactly: the delta's nodes, and every node past the graph.
    let mut exact: Vec<u64> = Vec::new();
    if let Some(d) = &delta {
        exact.extend(
            d.nodes
                .iter()
                .filter(|(&n, r)| !r.deleted && n < covers)
                .map(|(&n, _)| n),
        );
    }
    if ix.is_none() {
        exact = g.label_nodes(label, usize::MAX)?;
    } else if covers < g.n_nodes() {
        for n in covers..g.n_nodes() {
            if g.node_live(n) {
                exact.push(n);
            }
        }
    }
    let distance = |v: &[f32]| quiver_vector::distance(metric, &qv, v);
    for n in exact {
        if !g.has_label(n, label)? {
            continue;
        }
        let Some(mut v) = value_vector(&g.node_prop(n, &meta.property)?, dims) else {
            continue;
        };
        if metric.prepare(&mut v) {
            found.push((distance(&v), n));
        }
    }
    found.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    found.truncate(k);
    Ok(found
        .into_iter()
        .map(|(d, n)| (metric.score(d), n))
        .collect())
}
