//! `quiver import --append` into an open database, beside its readers and writers: the
//! whole path of a live append (see `quiver_engine::append` for the publish).
//!
//! 1. Take the store's publishing turn (no other checkpoint runs until the append is
//!    published) and check pending writes into segments, so that the id index knows
//!    every node the append may connect.
//! 2. Wait for the append's memory grant from the database's memory limit.
//! 3. Import into a private folder against that generation, the nodes taking an id
//!    range the store hands out once their count is known.
//! 4. Publish: a checkpoint takes the delta and the append's parts into a new
//!    generation, and the declared indexes are extended over the new tables.
//!
//! Readers keep their snapshots throughout; writers commit meanwhile (they wait only
//! for the publish step, a rename of files and a manifest).

use quiver_common::memory::WaitPolicy;
use quiver_engine::activity::Client;
use quiver_engine::append::{open_staged, Prebuilt};
use quiver_engine::checkpoint::CheckpointReport;
use quiver_engine::{EngineError, Store};
use quiver_import::progress::{Phase, Progress};
use quiver_import::{ImportConfig, ImportError, ImportSummary, NodeIds};
use quiver_storage::manifest::IdType;
use quiver_storage::write::Staging;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why a live append failed; the database is as it was (the ids it took are gaps).
#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    #[error(transparent)]
    Import(#[from] ImportError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Write(#[from] quiver_storage::WriteError),
    /// The append's memory grant did not come within the wait, or is more than the
    /// database's limit.
    #[error("the append needs {asked} of the database's memory limit ({limit}) and did not get it: {why}; retry when fewer queries and loads run, give a smaller --memory-budget, or raise the server's --memory-limit")]
    Memory {
        asked: String,
        limit: String,
        why: String,
    },
}

/// What a live append did: the import's summary and the publishing checkpoint's report.
pub struct Appended {
    pub summary: ImportSummary,
    pub checkpoint: CheckpointReport,
    /// How long the append waited for its memory grant.
    pub waited_for_memory: Duration,
}

/// How long an append waits for its memory grant before it gives up.
pub const GRANT_WAIT: Duration = Duration::from_secs(120);

/// Appends `cfg`'s files to the database `store` holds (see the module docs).
/// `id_type`: the ids' type when the command named one, else the database's.
/// `budget_given`: whether `cfg.memory_budget_bytes` was asked for; otherwise the
/// append takes at most half of the database's memory limit. `client`: who asked, for
/// `SHOW TRANSACTIONS`, which lists the append while it runs.
pub fn append(
    store: &Arc<Store>,
    mut cfg: ImportConfig,
    id_type: Option<IdType>,
    budget_given: bool,
    client: &Client,
    progress: &dyn Progress,
) -> Result<Appended, AppendError> {
    let t0 = Instant::now();
    if !store.is_writable() {
        return Err(EngineError::Refused(format!(
            "{} is open for writing by another process",
            store.dir().display()
        ))
        .into());
    }
    // The grant first, outside the publishing turn: an append that waits for memory
    // holds up nobody's checkpoint.
    let limit = store.memory.limit_bytes();
    if !budget_given {
        cfg.memory_budget_bytes = cfg
            .memory_budget_bytes
            .min((limit / 2).max(quiver_common::limits::IMPORT_BUDGET_BYTES_MIN));
    }
    // Listed by SHOW TRANSACTIONS while it runs: what it asked, and whether it waits.
    let text = format!(
        "import --append {}",
        cfg.nodes
            .iter()
            .map(|g| ("--nodes", g))
            .chain(cfg.relationships.iter().map(|g| ("--relationships", g)))
            .map(|(flag, g)| {
                let files: Vec<String> = g.files.iter().map(|f| f.display().to_string()).collect();
                match &g.spec {
                    Some(l) => format!("{flag} {l}={}", files.join(",")),
                    None => format!("{flag} {}", files.join(",")),
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    );
    let shown = store.memory.child_waiting(
        cfg.memory_budget_bytes,
        WaitPolicy {
            timeout: GRANT_WAIT,
            cancel: Some(cfg.cancel.clone()),
            idle: None,
        },
    );
    let _listed = store.activity.start(&text, client, &shown);
    let mut grant = shown.empty_grant("import --append");
    grant.grow_waiting(cfg.memory_budget_bytes).map_err(|e| {
        let h = quiver_common::size::human_bytes;
        AppendError::Memory {
            asked: h(cfg.memory_budget_bytes),
            limit: h(limit),
            why: e.to_string(),
        }
    })?;
    let waited_for_memory = shown.waited();
    let publisher = store.publishing();
    if store.has_uncheckpointed_writes() {
        store.checkpoint_with(&publisher)?;
    }
    let base = store.snapshot().db;
    if let Some(t) = id_type.or_else(|| base.manifest().id_spaces.first().map(|s| s.id_type)) {
        cfg.id_type = t;
    }
    cfg.db = store.dir().to_path_buf();
    static APPENDS: AtomicU64 = AtomicU64::new(0);
    let folder = format!(
        "{}/append-{}-{}",
        quiver_engine::bulk::BULK_DIR,
        std::process::id(),
        APPENDS.fetch_add(1, Ordering::Relaxed)
    );
    let staging = Staging::private(store.dir(), &folder)?;
    let first = Arc::new(AtomicU64::new(base.n_nodes()));
    let (s2, f2) = (store.clone(), first.clone());
    cfg.node_ids = Some(NodeIds(Arc::new(move |n| {
        let f = s2.reserve_nodes(n);
        f2.store(f, Ordering::SeqCst);
        Ok(f)
    })));
    let (mut summary, manifest) = quiver_import::append_staged(&cfg, &base, &staging, progress)?;
    progress.phase(Phase::Publish, 1);
    let appended = open_staged(store.dir(), manifest.clone())?;
    let prebuilt = Prebuilt::diff(base.manifest(), &manifest, first.load(Ordering::SeqCst));
    let checkpoint = store.publish_append(&publisher, &base, &appended, prebuilt)?;
    drop((appended, staging, publisher, grant));
    progress.advance(1, 0);
    progress.finish();
    summary.seconds = t0.elapsed().as_secs_f64();
    Ok(Appended {
        summary,
        checkpoint,
        waited_for_memory,
    })
}
