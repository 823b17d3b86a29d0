//! The row group a node or relationship table is built in: its share of the budget,
//! its column builders, and its encoding (in parallel per column) into the table.

use super::*;

/// Most of the budget one row group under construction may hold (numerator, denominator).
pub(crate) const ROW_GROUP_BUDGET_SHARE: (u64, u64) = (2, 5);

/// The most a row group of property columns may hold under `budget`:
/// `ROW_GROUP_BUDGET_SHARE` of it, so that the id map and the edge store always have
/// room to grow.
pub(crate) fn row_group_cap(budget: &MemoryBudget) -> u64 {
    budget.limit_bytes() / ROW_GROUP_BUDGET_SHARE.1 * ROW_GROUP_BUDGET_SHARE.0
}

/// A row group under construction, with the grant that covers it.
pub(crate) struct RowGroup {
    pub(crate) pool: Arc<rayon::ThreadPool>,
    /// Rows per group, sized from the first batch (0: not sized yet).
    pub(crate) rows_target: usize,
    pub(crate) builders: Vec<ColumnBuilder>,
    pub(crate) types: Vec<DataType>,
    pub(crate) grant: Grant,
}

impl RowGroup {
    pub(crate) fn new(
        types: &[DataType],
        budget: &MemoryBudget,
        pool: Arc<rayon::ThreadPool>,
    ) -> Self {
        RowGroup {
            pool,
            builders: types.iter().map(|&t| ColumnBuilder::new(t)).collect(),
            types: types.to_vec(),
            grant: budget.empty_grant("row group buffer"),
            rows_target: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.builders.first().map_or(0, |b| b.len())
    }

    pub(crate) fn heap_bytes(&self) -> u64 {
        self.builders.iter().map(|b| b.heap_bytes() as u64).sum()
    }

    /// Appends a batch; flushes first if the group would pass its row target, and after
    /// if the grant cannot cover the buffers plus their encoded copy.
    pub(crate) fn append(
        &mut self,
        cols: &[ColumnBuilder],
        w: &mut TableWriter,
        row_groups: &mut u64,
    ) -> Result<(), ImportError> {
        let n = cols.first().map_or(0, |c| c.len());
        if n == 0 {
            return Ok(());
        }
        // Buffers, plus the encoded row group that exists briefly while it is written,
        // within the budget's share and the byte cap of node row groups.
        let cap =
            row_group_cap(self.grant.budget()).min(quiver_common::limits::ROW_GROUP_BYTES_MAX);
        if self.rows_target == 0 {
            self.presize(cols, n, cap);
        }
        if self.len() + n > self.rows_target {
            self.flush(w, row_groups, false)?;
        }
        for (b, c) in self.builders.iter_mut().zip(cols) {
            b.append(c);
        }
        let need = self.heap_bytes() * 3 / 2;
        if need > self.grant.bytes() && (need > cap || self.grant.try_resize(need).is_err()) {
            self.flush(w, row_groups, true)?;
        }
        Ok(())
    }

    /// Sizes the group once, from the first batch's bytes per row, and allocates its
    /// buffers: a group that is filled and flushed again and again reuses them, instead
    /// of growing by doubling and faulting in fresh pages every time (the page faults
    /// were a quarter of the CPU profile of the dolt import).
    pub(crate) fn presize(&mut self, cols: &[ColumnBuilder], n: usize, cap: u64) {
        let row_bytes =
            (cols.iter().map(|c| c.data_bytes()).sum::<usize>() as f64 / n as f64).max(1.0);
        // Buffers with 25% slack for longer rows, plus the encoded copy (x1.5), stay
        // under five sixths of the cap, so that validity bitmaps and offsets fit too.
        let rows = (cap as f64 / 1.5 / 1.5 / row_bytes) as usize;
        self.rows_target = rows.clamp(1, ROW_GROUP_ROWS_MAX);
        let want: u64 = (row_bytes * self.rows_target as f64 * 1.25 * 1.5) as u64;
        if want > self.grant.bytes() && self.grant.try_resize(want).is_err() {
            // The budget is busy elsewhere: grow as needed instead.
            return;
        }
        for (b, c) in self.builders.iter_mut().zip(cols) {
            // Fixed-width values and offsets are reserved by row count; only string
            // bytes by their share (reserving offsets twice made a wide table's buffers
            // pass the cap at once and flush a group of a few hundred rows per batch).
            let per = c.string_bytes() as f64 / n as f64;
            let extra = self.rows_target.saturating_sub(b.len());
            b.reserve_exact(extra, (per * extra as f64 * 1.25) as usize);
        }
    }

    pub(crate) fn flush(
        &mut self,
        w: &mut TableWriter,
        row_groups: &mut u64,
        release: bool,
    ) -> Result<(), ImportError> {
        if self.len() > 0 {
            self.pool.install(|| w.write_row_group(&self.builders))?;
            *row_groups += 1;
        }
        if release {
            // Memory pressure: give the buffers back rather than keep their capacity, and
            // size the next group afresh.
            self.builders = self.types.iter().map(|&t| ColumnBuilder::new(t)).collect();
            self.grant.try_resize(0)?;
            self.rows_target = 0;
        } else {
            for b in &mut self.builders {
                b.clear();
            }
        }
        Ok(())
    }
}
