//! Reads that merge the delta with the segments: an entity with a delta record is read
//! from the record, any other from the segments; adjacency is the CSR minus deleted
//! relationships plus created ones.
//!
//! A segment relationship with a deleted end is deleted: `DETACH DELETE` of a segment
//! node writes one record for the node, not one per relationship (10% of Pokec's users
//! hold 5.7M relationships), and reads skip the node's relationships by its record.
//! Created relationships are in the delta's adjacency lists and are deleted one by one.

use crate::delta::Delta;
use crate::segments;
use crate::value::RelRef;
use quiver_storage::{Database, Direction, ReadError};
use std::sync::Arc;

#[derive(Clone, Copy)]
pub struct View<'a> {
    pub db: &'a Database,
    pub delta: &'a Delta,
}

impl<'a> View<'a> {
    pub fn new(db: &'a Database, delta: &'a Delta) -> View<'a> {
        View { db, delta }
    }

    pub fn node_labels(&self, n: u64) -> Result<Vec<Arc<str>>, ReadError> {
        match self.delta.node(n) {
            Some(Some(r)) => r.labels_of(self.db, n),
            Some(None) => Ok(Vec::new()),
            None => segments::node_labels(self.db, n),
        }
    }

    /// Relationships of type `ty` at `node` in `dir`: `f(neighbour, canonical edge id)`,
    /// segment ones that are not deleted, then created ones.
    #[inline]
    pub fn for_each_rel(
        &self,
        ty: u32,
        node: u64,
        dir: Direction,
        mut f: impl FnMut(u64, u64),
    ) -> Result<(), ReadError> {
        if !self.seg_node_deleted(node) {
            self.for_each_seg_rel(ty, node, dir, &mut f)?;
        }
        self.for_each_created_rel(ty, node, dir, f);
        Ok(())
    }

    /// Whether segment node `node` is deleted in the delta (which then deletes its
    /// segment relationships).
    #[inline]
    fn seg_node_deleted(&self, node: u64) -> bool {
        self.delta.deleted_nodes > 0 && self.delta.node(node) == Some(None)
    }

    /// The segment relationships of type `ty` at `node` in `dir` that are not deleted,
    /// whether or not `node` itself is: `f(neighbour, canonical edge id)`.
    #[inline]
    pub fn for_each_seg_rel(
        &self,
        ty: u32,
        node: u64,
        dir: Direction,
        f: impl FnMut(u64, u64),
    ) -> Result<(), ReadError> {
        self.seg_rels(ty, node, dir, true, f)
    }

    /// As [`for_each_seg_rel`](Self::for_each_seg_rel); with `skip_dead_ends` false,
    /// also those that die with a deleted neighbour.
    #[inline]
    fn seg_rels(
        &self,
        ty: u32,
        node: u64,
        dir: Direction,
        skip_dead_ends: bool,
        mut f: impl FnMut(u64, u64),
    ) -> Result<(), ReadError> {
        let t = ty as usize;
        if t >= self.db.rel_types().len() || node >= self.delta.base_nodes {
            return Ok(());
        }
        let check_rels = self.delta.deleted_rels > 0;
        let check_ends = skip_dead_ends && self.delta.deleted_nodes > 0;
        if !check_rels && !check_ends {
            // Nothing deleted: the CSR as it is (the common case, kept tight).
            for (nb, eid) in self.db.neighbours(t, node as u32, dir)? {
                f(
                    nb as u64,
                    segments::canonical_edge_id(self.db, ty, node, nb, eid, dir)?,
                );
            }
            return Ok(());
        }
        for (nb, eid) in self.db.neighbours(t, node as u32, dir)? {
            if check_ends && self.delta.node(nb as u64) == Some(None) {
                continue;
            }
            let eid = segments::canonical_edge_id(self.db, ty, node, nb, eid, dir)?;
            if check_rels && self.delta.rel(ty, eid) == Some(None) {
                continue;
            }
            f(nb as u64, eid);
        }
        Ok(())
    }

    /// The created relationships of type `ty` at `node` in `dir`.
    #[inline]
    pub fn for_each_created_rel(
        &self,
        ty: u32,
        node: u64,
        dir: Direction,
        mut f: impl FnMut(u64, u64),
    ) {
        if let Some(adj) = self.delta.adjacency(node, dir == Direction::Out) {
            for &(at, eid, nb) in adj.iter() {
                if at == ty {
                    f(nb, eid);
                }
            }
        }
    }

    /// Every relationship at `node`, each once (a self-loop too).
    pub fn node_rels(&self, node: u64) -> Result<Vec<RelRef>, ReadError> {
        let mut out = Vec::new();
        self.node_rels_parts(node, |r, _| out.push(r))?;
        Ok(out)
    }

    /// Every relationship at `node`, each once: `f(relationship, created)`; segment
    /// ones that are not deleted whether or not `node` itself is.
    pub fn node_rels_parts(
        &self,
        node: u64,
        mut f: impl FnMut(RelRef, bool),
    ) -> Result<(), ReadError> {
        for ty in 0..self.delta.types.len() as u32 {
            for dir in [Direction::Out, Direction::In] {
                let mut each = |nb: u64, eid: u64, created: bool| {
                    let (src, dst) = match dir {
                        Direction::Out => (node, nb),
                        Direction::In => (nb, node),
                    };
                    if dir == Direction::In && src == dst {
                        return; // the self-loop was met going out
                    }
                    f(
                        RelRef {
                            ty,
                            src: src as u32,
                            dst: dst as u32,
                            eid,
                        },
                        created,
                    );
                };
                self.for_each_seg_rel(ty, node, dir, |nb, eid| each(nb, eid, false))?;
                self.for_each_created_rel(ty, node, dir, |nb, eid| each(nb, eid, true));
            }
        }
        Ok(())
    }

    /// Segment relationships the delta deletes with a deleted end rather than by a
    /// record of their own, each once (for SHOW STORAGE INFO).
    pub fn rels_deleted_with_ends(&self) -> Result<u64, ReadError> {
        let mut n = 0u64;
        if self.delta.deleted_nodes == 0 {
            return Ok(0);
        }
        for (&id, r) in self.delta.nodes.range(..self.delta.base_nodes) {
            if !r.deleted || r.created {
                continue;
            }
            for ty in 0..self.db.rel_types().len() as u32 {
                for dir in [Direction::Out, Direction::In] {
                    self.seg_rels(ty, id, dir, false, |nb, _| {
                        // A self-loop is met going out; an edge between two deleted
                        // nodes at the smaller id.
                        if !((dir == Direction::In && nb == id)
                            || (nb < id && self.seg_node_deleted(nb)))
                        {
                            n += 1;
                        }
                    })?;
                }
            }
        }
        Ok(n)
    }
}
