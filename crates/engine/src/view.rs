//! Reads that merge the delta with the segments: an entity with a delta record is read
//! from the record, any other from the segments; adjacency is the CSR minus deleted
//! relationships plus created ones.

use crate::delta::{prop_get, Delta, Props};
use crate::segments;
use crate::value::{RelRef, Value};
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

    pub fn node_exists(&self, n: u64) -> bool {
        self.delta.node_exists(n)
    }

    pub fn node_labels(&self, n: u64) -> Result<Vec<Arc<str>>, ReadError> {
        match self.delta.node(n) {
            Some(Some(r)) => Ok(r.labels.clone()),
            Some(None) => Ok(Vec::new()),
            None => Ok(segments::node_state(self.db, n)?.0),
        }
    }

    pub fn node_props(&self, n: u64) -> Result<Props, ReadError> {
        match self.delta.node(n) {
            Some(Some(r)) => Ok(r.props.clone()),
            Some(None) => Ok(Vec::new()),
            None => Ok(segments::node_state(self.db, n)?.1),
        }
    }

    pub fn node_prop(&self, n: u64, key: &str) -> Result<Value, ReadError> {
        Ok(match self.delta.node(n) {
            Some(Some(r)) => prop_get(&r.props, key).cloned().unwrap_or(Value::Null),
            Some(None) => Value::Null,
            None => prop_get(&segments::node_state(self.db, n)?.1, key)
                .cloned()
                .unwrap_or(Value::Null),
        })
    }

    /// The edge id both directions agree on for a segment edge read from `dir`'s CSR.
    pub fn canonical(
        &self,
        ty: u32,
        node: u64,
        nb: u32,
        eid: u64,
        dir: Direction,
    ) -> Result<u64, ReadError> {
        let t = ty as usize;
        if dir == Direction::In
            && t < self.db.rel_types().len()
            && self.db.rel_types()[t].meta.columns.is_empty()
        {
            self.db.canonical_edge_id(t, node as u32, nb, eid)
        } else {
            Ok(eid)
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
                let eid = self.canonical(ty, node, nb, eid, dir)?;
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

    pub fn rel_props(&self, r: &RelRef) -> Result<Props, ReadError> {
        match self.delta.rel(r.ty, r.eid) {
            Some(Some(rec)) => Ok(rec.props.clone()),
            Some(None) => Ok(Vec::new()),
            None if (r.ty as usize) < self.db.rel_types().len() => {
                segments::rel_props(self.db, r.ty as usize, r.eid)
            }
            None => Ok(Vec::new()),
        }
    }
}
