//! `quiver query --bench-params FILE.csv`: the measuring loop the benchmarks in `bench/`
//! drive (not a user feature, but a stable interface for them).
//!
//! The query runs once per row of the file (its header names the parameters) and each
//! run prints its latency as a JSON line; a last line sums up (median, p99, queries per
//! second over the wall time, peak RSS). Options:
//! - `--bench-threads N`: N clients, each a [`Session`] of its own on the one open
//!   store, take the rows in turn (client `t` the rows `t`, `t + N`, ...). A write that
//!   meets a retryable conflict is run again and counted.
//! - `--bench-during STMT`: STMT (a LOAD CSV, say) runs on one more session while the
//!   clients go round their rows until it ends; the summary gives its time.
//! - `--bench-check Q`: around each measured query a client opens a transaction and runs
//!   Q (one integer) before and after it. Both must agree: a snapshot is stable. And Q
//!   may never go down between runs: snapshots move forward. The summary counts
//!   violations and lists the distinct values seen (a load in batches must only ever
//!   show whole batches).

use anyhow::{bail, Context, Result};
use quiver_common::size::peak_rss_bytes;
use quiver_query::batch::Batch;
use quiver_query::{parse_value, render, Graph, Params, QueryError, Session, Value};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

pub struct How {
    pub warmup: usize,
    pub threads: usize,
    pub during: Option<String>,
    pub check: Option<String>,
}

/// One measured run.
struct Run {
    ms: f64,
    rows: u64,
    client: usize,
    check: Option<i64>,
}

#[derive(Default)]
struct Client {
    runs: Vec<Run>,
    retries: u64,
    violations: Vec<String>,
    seen: BTreeSet<i64>,
}

/// Every value is turned into a host value, as a client would receive it.
fn sink(g: &Graph, b: &Batch) -> Result<(), QueryError> {
    for c in &b.cols {
        for v in c {
            std::hint::black_box(render::json(g, v)?);
        }
    }
    Ok(())
}

fn run_retrying(
    s: &mut Session,
    text: &str,
    p: &Params,
    retries: &mut u64,
) -> Result<u64, QueryError> {
    loop {
        match s.run(text, p, &mut sink) {
            Ok(sum) => return Ok(sum.rows),
            Err(e) if e.is_retryable() && *retries < 1_000_000 => {
                *retries += 1;
                std::thread::sleep(Duration::from_micros(50));
            }
            Err(e) => return Err(e),
        }
    }
}

/// The one integer `q` returns.
fn check_value(s: &mut Session, q: &str) -> Result<i64> {
    let mut got = None;
    s.run(q, &Params::new(), &mut |_, b: &Batch| {
        if let Some(Value::Int(i)) = b.cols.first().and_then(|c| c.first()) {
            got = Some(*i);
        }
        Ok(())
    })?;
    got.with_context(|| format!("--bench-check {q:?} returned no integer"))
}

fn client(
    mut s: Session,
    text: &str,
    runs: &[Params],
    me: usize,
    how: &How,
    done: &AtomicBool,
) -> Result<Client> {
    let mut out = Client::default();
    let mut last = i64::MIN;
    // Warm-up on this client's own session (its index set, its thread's allocator).
    let mut warm = 0;
    for p in runs.iter().cycle().take(how.warmup) {
        run_retrying(&mut s, text, p, &mut warm)?;
    }
    let mine: Vec<&Params> = runs.iter().skip(me).step_by(how.threads).collect();
    if mine.is_empty() {
        return Ok(out);
    }
    let mut i = 0;
    loop {
        if i >= mine.len() {
            // With a statement running beside: go round again until it ends.
            if how.during.is_none() || done.load(Ordering::Acquire) {
                break;
            }
            i = 0;
        }
        let p = mine[i];
        i += 1;
        let before = match &how.check {
            Some(q) => {
                s.run("BEGIN", &Params::new(), &mut sink)?;
                Some(check_value(&mut s, q)?)
            }
            None => None,
        };
        let t = Instant::now();
        let rows = run_retrying(&mut s, text, p, &mut out.retries)?;
        let ms = t.elapsed().as_secs_f64() * 1e3;
        if let (Some(q), Some(before)) = (&how.check, before) {
            let after = check_value(&mut s, q)?;
            s.run("COMMIT", &Params::new(), &mut sink)?;
            if before != after {
                out.violations.push(format!(
                    "client {me}: {before} then {after} in one transaction"
                ));
            }
            if before < last {
                out.violations.push(format!(
                    "client {me}: {last} then {before} in a later transaction"
                ));
            }
            last = before;
            out.seen.insert(before);
        }
        out.runs.push(Run {
            ms,
            rows,
            client: me,
            check: before,
        });
    }
    Ok(out)
}

pub fn run(session: &mut Session, text: &str, base: &Params, file: &Path, how: &How) -> Result<()> {
    let mut rdr =
        csv::Reader::from_path(file).with_context(|| format!("reading {}", file.display()))?;
    let names: Vec<String> = rdr.headers()?.iter().map(|h| h.to_string()).collect();
    let mut runs: Vec<Params> = Vec::new();
    for rec in rdr.records() {
        let rec = rec?;
        let mut p = base.clone();
        for (n, v) in names.iter().zip(rec.iter()) {
            p.insert(n.clone(), parse_value(v));
        }
        runs.push(p);
    }
    if runs.is_empty() {
        runs.push(base.clone());
    }
    let store = session.store().clone();
    let opts = session.opts.clone();
    let new_session = || {
        let mut s = Session::on(store.clone());
        s.opts = opts.clone();
        s
    };
    let done = AtomicBool::new(false);
    let t_all = Instant::now();
    let (clients, during) = std::thread::scope(|sc| -> Result<_> {
        let during = how.during.as_ref().map(|stmt| {
            let mut s = new_session();
            let done = &done;
            sc.spawn(move || {
                let t = Instant::now();
                let r = s.run(stmt, &Params::new(), &mut |_, _| Ok(()));
                done.store(true, Ordering::Release);
                r.map(|sum| (t.elapsed(), sum))
            })
        });
        let handles: Vec<_> = (0..how.threads)
            .map(|me| {
                let s = new_session();
                let (runs, done) = (&runs, &done);
                sc.spawn(move || client(s, text, runs, me, how, done))
            })
            .collect();
        let mut clients = Vec::new();
        for h in handles {
            clients.push(
                h.join()
                    .map_err(|_| anyhow::anyhow!("a bench client panicked"))??,
            );
        }
        let during = match during {
            Some(h) => Some(
                h.join()
                    .map_err(|_| anyhow::anyhow!("the --bench-during statement panicked"))??,
            ),
            None => None,
        };
        Ok((clients, during))
    })?;
    let total = t_all.elapsed().as_secs_f64();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut lat = Vec::new();
    let mut seen = BTreeSet::new();
    let mut violations = Vec::new();
    for c in &clients {
        seen.extend(c.seen.iter().copied());
        violations.extend(c.violations.iter().cloned());
        for r in &c.runs {
            lat.push(r.ms);
            let mut j = serde_json::json!({"ms": r.ms, "rows": r.rows, "client": r.client});
            if let Some(v) = r.check {
                j["check"] = serde_json::json!(v);
            }
            writeln!(out, "{j}")?;
        }
    }
    if lat.is_empty() {
        bail!("no run was measured");
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    let pct = |q: f64| lat[((lat.len() as f64 - 1.0) * q).round() as usize];
    let mut summary = serde_json::json!({
        "summary": true, "runs": lat.len(), "threads": how.threads,
        "median_ms": pct(0.5), "p99_ms": pct(0.99), "qps": lat.len() as f64 / total,
        "wall_s": total, "retries": clients.iter().map(|c| c.retries).sum::<u64>(), "peak_rss_bytes": peak_rss_bytes().unwrap_or(0),
    });
    if how.check.is_some() {
        summary["violations"] = serde_json::json!(violations);
        summary["checks_seen"] = serde_json::json!(seen.iter().collect::<Vec<_>>());
    }
    if let Some((t, sum)) = during {
        summary["during_s"] = serde_json::json!(t.as_secs_f64());
        summary["during_nodes_created"] = serde_json::json!(sum.counters.nodes_created);
    }
    writeln!(out, "{summary}")?;
    Ok(())
}
