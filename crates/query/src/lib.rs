//! Cypher execution over an open database.
//!
//! The path of a query: [`quiver_cypher`] parses and checks the text; [`plan`] binds
//! names to labels, types and properties of the database and builds a tree of physical
//! operators ([`ops`]); the tree runs pulling [`batch::Batch`]es of rows whose values
//! reference storage ([`value`]); [`render`] turns results into text, CSV or JSON.
//!
//! Queries take `&Database` and hold no locks: a database generation is immutable, so
//! any number of threads can query one open database at once, each seeing the
//! generation it opened (a consistent snapshot). [`Session`] adds what needs the
//! directory: index DDL (which publishes a new generation) and reopening.
//!
//! **Invariant:** library code never panics on a query; every failure is a
//! [`QueryError`].

pub mod batch;
pub mod error;
pub mod expr;
pub mod graph;
pub mod index;
pub mod ops;
pub mod plan;
pub mod render;
/// The value type lives in the engine (the delta stores values); re-exported here.
pub use quiver_engine::value;

pub use error::QueryError;
pub use graph::Graph;
pub use plan::Params;
pub use value::Value;

use batch::Batch;
use index::IndexSet;
use ops::{Cx, OpStats};
use quiver_common::memory::MemoryBudget;
use quiver_common::size::human_bytes;
use quiver_cypher::ast::Explain;
use quiver_storage::{Database, OpenError, OpenMode};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Per-query settings.
#[derive(Debug, Clone)]
pub struct QueryOptions {
    /// Bytes a query's operators may hold (hash tables, sort buffers, BFS frontiers).
    pub memory_limit: u64,
    /// Set to stop a running query (Ctrl-C in the shell).
    pub cancel: Option<Arc<AtomicBool>>,
}

/// A quarter of the machine's memory, at most 4 GiB.
pub fn default_memory_limit() -> u64 {
    let ram = quiver_common::size::physical_memory_bytes().max(1 << 30);
    (ram / 4).min(4 << 30)
}

impl Default for QueryOptions {
    fn default() -> Self {
        QueryOptions {
            memory_limit: default_memory_limit(),
            cancel: None,
        }
    }
}

/// What a run produced besides its rows.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub columns: Vec<String>,
    pub rows: u64,
    pub elapsed: Duration,
    /// Most bytes the query's operators held at once.
    pub peak_bytes: u64,
    /// The plan (EXPLAIN) or the plan with rows, time and memory per operator (PROFILE).
    pub plan: Option<String>,
    /// EXPLAIN: planned, not run.
    pub explained: bool,
    /// Set by index DDL: the database changed on disk.
    pub changed: bool,
    pub message: Option<String>,
}

/// Receives result batches as they are produced.
pub type Sink<'s> = dyn FnMut(&Graph, &Batch) -> Result<(), QueryError> + 's;

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

/// Runs one read query against `db`, passing result batches to `sink`.
pub fn run(
    db: &Database,
    indexes: &IndexSet,
    text: &str,
    params: &Params,
    opts: &QueryOptions,
    sink: &mut Sink,
) -> Result<Summary, QueryError> {
    let t0 = Instant::now();
    let stmt = quiver_cypher::parse_query(text)?;
    quiver_cypher::bind::check(text, &stmt)?;
    let g = Graph::new(db);
    let mut planner = plan::Planner::new(&g, params, indexes);
    let (root, columns) = planner.plan(&stmt.query)?;
    let descs = std::mem::take(&mut planner.descs);
    if stmt.explain == Some(Explain::Explain) {
        return Ok(Summary {
            columns,
            plan: Some(render_plan(&descs, root.id, None)),
            explained: true,
            elapsed: t0.elapsed(),
            ..Summary::default()
        });
    }
    let budget = MemoryBudget::new(opts.memory_limit);
    let mut cx = Cx {
        env: expr::Env { g: &g },
        budget: budget.clone(),
        stats: vec![OpStats::default(); descs.len()],
        cancel: opts.cancel.as_deref(),
    };
    let mut op = root.op;
    let mut rows = 0u64;
    while let Some(b) = op.next(&mut cx)? {
        rows += b.len as u64;
        sink(&g, &b)?;
    }
    let plan = (stmt.explain == Some(Explain::Profile))
        .then(|| render_plan(&descs, root.id, Some(&cx.stats)));
    Ok(Summary {
        columns,
        rows,
        elapsed: t0.elapsed(),
        peak_bytes: budget.peak_bytes(),
        plan,
        ..Summary::default()
    })
}

/// Runs a query and collects its rows.
pub fn query(
    db: &Database,
    text: &str,
    params: &Params,
) -> Result<(Vec<String>, Vec<Vec<Value>>), QueryError> {
    let mut rows = Vec::new();
    let ix = IndexSet::load(db);
    let s = run(
        db,
        &ix,
        text,
        params,
        &QueryOptions::default(),
        &mut |_, b| {
            for r in 0..b.len {
                rows.push(b.row(r));
            }
            Ok(())
        },
    )?;
    Ok((s.columns, rows))
}

/// Index DDL, recognised before the Cypher parser.
#[derive(Debug, Clone, PartialEq)]
pub enum Schema {
    Create { label: String, prop: String },
    Drop { label: String, prop: String },
    Show,
}

fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.trim().trim_end_matches(';').chars() {
        if c.is_alphanumeric() || c == '_' || c == '`' {
            cur.push(c);
        } else {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out.into_iter()
        .map(|w| w.trim_matches('`').to_string())
        .collect()
}

/// Recognises `CREATE INDEX ON :L(p)`, `CREATE INDEX [name] FOR (n:L) ON (n.p)`,
/// `DROP INDEX ON :L(p)` and `SHOW INDEXES`; `None` for anything else.
pub fn parse_schema(text: &str) -> Option<Result<Schema, QueryError>> {
    let w = words(text);
    let up: Vec<String> = w.iter().map(|x| x.to_ascii_uppercase()).collect();
    let u: Vec<&str> = up.iter().map(|s| s.as_str()).collect();
    if u.len() == 2 && u[0] == "SHOW" && (u[1] == "INDEXES" || u[1] == "INDEX") {
        return Some(Ok(Schema::Show));
    }
    let is_create = u.first() == Some(&"CREATE") && u.get(1) == Some(&"INDEX");
    let is_drop = u.first() == Some(&"DROP") && u.get(1) == Some(&"INDEX");
    if !is_create && !is_drop {
        return None;
    }
    let bad = || {
        Some(Err(QueryError::Argument(
            "index syntax: CREATE INDEX ON :Label(property), DROP INDEX ON :Label(property), SHOW INDEXES".into(),
        )))
    };
    // ON : L ( p )
    let on = |i: usize| -> Option<(String, String)> {
        if u.get(i) == Some(&"ON")
            && u.get(i + 1) == Some(&":")
            && u.get(i + 3) == Some(&"(")
            && u.get(i + 5) == Some(&")")
            && u.len() == i + 6
        {
            Some((w[i + 2].clone(), w[i + 4].clone()))
        } else {
            None
        }
    };
    if let Some((label, prop)) = on(2) {
        return Some(Ok(if is_create {
            Schema::Create { label, prop }
        } else {
            Schema::Drop { label, prop }
        }));
    }
    // CREATE INDEX [name] FOR ( n : L ) ON ( n . p )
    if is_create {
        let f = u.iter().position(|x| *x == "FOR")?;
        let t = &u[f..];
        if t.len() == 12
            && t[1] == "("
            && t[3] == ":"
            && t[5] == ")"
            && t[6] == "ON"
            && t[7] == "("
            && t[9] == "."
            && t[11] == ")"
        {
            return Some(Ok(Schema::Create {
                label: w[f + 4].clone(),
                prop: w[f + 10].clone(),
            }));
        }
    }
    bad()
}

/// An open database with its indexes: what the CLI and the shell use.
pub struct Session {
    dir: PathBuf,
    mode: OpenMode,
    db: Database,
    indexes: IndexSet,
    pub opts: QueryOptions,
}

impl Session {
    pub fn open(dir: &Path, mode: OpenMode) -> Result<Session, OpenError> {
        let db = Database::open(dir, mode)?;
        let indexes = IndexSet::load(&db);
        Ok(Session {
            dir: dir.to_path_buf(),
            mode,
            db,
            indexes,
            opts: QueryOptions::default(),
        })
    }

    pub fn db(&self) -> &Database {
        &self.db
    }

    fn reopen(&mut self) -> Result<(), QueryError> {
        self.db = Database::open(&self.dir, self.mode)
            .map_err(|e| QueryError::Index(format!("reopening after the change: {e}")))?;
        self.indexes = IndexSet::load(&self.db);
        Ok(())
    }

    /// Runs a query or an index command.
    pub fn run(
        &mut self,
        text: &str,
        params: &Params,
        sink: &mut Sink,
    ) -> Result<Summary, QueryError> {
        let Some(schema) = parse_schema(text) else {
            return run(&self.db, &self.indexes, text, params, &self.opts, sink);
        };
        let t0 = Instant::now();
        match schema? {
            Schema::Show => {
                let g = Graph::new(&self.db);
                let mut b = Batch::empty(4);
                for i in index::show(&self.db) {
                    b.push_row(vec![
                        Value::str(&i.label),
                        Value::str(&i.property),
                        Value::str(i.kind),
                        Value::Int(i.entries as i64),
                    ]);
                }
                let rows = b.len as u64;
                if rows > 0 {
                    sink(&g, &b)?;
                }
                Ok(Summary {
                    columns: vec![
                        "label".into(),
                        "property".into(),
                        "kind".into(),
                        "entries".into(),
                    ],
                    rows,
                    elapsed: t0.elapsed(),
                    ..Summary::default()
                })
            }
            Schema::Create { label, prop } => {
                let n = index::create(&self.dir, &self.db, &label, &prop)?;
                self.reopen()?;
                Ok(Summary {
                    elapsed: t0.elapsed(),
                    changed: true,
                    message: Some(format!("index on :{label}({prop}) created, {n} entries")),
                    ..Summary::default()
                })
            }
            Schema::Drop { label, prop } => {
                index::drop(&self.dir, &self.db, &label, &prop)?;
                self.reopen()?;
                Ok(Summary {
                    elapsed: t0.elapsed(),
                    changed: true,
                    message: Some(format!("index on :{label}({prop}) dropped")),
                    ..Summary::default()
                })
            }
        }
    }
}

/// Parses `--param name=value`: integers, floats, true/false/null, JSON lists and maps,
/// quoted strings; anything else is a string.
pub fn parse_param(s: &str) -> Result<(String, Value), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("--param {s}: expected name=value"))?;
    Ok((
        k.trim().trim_start_matches('$').to_string(),
        parse_value(v.trim()),
    ))
}

/// A parameter value from text (see [`parse_param`]).
pub fn parse_value(v: &str) -> Value {
    if let Ok(i) = v.parse::<i64>() {
        return Value::Int(i);
    }
    if let Ok(f) = v.parse::<f64>() {
        if v.contains(['.', 'e', 'E'])
            && !v.chars().any(|c| c.is_alphabetic() && c != 'e' && c != 'E')
        {
            return Value::Float(f);
        }
    }
    match v {
        "true" => return Value::Bool(true),
        "false" => return Value::Bool(false),
        "null" => return Value::Null,
        _ => {}
    }
    if v.starts_with('[') || v.starts_with('{') || v.starts_with('"') {
        if let Ok(j) = serde_json::from_str::<serde_json::Value>(v) {
            return from_json(&j);
        }
    }
    if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') {
        return Value::str(&v[1..v.len() - 1]);
    }
    Value::str(v)
}

fn from_json(j: &serde_json::Value) -> Value {
    match j {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => n
            .as_i64()
            .map(Value::Int)
            .unwrap_or_else(|| Value::Float(n.as_f64().unwrap_or(f64::NAN))),
        serde_json::Value::String(s) => Value::str(s),
        serde_json::Value::Array(a) => Value::list(a.iter().map(from_json).collect()),
        serde_json::Value::Object(o) => Value::Map(Arc::new(
            o.iter().map(|(k, v)| (k.clone(), from_json(v))).collect(),
        )),
    }
}
