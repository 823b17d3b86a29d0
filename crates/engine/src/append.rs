//! A bulk append into a live database (`quiver import --append` while the database is
//! served): the import writes its segments into a private folder beside the running
//! database, against a snapshot of it; a checkpoint then takes them into its next
//! generation, the same publish step as a bulk write's (see [`crate::bulk`]). This module
//! holds what the append staged ([`Prebuilt`], [`open_staged`]); the publish is
//! `Store::publish_append`, a checkpoint ([`crate::checkpoint`]).
//!
//! The append's nodes take an id range the store hands out once their count is known
//! ([`Store::reserve_nodes`]); transactions that created nodes meanwhile hold the ids
//! below it and after it. The publishing checkpoint writes the delta's created nodes
//! around the range: a table below it, the append's tables, a table after it.
//! Relationships the append adds to existing types take edge ids after the delta's,
//! as a bulk write's do; a transaction that created one of the same type before the
//! publish fails retryably at its commit.

use crate::error::EngineError;
use quiver_storage::manifest::{IdSpaceMeta, Manifest, NodeTableMeta, RelTypeMeta, SegmentMeta};
use quiver_storage::write::Staging;
use quiver_storage::{Database, OpenMode, WriteError};
use std::path::Path;

/// What an append adds to its base generation, staged and ready to be taken in.
#[derive(Debug, Clone)]
pub struct Prebuilt {
    /// The first id of the append's nodes (what [`Store::reserve_nodes`] gave).
    pub first_node: u64,
    pub n_nodes: u64,
    /// The append's label list: its tables' label numbers index it.
    pub labels: Vec<String>,
    pub node_tables: Vec<NodeTableMeta>,
    /// Per relationship type the append wrote: its columns and spaces, with the new
    /// segments only.
    pub rel_types: Vec<RelTypeMeta>,
    /// Id spaces whose index the append rewrote (whole: the base's ids and the new ones).
    pub id_spaces: Vec<(usize, IdSpaceMeta)>,
}

impl Prebuilt {
    /// The parts of `appended` (the manifest an append over `base` would publish) that
    /// the append added.
    pub fn diff(base: &Manifest, appended: &Manifest, first_node: u64) -> Prebuilt {
        let node_tables =
            appended.node_tables[base.node_tables.len().min(appended.node_tables.len())..].to_vec();
        let n_nodes = node_tables.iter().map(|t| t.n_rows).sum();
        let mut rel_types = Vec::new();
        for r in &appended.rel_types {
            let had = base
                .rel_types
                .iter()
                .find(|b| b.name == r.name)
                .map_or(0, |b| b.segments.len());
            let segments = r.segments[had.min(r.segments.len())..].to_vec();
            if segments.is_empty() {
                continue;
            }
            rel_types.push(RelTypeMeta {
                n_edges: segments.iter().map(|s| s.n_edges).sum(),
                segments,
                patches: Vec::new(),
                ..r.clone()
            });
        }
        let id_spaces = appended
            .id_spaces
            .iter()
            .enumerate()
            .filter(|(i, s)| {
                base.id_spaces
                    .get(*i)
                    .is_none_or(|b| b.index.file != s.index.file)
            })
            .map(|(i, s)| (i, s.clone()))
            .collect();
        Prebuilt {
            first_node,
            n_nodes,
            labels: appended.labels.clone(),
            node_tables,
            rel_types,
            id_spaces,
        }
    }

    /// Moves every file the parts name (relative to the database `dir`, in the private
    /// folder) into `staging` (names prefixed `append-`), and points the parts at them.
    pub(crate) fn take_files(&mut self, dir: &Path, staging: &Staging) -> Result<(), EngineError> {
        let mut segs: Vec<&mut SegmentMeta> = Vec::new();
        for t in &mut self.node_tables {
            segs.extend(t.segments.iter_mut());
        }
        for r in &mut self.rel_types {
            for s in &mut r.segments {
                segs.extend(s.files_mut());
            }
        }
        for (_, s) in &mut self.id_spaces {
            segs.push(&mut s.index);
        }
        for seg in segs {
            let name = Path::new(&seg.file)
                .file_name()
                .map(|n| n.to_string_lossy().to_string())
                .unwrap_or_default();
            let (path, rel) = staging.file(&format!("append-{name}"));
            let from = dir.join(&seg.file);
            quiver_storage::fsio::rename(&from, &path)
                .map_err(|source| WriteError::Io { path: from, source })?;
            seg.file = rel;
        }
        Ok(())
    }
}

/// Opens `dir`'s files as `m` names them (a generation not published yet).
pub fn open_staged(dir: &Path, m: Manifest) -> Result<Database, EngineError> {
    let at = dir.join("(append)");
    Ok(Database::with_manifest(dir, m, OpenMode::Mapped, &at)?)
}
