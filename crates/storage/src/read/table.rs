//! A table segment (node or relationship properties): its footer's row groups and
//! column chunks, opened on demand.

use super::*;

/// Typed columns in row groups, over one or more segment files (a table grows by
/// segments: later imports and checkpoints add files beside the first), with the chunks
/// of its patch files standing in for the segments' where a checkpoint rewrote them.
pub(crate) struct Table {
    /// All row groups of all segments, `first_row` counted across segments; columns
    /// are the manifest's (segments' plus patches'), chunk refs the segment's or the
    /// patch's that replaces it (their lengths, for sizes; offsets are per file).
    pub(crate) footer: TableFooter,
    pub(crate) files: Vec<(SegFile, TableFooter)>,
    /// Global row group -> (segment, row group within it).
    pub(crate) rg_map: Vec<(usize, usize)>,
    /// Patch files, oldest first.
    pub(crate) patch_files: Vec<SegFile>,
    /// (global row group, column) -> (patch file, blob), for patched chunks only.
    pub(crate) patched: std::collections::HashMap<(u32, u32), (u32, BlobRef)>,
}

impl Table {
    /// Opens a table's `segments` and `patches`; `columns` are the manifest's.
    pub(crate) fn open(
        dir: &Path,
        segments: &[crate::manifest::SegmentMeta],
        patches: &[crate::manifest::SegmentMeta],
        columns: &[crate::manifest::PropertyMeta],
        mode: OpenMode,
    ) -> Result<Table, OpenError> {
        let mut files = Vec::new();
        let mut rg_map = Vec::new();
        // The table's columns: the manifest's; segments hold a prefix of them (a column
        // a checkpoint added lives in patch files for the row groups before it).
        let mut footer = TableFooter {
            n_rows: 0,
            columns: columns.to_vec(),
            row_groups: Vec::new(),
        };
        // Columns each row group's segment holds itself.
        let mut native: Vec<usize> = Vec::new();
        for (si, seg) in segments.iter().enumerate() {
            let (file, f): (SegFile, TableFooter) = SegFile::open(dir, &seg.file, mode)?;
            if f.columns.len() > footer.columns.len()
                || f.columns[..] != footer.columns[..f.columns.len()]
            {
                return Err(OpenError::Corrupted {
                    file: dir.join(&seg.file),
                    what: "segment columns differ from the table's".into(),
                });
            }
            for (ri, rg) in f.row_groups.iter().enumerate() {
                let mut g = rg.clone();
                g.first_row = footer.n_rows + rg.first_row;
                g.chunks.resize(footer.columns.len(), BlobRef::default());
                footer.row_groups.push(g);
                rg_map.push((si, ri));
                native.push(f.columns.len());
            }
            footer.n_rows += f.n_rows;
            files.push((file, f));
        }
        let mut patch_files = Vec::new();
        let mut patched = std::collections::HashMap::new();
        for (pi, seg) in patches.iter().enumerate() {
            let path = dir.join(&seg.file);
            let bad = |what: &str| OpenError::Corrupted {
                file: path.clone(),
                what: what.into(),
            };
            let (file, f): (SegFile, crate::manifest::PatchFooter) =
                SegFile::open(dir, &seg.file, mode)?;
            if f.columns.len() > footer.columns.len()
                || f.columns[..] != footer.columns[..f.columns.len()]
            {
                return Err(bad("patch columns differ from the table's"));
            }
            for ch in &f.chunks {
                let g = footer
                    .row_groups
                    .get_mut(ch.row_group as usize)
                    .filter(|g| g.n_rows == ch.n_rows && (ch.column as usize) < f.columns.len())
                    .ok_or_else(|| bad("patch chunk outside the table"))?;
                g.chunks[ch.column as usize] = ch.blob;
                patched.insert((ch.row_group as u32, ch.column), (pi as u32, ch.blob));
            }
            patch_files.push(file);
        }
        // Every row group has a chunk of every column, its segment's or a patch's.
        for (rg, &n) in native.iter().enumerate() {
            for c in n..footer.columns.len() {
                if !patched.contains_key(&(rg as u32, c as u32)) {
                    return Err(OpenError::Corrupted {
                        file: patches
                            .last()
                            .map_or_else(|| dir.to_path_buf(), |p| dir.join(&p.file)),
                        what: format!("no chunk of column {c} for row group {rg}"),
                    });
                }
            }
        }
        Ok(Table {
            footer,
            files,
            rg_map,
            patch_files,
            patched,
        })
    }

    /// Where chunk (`rg`, `column`) is stored: the newest patch file that has it, else
    /// its segment's file.
    pub(crate) fn chunk_at(
        &self,
        rg: usize,
        column: usize,
    ) -> Result<(&SegFile, BlobRef), ReadError> {
        let &(si, lrg) = self.rg_map.get(rg).ok_or_else(|| ReadError::NotFound {
            kind: "row group",
            name: rg.to_string(),
        })?;
        if !self.patched.is_empty() {
            if let Some(&(pi, blob)) = self.patched.get(&(rg as u32, column as u32)) {
                return Ok((&self.patch_files[pi as usize], blob));
            }
        }
        let (file, footer) = &self.files[si];
        let r = footer
            .row_groups
            .get(lrg)
            .and_then(|g| g.chunks.get(column))
            .ok_or_else(|| ReadError::NotFound {
                kind: "column",
                name: column.to_string(),
            })?;
        Ok((file, *r))
    }

    pub(crate) fn with_chunk<R>(
        &self,
        rg: usize,
        column: usize,
        f: impl FnOnce(&ColumnChunk<'_>) -> R,
    ) -> Result<R, ReadError> {
        let (file, blob) = self.chunk_at(rg, column)?;
        let dtype = self.footer.columns[column].dtype;
        open_chunk(file, blob, dtype, self.footer.row_groups[rg].n_rows, f)
    }

    /// Every file of the table: segments, then patches.
    pub(crate) fn all_files(&self) -> impl Iterator<Item = &SegFile> {
        self.files
            .iter()
            .map(|(f, _)| f)
            .chain(self.patch_files.iter())
    }

    /// The raw bytes of chunk (`rg`, `column`) as stored (for a checkpoint that carries
    /// a patched chunk into a new patch file unchanged).
    pub(crate) fn chunk_bytes(&self, rg: usize, column: usize) -> Result<Cow<'_, [u8]>, ReadError> {
        let (file, blob) = self.chunk_at(rg, column)?;
        file.blob(blob)
    }
}

/// Runs `f` on the chunk at `r` in `file`, checked to hold `n_rows` values.
pub(crate) fn open_chunk<R>(
    file: &SegFile,
    r: BlobRef,
    dtype: quiver_common::DataType,
    n_rows: u64,
    f: impl FnOnce(&ColumnChunk<'_>) -> R,
) -> Result<R, ReadError> {
    let bytes = file.blob(r)?;
    let chunk = ColumnChunk::open(&bytes, dtype).map_err(|source| ReadError::Format {
        file: file.path.clone(),
        source,
    })?;
    if chunk.len() as u64 != n_rows {
        return Err(corrupted(
            &file.path,
            "column chunk row count differs from its row group",
        ));
    }
    Ok(f(&chunk))
}
