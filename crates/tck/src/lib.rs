//! The openCypher TCK, run in-process.
//!
//! [`load`] reads the vendored feature files (`tests/tck/features`) with the `gherkin`
//! crate and expands Scenario Outlines into one [`Scenario`] per example row. [`run`]
//! plays a scenario's steps on a fresh database in a temporary folder:
//!
//! - `an empty graph`, `any graph`, `the <name> graph` (the kit's named graphs);
//! - `having executed:` (setup; a failure fails the scenario), `parameters are:`;
//! - `executing query:` / `executing control query:`;
//! - `the result should be[ (ignoring element order for lists)], in [any ]order:`,
//!   `the result should be empty`: rows compared through [`value::TVal::canon`];
//! - `the side effects should be:` / `no side effects`: the difference between the graph
//!   before and after the query (nodes, relationships, label names, property triples),
//!   which is how the kit defines them;
//! - `a <Type> should be raised at <compile time|runtime|any time>: <detail>`: the
//!   error's type and phase ([`classify`]) and its detail code
//!   ([`QueryError::detail`]) are checked.
//! - `there exists a procedure ...`: registers a test procedure (its signature and
//!   table) with the scenario's session.
//!
//! The skip list (`tests/tck/skip.txt`) names scenarios (or prefixes of their ids) that
//! are not run, each with its reason; [`Report`] counts pass, fail and skip per area.

pub mod value;

use quiver_query::{QueryError, Session};
use quiver_storage::OpenMode;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;
use value::TVal;

/// Longest a single query of a scenario may run before it is cancelled (and fails).
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(20);

/// One step: its text (keyword dropped), docstring and table.
#[derive(Debug, Clone)]
pub struct Step {
    pub text: String,
    pub doc: Option<String>,
    pub table: Option<Vec<Vec<String>>>,
}

/// One scenario (an outline's example row is a scenario of its own).
#[derive(Debug, Clone)]
pub struct Scenario {
    /// `clauses/match/Match1.feature: [1] Match non-existent nodes returns empty`, with
    /// ` #k` (1-based example row) for outlines.
    pub id: String,
    /// `clauses/match`.
    pub area: String,
    pub steps: Vec<Step>,
}

impl Scenario {
    /// `clauses`, `expressions` or `useCases`.
    pub fn top(&self) -> &str {
        self.area.split('/').next().unwrap_or("")
    }
}

/// Reads every feature file under `features`, in path order.
pub fn load(features: &Path) -> Result<Vec<Scenario>, String> {
    let mut files = Vec::new();
    walk(features, &mut files).map_err(|e| format!("{}: {e}", features.display()))?;
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let rel = f
            .strip_prefix(features)
            .unwrap_or(&f)
            .to_string_lossy()
            .replace('\\', "/");
        let area = rel.rsplit_once('/').map_or("", |(d, _)| d).to_string();
        let text = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
        let feature = gherkin::Feature::parse(uncomment(&text), gherkin::GherkinEnv::default())
            .map_err(|e| format!("{}: {e:?}", f.display()))?;
        let background: Vec<Step> = feature
            .background
            .iter()
            .flat_map(|b| b.steps.iter().map(step))
            .collect();
        for sc in &feature.scenarios {
            let base: Vec<Step> = background
                .iter()
                .cloned()
                .chain(sc.steps.iter().map(step))
                .collect();
            let id = format!("{rel}: {}", sc.name.trim());
            let rows: Vec<(Vec<String>, Vec<String>)> = sc
                .examples
                .iter()
                .filter_map(|e| e.table.as_ref())
                .flat_map(|t| {
                    let head = t.rows.first().cloned().unwrap_or_default();
                    t.rows
                        .iter()
                        .skip(1)
                        .map(move |r| (head.clone(), r.clone()))
                })
                .collect();
            if rows.is_empty() {
                out.push(Scenario {
                    id,
                    area: area.clone(),
                    steps: base,
                });
                continue;
            }
            for (k, (head, row)) in rows.iter().enumerate() {
                let sub = |s: &str| {
                    let mut s = s.to_string();
                    for (h, v) in head.iter().zip(row) {
                        s = s.replace(&format!("<{h}>"), v);
                    }
                    s
                };
                let steps = base
                    .iter()
                    .map(|st| Step {
                        text: sub(&st.text),
                        doc: st.doc.as_deref().map(sub),
                        table: st.table.as_ref().map(|t| {
                            t.iter()
                                .map(|r| r.iter().map(|c| sub(c)).collect())
                                .collect()
                        }),
                    })
                    .collect();
                out.push(Scenario {
                    id: format!("{id} #{}", k + 1),
                    area: area.clone(),
                    steps,
                });
            }
        }
    }
    Ok(out)
}

/// The feature text without comment lines outside docstrings: the `gherkin` crate
/// refuses comments in some places the kit has them (between a feature's title and its
/// background). Lines are kept (blank) so positions stay.
fn uncomment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_doc = false;
    let mut first_step = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("\"\"\"") {
            in_doc = !in_doc;
        }
        if !in_doc && (t.starts_with("Scenario") || t.starts_with("Background")) {
            first_step = true;
        }
        if !in_doc && t.starts_with('#') {
            out.push('\n');
        } else if !in_doc && t.starts_with('|') {
            // Gherkin keeps a backslash before any other character as it is (`'\''` in a
            // cell); the crate accepts only `\\`, `\|` and `\n`, so double the others.
            let mut chars = line.chars().peekable();
            while let Some(c) = chars.next() {
                out.push(c);
                if c == '\\' {
                    match chars.next_if(|c| matches!(c, '\\' | '|' | 'n')) {
                        Some(n) => out.push(n),
                        None => out.push('\\'),
                    }
                }
            }
            out.push('\n');
        } else if !in_doc && first_step && t.starts_with("And ") {
            // A scenario may open with `And` in the kit (Match5 [25]); the crate wants
            // `Given` first.
            out.push_str(&line.replacen("And ", "Given ", 1));
            out.push('\n');
            first_step = false;
        } else {
            if !in_doc
                && ["Given ", "When ", "Then ", "But "]
                    .iter()
                    .any(|k| t.starts_with(k))
            {
                first_step = false;
            }
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            walk(&p, out)?;
        } else if p.extension().is_some_and(|x| x == "feature") {
            out.push(p);
        }
    }
    Ok(())
}

fn step(s: &gherkin::Step) -> Step {
    Step {
        text: s.value.trim().to_string(),
        doc: s.docstring.clone(),
        table: s.table.as_ref().map(|t| t.rows.clone()),
    }
}

/// How a scenario ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Pass,
    Fail(String),
    Skip(String),
}

/// The skip list: `id prefix | reason` per line; `#` starts a comment.
#[derive(Debug, Default)]
pub struct SkipList(Vec<(String, String)>);

impl SkipList {
    pub fn parse(text: &str) -> Result<SkipList, String> {
        let mut v = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let l = line.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let (id, why) = l
                .rsplit_once(" | ")
                .ok_or_else(|| format!("skip list line {}: expected `id | reason`", i + 1))?;
            if why.trim().is_empty() {
                return Err(format!("skip list line {}: a skip needs its reason", i + 1));
            }
            v.push((id.trim().to_string(), why.trim().to_string()));
        }
        Ok(SkipList(v))
    }

    pub fn reason(&self, id: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(p, _)| id.starts_with(p.as_str()))
            .map(|(_, r)| r.as_str())
    }
}

/// Counts per area.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub pass: usize,
    pub fail: usize,
    pub skip: usize,
}

impl Counts {
    pub fn add(&mut self, o: &Outcome) {
        match o {
            Outcome::Pass => self.pass += 1,
            Outcome::Fail(_) => self.fail += 1,
            Outcome::Skip(_) => self.skip += 1,
        }
    }

    pub fn total(&self) -> usize {
        self.pass + self.fail + self.skip
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} skipped of {} ({:.1}%)",
            self.pass,
            self.fail,
            self.skip,
            self.total(),
            100.0 * self.pass as f64 / self.total().max(1) as f64
        )
    }
}

/// Every scenario's outcome.
#[derive(Debug, Default)]
pub struct Report {
    pub results: Vec<(Scenario, Outcome)>,
}

impl Report {
    pub fn total(&self) -> Counts {
        let mut c = Counts::default();
        for (_, o) in &self.results {
            c.add(o);
        }
        c
    }

    /// Counts per key (`Scenario::top` or `Scenario::area`).
    pub fn by(&self, key: impl Fn(&Scenario) -> String) -> BTreeMap<String, Counts> {
        let mut m: BTreeMap<String, Counts> = BTreeMap::new();
        for (s, o) in &self.results {
            m.entry(key(s)).or_default().add(o);
        }
        m
    }

    /// The one summary line: overall, then per top-level area.
    pub fn line(&self) -> String {
        let per = self
            .by(|s| s.top().to_string())
            .iter()
            .map(|(a, c)| format!("{a} {}/{}/{}", c.pass, c.fail, c.skip))
            .collect::<Vec<_>>()
            .join(", ");
        format!("tck: {}; passed/failed/skipped: {per}", self.total())
    }
}

/// Runs `scenarios` on `threads` threads; `graphs` is the kit's named-graph folder.
/// Labels and relationship types the kit's queries name (`:Name`, capitalised as the
/// kit writes them), for [`History`].
pub fn kit_names(scenarios: &[Scenario]) -> Vec<String> {
    let mut names = BTreeSet::new();
    for st in scenarios.iter().flat_map(|s| &s.steps) {
        let Some(q) = &st.doc else { continue };
        let b = q.as_bytes();
        for (i, _) in q.match_indices(':') {
            let rest = &b[i + 1..];
            if !rest.first().is_some_and(|c| c.is_ascii_uppercase()) {
                continue;
            }
            let n = rest
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
                .count();
            names.insert(q[i + 1..i + 1 + n].to_string());
        }
    }
    names.into_iter().collect()
}

/// What a scenario's database has held before the scenario begins: with
/// `Held(names)`, a node carrying each name as a label and a relationship of each as
/// its type were made and deleted, so the labels and types are known to the database
/// while the graph is empty. An answer that is right only because a label never
/// existed shows here (an earlier planner dropped the labels of a bound node, which a
/// fresh database hid). The history stays in the delta: a checkpoint of it, a table
/// and a relationship segment per name, costs 0.2 s a scenario.
#[derive(Debug, Clone, Default)]
pub enum History {
    #[default]
    Fresh,
    Held(Vec<String>),
}

pub fn run_all(
    scenarios: Vec<Scenario>,
    skips: &SkipList,
    graphs: &Path,
    threads: usize,
) -> Report {
    run_all_after(scenarios, skips, graphs, threads, &History::Fresh)
}

/// [`run_all`] on databases with the given [`History`].
pub fn run_all_after(
    scenarios: Vec<Scenario>,
    skips: &SkipList,
    graphs: &Path,
    threads: usize,
    history: &History,
) -> Report {
    let n = scenarios.len();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: std::sync::Mutex<Vec<Option<Outcome>>> = std::sync::Mutex::new(vec![None; n]);
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    return;
                }
                let sc = &scenarios[i];
                let o = match skips.reason(&sc.id) {
                    Some(r) => Outcome::Skip(r.to_string()),
                    None => run_after(sc, graphs, history),
                };
                // A poisoned lock still holds the other scenarios' outcomes.
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(o);
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    Report {
        results: scenarios
            .into_iter()
            .zip(results)
            .map(|(s, o)| (s, o.unwrap_or(Outcome::Fail("not run".into()))))
            .collect(),
    }
}

/// Runs one scenario on a fresh database; a panic is a failure that names it.
pub fn run(sc: &Scenario, graphs: &Path) -> Outcome {
    run_after(sc, graphs, &History::Fresh)
}

/// [`run`] on a database with the given [`History`].
pub fn run_after(sc: &Scenario, graphs: &Path, history: &History) -> Outcome {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_steps(sc, graphs, history)
    }));
    match r {
        Ok(Ok(())) => Outcome::Pass,
        Ok(Err(why)) => Outcome::Fail(why),
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Outcome::Fail(format!("PANIC: {msg}"))
        }
    }
}

/// A result: column names and rows.
type Table = (Vec<String>, Vec<Vec<TVal>>);

/// What the graph holds, for side effects.
#[derive(Default)]
struct State {
    nodes: BTreeSet<i64>,
    rels: BTreeSet<i64>,
    labels: BTreeSet<String>,
    props: BTreeSet<(bool, i64, String, String)>,
}

struct Ctx {
    session: Session,
    params: BTreeMap<String, quiver_query::Value>,
    last: Option<Result<Table, QueryError>>,
    effects: Option<BTreeMap<&'static str, usize>>,
}

/// A test procedure from its signature (`test.my.proc(in :: INTEGER?) :: (out ::
/// STRING?):`) and its table (inputs, then outputs, per row).
fn procedure(sig: &str, table: &[Vec<String>]) -> Result<quiver_query::procs::Procedure, String> {
    use quiver_query::procs::{Body, PType, Procedure};
    let bad = || format!("procedure signature `{sig}`");
    let open = sig.find('(').ok_or_else(bad)?;
    let name = sig[..open].trim().to_string();
    let close = open + sig[open..].find(')').ok_or_else(bad)?;
    let rest = sig[close + 1..]
        .trim()
        .strip_prefix("::")
        .ok_or_else(bad)?
        .trim();
    let outs = rest
        .strip_prefix('(')
        .and_then(|r| r.rfind(')').map(|e| &r[..e]))
        .ok_or_else(bad)?;
    let params = |s: &str| -> Result<Vec<(String, PType)>, String> {
        s.split(',')
            .map(str::trim)
            .filter(|x| !x.is_empty())
            .map(|x| {
                let (n, t) = x.split_once("::").ok_or_else(bad)?;
                Ok((n.trim().to_string(), PType::parse(t)))
            })
            .collect()
    };
    let inputs = params(&sig[open + 1..close])?;
    let outputs = params(outs)?;
    let mut rows = Vec::new();
    let width = inputs.len() + outputs.len();
    for row in table.iter().skip(1) {
        if row.len() != width {
            return Err(format!(
                "procedure {name}: a row of {} values, not {width}",
                row.len()
            ));
        }
        let vals = row
            .iter()
            .map(|c| value::parse(c)?.to_value())
            .collect::<Result<Vec<_>, _>>()?;
        let (i, o) = vals.split_at(inputs.len());
        rows.push((i.to_vec(), o.to_vec()));
    }
    Ok(Procedure {
        name,
        inputs,
        optional: 0,
        outputs,
        body: Body::Table(rows),
    })
}

fn run_steps(sc: &Scenario, graphs: &Path, history: &History) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
    let mut session = Session::open_with(&dir.path().join("g.qdb"), OpenMode::Mapped, true)
        .map_err(|e| format!("opening an empty database: {e}"))?;
    if let History::Held(names) = history {
        let names =
            quiver_query::Value::list(names.iter().map(|n| quiver_query::Value::str(n)).collect());
        let params = BTreeMap::from([("names".to_string(), names)]);
        for q in [
            "UNWIND $names AS l CREATE (a:$(l))-[:$(l)]->(a)",
            "MATCH (n) DETACH DELETE n",
        ] {
            query(&mut session, q, &params).map_err(|e| format!("the history ({q}): {e}"))?;
        }
    }
    let mut cx = Ctx {
        session,
        params: BTreeMap::new(),
        last: None,
        effects: None,
    };
    for st in &sc.steps {
        let t = st.text.as_str();
        let doc = || {
            st.doc
                .clone()
                .ok_or_else(|| format!("step `{t}` has no query"))
        };
        let table = || {
            st.table
                .clone()
                .ok_or_else(|| format!("step `{t}` has no table"))
        };
        if t == "an empty graph" || t == "any graph" {
        } else if let Some(name) = t
            .strip_prefix("the ")
            .and_then(|r| r.strip_suffix(" graph"))
        {
            let p = graphs.join(name).join(format!("{name}.cypher"));
            let q = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            query(&mut cx.session, &q, &cx.params)
                .map_err(|e| format!("named graph {name}: {e}"))?;
        } else if t == "having executed:" {
            let q = doc()?;
            query(&mut cx.session, &q, &cx.params)
                .map_err(|e| format!("setup failed: {e}\n{q}"))?;
        } else if t == "parameters are:" {
            for row in table()? {
                if row.len() != 2 {
                    return Err(format!("parameter row {row:?}"));
                }
                let v = value::parse(&row[1])?.to_value()?;
                cx.params.insert(row[0].clone(), v);
            }
        } else if let Some(sig) = t.strip_prefix("there exists a procedure ") {
            let p = procedure(sig, st.table.as_deref().unwrap_or(&[]))?;
            cx.session
                .opts
                .procedures
                .registered
                .push(std::sync::Arc::new(p));
        } else if t == "executing query:" || t == "executing control query:" {
            let q = doc()?;
            let before = if t == "executing query:" {
                Some(state(&mut cx.session)?)
            } else {
                None
            };
            let r = query(&mut cx.session, &q, &cx.params);
            cx.effects = match before {
                Some(b) => Some(diff(&b, &state(&mut cx.session)?)),
                None => None,
            };
            cx.last = Some(r);
        } else if let Some(rest) = t.strip_prefix("the result should be") {
            let bag = rest.contains("ignoring element order for lists");
            let ordered = rest.contains("in order");
            let got = result(&cx)?;
            if rest.trim() == "empty" {
                if !got.1.is_empty() {
                    return Err(format!(
                        "expected no rows, got {}: {}",
                        got.1.len(),
                        show_rows(&got.1, bag)
                    ));
                }
                continue;
            }
            compare(got, &table()?, ordered, bag)?;
        } else if let Some(rest) = t
            .strip_prefix("a ")
            .filter(|_| t.contains(" should be raised at "))
        {
            let (ty, after) = rest.split_once(" should be raised at ").unwrap_or(("", ""));
            let (phase, detail) = after.split_once(':').unwrap_or((after, ""));
            let (phase, detail) = (phase.trim(), detail.trim());
            match &cx.last {
                Some(Err(e)) => {
                    let (got_ty, compile) = classify(e);
                    let phase_ok = match phase {
                        "compile time" => compile,
                        "runtime" => !compile,
                        _ => true,
                    };
                    let got_detail = e.detail().map_or("(none)", |d| d.as_str());
                    if got_ty != ty
                        || !phase_ok
                        || (!detail.is_empty() && detail != "*" && got_detail != detail)
                    {
                        return Err(format!(
                            "expected {ty} at {phase}: {detail}, got {got_ty} at {}: {got_detail}: {e}",
                            if compile { "compile time" } else { "runtime" }
                        ));
                    }
                }
                Some(Ok((_, rows))) => {
                    return Err(format!(
                        "expected {ty} at {phase}, the query returned {} rows",
                        rows.len()
                    ))
                }
                None => return Err("no query ran".into()),
            }
        } else if t == "no side effects" || t == "the side effects should be:" {
            let got = cx.effects.clone().ok_or("no query ran")?;
            let mut want: BTreeMap<String, usize> = BTreeMap::new();
            if t != "no side effects" {
                for row in table()? {
                    let n = row
                        .get(1)
                        .and_then(|x| x.trim().parse().ok())
                        .ok_or(format!("side effect row {row:?}"))?;
                    want.insert(row[0].trim().to_string(), n);
                }
            }
            for (k, v) in &got {
                let w = want.get(*k).copied().unwrap_or(0);
                if w != *v {
                    return Err(format!(
                        "side effects: expected {want:?}, got {}",
                        show_effects(&got)
                    ));
                }
            }
        } else {
            return Err(format!("unknown step `{t}`"));
        }
    }
    Ok(())
}

fn result(cx: &Ctx) -> Result<&Table, String> {
    match &cx.last {
        Some(Ok(t)) => Ok(t),
        Some(Err(e)) => Err(format!("the query failed: {e}")),
        None => Err("no query ran".into()),
    }
}

fn show_rows(rows: &[Vec<TVal>], bag: bool) -> String {
    rows.iter()
        .take(8)
        .map(|r| {
            r.iter()
                .map(|v| v.canon(bag))
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn show_effects(m: &BTreeMap<&'static str, usize>) -> String {
    m.iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn compare(got: &Table, want: &[Vec<String>], ordered: bool, bag: bool) -> Result<(), String> {
    let (cols, rows) = got;
    let head = want.first().ok_or("expected table has no header")?;
    // Columns by name (the kit's header names the returned columns).
    let mut idx = Vec::with_capacity(head.len());
    for h in head {
        match cols.iter().position(|c| c == h) {
            Some(i) => idx.push(i),
            None => return Err(format!("expected column {h:?}, got columns {cols:?}")),
        }
    }
    if cols.len() != head.len() {
        return Err(format!("expected columns {head:?}, got {cols:?}"));
    }
    let mut want_rows = Vec::new();
    for r in &want[1..] {
        let mut cells = Vec::new();
        for c in r {
            cells.push(value::parse(c)?.canon(bag));
        }
        want_rows.push(cells.join(" | "));
    }
    let mut got_rows: Vec<String> = rows
        .iter()
        .map(|r| {
            idx.iter()
                .map(|&i| r[i].canon(bag))
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .collect();
    if !ordered {
        want_rows.sort();
        got_rows.sort();
    }
    if want_rows != got_rows {
        return Err(format!(
            "expected {} rows{}: {}\n got {} rows: {}",
            want_rows.len(),
            if ordered { " in order" } else { "" },
            want_rows
                .iter()
                .take(8)
                .cloned()
                .collect::<Vec<_>>()
                .join("; "),
            got_rows.len(),
            got_rows
                .iter()
                .take(8)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    Ok(())
}

/// Runs `q` with the scenario's parameters, collecting rows as [`TVal`]s, cancelled
/// after [`QUERY_TIMEOUT`].
fn query(
    session: &mut Session,
    q: &str,
    params: &quiver_query::Params,
) -> Result<Table, QueryError> {
    let cancel = Arc::new(AtomicBool::new(false));
    session.opts.cancel = Some(cancel.clone());
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(QUERY_TIMEOUT) {
            cancel.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let mut rows = Vec::new();
    let mut conv_err = None;
    let r = session.run(q, params, &mut |g, b| {
        for i in 0..b.len {
            let row = b.row(i);
            match row
                .iter()
                .map(|v| TVal::from_value(g, v))
                .collect::<Result<Vec<_>, _>>()
            {
                Ok(r) => rows.push(r),
                Err(e) => conv_err = Some(e),
            }
        }
        Ok(())
    });
    drop(tx);
    let _ = watchdog.join();
    let summary = r?;
    if let Some(e) = conv_err {
        return Err(e);
    }
    Ok((summary.columns, rows))
}

impl State {
    /// The property triples of a node (`node`) or relationship from its property map.
    fn add_props(&mut self, node: bool, id: i64, props: &TVal) {
        if let TVal::Map(m) = props {
            for (k, v) in m {
                self.props.insert((node, id, k.clone(), v.canon(false)));
            }
        }
    }
}

fn state(session: &mut Session) -> Result<State, String> {
    let none = quiver_query::Params::new();
    let r = (|| -> Result<State, QueryError> {
        let mut s = State::default();
        let (_, nodes) = query(
            session,
            "MATCH (n) RETURN id(n), labels(n), properties(n)",
            &none,
        )?;
        for r in nodes {
            let TVal::Int(id) = r[0] else { continue };
            s.nodes.insert(id);
            if let TVal::List(ls) = &r[1] {
                for l in ls {
                    if let TVal::Str(l) = l {
                        s.labels.insert(l.clone());
                    }
                }
            }
            s.add_props(true, id, &r[2]);
        }
        let (_, rels) = query(
            session,
            "MATCH ()-[r]->() RETURN id(r), properties(r)",
            &none,
        )?;
        for r in rels {
            let TVal::Int(id) = r[0] else { continue };
            s.rels.insert(id);
            s.add_props(false, id, &r[1]);
        }
        Ok(s)
    })();
    r.map_err(|e| format!("reading the graph for side effects: {e}"))
}

fn diff(a: &State, b: &State) -> BTreeMap<&'static str, usize> {
    fn d<T: Ord>(x: &BTreeSet<T>, y: &BTreeSet<T>) -> usize {
        y.difference(x).count()
    }
    BTreeMap::from([
        ("+nodes", d(&a.nodes, &b.nodes)),
        ("-nodes", d(&b.nodes, &a.nodes)),
        ("+relationships", d(&a.rels, &b.rels)),
        ("-relationships", d(&b.rels, &a.rels)),
        ("+labels", d(&a.labels, &b.labels)),
        ("-labels", d(&b.labels, &a.labels)),
        ("+properties", d(&a.props, &b.props)),
        ("-properties", d(&b.props, &a.props)),
    ])
}

/// The kit's error type for a Quiver error, and whether it is raised before the query
/// runs (compile time). Parse and bind errors are compile time; the rest arise while
/// running.
pub fn classify(e: &QueryError) -> (&'static str, bool) {
    use quiver_engine::EngineError;
    match e {
        QueryError::Parse(p) if p.type_error => ("TypeError", true),
        QueryError::Parse(_) | QueryError::UnknownFunction(_) => ("SyntaxError", true),
        QueryError::MissingParam(_) => ("ParameterMissing", true),
        QueryError::Type(..) => ("TypeError", false),
        QueryError::Argument(_) | QueryError::ArgumentValue(..) => ("ArgumentError", false),
        QueryError::Engine(EngineError::Constraint(_) | EngineError::ConnectedNode { .. }) => {
            ("ConstraintVerificationFailed", false)
        }
        QueryError::Engine(EngineError::PropertyType(_)) => ("TypeError", false),
        QueryError::Semantic(..) => ("SemanticError", false),
        QueryError::Procedure(_) => ("ProcedureError", true),
        QueryError::InvalidArgument(..) => ("SyntaxError", false),
        QueryError::EntityNotFound(_) => ("EntityNotFound", false),
        QueryError::RolledBack(inner) => classify(inner),
        _ => ("Unsupported", false),
    }
}
