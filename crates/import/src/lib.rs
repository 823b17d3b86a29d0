//! Bulk import: CSV files -> a published database.
//!
//! The path of a byte (see ARCHITECTURE.md for the picture):
//! 1. [`input`]: a reader thread fills windows and cuts them into chunks of whole records
//!    (parallel quote-parity split);
//! 2. [`parse`]: chunks parse in parallel into typed column batches (no per-row allocation);
//! 3. this module, sequentially per batch: ids into the [`idmap`], errors to the rejects
//!    file or to a stop, rows into the row group, row groups encoded (in parallel per
//!    column) and written;
//! 4. [`edges`]: relationships resolve their endpoints in parallel, land in an edge store
//!    (spilling under budget pressure) and become CSR by partitioned counting sort;
//! 5. `quiver_storage::write::Staging::publish` switches the database atomically.
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

/// Files imported together: `--nodes User=a.csv,b.csv` or `--relationships FOLLOWS=f.csv`.
#[derive(Clone)]
pub struct InputGroup {
    /// Labels (`User` or `User:Person`) for nodes, the type for relationships.
    pub spec: Option<String>,
    /// The CSV files, or the names a [`RecordSource`] is known by in messages.
    pub files: Vec<PathBuf>,
    /// Input that is read as CSV but is not a CSV file (Parquet files, an Arrow stream:
    /// `quiver-arrow`); `files` then only names it.
    pub source: Option<Arc<dyn RecordSource>>,
}

impl std::fmt::Debug for InputGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputGroup")
            .field("spec", &self.spec)
            .field("files", &self.files)
            .field("source", &self.source.is_some())
            .finish()
    }
}

impl InputGroup {
    /// Parses `Label=file1,file2` or `file1,file2`.
    pub fn parse(text: &str) -> Result<InputGroup, String> {
        let (spec, files) = match text.split_once('=') {
            Some((s, f)) => (Some(s.trim().to_string()).filter(|s| !s.is_empty()), f),
            None => (None, text),
        };
        let files: Vec<PathBuf> = files
            .split(',')
            .filter(|f| !f.is_empty())
            .map(PathBuf::from)
            .collect();
        if files.is_empty() {
            return Err(format!(
                "'{text}' names no files; write e.g. User=users.csv"
            ));
        }
        Ok(InputGroup {
            spec,
            files,
            source: None,
        })
    }
}

#[derive(Debug, Clone)]
pub struct ImportConfig {
    pub db: PathBuf,
    pub nodes: Vec<InputGroup>,
    pub relationships: Vec<InputGroup>,
    pub dialect: Dialect,
    pub id_type: IdType,
    pub memory_budget_bytes: u64,
    pub threads: usize,
    /// Where spill files go (default: beside the database, on the same disk).
    pub temp_dir: Option<PathBuf>,
    pub skip_bad_rows: bool,
    /// Most rows that may be skipped before the import stops (`None`: unlimited).
    pub bad_tolerance: Option<u64>,
    pub rejects: Option<PathBuf>,
    pub overwrite: bool,
    pub no_edge_properties: bool,
    pub infer_types: bool,
    /// Field values read as "no value" in property columns, besides the empty field
    /// (real exports write `NA`, `\N` or `NULL`).
    pub null_markers: Vec<Vec<u8>>,
    /// Sort every id space on disk from the start, as when the ids do not fit the
    /// budget (`--spill-ids`; tests use it to compare both paths on the same input).
    pub spill_ids: bool,
    /// Hold string ids as strings from the start, even while they are all canonical
    /// integers (which the id map otherwise resolves as integers; tests use it to compare
    /// both representations on the same input).
    pub string_ids_as_strings: bool,
    /// Columns of plain headers named by the user: `(label, column)` for node ids,
    /// `(type, column)` for relationship endpoints (`--id-column`, `--start-column`,
    /// `--end-column`).
    pub id_columns: Vec<(String, String)>,
    pub start_columns: Vec<(String, String)>,
    pub end_columns: Vec<(String, String)>,
    /// Set (e.g. by a Ctrl-C handler) to stop the import: it ends with
    /// `ImportError::Interrupted` within a window's time and removes what it staged.
    pub cancel: Arc<AtomicBool>,
    /// An append into a live database: where its new nodes' ids start, asked once the
    /// nodes are read (with their count), so that the range is taken from the ids the
    /// database hands out meanwhile. `None`: right after the database's nodes.
    pub node_ids: Option<NodeIds>,
}

/// See [`ImportConfig::node_ids`]: the first id of `n` new nodes, or why none can be had.
#[derive(Clone)]
pub struct NodeIds(pub Arc<dyn Fn(u64) -> Result<u64, String> + Send + Sync>);

impl std::fmt::Debug for NodeIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeIds")
    }
}

impl ImportConfig {
    /// The node groups, then the relationship groups, each with its header kind.
    fn groups(&self) -> impl Iterator<Item = (&InputGroup, HeaderKind)> {
        let nodes = self.nodes.iter().map(|g| (g, HeaderKind::Nodes));
        nodes.chain(
            self.relationships
                .iter()
                .map(|g| (g, HeaderKind::Relationships)),
        )
    }

    pub fn new(db: impl Into<PathBuf>) -> Self {
        ImportConfig {
            db: db.into(),
            nodes: Vec::new(),
            relationships: Vec::new(),
            dialect: Dialect::default(),
            id_type: IdType::String,
            memory_budget_bytes: default_budget_bytes(),
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            temp_dir: None,
            skip_bad_rows: false,
            bad_tolerance: None,
            rejects: None,
            overwrite: false,
            no_edge_properties: false,
            infer_types: false,
            null_markers: Vec::new(),
            spill_ids: false,
            string_ids_as_strings: false,
            id_columns: Vec::new(),
            start_columns: Vec::new(),
            end_columns: Vec::new(),
            cancel: Arc::new(AtomicBool::new(false)),
            node_ids: None,
        }
    }
}

/// Half of physical memory (see `limits::IMPORT_BUDGET_RAM_FRACTION`).
pub fn default_budget_bytes() -> u64 {
    let (n, d) = quiver_common::limits::IMPORT_BUDGET_RAM_FRACTION;
    quiver_common::size::physical_memory_bytes() / d * n
}

/// What an import did.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct ImportSummary {
    pub db: PathBuf,
    /// Files whose header had no annotation (a newcomer's file): the header they were
    /// read with, in Neo4j's convention (pasted as the file's first line, it pins it).
    pub inferred_headers: Vec<(PathBuf, String)>,
    pub nodes_by_label: Vec<(String, u64)>,
    pub rels_by_type: Vec<(String, u64)>,
    pub n_nodes: u64,
    pub n_rels: u64,
    /// Data records read (headers excluded) = imported + rejected.
    pub rows_read: u64,
    pub rows_rejected: u64,
    pub rejects_path: Option<PathBuf>,
    pub bytes_read: u64,
    pub seconds: f64,
    pub budget_bytes: u64,
    /// Most bytes the budget granted at once.
    pub budget_peak_bytes: u64,
    pub peak_rss_bytes: u64,
    pub db_bytes: u64,
    pub spilled_edges: u64,
    /// Ids resolved by sorting on disk, because their space did not fit the budget.
    pub spilled_ids: u64,
    pub row_groups: u64,
    /// Each phase (reading nodes, indexing ids, ...) in order.
    pub phases: Vec<PhaseStats>,
}

/// Wall time of one import phase and the peak resident memory up to its end.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct PhaseStats {
    pub name: String,
    pub seconds: f64,
    pub peak_rss_bytes: u64,
}

impl ImportSummary {
    pub fn rows_per_second(&self) -> f64 {
        self.rows_read as f64 / self.seconds.max(1e-9)
    }
}

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
        spilled += r.store.spilled_edges();
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

fn header_error(file: &Path, e: quiver_csv::header::HeaderError) -> ImportError {
    ImportError::Header {
        file: file.to_path_buf(),
        column: e.column,
        message: e.message,
    }
}

/// Receives the header message of a group.
fn receive_header(
    rx: &crossbeam_channel::Receiver<Msg>,
    first_file: &Path,
) -> Result<(Vec<Vec<u8>>, u64), ImportError> {
    match rx.recv() {
        Ok(Msg::Header { fields, lines }) => Ok((fields, lines)),
        Ok(Msg::Error(e)) => Err(e.into()),
        Ok(Msg::Window(_)) | Err(_) => Err(ImportError::Input {
            file: first_file.to_path_buf(),
            line: 0,
            column: 0,
            message: "the file is empty; expected a header line".into(),
        }),
    }
}

/// Starts the reader thread of a group.
fn start_reader(
    ctx: &Ctx<'_>,
    group: &InputGroup,
) -> (
    crossbeam_channel::Receiver<Msg>,
    crossbeam_channel::Sender<Vec<u8>>,
    std::thread::JoinHandle<()>,
) {
    spawn_reader(
        group.files.clone(),
        group.source.clone(),
        ctx.cfg.dialect,
        ctx.window_bytes,
        ctx.chunk_bytes,
        true,
        ctx.cancel.clone(),
        ctx.pool.clone(),
    )
}

/// Receives and parses the header of a group; returns it, the lines it spans, and
/// whether it had no annotation at all (then it is read by
/// [`quiver_csv::header::annotate_plain`]'s rules and its types are sniffed).
fn read_header(
    rx: &crossbeam_channel::Receiver<Msg>,
    cfg: &ImportConfig,
    group: &InputGroup,
    kind: HeaderKind,
) -> Result<(Header, u64, bool), ImportError> {
    let file0 = &group.files[0];
    let (fields, lines) = receive_header(rx, file0)?;
    let refs: Vec<&[u8]> = fields.iter().map(|f| f.as_slice()).collect();
    let (header, plain) = header_of(&refs, cfg, group, kind)?;
    Ok((header, lines, plain))
}

/// A group's header from its first record's fields (see [`read_header`]).
fn header_of(
    refs: &[&[u8]],
    cfg: &ImportConfig,
    group: &InputGroup,
    kind: HeaderKind,
) -> Result<(Header, bool), ImportError> {
    let file0 = &group.files[0];
    // The group's first label (nodes) or its type, and the columns named for it.
    let name = group
        .spec
        .as_deref()
        .and_then(|s| s.split(':').next())
        .map(str::trim);
    fn chosen<'c>(list: &'c [(String, String)], name: Option<&str>) -> Option<&'c str> {
        list.iter()
            .find(|(l, _)| Some(l.as_str()) == name)
            .map(|(_, c)| c.as_str())
    }
    let nodes = kind == HeaderKind::Nodes;
    let rules = quiver_csv::header::PlainRules {
        label: group.spec.as_deref(),
        need_id: !nodes || !cfg.relationships.is_empty(),
        id: chosen(&cfg.id_columns, name).filter(|_| nodes),
        start: chosen(&cfg.start_columns, name).filter(|_| !nodes),
        end: chosen(&cfg.end_columns, name).filter(|_| !nodes),
    };
    let plain = quiver_csv::header::annotate_plain(refs, kind, &rules)
        .map_err(|e| header_error(file0, e))?;
    if plain.is_none() && (rules.id.is_some() || rules.start.is_some() || rules.end.is_some()) {
        return Err(ImportError::Usage(format!(
            "{}: --id-column, --start-column and --end-column choose columns of headers without annotations; this header is annotated (mark the column :ID, :START_ID or :END_ID in it instead)",
            file0.display()
        )));
    }
    let header = match &plain {
        Some(p) => {
            let refs: Vec<&[u8]> = p.iter().map(|f| f.as_bytes()).collect();
            Header::parse(&refs, kind)
        }
        None => Header::parse(refs, kind),
    }
    .map_err(|e| header_error(file0, e))?;
    Ok((header, plain.is_some()))
}

/// Whether every group is a [`RecordSource`] whose id and endpoint columns are
/// integers by their schema (an Arrow or Parquet input with integer ids): then the
/// import is best run with integer ids (`--id-type integer`), so that `{id: 1}` finds
/// the node the frame's `1` made. A CSV group, or a string id column, says no.
pub fn sources_have_integer_ids(cfg: &ImportConfig) -> Result<bool, ImportError> {
    let mut any = false;
    for (group, kind) in cfg.groups() {
        let Some(src) = &group.source else {
            return Ok(false);
        };
        let names = src.column_names();
        let refs: Vec<&[u8]> = names.iter().map(|n| n.as_bytes()).collect();
        let (header, _) = header_of(&refs, cfg, group, kind)?;
        let types = src.column_types();
        for (i, c) in header.columns.iter().enumerate() {
            if matches!(
                c.role,
                Role::Id { .. } | Role::StartId { .. } | Role::EndId { .. }
            ) {
                any = true;
                if types.get(i).copied().flatten() != Some(DataType::Scalar(ScalarType::Long)) {
                    return Ok(false);
                }
            }
        }
    }
    Ok(any)
}

/// What an import would read each group's header as, without importing (`--dry-run`):
/// per group, its first file, the header in Neo4j's convention (with the types sniffed
/// for a plain header, or with `--infer-types`), and whether it was plain.
pub fn describe(cfg: &ImportConfig) -> Result<Vec<(PathBuf, String, bool)>, ImportError> {
    let mut out = Vec::new();
    for_each_sample(cfg, |group, header, plain, sniffed, _| {
        out.push((group.files[0].clone(), header_text(header, sniffed), plain));
        Ok(true)
    })?;
    Ok(out)
}

/// Calls `f` with each group's header, whether it was plain, the sniffed types and the
/// sampled data (its first window, when types are sniffed), reading no further; stops
/// when `f` answers false.
fn for_each_sample(
    cfg: &ImportConfig,
    mut f: impl FnMut(&InputGroup, &Header, bool, &Sniffed, Option<&[u8]>) -> Result<bool, ImportError>,
) -> Result<(), ImportError> {
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .map_err(|e| ImportError::Usage(format!("cannot start a thread: {e}")))?,
    );
    for (group, kind) in cfg.groups() {
        // Its own cancel flag: set to stop the reader once the sample is read.
        let stop = Arc::new(AtomicBool::new(false));
        let (rx, _recycle, handle) = spawn_reader(
            group.files.clone(),
            group.source.clone(),
            cfg.dialect,
            1 << 20,
            1 << 20,
            true,
            stop.clone(),
            pool.clone(),
        );
        let r = read_header(&rx, cfg, group, kind).and_then(|(header, _, plain)| {
            let (types, window) = sniff(&rx, cfg, group, &header, cfg.infer_types || plain)?;
            f(
                group,
                &header,
                plain,
                &types,
                window.as_ref().map(|w| w.data.as_slice()),
            )
        });
        stop.store(true, std::sync::atomic::Ordering::SeqCst);
        drop(rx);
        let _ = handle.join();
        if !r? {
            break;
        }
    }
    Ok(())
}

/// Whether every header is plain (no annotations) and every id, start and end column
/// holds only integers in canonical form in its sample: such files get integer ids
/// when `--id-type` is not given, so that `{id: 1}` finds the node a newcomer's `1`
/// made. Headers in Neo4j's convention keep its rule (string ids).
pub fn plain_ids_are_integers(cfg: &ImportConfig) -> Result<bool, ImportError> {
    // A pipe cannot be read twice: its sample would be taken from the import.
    let regular = |f: &PathBuf| std::fs::metadata(f).is_ok_and(|m| m.is_file());
    if cfg
        .groups()
        .any(|(g, _)| g.source.is_some() || !g.files.iter().all(regular))
    {
        return Ok(false);
    }
    let mut all = true;
    let mut any = false;
    // A file that cannot be read or parsed says nothing here: the import reports it.
    let _ = for_each_sample(cfg, |_, header, plain, _, data| {
        let Some(data) = data.filter(|_| plain) else {
            all = false;
            return Ok(false);
        };
        let ids: Vec<usize> = (0..header.columns.len())
            .filter(|&i| {
                matches!(
                    header.columns[i].role,
                    Role::Id { .. } | Role::StartId { .. } | Role::EndId { .. }
                )
            })
            .collect();
        any |= !ids.is_empty();
        let mut tok = quiver_csv::tokenize::Tokenizer::new(data, &cfg.dialect);
        let mut fields = quiver_csv::tokenize::Fields::default();
        let mut rows = 0;
        while let Ok(Some(_)) = tok.next_record(&mut fields) {
            if fields.len() != header.columns.len() {
                continue;
            }
            for &i in &ids {
                let v = fields.get(data, i);
                let leading_zero = v.len() > 1 && v[0] == b'0';
                if v.is_empty() || leading_zero || crate::idmap::canonical_int(v).is_none() {
                    all = false;
                    return Ok(false);
                }
            }
            rows += 1;
            if rows >= SNIFF_ROWS {
                break;
            }
        }
        Ok(true)
    })
    .map_err(|_| all = false);
    Ok(all && any)
}

/// Records a sniff reads at most.
const SNIFF_ROWS: usize = 10_000;

/// A header in Neo4j's convention with the sniffed types written in (what a plain
/// header was read as), and after it the dates not spelled as ISO 8601 (which the
/// convention cannot say), e.g. `(shipped_on: DD/MM/YYYY)`.
fn header_text(header: &Header, sniffed: &Sniffed) -> String {
    let cols = header
        .columns
        .iter()
        .zip(&sniffed.types)
        .map(|(c, t)| match (&c.role, t) {
            (Role::Property, Some(t)) => format!("{}:{}", c.name, t.name()),
            _ => c.raw.clone(),
        })
        .collect::<Vec<_>>()
        .join(",");
    let dates: Vec<String> = header
        .columns
        .iter()
        .zip(&sniffed.dates)
        .filter(|(_, d)| **d != DateOrder::Iso)
        .map(|(c, d)| format!("{}: {}", c.name, d.pattern()))
        .collect();
    if dates.is_empty() {
        cols
    } else {
        format!("{cols} (dates {})", dates.join(", "))
    }
}

/// The first window of a group's data and the types sniffed from it, when they are to
/// be sniffed (`--infer-types`, or a plain header); else no window and no types. A
/// [`RecordSource`] knows its columns' types (an Arrow schema): they are taken as they
/// are for every property column whose header names no type, and nothing is sniffed.
fn sniff(
    rx: &crossbeam_channel::Receiver<Msg>,
    cfg: &ImportConfig,
    group: &InputGroup,
    header: &Header,
    wanted: bool,
) -> Result<(Sniffed, Option<Window>), ImportError> {
    let n = header.columns.len();
    if let Some(src) = &group.source {
        let mut types = src.column_types();
        types.resize(n, None);
        for (t, c) in types.iter_mut().zip(&header.columns) {
            if c.role != Role::Property || c.raw.contains(':') {
                *t = None;
            }
        }
        let dates = vec![DateOrder::Iso; n];
        return Ok((Sniffed { types, dates }, None));
    }
    if !wanted {
        return Ok((Sniffed::none(n), None));
    }
    match rx.recv() {
        Ok(Msg::Window(w)) => {
            let t = infer_types(&w.data, &cfg.dialect, header, &cfg.null_markers);
            Ok((t, Some(w)))
        }
        Ok(Msg::Error(e)) => Err(e.into()),
        _ => Ok((Sniffed::none(n), None)),
    }
}

/// Infers the type of untyped columns from a sample of records (`--infer-types`), and
/// how each date column spells its dates (the first of [`DateOrder::SNIFFED`] that reads
/// every sampled value).
fn infer_types(
    data: &[u8],
    dialect: &Dialect,
    header: &Header,
    null_markers: &[Vec<u8>],
) -> Sniffed {
    let n = header.columns.len();
    // Candidates, from most to least specific; a column keeps the first that parses
    // every non-empty sampled value.
    let cands = [
        ScalarType::Long,
        ScalarType::Double,
        ScalarType::Boolean,
        ScalarType::Date,
        ScalarType::LocalDateTime,
    ];
    let mut ok: Vec<[bool; 5]> = vec![[true; 5]; n];
    let mut orders: Vec<[bool; DateOrder::SNIFFED.len()]> =
        vec![[true; DateOrder::SNIFFED.len()]; n];
    let mut seen = vec![false; n];
    let mut tok = quiver_csv::tokenize::Tokenizer::new(data, dialect);
    let mut fields = quiver_csv::tokenize::Fields::default();
    let mut rows = 0;
    while let Ok(Some(_)) = tok.next_record(&mut fields) {
        if fields.len() != n {
            continue;
        }
        for i in 0..n {
            let f = fields.get(data, i);
            if f.is_empty() || null_markers.iter().any(|m| m == f) {
                continue;
            }
            seen[i] = true;
            let v = &mut ok[i];
            use quiver_csv::value::*;
            // A number only when converting it loses nothing it spells: `007`, `00123`
            // and `+7` stay strings (a code, a zip, a phone prefix), as do integers past
            // 64 bits.
            let plain_number = {
                let d = f.strip_prefix(b"-").unwrap_or(f);
                !(f.first() == Some(&b'+')
                    || (d.len() > 1 && d[0] == b'0' && d[1].is_ascii_digit()))
            };
            v[0] &= plain_number && crate::idmap::canonical_int(f).is_some();
            v[1] &= plain_number
                && parse_f64(f).is_some()
                && !(f.iter().all(u8::is_ascii_digit) && crate::idmap::canonical_int(f).is_none());
            v[2] &= parse_bool(f).is_some();
            if v[3] {
                for (k, o) in DateOrder::SNIFFED.iter().enumerate() {
                    orders[i][k] &= parse_date_as(*o, f).is_some();
                }
                v[3] = orders[i].iter().any(|&x| x);
            }
            v[4] &= parse_local_datetime(f).is_some();
        }
        rows += 1;
        if rows >= SNIFF_ROWS {
            break;
        }
    }
    let types: Vec<Option<DataType>> = (0..n)
        .map(|i| {
            let c = &header.columns[i];
            if c.role != Role::Property || c.raw.contains(':') || !seen[i] {
                return None;
            }
            (0..5)
                .find(|&k| ok[i][k])
                .map(|k| DataType::Scalar(cands[k]))
        })
        .collect();
    let dates = (0..n)
        .map(|i| match types[i] {
            Some(DataType::Scalar(ScalarType::Date)) => DateOrder::SNIFFED
                .into_iter()
                .zip(orders[i])
                .find(|&(_, ok)| ok)
                .map_or(DateOrder::Iso, |(o, _)| o),
            _ => DateOrder::Iso,
        })
        .collect();
    Sniffed { types, dates }
}

/// What a sample says of a header's columns: a type for each untyped property column
/// it could read, and how each date column spells its dates.
struct Sniffed {
    types: Vec<Option<DataType>>,
    dates: Vec<DateOrder>,
}

impl Sniffed {
    fn none(n: usize) -> Sniffed {
        Sniffed {
            types: vec![None; n],
            dates: vec![DateOrder::Iso; n],
        }
    }
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

/// Most of the budget one row group under construction may hold (numerator, denominator).
const ROW_GROUP_BUDGET_SHARE: (u64, u64) = (2, 5);

/// The most a row group of property columns may hold under `budget`:
/// `ROW_GROUP_BUDGET_SHARE` of it, so that the id map and the edge store always have
/// room to grow.
fn row_group_cap(budget: &MemoryBudget) -> u64 {
    budget.limit_bytes() / ROW_GROUP_BUDGET_SHARE.1 * ROW_GROUP_BUDGET_SHARE.0
}

/// A row group under construction, with the grant that covers it.
struct RowGroup {
    pool: Arc<rayon::ThreadPool>,
    /// Rows per group, sized from the first batch (0: not sized yet).
    rows_target: usize,
    builders: Vec<ColumnBuilder>,
    types: Vec<DataType>,
    grant: Grant,
}

impl RowGroup {
    fn new(types: &[DataType], budget: &MemoryBudget, pool: Arc<rayon::ThreadPool>) -> Self {
        RowGroup {
            pool,
            builders: types.iter().map(|&t| ColumnBuilder::new(t)).collect(),
            types: types.to_vec(),
            grant: budget.empty_grant("row group buffer"),
            rows_target: 0,
        }
    }

    fn len(&self) -> usize {
        self.builders.first().map_or(0, |b| b.len())
    }

    fn heap_bytes(&self) -> u64 {
        self.builders.iter().map(|b| b.heap_bytes() as u64).sum()
    }

    /// Appends a batch; flushes first if the group would pass its row target, and after
    /// if the grant cannot cover the buffers plus their encoded copy.
    fn append(
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
    fn presize(&mut self, cols: &[ColumnBuilder], n: usize, cap: u64) {
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

    fn flush(
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

/// Runs the parse stage over a group's windows and hands each parsed batch, in file
/// order, to `on_batch` (with the window, its file, the chunk's offset in the window and
/// the line the chunk starts on), after counting its rows and handling its bad rows.
/// Keeps the byte progress and line numbers across files, and recycles window buffers.
#[allow(clippy::too_many_arguments)]
fn drive_batches(
    ctx: &mut Ctx<'_>,
    files: &[PathBuf],
    rx: &crossbeam_channel::Receiver<Msg>,
    recycle: &crossbeam_channel::Sender<Vec<u8>>,
    first: Option<Window>,
    plan: &Plan,
    endpoints: Option<&Endpoints<'_>>,
    header_lines: u64,
    done_before: &mut u64,
    report: Report,
    mut on_batch: impl FnMut(&mut Ctx<'_>, &Window, &Path, usize, u64, Batch) -> Result<(), ImportError>,
) -> Result<(), ImportError> {
    let mut lines = Lines {
        file_idx: 0,
        next_line: header_lines,
    };
    let (mut last_done, mut file_done_base) = (0u64, 0u64);
    let pool = ctx.pool.clone();
    std::thread::scope(|scope| -> Result<(), ImportError> {
        let parsed = parse_stage(scope, rx, first, plan, endpoints, pool);
        for p in parsed.iter() {
            if ctx.cancel.load(std::sync::atomic::Ordering::Relaxed) {
                return Err(ImportError::Interrupted);
            }
            let (w, batches) = match p {
                Parsed::Window(w, b) => (w, b),
                Parsed::Error(e) => return Err(e),
            };
            if w.first_of_file && w.file_idx > 0 {
                file_done_base += last_done;
                last_done = 0;
            }
            lines.window(&w, header_lines);
            let file = &files[w.file_idx];
            for (chunk_start, mut batch) in batches {
                let base = lines.next_line;
                if report.count {
                    ctx.rows_read += batch.records;
                }
                for e in std::mem::take(&mut batch.errors) {
                    let at = (w.file_idx, base + e.line as u64);
                    if report.errors_from.is_none_or(|from| at < from) {
                        continue;
                    }
                    let (s, t) = (e.span.0 as usize, e.span.1 as usize);
                    let raw = &*w.raw(chunk_start + s, chunk_start + t);
                    bad_row(
                        ctx,
                        file,
                        base + e.line as u64,
                        e.column as u64,
                        e.reason,
                        &e.message(plan, raw),
                        raw,
                    )?;
                }
                let lines_total = batch.lines_total;
                on_batch(ctx, &w, file, chunk_start, base, batch)?;
                lines.next_line = base + lines_total;
            }
            if report.count {
                ctx.bytes_read += w.file_bytes_done - last_done;
                ctx.progress
                    .advance(*done_before + file_done_base + last_done, ctx.rows_read);
            }
            last_done = w.file_bytes_done;
            // Hand the window's buffer back to the reader: no fresh pages per window.
            let _ = recycle.try_send(w.data);
        }
        Ok(())
    })?;
    if report.count {
        *done_before += file_done_base + last_done;
    }
    Ok(())
}

/// What a read of a group reports: the bad rows from a place on (none: a read that
/// only collects ids for sorting), and whether its records count.
#[derive(Debug, Clone, Copy)]
struct Report {
    errors_from: Option<(usize, u64)>,
    count: bool,
}

impl Report {
    const ALL: Report = Report {
        errors_from: Some((0, 0)),
        count: true,
    };
    const QUIET: Report = Report {
        errors_from: None,
        count: false,
    };
}

/// Where a node group's in-memory id map gave out.
#[derive(Debug, Clone, Copy)]
struct Resume {
    /// (file, line) of the first row whose id was not mapped.
    rows_at: (usize, u64),
    /// (file, line) past the batch whose bad rows were reported.
    errors_at: (usize, u64),
    /// The node the first unmapped row would have been.
    next_node: u64,
}

fn show_key(key: Key<'_>) -> String {
    match key {
        Key::Int(k) => k.to_string(),
        Key::Str(s) => String::from_utf8_lossy(s).to_string(),
    }
}

/// Labels of a batch's `:LABEL` column that are new to the database.
fn new_labels(
    batch: &Batch,
    label_column: Option<usize>,
    labels: &mut Vec<String>,
) -> Result<(), ImportError> {
    if let Some(lc) = label_column {
        let col = &batch.columns[lc];
        if let Some(child) = col.list_child_ref() {
            for k in 0..child.len() {
                let l = String::from_utf8_lossy(child.bytes_at(k));
                if !l.is_empty() && !labels.iter().any(|x| *x == l) {
                    label_index(labels, &l)?;
                }
            }
        }
    }
    Ok(())
}

/// Every input of `group` is a regular file, so that sorting ids on disk can read it a
/// second time.
fn rereadable(group: &InputGroup) -> Result<(), ImportError> {
    if let Some(s) = &group.source {
        return match s.reopenable() {
            true => Ok(()),
            false => Err(ImportError::Usage(format!(
                "{}: the node ids do not fit in the memory budget and are sorted on disk, which reads the input a second time, and this stream can be read once; pass a table or a file, or raise the memory budget",
                group.files[0].display()
            ))),
        };
    }
    for f in &group.files {
        if !std::fs::metadata(f).is_ok_and(|m| m.is_file()) {
            return Err(ImportError::Usage(format!(
                "{}: the node ids do not fit in --memory-budget and are sorted on disk, which reads the file a second time, and it is a pipe or device; import from a file, or raise --memory-budget",
                f.display()
            )));
        }
    }
    Ok(())
}

/// Starts a reader on `group`, skips its header and runs `f` on it; stops the reader.
fn with_reader<T>(
    ctx: &mut Ctx<'_>,
    group: &InputGroup,
    kind: HeaderKind,
    f: impl FnOnce(
        &mut Ctx<'_>,
        &crossbeam_channel::Receiver<Msg>,
        &crossbeam_channel::Sender<Vec<u8>>,
    ) -> Result<T, ImportError>,
) -> Result<T, ImportError> {
    let (rx, recycle, handle) = start_reader(ctx, group);
    let r = read_header(&rx, ctx.cfg, group, kind).and_then(|_| f(ctx, &rx, &recycle));
    drop(rx);
    let _ = handle.join();
    r
}

/// Reads `group` again from the start (a read of the sorting path), batch by batch.
#[allow(clippy::too_many_arguments)]
fn reread(
    ctx: &mut Ctx<'_>,
    group: &InputGroup,
    kind: HeaderKind,
    plan: &Plan,
    endpoints: Option<&Endpoints<'_>>,
    header_lines: u64,
    report: Report,
    done_before: &mut u64,
    on_batch: impl FnMut(&mut Ctx<'_>, &Window, &Path, usize, u64, Batch) -> Result<(), ImportError>,
) -> Result<(), ImportError> {
    with_reader(ctx, group, kind, |ctx, rx, recycle| {
        drive_batches(
            ctx,
            &group.files,
            rx,
            recycle,
            None,
            plan,
            endpoints,
            header_lines,
            done_before,
            report,
            on_batch,
        )
    })
}

/// A node group's rows from `o.rows_at` on, when the id space does not fit in memory:
/// 1. a read that sorts their ids with provisional node numbers into runs (the space's
///    in-memory map, if it had one, is written out first and freed);
/// 2. the merge with the space's ids, which finds the duplicates and makes the new
///    space file;
/// 3. a second read that hands the rows to `append`, without the duplicates (rejected
///    as bad rows with their file, line and text), reporting the bad rows past
///    `o.errors_at` and counting every record of the group.
#[allow(clippy::too_many_arguments)]
fn spill_nodes(
    ctx: &mut Ctx<'_>,
    group: &InputGroup,
    plan: &Plan,
    header_lines: u64,
    temp: &Path,
    space: &mut Space,
    si: usize,
    id_out: usize,
    o: Resume,
    counted: (u64, u64, u64),
    done_before: &mut u64,
    mut append: impl FnMut(&mut Ctx<'_>, &Batch) -> Result<(), ImportError>,
) -> Result<(), ImportError> {
    use crate::spill::{merge_nodes, RunWriter};
    rereadable(group)?;
    let name = format!("ids{si:04}");
    let integer = plan.integer_ids;
    let mut runs = Vec::new();
    if !space.map.is_empty() {
        // The map fills the budget: write it out in small runs, then free it.
        let mut w = RunWriter::new(&ctx.budget, temp, &format!("{name}-mem"), 0);
        space
            .map
            .for_each(&mut |k, node| k.with_sort_bytes(|k| w.push(k, node as u64)))?;
        space.map = IdMapWithGrant::new(integer, &ctx.budget);
        runs.extend(w.finish()?);
    }
    // 1. Sort the rest.
    let mut w = RunWriter::new(&ctx.budget, temp, &name, ctx.budget.limit_bytes() / 2);
    let mut next = o.next_node;
    reread(
        ctx,
        group,
        HeaderKind::Nodes,
        plan,
        None,
        header_lines,
        Report::QUIET,
        &mut 0,
        |_, w_, _, _, base, batch| {
            let col = &batch.columns[id_out];
            for r in 0..batch.n_rows() {
                if (w_.file_idx, base + batch.lines[r] as u64) < o.rows_at {
                    continue;
                }
                if next >= NODES_MAX {
                    return Err(ImportError::Usage(format!("more than {NODES_MAX} nodes")));
                }
                Key::of(col, r, integer).with_sort_bytes(|k| w.push(k, next))?;
                next += 1;
            }
            Ok(())
        },
    )?;
    runs.extend(w.finish()?);
    // 2. Merge.
    let merged = merge_nodes(runs, space.spilled.as_ref(), temp, &name, &ctx.budget)?;
    space.spilled = Some(merged.space);
    let dups = merged.duplicates;
    // 3. Read again, for the table.
    (ctx.rows_read, ctx.bytes_read, *done_before) = counted;
    let mut next = o.next_node;
    let mut di = 0;
    reread(
        ctx,
        group,
        HeaderKind::Nodes,
        plan,
        None,
        header_lines,
        Report {
            errors_from: Some(o.errors_at),
            count: true,
        },
        done_before,
        |ctx, w_, file, chunk_start, base, mut batch| {
            let n = batch.n_rows();
            let mut keep: Option<Vec<bool>> = None;
            for r in 0..n {
                let line = base + batch.lines[r] as u64;
                if (w_.file_idx, line) < o.rows_at {
                    keep.get_or_insert_with(|| vec![true; n])[r] = false;
                    continue;
                }
                let p = next;
                next += 1;
                while di < dups.len() && dups[di] < p {
                    di += 1;
                }
                if dups.get(di) == Some(&p) {
                    let key = Key::of(&batch.columns[id_out], r, integer);
                    let message = format!(
                        "duplicate node id '{}' (an earlier node has it)",
                        show_key(key)
                    );
                    let (s, e) = batch.spans[r];
                    let raw = &*w_.raw(chunk_start + s as usize, chunk_start + e as usize);
                    bad_row(ctx, file, line, 0, Reason::DuplicateId, &message, raw)?;
                    keep.get_or_insert_with(|| vec![true; n])[r] = false;
                }
            }
            if let Some(keep) = keep {
                batch.columns = batch.columns.iter().map(|c| c.filter(&keep)).collect();
            }
            append(ctx, &batch)
        },
    )
}

/// A window with its chunks parsed.
enum Parsed {
    Window(Window, Vec<(usize, Batch)>),
    Error(ImportError),
}

/// Runs parsing on a thread of its own (its chunks in parallel on the pool), so that the
/// sequential stage of one window overlaps the parsing of the next. The channel holds
/// one parsed window: memory in flight stays a few windows.
fn parse_stage<'scope, 'env>(
    scope: &'scope std::thread::Scope<'scope, 'env>,
    rx: &'env crossbeam_channel::Receiver<Msg>,
    first: Option<Window>,
    plan: &'env Plan,
    endpoints: Option<&'env Endpoints<'env>>,
    pool: Arc<rayon::ThreadPool>,
) -> crossbeam_channel::Receiver<Parsed> {
    let (tx, out) = crossbeam_channel::bounded::<Parsed>(1);
    scope.spawn(move || {
        let windows = first.into_iter().map(Msg::Window).chain(rx.iter());
        for msg in windows {
            let p = match msg {
                Msg::Window(w) => {
                    let batches = pool.install(|| parse_window(&w, plan, endpoints));
                    Parsed::Window(w, batches)
                }
                Msg::Error(e) => Parsed::Error(e.into()),
                Msg::Header { .. } => continue,
            };
            if tx.send(p).is_err() {
                return;
            }
        }
    });
    out
}

/// Parses the chunks of a window in parallel.
fn parse_window(w: &Window, plan: &Plan, endpoints: Option<&Endpoints<'_>>) -> Vec<(usize, Batch)> {
    let mut ranges = Vec::with_capacity(w.chunk_ends.len());
    let mut s = 0;
    for &e in &w.chunk_ends {
        ranges.push((s, e));
        s = e;
    }
    ranges
        .par_iter()
        .map(|&(s, e)| {
            let batch = match &w.typed {
                Some(rows) => parse_typed(rows.as_ref(), s, e, plan, endpoints),
                None => parse_chunk(&w.data[s..e], plan, endpoints),
            };
            (s, batch)
        })
        .collect()
}

/// Tracks the line where the next chunk starts, per file.
struct Lines {
    file_idx: usize,
    next_line: u64,
}

impl Lines {
    fn window(&mut self, w: &Window, header_lines: u64) {
        if w.first_of_file {
            self.file_idx = w.file_idx;
            self.next_line = if w.file_idx == 0 { header_lines } else { 0 };
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn import_nodes(
    ctx: &mut Ctx<'_>,
    group: &InputGroup,
    gi: usize,
    staging: &Staging,
    spaces: &mut Vec<Space>,
    labels: &mut Vec<String>,
    first_node: u64,
    done_before: &mut u64,
    temp: &Path,
) -> Result<NodeTableMeta, ImportError> {
    let cfg = ctx.cfg;
    let (rx, recycle, handle) = start_reader(ctx, group);
    // Taken when the rows are to be read again (the id map spilled).
    let (mut rx_slot, mut handle_slot) = (Some(rx), Some(handle));
    let result = (|| {
        let rx = rx_slot
            .as_ref()
            .expect("the reader runs until the first pass ends");
        let (header, header_lines, plain) = read_header(rx, cfg, group, HeaderKind::Nodes)?;
        let integer = cfg.id_type == IdType::Integer;
        let (sniffed, mut first_window) = sniff(rx, cfg, group, &header, cfg.infer_types || plain)?;
        if plain {
            let text = header_text(&header, &sniffed);
            ctx.inferred_headers.push((group.files[0].clone(), text));
        }
        let inferred = &sniffed.types;
        // Plan: which output column each CSV column feeds.
        let mut slots = Vec::new();
        let mut columns: Vec<PropertyMeta> = Vec::new();
        let mut id_column = None;
        let mut id_space = None;
        let mut label_column = None;
        for (i, c) in header.columns.iter().enumerate() {
            let slot = match &c.role {
                Role::Id { space } => {
                    let name = if c.name.is_empty() {
                        "id".to_string()
                    } else {
                        c.name.clone()
                    };
                    let dtype = DataType::Scalar(if integer {
                        ScalarType::Long
                    } else {
                        ScalarType::String
                    });
                    columns.push(PropertyMeta { name, dtype });
                    id_column = Some(columns.len() - 1);
                    id_space = Some(space_index(
                        spaces,
                        space,
                        integer,
                        ctx.cfg.string_ids_as_strings,
                        &ctx.budget,
                    ));
                    Slot::Id {
                        out: columns.len() - 1,
                    }
                }
                Role::Label => {
                    columns.push(PropertyMeta {
                        name: ":LABEL".into(),
                        dtype: DataType::Array(ScalarType::String),
                    });
                    label_column = Some(columns.len() - 1);
                    Slot::Labels {
                        out: columns.len() - 1,
                    }
                }
                Role::Property => {
                    let dtype = inferred[i].unwrap_or(c.dtype);
                    columns.push(PropertyMeta {
                        name: c.name.clone(),
                        dtype,
                    });
                    Slot::Prop {
                        out: columns.len() - 1,
                        name: c.name.clone(),
                        date: sniffed.dates[i],
                    }
                }
                _ => Slot::Skip,
            };
            slots.push(slot);
        }
        if columns.iter().filter(|c| c.name == "id").count() > 1 {
            return Err(header_error(
                &group.files[0],
                quiver_csv::header::HeaderError {
                    column: 0,
                    message: "an unnamed :ID column is stored as property 'id', which the header also has; name the id column (e.g. userId:ID)".into(),
                },
            ));
        }
        let out_types: Vec<DataType> = columns.iter().map(|c| c.dtype).collect();
        let plan = Plan {
            slots,
            out_types: out_types.clone(),
            integer_ids: integer,
            dialect: cfg.dialect,
            null_markers: cfg.null_markers.clone().into(),
        };
        let mut fixed_labels = Vec::new();
        if let Some(spec) = &group.spec {
            for l in spec.split(':').filter(|l| !l.is_empty()) {
                fixed_labels.push(label_index(labels, l)?);
            }
        }
        let name = group.spec.clone().unwrap_or_else(|| format!("nodes{gi}"));
        let mut writer =
            TableWriter::create(staging, &format!("nodes-{gi:04}.seg"), columns.clone())?;
        let mut rg = RowGroup::new(&out_types, &ctx.budget, ctx.pool.clone());
        let mut n_rows = 0u64;
        let counted = (ctx.rows_read, ctx.bytes_read, *done_before);
        let spilled_before = id_space.is_some_and(|si| {
            spaces[si].spilled.is_some() || (cfg.spill_ids && ctx.base.is_none())
        });
        // Where the in-memory map gave out, if it did: rows from there on are resolved by
        // sorting (see `spill`).
        let mut resume: Option<Resume> = spilled_before.then_some(Resume {
            rows_at: (0, 0),
            errors_at: (0, 0),
            next_node: first_node,
        });
        if resume.is_none() {
            let r = drive_batches(
                ctx,
                &group.files,
                rx,
                &recycle,
                first_window.take(),
                &plan,
                None,
                header_lines,
                done_before,
                Report::ALL,
                |ctx, w, file, chunk_start, base, mut batch| {
                    // Ids: first occurrence wins; later ones are duplicates.
                    if let (Some(out), Some(si)) = (id_column, id_space) {
                        let mut keep: Option<Vec<bool>> = None;
                        let mut next_node = first_node + n_rows;
                        for r in 0..batch.n_rows() {
                            let key = Key::of(&batch.columns[out], r, integer);
                            if next_node >= NODES_MAX {
                                return Err(ImportError::Usage(format!(
                                    "more than {NODES_MAX} nodes"
                                )));
                            }
                            // An append: an id the database has already is a duplicate too.
                            let in_base = match (ctx.base, spaces[si].base) {
                                (Some(db), Some(b)) => db.lookup_id(b, key.into())?.is_some(),
                                _ => false,
                            };
                            let dup = in_base
                                || match spaces[si].map.insert(key, next_node as u32) {
                                    Ok(old) => old.is_some(),
                                    // The map is full: this row and the rest go the
                                    // sorting way (not in an append, whose ids must
                                    // also be looked up in the database's index).
                                    Err(ImportError::Budget { .. }) if ctx.base.is_none() => {
                                        resume = Some(Resume {
                                            rows_at: (w.file_idx, base + batch.lines[r] as u64),
                                            errors_at: (w.file_idx, base + batch.lines_total),
                                            next_node,
                                        });
                                        let k =
                                            keep.get_or_insert_with(|| vec![true; batch.n_rows()]);
                                        k[r..].iter_mut().for_each(|x| *x = false);
                                        break;
                                    }
                                    Err(e) => return Err(e),
                                };
                            if dup {
                                let shown = show_key(key);
                                let (s, e) = batch.spans[r];
                                let raw =
                                    &*w.raw(chunk_start + s as usize, chunk_start + e as usize);
                                let message = if in_base {
                                    format!(
                                        "duplicate node id '{shown}' (a node in the database has it)"
                                    )
                                } else {
                                    format!("duplicate node id '{shown}' (an earlier node has it)")
                                };
                                let line = base + batch.lines[r] as u64;
                                bad_row(ctx, file, line, 0, Reason::DuplicateId, &message, raw)?;
                                keep.get_or_insert_with(|| vec![true; batch.n_rows()])[r] = false;
                            } else {
                                next_node += 1;
                            }
                        }
                        if let Some(keep) = keep {
                            batch.columns = batch.columns.iter().map(|c| c.filter(&keep)).collect();
                        }
                    }
                    new_labels(&batch, label_column, labels)?;
                    let kept = batch.columns.first().map_or(batch.n_rows(), |c| c.len());
                    rg.append(&batch.columns, &mut writer, &mut ctx.row_groups)?;
                    n_rows += kept as u64;
                    if resume.is_some() {
                        // Stops this read; the rows from `resume` on are read again.
                        return Err(ImportError::Interrupted);
                    }
                    Ok(())
                },
            );
            if resume.is_none() {
                r?;
            }
        }
        if let (Some(o), Some(out), Some(si)) = (resume, id_column, id_space) {
            drop(rx_slot.take());
            if let Some(h) = handle_slot.take() {
                let _ = h.join();
            }
            spill_nodes(
                ctx,
                group,
                &plan,
                header_lines,
                temp,
                &mut spaces[si],
                si,
                out,
                o,
                counted,
                done_before,
                |ctx, batch| {
                    new_labels(batch, label_column, labels)?;
                    let kept = batch.columns.first().map_or(0, |c| c.len());
                    rg.append(&batch.columns, &mut writer, &mut ctx.row_groups)?;
                    n_rows += kept as u64;
                    Ok(())
                },
            )?;
        }
        rg.flush(&mut writer, &mut ctx.row_groups, true)?;
        let segment: SegmentMeta = writer.finish()?;
        Ok(NodeTableMeta {
            name,
            first_node,
            n_rows,
            labels: fixed_labels,
            label_column,
            id_column,
            id_space,
            columns,
            segments: vec![segment],
            patches: Vec::new(),
            deleted: None,
        })
    })();
    drop(rx_slot);
    if let Some(h) = handle_slot {
        let _ = h.join();
    }
    result
}

#[allow(clippy::too_many_arguments)]
fn import_rels(
    ctx: &mut Ctx<'_>,
    group: &InputGroup,
    staging: &Staging,
    temp: &Path,
    spaces: &[Space],
    rels: &mut Vec<RelState>,
    (n_nodes, shift): (u64, u32),
    done_before: &mut u64,
) -> Result<(), ImportError> {
    let cfg = ctx.cfg;
    let (rx, recycle, handle) = start_reader(ctx, group);
    // Taken when the endpoints are resolved by sorting (the rows are read twice).
    let (mut rx_slot, mut handle_slot) = (Some(rx), Some(handle));
    let result = (|| {
        let file0 = &group.files[0];
        let rx0 = rx_slot
            .as_ref()
            .expect("the reader runs until the header is read");
        let (header, header_lines, plain) =
            read_header(rx0, cfg, group, HeaderKind::Relationships)?;
        let (sniffed, mut first_window) =
            sniff(rx0, cfg, group, &header, cfg.infer_types || plain)?;
        if plain {
            let text = header_text(&header, &sniffed);
            ctx.inferred_headers.push((file0.clone(), text));
        }
        let find_space = |space: &Option<String>, what: &str| -> Result<usize, ImportError> {
            spaces.iter().position(|s| &s.name == space).ok_or_else(|| {
                ImportError::Usage(format!(
                    "{}: {what} refers to id space {}, but no nodes file declares it (:ID{})",
                    file0.display(),
                    space
                        .as_deref()
                        .map_or("(global)".to_string(), |s| format!("'{s}'")),
                    space.as_deref().map_or(String::new(), |s| format!("({s})"))
                ))
            })
        };
        let mut slots = Vec::new();
        let mut columns: Vec<PropertyMeta> = Vec::new();
        let (mut ss, mut es) = (0, 0);
        let mut has_type_col = false;
        for ((c, inferred), &date) in header
            .columns
            .iter()
            .zip(&sniffed.types)
            .zip(&sniffed.dates)
        {
            slots.push(match &c.role {
                Role::StartId { space } => {
                    ss = find_space(space, ":START_ID")?;
                    Slot::Start
                }
                Role::EndId { space } => {
                    es = find_space(space, ":END_ID")?;
                    Slot::End
                }
                Role::Type => {
                    has_type_col = true;
                    Slot::Type
                }
                Role::Property if !cfg.no_edge_properties => {
                    columns.push(PropertyMeta {
                        name: c.name.clone(),
                        dtype: inferred.unwrap_or(c.dtype),
                    });
                    Slot::Prop {
                        out: columns.len() - 1,
                        name: c.name.clone(),
                        date,
                    }
                }
                _ => Slot::Skip,
            });
        }
        if group.spec.is_none() && !has_type_col {
            return Err(ImportError::Usage(format!(
                "{}: relationships need a type: give it on the command line (--relationships TYPE={}) or add a :TYPE column",
                file0.display(),
                file0.display()
            )));
        }
        let out_types: Vec<DataType> = columns.iter().map(|c| c.dtype).collect();
        let integer = cfg.id_type == IdType::Integer;
        let plan = Plan {
            slots,
            out_types: out_types.clone(),
            integer_ids: integer,
            dialect: cfg.dialect,
            null_markers: cfg.null_markers.clone().into(),
        };
        let endpoints = Endpoints {
            start: &spaces[ss].map,
            end: &spaces[es].map,
            start_integer: integer,
            end_integer: integer,
            start_base: ctx.base.zip(spaces[ss].base),
            end_base: ctx.base.zip(spaces[es].base),
            start_spilled: spaces[ss].spilled.is_some(),
            end_spilled: spaces[es].spilled.is_some(),
            keep_keys: false,
            shift,
        };
        // Endpoints in spilled spaces: sort their keys with the row ordinal, join them
        // with the space files, then read the rows again with the nodes found.
        let mut resolved = if endpoints.start_spilled || endpoints.end_spilled {
            // The rows are read again from the start: the sniffed window is not used.
            first_window = None;
            drop(rx_slot.take());
            if let Some(h) = handle_slot.take() {
                let _ = h.join();
            }
            Some(resolve_endpoints(
                ctx,
                group,
                &plan,
                &endpoints,
                header_lines,
                temp,
                (&spaces[ss], &spaces[es]),
            )?)
        } else {
            None
        };
        let start_col = plan.slots.iter().position(|s| matches!(s, Slot::Start));
        let end_col = plan.slots.iter().position(|s| matches!(s, Slot::End));
        let mut ordinal = 0u64;
        let type_index = |name: &str,
                          rels: &mut Vec<RelState>,
                          ctx: &mut Ctx<'_>|
         -> Result<usize, ImportError> {
            if let Some(i) = rels.iter().position(|r| r.name == name) {
                if rels[i].columns != columns {
                    return Err(ImportError::Usage(format!(
                        "{}: relationship type {name} was imported before with other properties; one type has one property schema",
                        file0.display()
                    )));
                }
                return Ok(i);
            }
            let ri = rels.len();
            let props = if columns.is_empty() {
                None
            } else {
                Some((
                    TableWriter::create(
                        staging,
                        &format!("rel-{ri:04}.props.seg"),
                        columns.clone(),
                    )?,
                    out_types.iter().map(|&t| ColumnBuilder::new(t)).collect(),
                ))
            };
            rels.push(RelState {
                name: name.to_string(),
                store: EdgeStore::new(n_nodes, &ctx.budget, temp, name),
                columns: columns.clone(),
                props,
                start_space: ss,
                end_space: es,
            });
            Ok(ri)
        };
        let fixed_type = match &group.spec {
            Some(t) if !has_type_col => Some(type_index(t, rels, ctx)?),
            _ => None,
        };
        let mut rg_grant = ctx.budget.empty_grant("relationship property buffer");
        let by_ordinal = resolved.is_some();
        let mut main_pass =
            |ctx: &mut Ctx<'_>,
             rx: &crossbeam_channel::Receiver<Msg>,
             recycle: &crossbeam_channel::Sender<Vec<u8>>| {
                drive_batches(
                    ctx,
                    &group.files,
                    rx,
                    recycle,
                    first_window.take(),
                    &plan,
                    Some(&endpoints),
                    header_lines,
                    done_before,
                    Report::ALL,
                    |ctx, w, file, chunk_start, base, mut batch| {
                        if let Some((start, end)) = resolved.as_mut() {
                            // Rows whose endpoints the join did not find are rejected now.
                            let n = batch.edges.len();
                            let mut keep: Option<Vec<bool>> = None;
                            for r in 0..n {
                                let ord = ordinal;
                                ordinal += 1;
                                let mut e = batch.edges[r];
                                let mut missing = None;
                                if let Some(s) = start.as_mut() {
                                    match s.get(ord)? {
                                        Some(node) => e = (node as u64) << 32 | (e & 0xffff_ffff),
                                        None => missing = start_col,
                                    }
                                }
                                if let (None, Some(d)) = (missing, end.as_mut()) {
                                    match d.get(ord)? {
                                        Some(node) => e = (e & !0xffff_ffff) | node as u64,
                                        None => missing = end_col,
                                    }
                                }
                                batch.edges[r] = e;
                                if let Some(col) = missing {
                                    let (s, t) = batch.spans[r];
                                    let raw =
                                        &*w.raw(chunk_start + s as usize, chunk_start + t as usize);
                                    let err = parse::RowError {
                                        line: batch.lines[r],
                                        column: parse::field_column(&plan, raw, col),
                                        reason: Reason::MissingNode,
                                        detail: parse::Detail::Field(col as u32),
                                        span: (s, t),
                                    };
                                    bad_row(
                                        ctx,
                                        file,
                                        base + err.line as u64,
                                        err.column as u64,
                                        err.reason,
                                        &err.message(&plan, raw),
                                        raw,
                                    )?;
                                    keep.get_or_insert_with(|| vec![true; n])[r] = false;
                                }
                            }
                            if let Some(keep) = keep {
                                let mut it = keep.iter();
                                batch.edges.retain(|_| *it.next().unwrap_or(&true));
                                if !batch.types.is_empty() {
                                    let mut it = keep.iter();
                                    batch.types.retain(|_| *it.next().unwrap_or(&true));
                                }
                                batch.columns =
                                    batch.columns.iter().map(|c| c.filter(&keep)).collect();
                            }
                        }
                        // Global type index of every row.
                        // Global type of every row, when the file has a :TYPE column.
                        let row_types: Vec<usize> = match fixed_type {
                            Some(_) => Vec::new(),
                            None => {
                                let mut map = Vec::with_capacity(batch.type_names.len());
                                for n in &batch.type_names {
                                    let name = String::from_utf8_lossy(n).to_string();
                                    map.push(type_index(&name, rels, ctx)?);
                                }
                                batch.types.iter().map(|&t| map[t as usize]).collect()
                            }
                        };
                        match fixed_type {
                            Some(t) => rels[t].store.push_all(&batch.edges)?,
                            None => {
                                for (r, &e) in batch.edges.iter().enumerate() {
                                    rels[row_types[r]]
                                        .store
                                        .push_all(std::slice::from_ref(&e))?;
                                }
                            }
                        }
                        if !columns.is_empty() {
                            let (single, targets) = match fixed_type {
                                Some(t) => (Some(t), vec![t]),
                                None => {
                                    let single = row_types
                                        .first()
                                        .copied()
                                        .filter(|&t| row_types.iter().all(|&x| x == t));
                                    let mut targets: Vec<usize> = row_types.clone();
                                    targets.sort_unstable();
                                    targets.dedup();
                                    (single, targets)
                                }
                            };
                            for t in targets {
                                let cols: Vec<ColumnBuilder> = if single.is_some() {
                                    Vec::new()
                                } else {
                                    let keep: Vec<bool> =
                                        row_types.iter().map(|&x| x == t).collect();
                                    batch.columns.iter().map(|c| c.filter(&keep)).collect()
                                };
                                let src = if single.is_some() {
                                    &batch.columns
                                } else {
                                    &cols
                                };
                                let Some((writer, builders)) = rels[t].props.as_mut() else {
                                    continue;
                                };
                                if builders[0].len() + src[0].len() > ROW_GROUP_ROWS_MAX {
                                    ctx.pool.install(|| writer.write_row_group(builders))?;
                                    ctx.row_groups += 1;
                                    builders.iter_mut().for_each(|b| b.clear());
                                }
                                for (b, c) in builders.iter_mut().zip(src) {
                                    b.append(c);
                                }
                            }
                            // The property buffers of all types share one grant and the same cap
                            // as node row groups; under pressure every type flushes.
                            let held = |rels: &Vec<RelState>| -> u64 {
                                rels.iter()
                                    .filter_map(|r| r.props.as_ref())
                                    .map(|(_, b)| {
                                        b.iter().map(|c| c.heap_bytes() as u64).sum::<u64>()
                                    })
                                    .sum::<u64>()
                                    * 3
                                    / 2
                            };
                            let need = held(rels);
                            let cap = row_group_cap(&ctx.budget);
                            if need > rg_grant.bytes()
                                && (need > cap || rg_grant.try_resize(need).is_err())
                            {
                                for r in rels.iter_mut() {
                                    if let Some((writer, builders)) = r.props.as_mut() {
                                        if builders[0].len() > 0 {
                                            ctx.pool
                                                .install(|| writer.write_row_group(builders))?;
                                            ctx.row_groups += 1;
                                        }
                                        *builders = out_types
                                            .iter()
                                            .map(|&t| ColumnBuilder::new(t))
                                            .collect();
                                    }
                                }
                                rg_grant.try_resize(held(rels))?;
                            }
                        }
                        Ok(())
                    },
                )
            };
        // The read after a join holds a quarter of the budget back from the edge
        // store. Measured on 100M relationships at 256 MiB: without it, resident memory
        // rose by about 20 MiB with each spill of the edge store (freed blocks the
        // allocator keeps, among the per-chunk span and line arrays this read adds),
        // to 384 MiB, past the budget plus the 64 MiB fixed overhead.
        let _headroom = by_ordinal.then(|| {
            ctx.budget
                .try_grant(ctx.budget.limit_bytes() / 4, "spilled endpoints headroom")
                .ok()
        });
        match rx_slot.as_ref() {
            Some(rx) => main_pass(ctx, rx, &recycle)?,
            None => with_reader(ctx, group, HeaderKind::Relationships, |ctx, rx, recycle| {
                main_pass(ctx, rx, recycle)
            })?,
        }
        Ok(())
    })();
    drop(rx_slot);
    if let Some(h) = handle_slot {
        let _ = h.join();
    }
    result
}

/// Resolves the endpoints of `group` on its spilled sides: a read that writes each
/// good row's keys with the row's ordinal into sorted runs, then a join of each side's
/// runs with its space file. The result gives the node of each ordinal, side by side.
fn resolve_endpoints(
    ctx: &mut Ctx<'_>,
    group: &InputGroup,
    plan: &Plan,
    endpoints: &Endpoints<'_>,
    header_lines: u64,
    temp: &Path,
    spaces: (&Space, &Space),
) -> Result<(Option<spill::Resolved>, Option<spill::Resolved>), ImportError> {
    use crate::spill::{Resolved, RunWriter};
    rereadable(group)?;
    let share = ctx.budget.limit_bytes() / 4;
    let mut start = endpoints
        .start_spilled
        .then(|| RunWriter::new(&ctx.budget, temp, "start", share));
    let mut end = endpoints
        .end_spilled
        .then(|| RunWriter::new(&ctx.budget, temp, "end", share));
    let mut rows = 0u64;
    reread(
        ctx,
        group,
        HeaderKind::Relationships,
        plan,
        Some(&Endpoints {
            keep_keys: true,
            ..*endpoints
        }),
        header_lines,
        Report::QUIET,
        &mut 0,
        |_, _, _, _, _, batch| {
            for r in 0..batch.edges.len() {
                if let Some(w) = start.as_mut() {
                    w.push(batch.start_keys.get(r), rows)?;
                }
                if let Some(w) = end.as_mut() {
                    w.push(batch.end_keys.get(r), rows)?;
                }
                rows += 1;
            }
            Ok(())
        },
    )?;
    let join = |w: Option<RunWriter>, space: &Space, name: &str| -> Result<_, ImportError> {
        let Some(w) = w else { return Ok(None) };
        let runs = w.finish()?;
        let file = space
            .spilled
            .as_ref()
            .expect("a spilled side's space has its file");
        Ok(Some(Resolved::join(
            runs,
            file,
            rows,
            temp,
            name,
            &ctx.budget,
        )?))
    };
    let s = join(start.take(), spaces.0, "start")?;
    let e = join(end.take(), spaces.1, "end")?;
    Ok((s, e))
}
