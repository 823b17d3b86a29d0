//! Bulk import: CSV files -> a published database.
//!
//! The path of a byte (see ARCHITECTURE.md for the picture):
//! 1. [`decide`]: how the files are read (delimiter, quote, ids), settled once for every
//!    front end; `config`: what the import is given and reports;
//! 2. `read`: a reader thread fills windows and cuts them into chunks of whole records
//!    (parallel quote-parity split); `headers`: each group's header and column types;
//! 3. [`parse`]: chunks parse in parallel into typed column batches (no per-row allocation);
//! 4. `nodes`, sequentially per batch: ids into the [`idmap`] (or sorted on disk,
//!    [`spill`]), errors to the rejects file or to a stop, rows into the `rowgroup`, row
//!    groups encoded (in parallel per column) and written;
//! 5. `rels` and [`edges`]: relationships resolve their endpoints in parallel, land in an
//!    edge store (spilling under budget pressure) and become CSR by partitioned counting
//!    sort;
//! 6. this module: the orchestration (an import or an append, its phases, its budget),
//!    and `quiver_storage::write::Staging::publish` switches the database atomically.
//!
//! Memory: one [`MemoryBudget`] covers the row group being built, the id maps, the edge
//! store, degree arrays and CSR build buffers; input windows and in-flight batches are the
//! fixed overhead (sized from the budget, a few windows of at most 8 MiB).

pub mod decide;
pub mod edges;
pub mod error;
pub mod idmap;
pub mod parse;
pub mod progress;
pub mod spill;
mod strtable;

mod config;
mod headers;
mod nodes;
mod read;
mod rels;
mod rowgroup;

pub use config::{
    default_budget_bytes, ImportConfig, ImportSummary, InputGroup, NodeIds, PhaseStats,
};
use headers::*;
pub use headers::{describe, plain_ids_are_integers, sources_have_integer_ids};
use nodes::*;
use read::*;
use rels::*;
use rowgroup::*;

pub use error::ImportError;
pub use progress::{NoProgress, Phase, Progress};

use crate::edges::EdgeStore;
use crate::error::IoAt;
use crate::idmap::{IdMapWithGrant, Key};
use crate::parse::{parse_chunk, parse_typed, Batch, Endpoints, Plan, Reason, Slot};
use quiver_common::limits::{CSV_CHUNK_BYTES, CSV_WINDOW_BYTES, NODES_MAX, ROW_GROUP_ROWS_MAX};
use quiver_common::types::{DataType, ScalarType};
use quiver_common::{Grant, MemoryBudget};
use quiver_csv::header::{Header, HeaderKind, Role};
use quiver_csv::reader::{spawn_reader, Msg, RecordSource, Window};
use quiver_csv::rejects::Rejects;
use quiver_csv::value::DateOrder;
use quiver_csv::Dialect;
use quiver_format::column::ColumnBuilder;
use quiver_storage::manifest::{
    IdSpaceMeta, IdType, Manifest, NodeTableMeta, PropertyMeta, RelTypeMeta, SegmentMeta,
};
use quiver_storage::write::{write_id_index, CsrWriter, Staging, TableWriter};
use rayon::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

struct Space {
    name: Option<String>,
    map: IdMapWithGrant,
    /// Set once the space's ids no longer fit in memory: they are sorted on disk, and
    /// `map` is empty.
    spilled: Option<spill::SpaceFile>,
    /// An append: the position of this space among the database's id spaces.
    base: Option<usize>,
}

impl Space {
    fn n_ids(&self) -> u64 {
        self.spilled.as_ref().map_or(self.map.len(), |f| f.n_ids)
    }
}

struct RelState {
    name: String,
    store: EdgeStore,
    columns: Vec<PropertyMeta>,
    props: Option<(TableWriter, Vec<ColumnBuilder>)>,
    start_space: usize,
    end_space: usize,
}

struct Ctx<'a> {
    cfg: &'a ImportConfig,
    /// An append: the database the new nodes and relationships are added to.
    base: Option<&'a quiver_storage::Database>,
    budget: MemoryBudget,
    progress: &'a dyn Progress,
    rejects: Rejects,
    pool: Arc<rayon::ThreadPool>,
    cancel: Arc<AtomicBool>,
    rows_read: u64,
    bytes_read: u64,
    window_bytes: usize,
    chunk_bytes: usize,
    row_groups: u64,
    /// Wall time per phase, in order, and each finished phase's peak RSS.
    phases: Vec<(Phase, Instant)>,
    phase_peaks: Vec<u64>,
    /// See [`ImportSummary::inferred_headers`].
    inferred_headers: Vec<(PathBuf, String)>,
}

impl Ctx<'_> {
    fn phase(&mut self, phase: Phase, total: u64) {
        self.end_phase();
        self.phases.push((phase, Instant::now()));
        self.progress.phase(phase, total);
    }

    /// Records the peak RSS so far at the end of a phase. (Not reset between phases:
    /// resetting VmHWM would also reset what `wait4` reports to whoever measures us.)
    fn end_phase(&mut self) {
        if self.phase_peaks.len() < self.phases.len() {
            self.phase_peaks
                .push(quiver_common::size::peak_rss_bytes().unwrap_or(0));
        }
    }

    fn phase_stats(&self) -> Vec<PhaseStats> {
        let mut v = Vec::new();
        for (i, (p, t)) in self.phases.iter().enumerate() {
            let end = self.phases.get(i + 1).map_or_else(Instant::now, |n| n.1);
            v.push(PhaseStats {
                name: p.name().to_string(),
                seconds: (end - *t).as_secs_f64(),
                peak_rss_bytes: self.phase_peaks.get(i).copied().unwrap_or(0),
            });
        }
        v
    }
}

/// Runs an import. On error nothing is published and the staging area is removed.
pub fn import(cfg: &ImportConfig, progress: &dyn Progress) -> Result<ImportSummary, ImportError> {
    import_with(cfg, None, None, progress).map(|(s, _)| s)
}

/// Adds the nodes and relationships of `cfg`'s files to the database `base` (open on its
/// newest generation, with no pending writes: the caller checkpoints first and holds
/// the database's writer lock). The result is a new generation that keeps every
/// segment of `base` and adds:
/// - a node table per nodes group, numbered after the existing nodes;
/// - relationship segments, to existing types or new ones; an endpoint is looked up
///   among this append's ids first, then in the database's id index;
/// - each id space's index rewritten with the new ids merged in, so that later
///   appends and queries find them.
///
/// An id that the database already has is a duplicate, rejected like any bad row. On
/// error nothing is published: the database stays as it was.
pub fn append(
    cfg: &ImportConfig,
    base: &quiver_storage::Database,
    progress: &dyn Progress,
) -> Result<ImportSummary, ImportError> {
    import_with(cfg, Some(base), None, progress).map(|(s, _)| s)
}

/// [`append`] without the publish: the segments are written into `staging` (a private
/// folder, see [`Staging::private`]) and the whole manifest the append would publish is
/// returned with the summary, for a live database to take the new parts into its next
/// generation (`quiver_engine`'s `Store::publish_append`).
pub fn append_staged(
    cfg: &ImportConfig,
    base: &quiver_storage::Database,
    staging: &Staging,
    progress: &dyn Progress,
) -> Result<(ImportSummary, Manifest), ImportError> {
    import_with(cfg, Some(base), Some(staging), progress)
}

fn import_with(
    cfg: &ImportConfig,
    base: Option<&quiver_storage::Database>,
    private: Option<&Staging>,
    progress: &dyn Progress,
) -> Result<(ImportSummary, Manifest), ImportError> {
    let start = Instant::now();
    // An append may add relationships alone, between nodes the database has.
    if cfg.nodes.is_empty() && (base.is_none() || cfg.relationships.is_empty()) {
        return Err(ImportError::Usage(
            "nothing to import: give at least one --nodes group".into(),
        ));
    }
    if cfg.memory_budget_bytes < quiver_common::limits::IMPORT_BUDGET_BYTES_MIN {
        return Err(ImportError::Usage(format!(
            "--memory-budget {} is below the minimum of {}",
            quiver_common::size::human_bytes(cfg.memory_budget_bytes),
            quiver_common::size::human_bytes(quiver_common::limits::IMPORT_BUDGET_BYTES_MIN)
        )));
    }
    for g in cfg.nodes.iter().chain(&cfg.relationships) {
        if g.source.is_some() {
            continue;
        }
        for f in &g.files {
            // Regular files, or pipes and devices (`<(zcat x.gz)`, `/dev/stdin`): every
            // input is read once, front to back.
            match std::fs::metadata(f) {
                Err(_) => return Err(ImportError::Usage(format!("{}: no such file", f.display()))),
                Ok(m) if m.is_dir() => {
                    return Err(ImportError::Usage(format!(
                        "{}: is a folder; give the CSV files in it (comma-separated)",
                        f.display()
                    )))
                }
                Ok(_) => {}
            }
        }
    }
    let threads = cfg.threads.max(1);
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("quiver-import-{i}"))
            .build()
            .map_err(|e| ImportError::Usage(format!("cannot start {threads} threads: {e}")))?,
    );
    // Input windows are fixed overhead outside the budget: about five are alive at once
    // (reader, two channels, parser, sequential stage), each of at most 8 MiB and of
    // 1/128 of the budget below 1 GiB. At 1/32, social scale 4 at 256 MiB peaked at
    // 362 MiB, 40 MiB of it windows; at 1/128 it peaks at 318 MiB, as fast.
    let window_bytes = ((cfg.memory_budget_bytes / 128) as usize).clamp(1 << 20, CSV_WINDOW_BYTES);
    let chunk_bytes = (window_bytes / (threads * 2)).clamp(64 << 10, CSV_CHUNK_BYTES);
    let rejects_path = cfg.rejects.clone().unwrap_or_else(|| {
        let mut p = cfg.db.clone().into_os_string();
        p.push(".rejects.csv");
        PathBuf::from(p)
    });
    let mut ctx = Ctx {
        cfg,
        base,
        budget: MemoryBudget::new(cfg.memory_budget_bytes),
        progress,
        rejects: Rejects::new(rejects_path),
        pool: pool.clone(),
        cancel: cfg.cancel.clone(),
        rows_read: 0,
        bytes_read: 0,
        window_bytes,
        chunk_bytes,
        row_groups: 0,
        phases: Vec::new(),
        phase_peaks: Vec::new(),
        inferred_headers: Vec::new(),
    };
    let mut own = match (private, base) {
        (Some(_), _) => None,
        (None, Some(_)) => Some(Staging::begin_held(&cfg.db)?),
        (None, None) => Some(Staging::begin(&cfg.db, cfg.overwrite)?),
    };
    let Some(staging) = private.or(own.as_ref()) else {
        return Err(ImportError::Usage("no staging area to write into".into()));
    };
    let temp_parent = match &cfg.temp_dir {
        Some(t) => t.clone(),
        None => staging.file("").0,
    };
    std::fs::create_dir_all(&temp_parent).at(&temp_parent)?;
    let temp = tempfile::Builder::new()
        .prefix(".quiver-spill-")
        .tempdir_in(&temp_parent)
        .at(&temp_parent)?;

    // The sequential stages run on this thread; parallel sections enter the pool.
    let result = run(&mut ctx, staging, temp.path());
    let (manifest, mut summary) = match result {
        Ok(x) => x,
        Err(e) => {
            ctx.cancel.store(true, std::sync::atomic::Ordering::Relaxed);
            let _ = ctx.rejects.finish();
            return Err(e);
        }
    };
    ctx.rejects.finish()?;
    drop(temp);
    if ctx.cancel.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(ImportError::Interrupted);
    }
    summary.db = match own.take() {
        Some(staging) => {
            ctx.phase(Phase::Publish, 1);
            let db = staging.publish(&manifest)?;
            ctx.progress.advance(1, 0);
            ctx.progress.finish();
            db
        }
        // The caller publishes (and reports it).
        None => cfg.db.clone(),
    };
    summary.rows_read = ctx.rows_read;
    summary.rows_rejected = ctx.rejects.count;
    summary.rejects_path = (ctx.rejects.count > 0).then(|| ctx.rejects.path().to_path_buf());
    summary.bytes_read = ctx.bytes_read;
    summary.seconds = start.elapsed().as_secs_f64();
    summary.budget_bytes = cfg.memory_budget_bytes;
    summary.budget_peak_bytes = ctx.budget.peak_bytes();
    summary.peak_rss_bytes = quiver_common::size::peak_rss_bytes().unwrap_or(0);
    summary.row_groups = ctx.row_groups;
    ctx.end_phase();
    summary.phases = ctx.phase_stats();
    summary.peak_rss_bytes = summary
        .phases
        .iter()
        .map(|p| p.peak_rss_bytes)
        .max()
        .unwrap_or(0);
    summary.db_bytes = manifest_bytes(&manifest);
    Ok((summary, manifest))
}

fn manifest_bytes(m: &Manifest) -> u64 {
    let t: u64 = m
        .node_tables
        .iter()
        .flat_map(|t| &t.segments)
        .map(|s| s.bytes)
        .sum();
    let r: u64 = m
        .rel_types
        .iter()
        .flat_map(|r| &r.segments)
        .map(|s| s.files().map(|f| f.bytes).sum::<u64>())
        .sum();
    let i: u64 = m.id_spaces.iter().map(|s| s.index.bytes).sum();
    t + r + i
}

fn files_bytes(groups: &[InputGroup]) -> u64 {
    groups
        .iter()
        .map(|g| match &g.source {
            Some(s) => s.bytes_hint(),
            None => g
                .files
                .iter()
                .map(|f| std::fs::metadata(f).map_or(0, |m| m.len()))
                .sum(),
        })
        .sum()
}

fn run(
    ctx: &mut Ctx<'_>,
    staging: &Staging,
    temp: &Path,
) -> Result<(Manifest, ImportSummary), ImportError> {
    let cfg = ctx.cfg;
    let base = ctx.base.map(|b| b.manifest());
    // An append starts from the database's labels, id spaces and node count.
    let mut spaces: Vec<Space> = base.map_or_else(Vec::new, |m| {
        m.id_spaces
            .iter()
            .enumerate()
            .map(|(i, s)| Space {
                name: s.name.clone(),
                map: IdMapWithGrant::new(s.id_type == IdType::Integer, &ctx.budget)
                    .strings_only(cfg.string_ids_as_strings),
                spilled: None,
                base: Some(i),
            })
            .collect()
    });
    if let Some(s) = base.and_then(|m| m.id_spaces.iter().find(|s| s.id_type != cfg.id_type)) {
        return Err(ImportError::Usage(format!(
            "the database's ids are {} ones; append with --id-type {}",
            s.id_type.name(),
            s.id_type.name()
        )));
    }
    let mut labels: Vec<String> = base.map_or_else(Vec::new, |m| m.labels.clone());
    let base_nodes = base.map_or(0, |m| m.n_nodes);
    let mut tables: Vec<NodeTableMeta> = Vec::new();
    let mut n_nodes = base_nodes;
    ctx.phase(Phase::Nodes, files_bytes(&cfg.nodes));
    let mut done_before = 0u64;
    for (gi, group) in cfg.nodes.iter().enumerate() {
        let t = import_nodes(
            ctx,
            group,
            gi,
            staging,
            &mut spaces,
            &mut labels,
            n_nodes,
            &mut done_before,
            temp,
        )?;
        n_nodes += t.n_rows;
        tables.push(t);
    }
    // An append into a live database: its nodes take the range it hands out now, which
    // may start past ids it gave to transactions meanwhile (shifting what was read).
    let n_new = n_nodes - base_nodes;
    let first = match (&cfg.node_ids, base) {
        (Some(f), Some(_)) => (f.0)(n_new).map_err(ImportError::Usage)?,
        _ => base_nodes,
    };
    let shift = match first.checked_sub(base_nodes) {
        Some(d) if first + n_new <= u64::from(u32::MAX) => d as u32,
        _ => {
            return Err(ImportError::Usage(format!(
                "no room for {n_new} more nodes in this database (their ids would start at {first})"
            )))
        }
    };
    if shift > 0 {
        if spaces.iter().any(|s| s.spilled.is_some()) {
            return Err(ImportError::Usage(
                "an append into a database that is in use cannot spill its ids; give it a larger --memory-budget".into(),
            ));
        }
        for t in tables.iter_mut() {
            t.first_node += u64::from(shift);
        }
        n_nodes = first + n_new;
    }
    if let Some(m) = base {
        // Table names stay unique across appends.
        for t in tables.iter_mut() {
            if m.node_tables.iter().any(|x| x.name == t.name) {
                t.name = format!("{}-g{}", t.name, staging.generation());
            }
        }
    }

    for sp in spaces.iter_mut() {
        sp.map.seal();
    }
    // Persist the id indexes (the maps stay in memory for the relationships).
    let total_ids: u64 = spaces.iter().map(Space::n_ids).sum();
    let spilled_ids: u64 = spaces
        .iter()
        .filter_map(|s| s.spilled.as_ref())
        .map(|f| f.n_ids)
        .sum();
    ctx.phase(Phase::IdIndex, total_ids);
    let mut id_spaces = Vec::new();
    for (si, s) in spaces.iter().enumerate() {
        if let (Some(b), Some(m)) = (s.base, base) {
            if s.map.is_empty() {
                id_spaces.push(m.id_spaces[b].clone());
                continue;
            }
        }
        if let Some(f) = &s.spilled {
            let seg = quiver_storage::write::write_id_index_streaming(
                staging,
                &format!("ids-{si:04}.seg"),
                cfg.id_type,
                f.n_ids,
                f.key_bytes,
                n_nodes,
                &mut f.ids(cfg.id_type == IdType::Integer),
            )?;
            ctx.progress.advance(f.n_ids, 0);
            id_spaces.push(IdSpaceMeta {
                name: s.name.clone(),
                id_type: cfg.id_type,
                n_ids: f.n_ids,
                index: seg,
            });
            continue;
        }
        let (keys, mut nodes, grant) = s.map.sorted(&ctx.budget)?;
        if shift > 0 {
            for n in nodes.iter_mut() {
                *n += shift;
            }
        }
        let name = format!("ids-{si:04}.seg");
        let (seg, n_ids) = match (s.base, ctx.base) {
            // An append: the database's index and the new ids (no key is in both, the
            // append rejected those as duplicates), merged as they are written.
            (Some(b), Some(db)) => {
                let integer = cfg.id_type == IdType::Integer;
                let new = |j: usize| {
                    let k = if integer {
                        quiver_storage::IdKey::Int(keys.i64_values()[j])
                    } else {
                        quiver_storage::IdKey::Str(keys.bytes_at(j))
                    };
                    (k, nodes[j])
                };
                quiver_storage::write::write_id_index_merged(
                    staging,
                    &name,
                    db,
                    b,
                    nodes.len(),
                    &new,
                    n_nodes,
                )?
            }
            _ => (
                write_id_index(staging, &name, cfg.id_type, &keys, &nodes, n_nodes)?,
                nodes.len() as u64,
            ),
        };
        drop((keys, nodes, grant));
        ctx.progress.advance(s.map.len(), 0);
        id_spaces.push(IdSpaceMeta {
            name: s.name.clone(),
            id_type: cfg.id_type,
            n_ids,
            index: seg,
        });
    }

    // Relationships.
    let mut rels: Vec<RelState> = Vec::new();
    ctx.phase(Phase::Relationships, files_bytes(&cfg.relationships));
    let mut done_before = 0u64;
    for group in &cfg.relationships {
        import_rels(
            ctx,
            group,
            staging,
            temp,
            &spaces,
            &mut rels,
            (n_nodes, shift),
            &mut done_before,
        )?;
    }
    drop(spaces);

    let total_csr: u64 = rels.iter().map(|r| r.store.len() * 2).sum();
    ctx.phase(Phase::Csr, total_csr);
    let mut rel_metas = Vec::new();
    let mut spilled = 0;
    let mut csr_done_before = 0u64;
    for (ri, r) in rels.iter_mut().enumerate() {
        if ctx.cancel.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(ImportError::Interrupted);
        }
        let props = match r.props.take() {
            Some((mut w, builders)) => {
                if builders.first().is_some_and(|b| !b.is_empty()) {
                    ctx.pool.install(|| w.write_row_group(&builders))?;
                    ctx.row_groups += 1;
                }
                drop(builders);
                Some(w.finish()?)
            }
            None => None,
        };
        let has_props = props.is_some();
        let n_edges = r.store.len();
        // The degree counts, then the CSR builds, need room. Blocks the input left in
        // memory save a write and a read of the spill file, but only while the builds
        // still fit in a few passes: each pass reads every edge, and with the blocks
        // resident a small budget left the builds ~3 MiB, 46 passes per direction on the
        // social graph at 256 MiB (1.2-2.4 s; 0.4 s after spilling the blocks).
        r.store.make_room(
            &ctx.budget,
            n_nodes * 8 + n_edges * edges::csr_entry_bytes(has_props),
        )?;
        r.store.finish_input()?;
        // Counted after `make_room`, which may spill what the input left in memory.
        spilled += r.store.spilled_edges();
        let (out_deg, in_deg, _deg_grant) = ctx.pool.install(|| r.store.degrees(&ctx.budget))?;
        let sorted = r.store.sorted;
        let out_w = CsrWriter::create(
            staging,
            &format!("rel-{ri:04}.out.seg"),
            &out_deg,
            n_edges,
            has_props && !sorted,
        )?;
        let in_w = CsrWriter::create(
            staging,
            &format!("rel-{ri:04}.in.seg"),
            &in_deg,
            n_edges,
            has_props,
        )?;
        // Both directions build side by side, each with half of what is free; input
        // sorted by source streams into the forward CSR, and the other takes it all.
        let in_share = if sorted { (1, 1) } else { (1, 2) };
        let done = std::sync::atomic::AtomicU64::new(0);
        let progress = ctx.progress;
        let advance = |m: u64| {
            let d = done.fetch_add(m, std::sync::atomic::Ordering::Relaxed) + m;
            progress.advance(csr_done_before + d, 0);
        };
        let (store, budget) = (&r.store, &ctx.budget);
        let (out, inc) = ctx.pool.install(|| {
            rayon::join(
                || {
                    store.build_csr(
                        true,
                        has_props && !sorted,
                        &out_deg,
                        out_w,
                        budget,
                        (1, 2),
                        &advance,
                    )
                },
                || store.build_csr(false, has_props, &in_deg, in_w, budget, in_share, &advance),
            )
        });
        let (out, inc) = (out?, inc?);
        csr_done_before += 2 * n_edges;
        rel_metas.push(RelTypeMeta {
            name: r.name.clone(),
            n_edges,
            columns: r.columns.clone(),
            segments: vec![quiver_storage::manifest::RelSegmentMeta::new(
                n_edges, out, inc, props, None,
            )],
            start_space: Some(r.start_space),
            end_space: Some(r.end_space),
            patches: Vec::new(),
        });
    }
    let summary = ImportSummary {
        nodes_by_label: labels
            .iter()
            .enumerate()
            .map(|(li, l)| {
                let n = tables
                    .iter()
                    .filter(|t| t.labels.contains(&(li as u32)))
                    .map(|t| t.n_rows)
                    .sum();
                (l.clone(), n)
            })
            .collect(),
        rels_by_type: rel_metas
            .iter()
            .map(|r| (r.name.clone(), r.n_edges))
            .collect(),
        n_nodes: n_new,
        n_rels: rel_metas.iter().map(|r| r.n_edges).sum(),
        spilled_edges: spilled,
        spilled_ids,
        inferred_headers: std::mem::take(&mut ctx.inferred_headers),
        ..Default::default()
    };
    let manifest = match base {
        None => Manifest {
            format_version: quiver_format::FORMAT_VERSION,
            generation: staging.generation(),
            written_by: format!("quiver {}", env!("CARGO_PKG_VERSION")),
            n_nodes,
            labels,
            id_spaces,
            node_tables: tables,
            rel_types: rel_metas,
            indexes: Vec::new(),
            base_ops: None,
            log: None,
            constraints: Vec::new(),
            vector_indexes: Vec::new(),
            fulltext_indexes: Vec::new(),
        },
        Some(m) => {
            // Everything the database had stays; its declared indexes are rebuilt over
            // the new tables when the database next opens for writing.
            let mut m = m.clone();
            m.pin_log();
            m.generation = staging.generation();
            m.written_by = format!("quiver {}", env!("CARGO_PKG_VERSION"));
            m.n_nodes = n_nodes;
            m.labels = labels;
            m.id_spaces = id_spaces;
            m.node_tables.extend(tables);
            for r in rel_metas {
                m.add_rel_segments(r).map_err(ImportError::Usage)?;
            }
            m
        }
    };
    Ok((manifest, summary))
}

/// Handles one bad row: stop (default) or reject (with --skip-bad-rows).
fn bad_row(
    ctx: &mut Ctx<'_>,
    file: &Path,
    line: u64,
    column: u64,
    reason: Reason,
    message: &str,
    raw: &[u8],
) -> Result<(), ImportError> {
    if !ctx.cfg.skip_bad_rows {
        return Err(ImportError::Input {
            file: file.to_path_buf(),
            line,
            column,
            message: message.to_string(),
        });
    }
    ctx.rejects
        .write(file, line, column, reason.name(), message, raw)?;
    if let Some(t) = ctx.cfg.bad_tolerance {
        if ctx.rejects.count > t {
            return Err(ImportError::TooManyBadRows {
                rejected: ctx.rejects.count,
                tolerance: t,
                rejects: ctx.rejects.path().to_path_buf(),
            });
        }
    }
    Ok(())
}

fn space_index(
    spaces: &mut Vec<Space>,
    name: &Option<String>,
    integer: bool,
    strings_only: bool,
    budget: &MemoryBudget,
) -> usize {
    match spaces.iter().position(|s| &s.name == name) {
        Some(i) => i,
        None => {
            spaces.push(Space {
                name: name.clone(),
                map: IdMapWithGrant::new(integer, budget).strings_only(strings_only),
                spilled: None,
                base: None,
            });
            spaces.len() - 1
        }
    }
}

fn label_index(labels: &mut Vec<String>, l: &str) -> Result<u32, ImportError> {
    if let Some(i) = labels.iter().position(|x| x == l) {
        return Ok(i as u32);
    }
    if labels.len() >= quiver_common::limits::LABELS_MAX {
        return Err(ImportError::Usage(format!(
            "more than {} labels",
            quiver_common::limits::LABELS_MAX
        )));
    }
    labels.push(l.to_string());
    Ok(labels.len() as u32 - 1)
}
