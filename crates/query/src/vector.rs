//! Vector indexes over node properties: their HNSW graphs (`quiver_vector`), built from
//! the columns when an index is created and again when a checkpoint rewrote what they
//! cover, opened once per file, and searched together with what the delta changed since
//! (those nodes, and nodes past the graph, are scored exactly).

use crate::error::QueryError;
use crate::graph::Graph;
use crate::memory::account;
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

/// A query vector as `meta`'s metric compares it; `None` when it compares to nothing
/// (a zero vector under cosine, a value that is not finite).
fn query_vector(meta: &VectorIndexMeta, q: &[f64]) -> Option<Vec<f32>> {
    let mut qv: Vec<f32> = q.iter().map(|x| *x as f32).collect();
    metric(meta).prepare(&mut qv).then_some(qv)
}

/// Appends to `out` the vector of row `i` of list chunk `c` as `f32`s when it holds
/// exactly `dims` numbers (any number but none when `dims` is 0: the first vector met
/// sets it); false otherwise (nothing appended).
fn chunk_vector(c: &ColumnChunk<'_>, i: usize, dims: &mut usize, out: &mut Vec<f32>) -> bool {
    let (Some((s, e)), Some(child)) = (c.get_list(i), c.list_child()) else {
        return false;
    };
    if *dims == 0 && e > s {
        *dims = e - s;
    }
    if e - s != *dims {
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

/// Calls `f` with each node of `meta`'s label that the segments of `db` hold a vector
/// of `meta`'s dimensions for (live nodes; the delta is not read: DDL checkpoints first,
/// and a checkpoint's refresh runs on its generation), the vector prepared for the
/// metric. `f` is also told when a row group is done (`None`), to account memory.
/// `dims` 0 (an index declared without dimensions, as Neo4j allows): the first vector
/// met sets them. Returns the dimensions (0 when no vector was met).
fn scan(
    db: &Database,
    meta: &VectorIndexMeta,
    mut dims: usize,
    f: &mut dyn FnMut(Option<(u64, &[f32])>) -> Result<(), QueryError>,
) -> Result<usize, QueryError> {
    let metric = metric(meta);
    let g = Graph::new(db);
    let Some(lid) = g.label_id(&meta.label) else {
        return Ok(dims);
    };
    let mut v: Vec<f32> = Vec::with_capacity(dims);
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
                    v.clear();
                    if chunk_vector(c, i, &mut dims, &mut v) && metric.prepare(&mut v) {
                        f(Some((node, &v)))?;
                    }
                }
                Ok(())
            })??;
            f(None)?;
        }
    }
    Ok(dims)
}

/// Writes `built` into `staging` as `meta`'s graph and records it.
fn record(
    staging: &Staging,
    db: &Database,
    meta: &mut VectorIndexMeta,
    built: quiver_vector::Built,
    live: u64,
) -> Result<(), QueryError> {
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
    meta.entries = live;
    Ok(())
}

/// Grows `grant` to what a build of `n` vectors holds at its peak.
fn grant_for(
    grant: &mut quiver_common::memory::Grant,
    n: u64,
    dims: u64,
    p: &Params,
) -> Result<(), QueryError> {
    let need = quiver_vector::build_bytes(n, dims, p);
    let held = grant.bytes();
    if need > held {
        account(grant, need - held, "CREATE VECTOR INDEX")?;
    }
    Ok(())
}

/// Builds the graph of `meta` over the vectors the segments of `db` hold, written into
/// `staging`. Sets `file`, `covers_nodes` and `entries`.
pub fn build_into(
    staging: &Staging,
    db: &Database,
    meta: &mut VectorIndexMeta,
    budget: &MemoryBudget,
) -> Result<(), QueryError> {
    let params = Params::default();
    let mut grant = budget.empty_grant("CREATE VECTOR INDEX");
    let mut ids = Vec::new();
    let mut vecs: Vec<f32> = Vec::new();
    let dims = scan(db, meta, meta.dimensions as usize, &mut |x| {
        match x {
            Some((node, v)) => {
                ids.push(node);
                vecs.extend_from_slice(v);
            }
            None => {
                let dims = (vecs.len() / ids.len().max(1)) as u64;
                grant_for(&mut grant, ids.len() as u64, dims, &params)?
            }
        }
        Ok(())
    })?
    .max(1);
    let n = ids.len() as u64;
    let built = quiver_vector::build(dims, metric(meta), ids, vecs, &params, None, &|_| {})
        .map_err(|e| QueryError::Index(e.to_string()))?;
    record(staging, db, meta, built, n)
}

/// Brings `meta`'s graph up to what the segments of `db` hold after a checkpoint: its
/// entries whose node was deleted, lost the label or the vector, or has another vector
/// now are marked dead, and the vectors it lacks are inserted. A copy of the graph and
/// the new insertions, not a build: adding 1,000 vectors to a million-vector graph
/// is seconds, not the minute of a build. Built again whole when it has no graph,
/// cannot read it, or more than half its entries would be dead.
pub fn refresh_into(
    staging: &Staging,
    db: &Database,
    meta: &mut VectorIndexMeta,
    budget: &MemoryBudget,
) -> Result<(), QueryError> {
    let old = meta.file.as_ref().and_then(|f| {
        VectorIndex::open(&db.dir().join(&f.file), db.mode() == OpenMode::Mapped).ok()
    });
    let declared = meta.dimensions as usize;
    let Some(old) = old.filter(|o| {
        (declared == 0 || o.dims() == declared) && o.metric() == metric(meta) && !o.is_empty()
    }) else {
        return build_into(staging, db, meta, budget);
    };
    let dims = old.dims();
    let params = Params::default();
    let mut grant = budget.empty_grant("CREATE VECTOR INDEX");
    // The old graph's live entries by node (24 bytes or so an entry).
    account(&mut grant, old.len() as u64 * 24, "CREATE VECTOR INDEX")?;
    let mut at: hashbrown::HashMap<u64, u32> = hashbrown::HashMap::with_capacity(old.len());
    for (e, (id, _)) in old.entries().enumerate() {
        if id != quiver_vector::DEAD {
            at.insert(id, e as u32);
        }
    }
    let mut kept = vec![false; old.len()];
    let mut ids = Vec::new();
    let mut vecs: Vec<f32> = Vec::new();
    scan(db, meta, dims, &mut |x| {
        match x {
            Some((node, v)) => match at.get(&node) {
                Some(&e) if old.vector(e) == v => kept[e as usize] = true,
                _ => {
                    ids.push(node);
                    vecs.extend_from_slice(v);
                }
            },
            None => {
                let total = (old.len() + ids.len()) as u64;
                grant_for(&mut grant, total, dims as u64, &params)?;
            }
        }
        Ok(())
    })?;
    let alive = kept.iter().filter(|&&k| k).count();
    if alive < old.len() / 2 {
        drop((old, at, kept, ids, vecs));
        return build_into(staging, db, meta, budget);
    }
    let dead: Vec<u32> = at
        .values()
        .copied()
        .filter(|&e| !kept[e as usize])
        .collect();
    let live = (alive + ids.len()) as u64;
    let built = quiver_vector::extend(&old, &dead, ids, vecs, &params, None, &|_| {})
        .map_err(|e| QueryError::Index(e.to_string()))?;
    record(staging, db, meta, built, live)
}

/// Open graphs by file, with the file's identity when opened (files are immutable, but
/// a database deleted and made again at the same place reuses their names): a few, the
/// least recently used dropped first.
type OpenGraph = (PathBuf, FileId, Arc<VectorIndex>);
static OPEN: Mutex<Vec<OpenGraph>> = Mutex::new(Vec::new());
const OPEN_KEPT: usize = 8;

/// What tells two files at one path apart: device, inode, length, modification time.
type FileId = (u64, u64, u64, Option<std::time::SystemTime>);

fn file_id(path: &std::path::Path) -> Result<FileId, QueryError> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)
        .map_err(|e| QueryError::Index(format!("{}: {e}", path.display())))?;
    Ok((m.dev(), m.ino(), m.len(), m.modified().ok()))
}

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
    let id = file_id(&path)?;
    let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    open.retain(|(p, i, _)| *p != path || *i == id);
    if let Some(i) = open.iter().position(|(p, _, _)| *p == path) {
        let e = open.remove(i);
        let ix = e.2.clone();
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
    open.push((path, id, ix.clone()));
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
    let dims = q.len();
    let metric = metric(meta);
    let (Some(qv), Some(label)) = (query_vector(meta, q), g.label_id(&meta.label)) else {
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

/// The `k` relationships of `meta`'s type whose vectors are nearest `q`, best first,
/// with Neo4j's scores: every relationship of the type is scored (segments and delta
/// alike), in morsels of source nodes on every core. No graph yet.
pub fn query_relationships(
    g: &Graph,
    meta: &VectorIndexMeta,
    q: &[f64],
    k: usize,
) -> Result<Vec<(f64, crate::value::RelRef)>, QueryError> {
    use rayon::prelude::*;
    let dims = q.len();
    let metric = metric(meta);
    let (Some(qv), Some(ty)) = (query_vector(meta, q), g.rel_type_id(&meta.label)) else {
        return Ok(Vec::new());
    };
    let n = g.n_nodes();
    let by = |a: &(f32, crate::value::RelRef), b: &(f32, crate::value::RelRef)| {
        a.0.total_cmp(&b.0)
            .then((a.1.src, a.1.eid).cmp(&(b.1.src, b.1.eid)))
    };
    let starts: Vec<u64> = (0..n).step_by(4096).collect();
    let parts = starts
        .par_iter()
        .map(
            |&lo| -> Result<Vec<(f32, crate::value::RelRef)>, QueryError> {
                let mut best = Vec::new();
                let mut rels = Vec::new();
                for node in lo..(lo + 4096).min(n) {
                    if !g.node_live(node) {
                        continue;
                    }
                    rels.clear();
                    g.step_rels(&[ty], quiver_cypher::ast::Dir::Out, node, &mut rels)?;
                    for (_, r) in rels.drain(..) {
                        let Some(mut v) = value_vector(&g.rel_prop(&r, &meta.property)?, dims)
                        else {
                            continue;
                        };
                        if metric.prepare(&mut v) {
                            best.push((quiver_vector::distance(metric, &qv, &v), r));
                        }
                    }
                    if best.len() > 4 * k + 1024 {
                        best.sort_by(by);
                        best.truncate(k);
                    }
                }
                best.sort_by(by);
                best.truncate(k);
                Ok(best)
            },
        )
        .collect::<Result<Vec<_>, _>>()?;
    let mut all: Vec<(f32, crate::value::RelRef)> = parts.into_iter().flatten().collect();
    all.sort_by(by);
    all.truncate(k);
    Ok(all.into_iter().map(|(d, r)| (metric.score(d), r)).collect())
}
