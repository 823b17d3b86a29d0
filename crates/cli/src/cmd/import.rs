//! `quiver import`: flags -> `ImportConfig`, a progress bar, and the summary.

use anyhow::{bail, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use quiver_common::size::{human_bytes, parse_bytes};
use quiver_import::{ImportConfig, ImportSummary, InputGroup, Phase, Progress};
use quiver_storage::manifest::IdType;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// The database directory to create.
    #[arg(long)]
    db: PathBuf,
    /// Nodes: `[Label[:Label2]=]file.csv[,more.csv]` (the first file's first line is the header).
    #[arg(long, value_name = "[LABELS=]FILES")]
    nodes: Vec<String>,
    /// Relationships: `[TYPE=]file.csv[,more.csv]`.
    #[arg(long, value_name = "[TYPE=]FILES")]
    relationships: Vec<String>,
    /// Field delimiter (one byte; `\t` for tab). Default: `,`, or `;`, tab or `|` when
    /// every file's header is split by that one and not by commas (said on stderr).
    #[arg(long)]
    delimiter: Option<String>,
    /// Quote character, or `none` to treat quotes as data. Default: `"`, or `'` when the
    /// files quote fields with it and have no `"` (said on stderr).
    #[arg(long)]
    quote: Option<String>,
    /// Separator of array elements and of extra labels. Default: `;`, or `|` when the
    /// fields are `;`-delimited.
    #[arg(long)]
    array_delimiter: Option<String>,
    /// How node ids are compared: as strings (the default) or as integers. With
    /// --append, the database's own id type unless given.
    #[arg(long, value_parser = ["string", "integer"])]
    pub(crate) id_type: Option<String>,
    /// Memory the import may hold (e.g. 512MiB, 4GiB). Default: half of RAM.
    #[arg(long)]
    pub(crate) memory_budget: Option<String>,
    /// Worker threads. Default: all cores.
    #[arg(long)]
    threads: Option<usize>,
    /// Directory for spill files. Default: inside the database being written.
    #[arg(long)]
    temp_dir: Option<PathBuf>,
    /// Skip bad rows (writing each to the rejects file) instead of stopping.
    #[arg(long)]
    skip_bad_rows: bool,
    /// With --skip-bad-rows: stop (importing nothing) after more than N bad rows.
    #[arg(long, value_name = "N")]
    bad_tolerance: Option<u64>,
    /// Where skipped rows go. Default: DB.rejects.csv beside the database.
    #[arg(long)]
    rejects: Option<PathBuf>,
    /// Replace an existing database.
    #[arg(long, conflicts_with = "append")]
    overwrite: bool,
    /// Add the files' nodes and relationships to an existing database (its pending
    /// writes are checkpointed first). Relationship endpoints may be nodes already in
    /// the database (found through its id index); an id it has already is rejected as a
    /// duplicate, like a bad row.
    #[arg(long)]
    pub(crate) append: bool,
    /// A vector index to build once the nodes are in, as `CREATE VECTOR INDEX` would:
    /// `NAME=LABEL.PROPERTY:DIMENSIONS[:cosine|euclidean]` (repeatable; the property a
    /// `float[]` column). Not with --append: there, run CREATE VECTOR INDEX.
    #[arg(
        long,
        value_name = "NAME=LABEL.PROP:DIMS[:SIMILARITY]",
        conflicts_with = "append"
    )]
    vector_index: Vec<String>,
    /// Drop relationship properties (halves what relationships cost).
    #[arg(long)]
    no_edge_properties: bool,
    /// Resolve node ids by sorting them on disk from the start, as the import does on
    /// its own when the ids outgrow --memory-budget (for ids you know will not fit: it
    /// skips filling memory first).
    #[arg(long)]
    spill_ids: bool,
    /// Sniff the types of untyped columns from the first records (headers without any
    /// annotation always are).
    #[arg(long)]
    infer_types: bool,
    /// The id column of a header without annotations, for a label: `LABEL=COLUMN`
    /// (repeatable).
    #[arg(long, value_name = "LABEL=COLUMN")]
    id_column: Vec<String>,
    /// The start column of a relationship header without annotations: `TYPE=COLUMN`.
    #[arg(long, value_name = "TYPE=COLUMN")]
    start_column: Vec<String>,
    /// The end column of a relationship header without annotations: `TYPE=COLUMN`.
    #[arg(long, value_name = "TYPE=COLUMN")]
    end_column: Vec<String>,
    /// Print the header each file would be read as (in Neo4j's convention, types
    /// sniffed), and import nothing.
    #[arg(long)]
    dry_run: bool,
    /// A property value that means "missing", besides the empty field; repeatable
    /// (`--null-marker NA --null-marker '\N'`). R writes NA, MySQL \N.
    #[arg(long = "null-marker", value_name = "TEXT")]
    null_markers: Vec<String>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
    /// Print nothing but errors.
    #[arg(long)]
    quiet: bool,
}

fn one_byte(flag: &str, s: &str) -> Result<u8> {
    let s = match s {
        "\\t" | "tab" => "\t",
        other => other,
    };
    if s.len() != 1 {
        bail!("--{flag} must be one byte, got '{s}'");
    }
    Ok(s.as_bytes()[0])
}

/// Draws the import's phases on stderr.
struct Bar {
    bar: ProgressBar,
    /// Phase, its start, and the row count when it started (rows are cumulative).
    state: Mutex<(Phase, Instant, Option<u64>)>,
}

impl Bar {
    fn new(quiet: bool) -> Bar {
        let target = if quiet || !std::io::stderr().is_terminal() {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr_with_hz(5)
        };
        let bar = ProgressBar::with_draw_target(Some(0), target);
        Bar {
            bar,
            state: Mutex::new((Phase::Nodes, Instant::now(), None)),
        }
    }
}

impl Progress for Bar {
    fn phase(&self, phase: Phase, total: u64) {
        if let Ok(mut s) = self.state.lock() {
            *s = (phase, Instant::now(), None);
        }
        let template = if phase.unit_is_bytes() {
            "{prefix:>22} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {msg} ETA {eta}"
        } else {
            "{prefix:>22} [{bar:30}] {human_pos}/{human_len} {msg} ETA {eta}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            self.bar.set_style(style.progress_chars("=> "));
        }
        self.bar.set_prefix(phase.name());
        self.bar.set_message("");
        self.bar.set_length(total);
        self.bar.reset();
    }

    fn advance(&self, done: u64, rows: u64) {
        self.bar.set_position(done);
        if let Ok(mut s) = self.state.lock() {
            let secs = s.1.elapsed().as_secs_f64().max(1e-3);
            if rows > 0 {
                let base = *s.2.get_or_insert(rows);
                let rate = (rows - base) as f64 / secs;
                self.bar
                    .set_message(format!("{rows} rows ({rate:.0} rows/s)"));
            } else if !s.0.unit_is_bytes() {
                self.bar
                    .set_message(format!("({:.0}/s)", done as f64 / secs));
            }
        }
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

pub fn run(a: Args) -> Result<()> {
    if a.nodes.is_empty() && !(a.append && !a.relationships.is_empty()) {
        bail!(
            "nothing to import: give at least one --nodes [LABEL=]FILE, or --append with --relationships (see quiver import --help)"
        );
    }
    if a.append {
        // A database that `quiver serve` holds: the server appends (see `control`).
        if let Some(summary) = super::control::append_remote(&a.db, &Bar::new(a.quiet || a.json))? {
            return report(&a, &summary);
        }
    }
    let vector_indexes = a
        .vector_index
        .iter()
        .map(|v| vector_index_spec(v))
        .collect::<Result<Vec<_>>>()?;
    let mut cfg = config(&a, None)?;
    if a.dry_run {
        for (file, header, plain) in quiver_import::describe(&cfg)? {
            let how = if plain {
                "no annotations; read as"
            } else {
                "annotated; read as"
            };
            println!("{}: {how}: {header}", file.display());
        }
        return Ok(());
    }
    // Ctrl-C stops the import cleanly (nothing published, staging removed); a second
    // Ctrl-C exits at once (the next import cleans up what is left).
    let cancel = cfg.cancel.clone();
    let _ = ctrlc::set_handler(move || {
        if cancel.swap(true, std::sync::atomic::Ordering::SeqCst) {
            std::process::exit(130);
        }
        eprintln!("\ninterrupting: removing what was staged (Ctrl-C again to exit at once)");
    });
    let bar = Bar::new(a.quiet || a.json);
    let summary = if a.append {
        append(&mut cfg, &a, &bar)
    } else {
        quiver_import::import(&cfg, &bar).map_err(anyhow::Error::from)
    }
    .map_err(|e| with_delimiter_hint(e, cfg.dialect.delimiter))?;
    bar.finish();
    report(&a, &summary)?;
    // The vector indexes, each a new generation over the imported columns (within the
    // import's memory budget).
    let budget = quiver_common::memory::MemoryBudget::new(cfg.memory_budget_bytes);
    for meta in vector_indexes {
        let t = Instant::now();
        let (name, label, prop) = (meta.name.clone(), meta.label.clone(), meta.property.clone());
        let db = quiver_storage::read::Database::open(&a.db, quiver_storage::OpenMode::Mapped)?;
        quiver_query::index::vector_create_in(&a.db, &db, meta, false, &budget)
            .map_err(|e| anyhow::anyhow!("vector index {name}: {e}"))?;
        let db = quiver_storage::read::Database::open(&a.db, quiver_storage::OpenMode::Mapped)?;
        let entries = db
            .manifest()
            .vector_indexes
            .iter()
            .find(|v| v.name == name)
            .map_or(0, |v| v.entries);
        if !a.quiet && !a.json {
            eprintln!(
                "vector index {name} on :{label}({prop}): {entries} vectors in {:.1} s",
                t.elapsed().as_secs_f64()
            );
        }
    }
    Ok(())
}

/// `NAME=LABEL.PROPERTY:DIMENSIONS[:SIMILARITY]` as a vector index to build.
fn vector_index_spec(spec: &str) -> Result<quiver_storage::manifest::VectorIndexMeta> {
    let usage = || {
        anyhow::anyhow!(
            "--vector-index {spec}: expected NAME=LABEL.PROPERTY:DIMENSIONS[:cosine|euclidean], e.g. docs=Doc.embedding:384:cosine"
        )
    };
    let (name, rest) = spec.split_once('=').ok_or_else(usage)?;
    let (target, rest) = rest.split_once(':').ok_or_else(usage)?;
    let (label, prop) = target.split_once('.').ok_or_else(usage)?;
    let (dims, sim) = rest.split_once(':').unwrap_or((rest, "cosine"));
    let dimensions: u32 = dims.parse().map_err(|_| usage())?;
    if name.is_empty() || label.is_empty() || prop.is_empty() || !(1..=4096).contains(&dimensions) {
        return Err(usage());
    }
    let similarity = match sim.to_ascii_lowercase().as_str() {
        s @ ("cosine" | "euclidean") => s.to_string(),
        _ => return Err(usage()),
    };
    Ok(quiver_storage::manifest::VectorIndexMeta {
        name: name.to_string(),
        label: label.to_string(),
        property: prop.to_string(),
        dimensions,
        similarity,
        file: None,
        covers_nodes: 0,
        entries: 0,
        relationship: false,
    })
}

/// Prints what the import did, as JSON with `--json`.
fn report(a: &Args, summary: &ImportSummary) -> Result<()> {
    if a.json {
        println!("{}", serde_json::to_string_pretty(&to_json(summary))?);
    } else if !a.quiet {
        print_summary(summary);
    }
    Ok(())
}

/// The import's configuration from the command's arguments; `cwd`: the directory
/// relative paths are in, when not this process's (a server appending for a client).
pub(crate) fn config(a: &Args, cwd: Option<&std::path::Path>) -> Result<ImportConfig> {
    let mut cfg = ImportConfig::new(&a.db);
    for n in &a.nodes {
        cfg.nodes
            .push(InputGroup::parse(n).map_err(anyhow::Error::msg)?);
    }
    for r in &a.relationships {
        cfg.relationships
            .push(InputGroup::parse(r).map_err(anyhow::Error::msg)?);
    }
    // A server appending for a client: the client's relative paths are its own.
    let at = |p: &std::path::Path| match cwd {
        Some(c) if p.is_relative() => c.join(p),
        _ => p.to_path_buf(),
    };
    for g in cfg.nodes.iter_mut().chain(cfg.relationships.iter_mut()) {
        for f in g.files.iter_mut() {
            *f = at(f);
        }
    }
    // Parquet files (or folders of parts) are read through their schema.
    for g in cfg.nodes.iter_mut().chain(cfg.relationships.iter_mut()) {
        g.source = quiver_arrow::source::parquet_group(&g.files).map_err(anyhow::Error::msg)?;
    }
    // How the files are read: what the flags give, the rest decided from the files,
    // as every front end decides it (quiver_import::decide).
    let given = quiver_import::decide::Given {
        delimiter: a
            .delimiter
            .as_deref()
            .map(|d| one_byte("delimiter", d))
            .transpose()?,
        quote: match a.quote.as_deref() {
            Some(q) if q.eq_ignore_ascii_case("none") => Some(None),
            Some(q) => Some(Some(one_byte("quote", q)?)),
            None => None,
        },
        array_delimiter: a
            .array_delimiter
            .as_deref()
            .map(|d| one_byte("array-delimiter", d))
            .transpose()?,
        id_type: match a.id_type.as_deref() {
            Some("integer") => Some(IdType::Integer),
            Some(_) => Some(IdType::String),
            None => None,
        },
        appending: a.append,
    };
    for d in quiver_import::decide::settle(&mut cfg, &given)? {
        let show = match d {
            quiver_import::decide::Decided::IntegerIds => !a.json,
            _ => !a.quiet,
        };
        if show {
            eprintln!("{d}");
        }
    }
    if let Some(b) = &a.memory_budget {
        cfg.memory_budget_bytes = parse_bytes(b).map_err(anyhow::Error::msg)?;
    }
    if let Some(t) = a.threads {
        cfg.threads = t.max(1);
    }
    cfg.temp_dir = a.temp_dir.as_deref().map(at);
    cfg.skip_bad_rows = a.skip_bad_rows || a.bad_tolerance.is_some();
    cfg.null_markers = a
        .null_markers
        .iter()
        .map(|m| m.as_bytes().to_vec())
        .collect();
    cfg.bad_tolerance = a.bad_tolerance;
    cfg.rejects = a.rejects.as_deref().map(at);
    cfg.overwrite = a.overwrite;
    cfg.no_edge_properties = a.no_edge_properties;
    cfg.spill_ids = a.spill_ids;
    cfg.infer_types = a.infer_types;
    let pairs = |flag: &str, list: &[String]| -> Result<Vec<(String, String)>> {
        list.iter()
            .map(|x| match x.split_once('=') {
                Some((l, c)) if !l.trim().is_empty() && !c.trim().is_empty() => {
                    Ok((l.trim().to_string(), c.trim().to_string()))
                }
                _ => {
                    bail!("--{flag} takes NAME=COLUMN (e.g. --{flag} Person=person_no), not `{x}`")
                }
            })
            .collect()
    };
    cfg.id_columns = pairs("id-column", &a.id_column)?;
    cfg.start_columns = pairs("start-column", &a.start_column)?;
    cfg.end_columns = pairs("end-column", &a.end_column)?;
    Ok(cfg)
}

/// `--append` on a database no other process holds: opened for writing, and appended
/// to as a live database is (`quiver_query::append`): pending writes checkpointed
/// first, the append published as a new generation, declared indexes extended.
fn append(cfg: &mut ImportConfig, a: &Args, bar: &Bar) -> Result<ImportSummary> {
    use quiver_storage::OpenMode;
    if !a.db.join("CURRENT").exists() {
        bail!(
            "{} is not a database; --append adds to an existing one (leave --append out to create it)",
            a.db.display()
        );
    }
    let session = quiver_query::Session::open(&a.db, OpenMode::Mapped)?;
    let store = session.store().clone();
    if !store.is_writable() {
        bail!(
            "{} is open for writing by another process that does not take appends (a shell or a one-shot command, or a server of an older version); stop it and append again",
            a.db.display()
        );
    }
    let id_type = a.id_type.is_some().then_some(cfg.id_type);
    let done = quiver_query::append::append(
        &store,
        cfg.clone(),
        id_type,
        a.memory_budget.is_some(),
        &Default::default(),
        bar,
    )?;
    Ok(done.summary)
}

fn to_json(s: &ImportSummary) -> serde_json::Value {
    serde_json::json!({
        "db": s.db,
        "nodes": s.n_nodes,
        "relationships": s.n_rels,
        "nodes_by_label": s.nodes_by_label.iter().map(|(l, n)| serde_json::json!({"label": l, "count": n})).collect::<Vec<_>>(),
        "relationships_by_type": s.rels_by_type.iter().map(|(t, n)| serde_json::json!({"type": t, "count": n})).collect::<Vec<_>>(),
        "rows_read": s.rows_read,
        "rows_rejected": s.rows_rejected,
        "rejects_file": s.rejects_path,
        "bytes_read": s.bytes_read,
        "seconds": s.seconds,
        "rows_per_second": s.rows_per_second(),
        "memory_budget_bytes": s.budget_bytes,
        "budget_peak_bytes": s.budget_peak_bytes,
        "peak_rss_bytes": s.peak_rss_bytes,
        "db_bytes": s.db_bytes,
        "row_groups": s.row_groups,
        "spilled_edges": s.spilled_edges,
        "spilled_ids": s.spilled_ids,
        "inferred_headers": s.inferred_headers.iter().map(|(f, h)| serde_json::json!({"file": f, "header": h})).collect::<Vec<_>>(),
        "phases": s.phases.iter().map(|p| serde_json::json!({"phase": p.name, "seconds": p.seconds, "peak_rss_bytes": p.peak_rss_bytes})).collect::<Vec<_>>(),
    })
}

fn print_summary(s: &ImportSummary) {
    for (f, h) in &s.inferred_headers {
        // A newcomer's header: what it was read as, to check, or to pin by pasting it as
        // the file's first line.
        eprintln!(
            "{}: no annotations in the header; read as: {h}",
            f.display()
        );
    }
    println!("imported into {}", s.db.display());
    for (l, n) in &s.nodes_by_label {
        println!("  :{l:<24} {n:>14} nodes");
    }
    if s.nodes_by_label.is_empty() {
        println!("  {:<25} {:>14} nodes", "(no label)", s.n_nodes);
    }
    for (t, n) in &s.rels_by_type {
        println!(
            "  [:{t}]{:<width$} {n:>14} relationships",
            "",
            width = 22usize.saturating_sub(t.len())
        );
    }
    println!(
        "  rows read      {:>14}  ({} bytes, {})",
        s.rows_read,
        s.bytes_read,
        human_bytes(s.bytes_read)
    );
    if s.rows_rejected > 0 {
        println!(
            "  rows skipped   {:>14}  (each in {})",
            s.rows_rejected,
            s.rejects_path
                .as_ref()
                .map_or(String::new(), |p| p.display().to_string())
        );
    }
    println!(
        "  wall time      {:>14.2} s  ({:.0} rows/s)",
        s.seconds,
        s.rows_per_second()
    );
    println!(
        "  peak memory    {:>14}  (budget {}, granted at most {})",
        human_bytes(s.peak_rss_bytes),
        human_bytes(s.budget_bytes),
        human_bytes(s.budget_peak_bytes)
    );
    println!(
        "  database size  {:>14}  ({} row groups)",
        human_bytes(s.db_bytes),
        s.row_groups
    );
    let phases: Vec<String> = s
        .phases
        .iter()
        .map(|p| {
            format!(
                "{} {:.2} s (peak so far {})",
                p.name,
                p.seconds,
                human_bytes(p.peak_rss_bytes)
            )
        })
        .collect();
    println!("  phases         {}", phases.join(", "));
    if s.spilled_ids > 0 {
        println!(
            "  sorted ids     {:>14} node ids sorted on disk (they did not fit the budget)",
            s.spilled_ids
        );
    }
    if s.spilled_edges > 0 {
        println!(
            "  spilled        {:>14} relationships to the temp directory",
            s.spilled_edges
        );
    }
}

/// An import error about a file whose header reads as one column with the delimiter in
/// use, but as several with another common one (`;`, tab, `|`), says which to pass.
fn with_delimiter_hint(e: anyhow::Error, delimiter: u8) -> anyhow::Error {
    let file = match e.downcast_ref::<quiver_import::ImportError>() {
        Some(
            quiver_import::ImportError::Input { file, .. }
            | quiver_import::ImportError::Header { file, .. },
        ) => file.clone(),
        _ => return e,
    };
    let found = quiver_csv::sniff::other_delimiter(&file, delimiter);
    match found {
        Some((n, d)) => {
            let shown = if d == b'\t' {
                "\\t".to_string()
            } else {
                (d as char).to_string()
            };
            anyhow::anyhow!(
                "{e:#}\n  hint: {}'s header is one column with `{}` but {n} with `{shown}`: it looks `{shown}`-delimited; pass --delimiter '{shown}'",
                file.display(),
                delimiter as char
            )
        }
        None => e,
    }
}
