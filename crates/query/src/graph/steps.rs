//! Adjacency reads of the [`Graph`]: a node's neighbours and relationships by type and
//! direction (the CSR minus deleted relationships plus created ones), eager or lazy,
//! prefetched, a relationship between two given nodes, degrees, and a relationship's
//! canonical reference.

use super::*;

impl<'db> Graph<'db> {
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
