//! The row group a node table is built in: its share of the budget, its column
//! builders, and its encoding (in parallel per column) into the table, on a thread of its
//! own while the next group fills when the budget has room for both.

use super::*;
use quiver_storage::manifest::SegmentMeta;
use quiver_storage::WriteError;
use std::thread::JoinHandle;

/// Most of the budget one row group under construction may hold (numerator, denominator).
pub(crate) const ROW_GROUP_BUDGET_SHARE: (u64, u64) = (2, 5);

/// The most a row group of property columns may hold under `budget`:
/// `ROW_GROUP_BUDGET_SHARE` of it, so that the id map and the edge store always have
/// room to grow.
pub(crate) fn row_group_cap(budget: &MemoryBudget) -> u64 {
    budget.limit_bytes() / ROW_GROUP_BUDGET_SHARE.1 * ROW_GROUP_BUDGET_SHARE.0
}

/// What the encoding thread gives back: the writer, the group's buffers (to fill again),
/// and how the write went.
type Encoded = (TableWriter, Vec<ColumnBuilder>, Result<(), WriteError>);

/// A table's row groups under construction, with the grants that cover them.
///
/// A full group is handed to an encoding thread (`quiver-encode`, which runs the
/// columns on the import's pool) while the next one fills in a second set of buffers:
/// encoding a group took a quarter of the dolt import's wall time with one core idle,
/// the parse stage waiting for the sequential stage that waited for the encoder. The
/// second set is granted apart (`second`), and only when both fit in the row groups'
/// share of the budget; otherwise a group is written in place, as before, and a tight
/// budget holds one group at a time.
pub(crate) struct RowGroup {
    pool: Arc<rayon::ThreadPool>,
    /// Rows per group, sized from the first batch (0: not sized yet).
    rows_target: usize,
    builders: Vec<ColumnBuilder>,
    types: Vec<DataType>,
    /// Covers `builders` and their encoded copy.
    grant: Grant,
    /// The table's writer; `None` while a group is encoded on its thread.
    writer: Option<TableWriter>,
    /// The group being encoded, if any.
    in_flight: Option<JoinHandle<Encoded>>,
    /// The buffers of the last group written in the background, kept to fill again.
    spare: Vec<ColumnBuilder>,
    /// Covers the group in flight or the spare buffers.
    second: Grant,
    /// Per column, string bytes per row in the first batch (to reserve a fresh set).
    string_bytes_per_row: Vec<f64>,
}

impl RowGroup {
    pub(crate) fn new(
        types: &[DataType],
        budget: &MemoryBudget,
        pool: Arc<rayon::ThreadPool>,
        writer: TableWriter,
    ) -> Self {
        RowGroup {
            pool,
            builders: types.iter().map(|&t| ColumnBuilder::new(t)).collect(),
            types: types.to_vec(),
            grant: budget.empty_grant("row group buffer"),
            rows_target: 0,
            writer: Some(writer),
            in_flight: None,
            spare: Vec::new(),
            second: budget.empty_grant("row group buffer"),
            string_bytes_per_row: Vec::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.builders.first().map_or(0, |b| b.len())
    }

    pub(crate) fn heap_bytes(&self) -> u64 {
        self.builders.iter().map(|b| b.heap_bytes() as u64).sum()
    }

    /// Appends a batch; hands the group off first if it would pass its row target, and
    /// writes it after if the grant cannot cover the buffers plus their encoded copy.
    pub(crate) fn append(
        &mut self,
        cols: &[ColumnBuilder],
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
            self.hand_off(row_groups)?;
        }
        for (b, c) in self.builders.iter_mut().zip(cols) {
            b.append(c);
        }
        let need = self.heap_bytes() * 3 / 2;
        if need > self.grant.bytes() && (need > cap || self.grant.try_resize(need).is_err()) {
            self.flush(row_groups, true)?;
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
        // When the budget's share holds two groups of the cap, the groups are half the
        // cap each, one filling while the other is encoded: the same memory as one
        // group written in place (dolt 1m: peak 187 MiB either way, where two whole
        // groups took 252 MiB).
        let halves = if row_group_cap(self.grant.budget()) >= 2 * cap {
            2.0
        } else {
            1.0
        };
        let rows = (cap as f64 / halves / 1.5 / 1.5 / row_bytes) as usize;
        self.rows_target = rows.clamp(1, ROW_GROUP_ROWS_MAX);
        self.string_bytes_per_row = cols
            .iter()
            .map(|c| c.string_bytes() as f64 / n as f64)
            .collect();
        let want: u64 = (row_bytes * self.rows_target as f64 * 1.25 * 1.5) as u64;
        if want > self.grant.bytes() && self.grant.try_resize(want).is_err() {
            // The budget is busy elsewhere: grow as needed instead.
            return;
        }
        let mut builders = std::mem::take(&mut self.builders);
        self.reserve(&mut builders);
        self.builders = builders;
    }

    /// Reserves a group's worth of rows in `builders`. Fixed-width values and offsets
    /// are reserved by row count; only string bytes by their share (reserving offsets
    /// twice made a wide table's buffers pass the cap at once and flush a group of a few
    /// hundred rows per batch).
    fn reserve(&self, builders: &mut [ColumnBuilder]) {
        for (b, per) in builders.iter_mut().zip(&self.string_bytes_per_row) {
            let extra = self.rows_target.saturating_sub(b.len());
            b.reserve_exact(extra, (per * extra as f64 * 1.25) as usize);
        }
    }

    /// The group is full: encodes it on its own thread while the next one fills, if
    /// the budget has room for a second set of buffers, else writes it here.
    fn hand_off(&mut self, row_groups: &mut u64) -> Result<(), ImportError> {
        self.wait()?;
        if self.len() == 0 {
            return Ok(());
        }
        // The second set of buffers needs what this one holds.
        let need = self.grant.bytes();
        let fits =
            2 * need <= row_group_cap(self.grant.budget()) && self.second.try_resize(need).is_ok();
        if !fits {
            return self.flush(row_groups, false);
        }
        let mut next = std::mem::take(&mut self.spare);
        if next.len() != self.types.len() {
            next = self.types.iter().map(|&t| ColumnBuilder::new(t)).collect();
            self.reserve(&mut next);
        }
        let full = std::mem::replace(&mut self.builders, next);
        let mut writer = self.writer.take().ok_or_else(writer_missing)?;
        let pool = self.pool.clone();
        let spawned = std::thread::Builder::new()
            .name("quiver-encode".into())
            .spawn(move || {
                let r = pool.install(|| writer.write_row_group(&full));
                (writer, full, r)
            });
        match spawned {
            Ok(h) => self.in_flight = Some(h),
            Err(e) => {
                return Err(ImportError::Usage(format!(
                    "could not start a thread to encode a row group: {e}"
                )))
            }
        }
        *row_groups += 1;
        Ok(())
    }

    /// Waits for the group in flight: its writer comes back, its buffers become the
    /// spare set.
    fn wait(&mut self) -> Result<(), ImportError> {
        let Some(h) = self.in_flight.take() else {
            return Ok(());
        };
        let (writer, mut buffers, result) = h.join().map_err(|_| {
            ImportError::Usage("internal: the thread encoding a row group panicked".into())
        })?;
        self.writer = Some(writer);
        result?;
        for b in &mut buffers {
            b.clear();
        }
        self.spare = buffers;
        Ok(())
    }

    /// Writes the group here (after the one in flight). With `release`, gives every
    /// buffer back (memory pressure, or the table's end).
    pub(crate) fn flush(&mut self, row_groups: &mut u64, release: bool) -> Result<(), ImportError> {
        self.wait()?;
        if self.len() > 0 {
            let w = self.writer.as_mut().ok_or_else(writer_missing)?;
            self.pool.install(|| w.write_row_group(&self.builders))?;
            *row_groups += 1;
        }
        if release {
            // Memory pressure: give the buffers back rather than keep their capacity, and
            // size the next group afresh.
            self.builders = self.types.iter().map(|&t| ColumnBuilder::new(t)).collect();
            self.spare = Vec::new();
            self.grant.try_resize(0)?;
            self.second.try_resize(0)?;
            self.rows_target = 0;
        } else {
            for b in &mut self.builders {
                b.clear();
            }
        }
        Ok(())
    }

    /// Writes what is left and finishes the table.
    pub(crate) fn finish(mut self, row_groups: &mut u64) -> Result<SegmentMeta, ImportError> {
        self.flush(row_groups, true)?;
        Ok(self.writer.take().ok_or_else(writer_missing)?.finish()?)
    }
}

/// The writer is away only while a group is in flight, and every use waits for it
/// first: its absence is a bug, reported rather than a panic.
fn writer_missing() -> ImportError {
    ImportError::Usage("internal: a row group's writer is missing".into())
}

impl Drop for RowGroup {
    /// An import that fails while a group is encoded waits for it, so that nothing
    /// writes into the staging folder after the import returned.
    fn drop(&mut self) {
        if let Some(h) = self.in_flight.take() {
            let _ = h.join();
        }
    }
}
