//! One statement run on a graph: planned ([`plan`](crate::plan)), EXPLAINed or
//! executed (its memory budget, its entry in the store's activity, the operator tree
//! pulled into the sink), PROFILE's plan rendered, and its summary. Every front end's
//! statement comes here: [`crate::run`] for a read on a database, the `Session` for
//! everything else.

use crate::error::QueryError;
use crate::graph::Graph;
use crate::index::IndexSet;
use crate::ops::load;
use crate::ops::{Cx, OpStats};
use crate::options::*;
use crate::plan::Params;
use crate::{batch, expr, plan, procs};
use quiver_common::memory::MemoryBudget;
use quiver_common::size::human_bytes;
use quiver_cypher::ast::Explain;
use quiver_storage::Database;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

fn render_plan(descs: &[plan::Desc], root: usize, stats: Option<&[OpStats]>) -> String {
    let mut out = String::new();
    fn walk(
        descs: &[plan::Desc],
        id: usize,
        depth: usize,
        stats: Option<&[OpStats]>,
        out: &mut String,
    ) {
        let d = &descs[id];
        out.push_str(&"  ".repeat(depth));
        out.push_str(d.name);
        if !d.detail.is_empty() {
            out.push_str(&format!(" {}", d.detail));
        }
        if let Some(s) = stats {
            let st = &s[id];
            let child_ns: u64 = d.children.iter().map(|&c| s[c].nanos).sum();
            let own = st.nanos.saturating_sub(child_ns);
            out.push_str(&format!(
                "  [rows {}, time {:.3} ms (self {:.3} ms){}]",
                st.rows,
                st.nanos as f64 / 1e6,
                own as f64 / 1e6,
                if st.peak_bytes > 0 {
                    format!(", memory {}", human_bytes(st.peak_bytes))
                } else {
                    String::new()
                }
            ));
        }
        out.push('\n');
        for &c in &d.children {
            walk(descs, c, depth + 1, stats, out);
        }
    }
    walk(descs, root, 0, stats, &mut out);
    out
}

/// Runs a parsed statement that passed `bind::check` on `db` plus `delta`, writing
/// through `tx` when given.
#[allow(clippy::too_many_arguments)]
pub fn run_statement(
    db: &Database,
    delta: Option<Arc<quiver_engine::Delta>>,
    tx: Option<&mut quiver_engine::Txn>,
    explicit_tx: bool,
    indexes: &IndexSet,
    text: &str,
    stmt: &quiver_cypher::ast::Statement,
    params: &Params,
    opts: &QueryOptions,
    sink: &mut Sink,
) -> Result<Summary, QueryError> {
    let t0 = Instant::now();
    let writes = stmt.query.writes();
    if writes && tx.is_none() {
        return Err(QueryError::Unsupported(
            "this statement writes; run it through a session (quiver query / shell)".into(),
        ));
    }
    let g = Graph::with_delta(db, delta, writes);
    procs::check(text, stmt, &opts.procedures)?;
    let mut planner = plan::Planner::new(&g, params, indexes, &opts.procedures);
    let (root, columns) = planner.plan(&stmt.query)?;
    let descs = std::mem::take(&mut planner.descs);
    if let Some(h) = &opts.on_columns {
        (h.0)(&columns);
    }
    if stmt.explain == Some(Explain::Explain) {
        return Ok(Summary {
            columns,
            plan: Some(render_plan(&descs, root.id, None)),
            explained: true,
            elapsed: t0.elapsed(),
            ..Summary::default()
        });
    }
    let before = tx.as_ref().map(|t| t.counters).unwrap_or_default();
    let budget = match &opts.database_memory {
        Some(db) => db.child_waiting(
            opts.memory_limit,
            quiver_common::memory::WaitPolicy {
                timeout: opts.memory_wait,
                cancel: opts.cancel.clone(),
                // Parallel operators wait on rayon's workers: they run queued jobs.
                idle: Some(|| matches!(rayon::yield_now(), Some(rayon::Yield::Executed))),
            },
        ),
        None => MemoryBudget::new(opts.memory_limit),
    };
    // A query that held much gives the memory back when it ends, however it ends
    // (glibc keeps freed memory in its arenas otherwise: a server at rest held 650-800
    // MiB after eight big queries).
    struct Release(MemoryBudget);
    impl Drop for Release {
        fn drop(&mut self) {
            if self.0.peak_bytes() >= quiver_common::memory::RELEASE_AFTER_BYTES {
                quiver_common::memory::release_free_memory();
            }
        }
    }
    let _release = Release(budget.clone());
    let _running = opts
        .activity
        .as_ref()
        .map(|a| a.start(text, &opts.client, &budget));
    let mut cx = Cx {
        env: expr::Env {
            g: &g,
            budget: Some(budget.clone()),
        },
        budget: budget.clone(),
        stats: vec![OpStats::default(); descs.len()],
        cancel: opts.cancel.as_deref(),
        deadline: opts.deadline,
        tx,
        explicit_tx,
        indexes: Some(indexes),
        load: load::LoadState::new(opts.import_dir.clone(), opts.rejects_dir.clone()),
        want: batch::BATCH_ROWS,
        temp_dir: opts.temp_dir.clone(),
        catalog: opts.catalog.clone(),
    };
    let mut op = root.op;
    let mut rows = 0u64;
    // A statement that ends in an updating clause (no RETURN) has no result rows: its
    // batches only drive the writes.
    let returns = !columns.is_empty();
    while let Some(b) = op.next(&mut cx)? {
        if returns {
            rows += b.len as u64;
            sink(&g, &b)?;
        }
    }
    let plan = (stmt.explain == Some(Explain::Profile))
        .then(|| render_plan(&descs, root.id, Some(&cx.stats)));
    let counters = cx
        .tx
        .as_ref()
        .map(|t| t.counters.since(&before))
        .unwrap_or_default();
    let rejects_path = cx.load.finish()?;
    Ok(Summary {
        columns,
        rows,
        elapsed: t0.elapsed(),
        peak_bytes: budget.peak_bytes(),
        plan,
        counters,
        bad_rows: cx.load.bad_rows,
        rejects_path,
        graph_read: stmt.query.graph_read(),
        rerunnable: stmt.query.rerunnable(),
        ..Summary::default()
    })
}

/// LOAD CSV's defaults for a database at `db`: files come from the `import` folder beside
/// it, skipped rows go to `<db>.rejects/` beside it.
pub fn default_load_dirs(db: &Path) -> (PathBuf, PathBuf) {
    let parent = db
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = db
        .file_name()
        .map_or_else(|| "db".into(), |n| n.to_string_lossy().to_string());
    (
        parent.join("import"),
        parent.join(format!("{name}.rejects")),
    )
}
