//! Reads that merge the delta with the segments: an entity with a delta record is read
//! from the record, any other from the segments; adjacency is the CSR minus deleted
//! relationships plus created ones.

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
    pub fn for_each_rel(
        &self,
        ty: u32,
        node: u64,
        dir: Direction,
        mut f: impl FnMut(u64, u64),
    ) -> Result<(), ReadError> {
        let t = ty as usize;
        if t < self.db.rel_types().len() && node < self.delta.base_nodes {
            let check = self.delta.deleted_rels > 0;
            for (nb, eid) in self.db.neighbours(t, node as u32, dir)? {
                let eid = segments::canonical_edge_id(self.db, ty, node, nb, eid, dir)?;
                if check && self.delta.rel(ty, eid) == Some(None) {
                    continue;
                }
                f(nb as u64, eid);
            }
        }
        if let Some(adj) = self.delta.adjacency(node, dir == Direction::Out) {
            for &(at, eid, nb) in adj.iter() {
                if at == ty {
                    f(nb, eid);
                }
            }
        }
        Ok(())
    }

    /// Every relationship at `node`, each once (a self-loop too).
    pub fn node_rels(&self, node: u64) -> Result<Vec<RelRef>, ReadError> {
        let mut out = Vec::new();
        for ty in 0..self.delta.types.len() as u32 {
            for dir in [Direction::Out, Direction::In] {
                self.for_each_rel(ty, node, dir, |nb, eid| {
                    let (src, dst) = match dir {
                        Direction::Out => (node, nb),
                        Direction::In => (nb, node),
                    };
                    if dir == Direction::In && src == dst {
                        return; // the self-loop was met going out
                    }
                    out.push(RelRef {
                        ty,
                        src: src as u32,
                        dst: dst as u32,
                        eid,
                    });
                })?;
            }
        }
        Ok(out)
    }
}
