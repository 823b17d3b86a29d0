//! A projection as the algorithms read it ([`quiver_algo::Adjacency`]): the stored CSR
//! segments of its types, in the directions its orientations give each side, decoded a
//! block of nodes at a time (`Database::adjacency_into`), the nodes outside its labels
//! dropped. Nothing is copied but the block being read, and the weights when a run
//! asks for them (a column of the type's properties, by edge id).
//!
//! A delta that created or deleted nodes or relationships is read node by node
//! through the [`Graph`]'s merged adjacency instead (until a checkpoint folds it).

use crate::error::QueryError;
use crate::gds::{Orientation, Projection, RelSpec};
use crate::graph::Graph;
use quiver_algo::{Adjacency, AlgoError, Block, Side};
use quiver_storage::read::Direction;
use std::cell::RefCell;
use std::sync::Arc;

/// One projected type: its id, orientation, and its weights when a run reads them.
struct List {
    ty: u32,
    /// Whether the segments know the type (a type only the delta has is read through it).
    stored: bool,
    orientation: Orientation,
    /// Weights by edge id (NaN: absent, `default` then).
    weights: Option<Arc<Vec<f64>>>,
    default: f64,
    /// The stored property the weights come from (for relationships the delta holds).
    property: Option<String>,
}

pub(crate) struct View<'a> {
    g: &'a Graph<'a>,
    lists: Vec<List>,
    /// Members as bits by node id.
    members: Arc<Vec<u64>>,
    n: u32,
    member_count: u64,
    relationship_count: u64,
    /// Only some nodes are members: entries to the others are dropped.
    filtered: bool,
    /// The delta changed the graph's shape: read through it.
    through_delta: bool,
    weighted: bool,
}

#[inline]
fn bit(bits: &[u64], v: u32) -> bool {
    bits.get((v / 64) as usize)
        .is_some_and(|w| w & (1 << (v % 64)) != 0)
}

/// The storage directions a side reads under an orientation.
fn dirs(o: Orientation, side: Side) -> &'static [Direction] {
    use Direction::*;
    match (o, side) {
        (Orientation::Undirected, _) | (_, Side::Both) => &[Out, In],
        (Orientation::Natural, Side::Out) | (Orientation::Reverse, Side::In) => &[Out],
        (Orientation::Natural, Side::In) | (Orientation::Reverse, Side::Out) => &[In],
    }
}

/// The members of a projection with `labels` (`None`: every live node), as bits.
pub(crate) fn members(
    g: &Graph,
    labels: &Option<Vec<String>>,
) -> Result<(Vec<u64>, u64), QueryError> {
    let n = g.n_nodes();
    let mut bits = vec![0u64; n.div_ceil(64) as usize];
    match labels {
        None => {
            let mut live = Vec::new();
            let step = 1 << 20;
            let mut lo = 0;
            while lo < n {
                let hi = (lo + step).min(n);
                live.clear();
                g.live_mask(lo, hi, None, &mut live);
                for (i, &l) in live.iter().enumerate() {
                    if l {
                        let v = lo + i as u64;
                        bits[(v / 64) as usize] |= 1 << (v % 64);
                    }
                }
                lo = hi;
            }
        }
        Some(ls) => {
            for l in ls {
                let Some(id) = g.label_id(l) else {
                    return Err(QueryError::Procedure(format!(
                        "invalid node projection: no node has label {l} (db.labels() lists those there are)"
                    )));
                };
                if g.has_delta() {
                    for v in g.label_nodes(id, usize::MAX)? {
                        bits[(v / 64) as usize] |= 1 << (v % 64);
                    }
                    continue;
                }
                // Tables that carry the label: their live rows, a mask at a time; tables
                // with a `:LABEL` column: row by row.
                let mut live = Vec::new();
                for (t, check) in g.label_scan(id).tables {
                    let (lo, hi) = g.table_range(t);
                    live.clear();
                    g.live_mask(lo, hi, None, &mut live);
                    for (i, &l) in live.iter().enumerate() {
                        let v = lo + i as u64;
                        if l && (!check || g.has_label(v, id)?) {
                            bits[(v / 64) as usize] |= 1 << (v % 64);
                        }
                    }
                }
            }
        }
    }
    let count = bits.iter().map(|w| w.count_ones() as u64).sum();
    Ok((bits, count))
}

/// The type ids a relationship spec names.
pub(crate) fn type_ids(g: &Graph, spec: &RelSpec) -> Result<Vec<u32>, QueryError> {
    if spec.ty == "*" {
        return Ok((0..g.n_rel_types() as u32).collect());
    }
    match g.rel_type_id(&spec.ty) {
        Some(t) => Ok(vec![t]),
        None => Err(QueryError::Procedure(format!(
            "invalid relationship projection: no relationship has type {} (db.relationshipTypes() lists those there are)",
            spec.ty
        ))),
    }
}

impl<'a> View<'a> {
    /// The view of `p` (its members computed at projection) over `g`, its graph, with
    /// the weights of projection property `weight` when given.
    pub(crate) fn of_projection(
        g: &'a Graph<'a>,
        p: &Projection,
        members: Arc<Vec<u64>>,
        member_count: u64,
        weight: Option<&str>,
    ) -> Result<View<'a>, QueryError> {
        Self::build(
            g,
            &p.rels,
            p.labels.is_some(),
            members,
            member_count,
            weight,
            Some(p.relationship_count),
        )
    }

    pub(crate) fn new(
        g: &'a Graph<'a>,
        rels: &[RelSpec],
        filtered: bool,
        members: Arc<Vec<u64>>,
        member_count: u64,
        weight: Option<&str>,
    ) -> Result<View<'a>, QueryError> {
        Self::build(g, rels, filtered, members, member_count, weight, None)
    }

    /// `relationships`: the count when known (a projection's, counted once).
    fn build(
        g: &'a Graph<'a>,
        rels: &[RelSpec],
        filtered: bool,
        members: Arc<Vec<u64>>,
        member_count: u64,
        weight: Option<&str>,
        relationships: Option<u64>,
    ) -> Result<View<'a>, QueryError> {
        let through_delta = g.delta().is_some_and(|d| !d.keeps_shape());
        let stored_types = g.db.rel_types().len() as u32;
        let mut lists = Vec::new();
        let mut weight_found = weight.is_none();
        for spec in rels {
            let prop = weight.and_then(|w| spec.properties.iter().find(|p| p.name == w));
            // A property named in the algorithm but not projected: read the stored one of
            // that name (GDS needs it projected; reading it is what the user meant).
            let (property, default) = match (weight, prop) {
                (Some(_), Some(p)) => (Some(p.property.clone()), p.default),
                (Some(w), None) => (Some(w.to_string()), f64::NAN),
                (None, _) => (None, f64::NAN),
            };
            for ty in type_ids(g, spec)? {
                let weights = match &property {
                    Some(name) if ty < stored_types => {
                        let w = g.rel_prop_numbers(ty, name)?;
                        weight_found |= w.is_some();
                        w.map(Arc::new)
                    }
                    _ => None,
                };
                lists.push(List {
                    ty,
                    stored: ty < stored_types,
                    orientation: spec.orientation,
                    weights,
                    default: if default.is_nan() { 1.0 } else { default },
                    property: property.clone(),
                });
            }
        }
        if !weight_found && !through_delta {
            return Err(QueryError::Procedure(format!(
                "relationshipWeightProperty {}: no projected relationship has it",
                weight.unwrap_or_default()
            )));
        }
        // Labels that every live node has filter nothing.
        let all_live = !g.has_delta() && member_count == g.db.n_nodes() - g.db.n_deleted_nodes();
        let mut v = View {
            g,
            lists,
            members,
            n: g.n_nodes() as u32,
            member_count,
            relationship_count: 0,
            filtered: filtered && !all_live,
            through_delta,
            weighted: weight.is_some(),
        };
        v.relationship_count = match relationships {
            Some(c) => c,
            None => v.count_relationships()?,
        };
        Ok(v)
    }

    /// Relationships the projection holds (an undirected type's twice, once a side):
    /// from the manifest when every node is a member and the segments are the graph,
    /// else counted over the adjacency.
    fn count_relationships(&self) -> Result<u64, QueryError> {
        if !self.filtered && !self.through_delta {
            let m = self.g.db.manifest();
            return Ok(self
                .lists
                .iter()
                .map(|l| {
                    let live = if l.stored {
                        let t = &m.rel_types[l.ty as usize];
                        let stored: u64 = t.segments.iter().map(|s| s.n_edges).sum();
                        stored - self.g.db.n_deleted_edges(l.ty as usize)
                    } else {
                        0
                    };
                    live * if l.orientation == Orientation::Undirected {
                        2
                    } else {
                        1
                    }
                })
                .sum());
        }
        let mut b = Block::default();
        let mut total = 0u64;
        for (lo, hi) in quiver_algo::blocks(self.n) {
            self.fill(Side::Out, lo, hi, false, &mut b)
                .map_err(|e| QueryError::Procedure(e.to_string()))?;
            total += b.targets.len() as u64;
        }
        Ok(total)
    }

    #[inline]
    fn member(&self, v: u32) -> bool {
        bit(&self.members, v)
    }

    /// Node `v`'s entries from the merged graph (a delta that changed the shape).
    fn fill_node_through_delta(
        &self,
        side: Side,
        v: u32,
        weights: bool,
        out: &mut Block,
    ) -> Result<(), QueryError> {
        for l in &self.lists {
            for &d in dirs(l.orientation, side) {
                let mut got: Vec<(u32, u64)> = Vec::new();
                self.g
                    .for_each_neighbour(l.ty, v as u64, d, |nb, eid| got.push((nb, eid)))?;
                for (nb, eid) in got {
                    if !self.member(nb) {
                        continue;
                    }
                    out.targets.push(nb);
                    if weights {
                        let w = match &l.property {
                            Some(p) => {
                                let r = self.g.rel_ref(l.ty, v as u64, nb, eid, d)?;
                                match self.g.rel_prop(&r, p)? {
                                    crate::value::Value::Int(i) => i as f64,
                                    crate::value::Value::Float(f) => f,
                                    _ => l.default,
                                }
                            }
                            None => 1.0,
                        };
                        out.weights.push(w);
                    }
                }
            }
        }
        Ok(())
    }
}

/// What a block of several sources decodes before it interleaves them per node.
#[derive(Default)]
struct Part {
    targets: Vec<u32>,
    ends: Vec<u32>,
    eids: Vec<u64>,
}

thread_local! {
    static PARTS: RefCell<Vec<Part>> = const { RefCell::new(Vec::new()) };
    static EIDS: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

fn read_err(e: impl std::fmt::Display) -> AlgoError {
    AlgoError::Read(e.to_string())
}

impl Adjacency for View<'_> {
    fn node_bound(&self) -> u32 {
        self.n
    }

    fn is_member(&self, v: u32) -> bool {
        self.member(v)
    }

    fn member_count(&self) -> u64 {
        self.member_count
    }

    fn relationship_count(&self) -> u64 {
        self.relationship_count
    }

    fn has_weights(&self) -> bool {
        self.weighted
    }

    fn fill(
        &self,
        side: Side,
        lo: u32,
        hi: u32,
        weights: bool,
        out: &mut Block,
    ) -> Result<(), AlgoError> {
        out.reset(lo, hi);
        let weights = weights && self.weighted;
        if self.through_delta {
            for v in lo..hi {
                if self.member(v) {
                    self.fill_node_through_delta(side, v, weights, out)
                        .map_err(read_err)?;
                }
                out.close_node();
            }
            return Ok(());
        }
        let db = self.g.db;
        let sources: Vec<(&List, Direction)> = self
            .lists
            .iter()
            .filter(|l| l.stored)
            .flat_map(|l| dirs(l.orientation, side).iter().map(move |&d| (l, d)))
            .collect();
        let weight_of = |l: &List, eid: u64| -> f64 {
            match &l.weights {
                Some(w) => match w.get(eid as usize) {
                    Some(x) if !x.is_nan() => *x,
                    _ => l.default,
                },
                None => l.default,
            }
        };
        match sources.as_slice() {
            [] => out.offsets.extend((lo..hi).map(|_| 0)),
            [(l, d)] => EIDS.with(|e| {
                let mut e = e.borrow_mut();
                e.clear();
                db.adjacency_into(
                    l.ty as usize,
                    *d,
                    lo,
                    hi,
                    &mut out.targets,
                    &mut out.offsets,
                    weights.then_some(&mut *e),
                )
                .map_err(read_err)?;
                if weights {
                    out.weights.extend(e.iter().map(|&eid| weight_of(l, eid)));
                }
                Ok::<(), AlgoError>(())
            })?,
            many => PARTS.with(|p| {
                let mut parts = p.borrow_mut();
                parts.resize_with(many.len(), Part::default);
                for (part, (l, d)) in parts.iter_mut().zip(many) {
                    part.targets.clear();
                    part.ends.clear();
                    part.eids.clear();
                    part.ends.push(0);
                    db.adjacency_into(
                        l.ty as usize,
                        *d,
                        lo,
                        hi,
                        &mut part.targets,
                        &mut part.ends,
                        weights.then_some(&mut part.eids),
                    )
                    .map_err(read_err)?;
                }
                for k in 0..(hi - lo) as usize {
                    for (part, (l, _)) in parts.iter().zip(many) {
                        let (a, b) = (part.ends[k] as usize, part.ends[k + 1] as usize);
                        out.targets.extend_from_slice(&part.targets[a..b]);
                        if weights {
                            out.weights
                                .extend(part.eids[a..b].iter().map(|&eid| weight_of(l, eid)));
                        }
                    }
                    out.close_node();
                }
                Ok::<(), AlgoError>(())
            })?,
        }
        if self.filtered {
            // Drop non-members' entries and entries to non-members, in place.
            let mut w = 0usize;
            let mut start = 0usize;
            for k in 0..(hi - lo) as usize {
                let end = out.offsets[k + 1] as usize;
                if self.member(lo + k as u32) {
                    for i in start..end {
                        if self.member(out.targets[i]) {
                            out.targets[w] = out.targets[i];
                            if weights {
                                out.weights[w] = out.weights[i];
                            }
                            w += 1;
                        }
                    }
                }
                start = end;
                out.offsets[k + 1] = w as u32;
            }
            out.targets.truncate(w);
            out.weights.truncate(if weights { w } else { 0 });
        }
        Ok(())
    }
}
