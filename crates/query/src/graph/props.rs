//! Property reads of the [`Graph`]: one node's or relationship's value by name, a batch
//! of nodes' values (each column chunk read once per run of nodes in a row group, rows
//! far apart prefetched), ranges of consecutive nodes as whole chunks, whole property
//! maps; each through the delta's overlay where the delta holds a record.

use super::*;

/// How many rows ahead a read of scattered rows hints the next row to the CPU.
const PROP_PREFETCH_AHEAD: usize = 8;

impl<'db> Graph<'db> {
    pub(crate) fn cell(&self, t: usize, row: u64, col: usize) -> Result<Value, QueryError> {
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

    /// Property `name` of every segment relationship of type `ty` as a number, by edge
    /// id (NaN where absent or not a number), read a column chunk at a time: a graph
    /// algorithm's weights. `None` when the type has no such column.
    pub fn rel_prop_numbers(&self, ty: u32, name: &str) -> Result<Option<Vec<f64>>, QueryError> {
        let Some(ri) = self.schema.rels.get(ty as usize) else {
            return Ok(None);
        };
        let Some(&col) = ri.props.get(name) else {
            return Ok(None);
        };
        let dtype = ri.dtypes[col];
        let mut out = Vec::new();
        for rg in 0..ri.rg_first.len() {
            out.resize(ri.rg_first[rg] as usize, f64::NAN);
            self.db.with_rel_chunk(ty as usize, rg, col, |c| {
                for i in 0..c.len() {
                    out.push(match chunk_value(c, i, dtype) {
                        Value::Int(x) => x as f64,
                        Value::Float(x) => x,
                        _ => f64::NAN,
                    });
                }
            })?;
        }
        Ok(Some(out))
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
}
