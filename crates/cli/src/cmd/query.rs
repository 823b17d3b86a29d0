//! `quiver query`: run one Cypher query (or index command) and print its rows.
//!
//! `--bench-params FILE.csv` runs the query as a benchmark instead, once per row of the
//! file (see [`super::bench`]): what the scripts in `bench/` use.

use anyhow::{bail, Context, Result};
use quiver_common::size::{human_bytes, peak_rss_bytes};
use quiver_query::batch::Batch;
use quiver_query::{parse_param, render, Graph, Params, QueryError, Session};
use std::io::{BufWriter, Write};
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Csv,
    Json,
}

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: super::DbArgs,
    /// The query; `-` reads it from standard input.
    query: Option<String>,
    /// Read the query from a file.
    #[arg(long, conflicts_with = "query")]
    file: Option<PathBuf>,
    /// A parameter, `name=value` (integers, floats, true/false/null, JSON lists and maps,
    /// otherwise a string). Repeatable.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
    /// Print rows, time and peak memory to standard error.
    #[arg(long)]
    timing: bool,
    /// Run the query once per row of this CSV file (header: parameter names) and print
    /// latencies instead of rows.
    #[arg(long, value_name = "FILE.csv")]
    bench_params: Option<PathBuf>,
    /// Runs before measuring, with `--bench-params`.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// With `--bench-params`: client threads, each with its own session on the one open
    /// database, sharing the parameter rows.
    #[arg(long, default_value_t = 1)]
    bench_threads: usize,
    /// With `--bench-params`: a statement (e.g. a LOAD CSV) run on another session while
    /// the clients repeat their rows until it ends.
    #[arg(long, value_name = "STATEMENT")]
    bench_during: Option<String>,
    /// With `--bench-params`: a query returning one integer that each client runs before
    /// and after every measured query, in one transaction: both must agree (a stable
    /// snapshot) and never go down (snapshots move forward).
    #[arg(long, value_name = "QUERY")]
    bench_check: Option<String>,
}

/// Rows a table shows; the rest are counted (a table needs every row before it can
/// print, so it is bounded; CSV and JSON stream any number).
const TABLE_ROWS_MAX: usize = 10_000;

/// Formats result batches as they come (CSV, JSON lines) or collects them (table).
pub struct Printer<W: Write> {
    pub format: Format,
    pub out: W,
    pub header_done: bool,
    pub columns: Vec<String>,
    pub cells: Vec<Vec<String>>,
    /// Table rows beyond [`TABLE_ROWS_MAX`], not shown.
    pub hidden: u64,
}

impl<W: Write> Printer<W> {
    pub fn new(format: Format, out: W) -> Self {
        Printer {
            format,
            out,
            header_done: false,
            columns: Vec::new(),
            cells: Vec::new(),
            hidden: 0,
        }
    }

    pub fn batch(&mut self, g: &Graph, b: &Batch) -> Result<(), QueryError> {
        let io = |e: std::io::Error| QueryError::Argument(format!("writing output: {e}"));
        for r in 0..b.len {
            match self.format {
                Format::Table if self.cells.len() >= TABLE_ROWS_MAX => self.hidden += 1,
                Format::Table => {
                    let row = b
                        .cols
                        .iter()
                        .map(|c| render::text(g, &c[r]))
                        .collect::<Result<Vec<_>, _>>()?;
                    self.cells.push(row);
                }
                Format::Csv => {
                    let row = b
                        .cols
                        .iter()
                        .map(|c| render::csv_cell(g, &c[r]))
                        .collect::<Result<Vec<_>, _>>()?;
                    let line = row
                        .iter()
                        .map(|c| csv_quote(c))
                        .collect::<Vec<_>>()
                        .join(",");
                    writeln!(self.out, "{line}").map_err(io)?;
                }
                Format::Json => {
                    let mut m = serde_json::Map::new();
                    for (i, c) in b.cols.iter().enumerate() {
                        let name = self
                            .columns
                            .get(i)
                            .cloned()
                            .unwrap_or_else(|| format!("col{i}"));
                        m.insert(name, render::json(g, &c[r])?);
                    }
                    writeln!(self.out, "{}", serde_json::Value::Object(m)).map_err(io)?;
                }
            }
        }
        Ok(())
    }

    pub fn header(&mut self) -> std::io::Result<()> {
        if self.format == Format::Csv && !self.header_done {
            let line = self
                .columns
                .iter()
                .map(|c| csv_quote(c))
                .collect::<Vec<_>>()
                .join(",");
            writeln!(self.out, "{line}")?;
        }
        self.header_done = true;
        Ok(())
    }

    pub fn finish(&mut self, columns: &[String]) -> std::io::Result<()> {
        if self.format == Format::Table && !columns.is_empty() {
            let t = render::table(columns, &self.cells);
            self.out.write_all(t.as_bytes())?;
            if self.hidden > 0 {
                writeln!(
                    self.out,
                    "({} more rows not shown; --format csv or json streams every row)",
                    self.hidden
                )?;
            }
        }
        self.cells.clear();
        self.hidden = 0;
        self.out.flush()
    }
}

fn csv_quote(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Column names of a query before it runs (for a CSV header and JSON keys).
pub fn columns_of(session: &mut Session, text: &str, params: &Params) -> Vec<String> {
    // A SHOW command cannot be explained; it only reads, so it runs for its columns.
    if let Ok(quiver_cypher::ast::Parsed::Command(c)) = quiver_cypher::parse(text) {
        if !c.is_show() {
            return Vec::new();
        }
        return match session.run(text, params, &mut |_, _| Ok(())) {
            Ok(s) => s.columns,
            Err(_) => Vec::new(),
        };
    }
    let explain = format!("EXPLAIN {text}");
    match session.run(&explain, params, &mut |_, _| Ok(())) {
        Ok(s) => s.columns,
        Err(_) => Vec::new(),
    }
}

pub fn run(a: Args) -> Result<()> {
    let text = match (&a.query, &a.file) {
        (Some(q), _) if q == "-" => std::io::read_to_string(std::io::stdin()).context("reading the query from standard input")?,
        (Some(q), _) => q.clone(),
        (None, Some(f)) => std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
        (None, None) => bail!("give a query: quiver query --db DB 'MATCH (n) RETURN count(n)' (or --file F, or - for stdin)"),
    };
    let mut params = Params::new();
    for p in &a.params {
        let (k, v) = parse_param(p).map_err(anyhow::Error::msg)?;
        params.insert(k, v);
    }
    let mut session = a.db.open(writes(&text))?;
    if let Some(f) = &a.bench_params {
        let how = super::bench::How {
            warmup: a.warmup,
            threads: a.bench_threads.max(1),
            during: a.bench_during.clone(),
            check: a.bench_check.clone(),
        };
        return super::bench::run(&mut session, &text, &params, f, &how);
    }
    let stdout = std::io::stdout();
    let mut printer = Printer::new(a.format, BufWriter::new(stdout.lock()));
    let show = matches!(quiver_cypher::parse(&text), Ok(quiver_cypher::ast::Parsed::Command(c)) if c.is_show());
    if a.format != Format::Table
        && (show || !quiver_query::is_command(&text))
        && !text
            .trim_start()
            .to_ascii_uppercase()
            .starts_with("EXPLAIN")
    {
        printer.columns = columns_of(&mut session, &text, &params);
        printer.header()?;
    }
    let summary = session.run(&text, &params, &mut |g, b| printer.batch(g, b))?;
    if !summary.explained {
        printer.finish(&summary.columns)?;
    }
    drop(printer);
    if let Some(m) = &summary.message {
        println!("{m}");
    }
    if let Some(c) = quiver_query::counters_line(&summary) {
        if a.format == Format::Table {
            println!("{c}");
        } else {
            eprintln!("{c}");
        }
    }
    if let Some(plan) = &summary.plan {
        println!("{plan}");
    }
    if a.timing {
        eprintln!(
            "{} rows in {:.3} ms; operators held at most {}; peak RSS {}",
            summary.rows,
            summary.elapsed.as_secs_f64() * 1e3,
            human_bytes(summary.peak_bytes),
            human_bytes(peak_rss_bytes().unwrap_or(0))
        );
    }
    Ok(())
}

/// Whether the statement text writes (an updating clause, or a command other than SHOW):
/// such a statement may create the database. Text that does not parse counts as a read.
fn writes(text: &str) -> bool {
    use quiver_cypher::ast::{Command, Parsed};
    match quiver_cypher::parse(text) {
        Ok(Parsed::Query(s)) => s.query.writes(),
        Ok(Parsed::Command(c)) => !matches!(
            c,
            Command::ShowStorageInfo
                | Command::ShowIndexes
                | Command::ShowDatabases
                | Command::ShowConstraints
                | Command::ShowTransactions
        ),
        Err(_) => false,
    }
}
