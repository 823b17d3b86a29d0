//! `quiver export`: the graph back as CSV (or Parquet) in the import header convention,
//! so that `quiver import` of the export gives the same graph. Each node file carries a
//! `:LABEL` column with all labels of the node; relationships carry `:TYPE`. Both
//! formats write the same columns, a batch of rows at a time ([`Sink`]); Parquet columns
//! are typed from the property's type (`quiver_arrow::export`).

use anyhow::{Context, Result};
use quiver_common::types::{DataType, Physical, ScalarType};
use quiver_csv::value::{format_date, format_datetime, format_local_datetime};
use quiver_format::column::ColumnBuilder;
use quiver_storage::manifest::IdSpaceMeta;
use quiver_storage::{Database, Direction, OpenMode};
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    #[arg(long)]
    db: PathBuf,
    /// Output directory (created).
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value = "mapped", value_parser = super::parse_open)]
    open: OpenMode,
    /// File format: csv, or parquet (typed columns, the same header names).
    #[arg(long, value_enum, default_value_t = Format::Csv)]
    format: Format,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Csv,
    Parquet,
}

/// Relationships written a batch at a time.
const REL_BATCH: usize = 64 * 1024;

/// One output file: rows arrive as a batch of columns, in header order.
enum Sink {
    Csv(csv::Writer<BufWriter<File>>, Vec<String>),
    Parquet(quiver_arrow::export::ParquetTable),
}

impl Sink {
    fn create(
        format: Format,
        dir: &Path,
        stem: &str,
        header: &[(String, DataType)],
    ) -> Result<(Sink, PathBuf)> {
        match format {
            Format::Csv => {
                let path = dir.join(format!("{stem}.csv"));
                let mut w = csv::Writer::from_writer(BufWriter::new(
                    File::create(&path).with_context(|| path.display().to_string())?,
                ));
                w.write_record(header.iter().map(|h| &h.0))?;
                Ok((Sink::Csv(w, vec![String::new(); header.len()]), path))
            }
            Format::Parquet => {
                let path = dir.join(format!("{stem}.parquet"));
                let t = quiver_arrow::export::ParquetTable::create(&path, header)
                    .map_err(anyhow::Error::msg)?;
                Ok((Sink::Parquet(t), path))
            }
        }
    }

    fn write(&mut self, cols: Vec<ColumnBuilder>) -> Result<()> {
        match self {
            Sink::Csv(w, fields) => {
                for row in 0..cols.first().map_or(0, |c| c.len()) {
                    for (f, c) in fields.iter_mut().zip(&cols) {
                        f.clear();
                        format_value(c, row, f);
                    }
                    w.write_record(&*fields)?;
                }
                Ok(())
            }
            Sink::Parquet(t) => t.write(cols).map_err(anyhow::Error::msg),
        }
    }

    fn finish(self) -> Result<()> {
        match self {
            Sink::Csv(mut w, _) => Ok(w.flush()?),
            Sink::Parquet(t) => t.finish().map_err(anyhow::Error::msg),
        }
    }
}

/// Appends the text of value `i` of `c` to `out` (nothing for null).
pub fn format_value(c: &ColumnBuilder, i: usize, out: &mut String) {
    use std::fmt::Write;
    if !c.is_valid(i) {
        return;
    }
    match c.dtype {
        DataType::Array(_) => {
            let (s, e) = c.list_range(i);
            if let Some(child) = c.list_child_ref() {
                for k in s..e {
                    if k > s {
                        out.push(';');
                    }
                    format_value(child, k, out);
                }
            }
        }
        DataType::Scalar(t) => match t.physical() {
            Physical::I64 => {
                let v = c.i64_values()[i];
                match t {
                    ScalarType::Date => format_date(v, out),
                    ScalarType::LocalDateTime => format_local_datetime(v, out),
                    ScalarType::DateTime => format_datetime(v, out),
                    _ => {
                        let _ = write!(out, "{v}");
                    }
                }
            }
            Physical::F64 => {
                let v = c.f64_values()[i];
                let _ = if t == ScalarType::Float {
                    write!(out, "{}", v as f32)
                } else {
                    write!(out, "{v}")
                };
            }
            Physical::Bool => out.push_str(if c.bool_values()[i] { "true" } else { "false" }),
            Physical::Bytes => out.push_str(&String::from_utf8_lossy(c.bytes_at(i))),
        },
    }
}

fn space_suffix(spaces: &[IdSpaceMeta], s: Option<usize>) -> String {
    match s.and_then(|s| spaces.get(s)).and_then(|s| s.name.as_ref()) {
        Some(n) => format!("({n})"),
        None => String::new(),
    }
}

fn file_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// External ids of every node, decoded once (for relationship endpoints).
struct Ids {
    tables: Vec<(u64, Option<ColumnBuilder>)>,
}

impl Ids {
    fn load(db: &Database) -> Result<Ids> {
        let mut tables = Vec::new();
        for (ti, t) in db.node_tables().iter().enumerate() {
            let col = match t.meta.id_column {
                Some(ci) => {
                    let mut b = ColumnBuilder::new(t.footer.columns[ci].dtype);
                    for rg in 0..t.footer.row_groups.len() {
                        db.with_node_chunk(ti, rg, ci, |ch| b.append(&ch.to_builder()))?;
                    }
                    Some(b)
                }
                None => None,
            };
            tables.push((t.meta.first_node, col));
        }
        Ok(Ids { tables })
    }

    /// Whether every node has an integer id (endpoints are then integers; else text,
    /// `@n` for a node without an id).
    fn all_integer(&self) -> bool {
        self.tables.iter().all(|(_, c)| {
            c.as_ref()
                .is_some_and(|c| c.dtype.element().physical() == Physical::I64)
        })
    }

    /// Appends the ids of `nodes` to `out` (a Long column when [`Self::all_integer`],
    /// else a String column). A batch at a time: the look-ups of one table's ids run in
    /// a tight loop whose cache misses overlap (a relationship's ends are random nodes).
    fn push(&self, nodes: &[u64], out: &mut ColumnBuilder) {
        if let [(first, Some(col))] = &self.tables[..] {
            if col.dtype.element().physical() == Physical::I64
                && out.dtype.element().physical() == Physical::I64
                && nodes
                    .iter()
                    .all(|&n| n >= *first && ((n - first) as usize) < col.len())
            {
                let v = col.i64_values();
                let ids: Vec<i64> = nodes.iter().map(|&n| v[(n - first) as usize]).collect();
                for id in ids {
                    out.push_i64(id);
                }
                return;
            }
        }
        for &node in nodes {
            self.push_one(node, out);
        }
    }

    fn push_one(&self, node: u64, out: &mut ColumnBuilder) {
        let ti = self
            .tables
            .partition_point(|t| t.0 <= node)
            .saturating_sub(1);
        if let Some((first, Some(col))) = self.tables.get(ti) {
            let row = (node - first) as usize;
            if row < col.len() {
                match (
                    col.dtype.element().physical(),
                    out.dtype.element().physical(),
                ) {
                    (Physical::I64, Physical::I64) => out.push_i64(col.i64_values()[row]),
                    (Physical::I64, _) => {
                        out.push_bytes(col.i64_values()[row].to_string().as_bytes())
                    }
                    _ => out.push_bytes(col.bytes_at(row)),
                }
                return;
            }
        }
        out.push_bytes(format!("@{node}").as_bytes());
    }
}

pub fn run(a: Args) -> Result<()> {
    let db = Database::open(&a.db, a.open)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let m = db.manifest();
    let mut written = Vec::new();
    let labels_type = DataType::Array(ScalarType::String);
    for (ti, t) in db.node_tables().iter().enumerate() {
        let mut header: Vec<(String, DataType)> = Vec::new();
        for (ci, c) in t.footer.columns.iter().enumerate() {
            if Some(ci) == t.meta.label_column {
                continue;
            }
            let name = if Some(ci) == t.meta.id_column {
                format!(
                    "{}:ID{}",
                    c.name,
                    space_suffix(&m.id_spaces, t.meta.id_space)
                )
            } else {
                format!("{}:{}", c.name, c.dtype.name())
            };
            header.push((name, c.dtype));
        }
        header.push((":LABEL".into(), labels_type));
        let stem = format!("nodes-{ti:04}-{}", file_name(&t.meta.name));
        let (mut sink, path) = Sink::create(a.format, &a.out, &stem, &header)?;
        let fixed: Vec<&str> = t
            .meta
            .labels
            .iter()
            .map(|&l| m.labels[l as usize].as_str())
            .collect();
        for (rgi, rg) in t.footer.row_groups.iter().enumerate() {
            let mut cols: Vec<ColumnBuilder> = Vec::new();
            let mut extra = None;
            for ci in 0..t.footer.columns.len() {
                let b = db.with_node_chunk(ti, rgi, ci, |ch| ch.to_builder())?;
                if Some(ci) == t.meta.label_column {
                    extra = Some(b);
                } else {
                    cols.push(b);
                }
            }
            // Every label of a row: the table's, then its own.
            let mut labels = ColumnBuilder::new(labels_type);
            for row in 0..rg.n_rows as usize {
                let child = labels.list_child().context("a list column")?;
                for l in &fixed {
                    child.push_bytes(l.as_bytes());
                }
                if let Some(e) = extra.as_ref().filter(|e| e.is_valid(row)) {
                    let (s, end) = e.list_range(row);
                    if let Some(ec) = e.list_child_ref() {
                        for k in s..end {
                            child.push_row_from(ec, k);
                        }
                    }
                }
                labels.end_list();
            }
            cols.push(labels);
            // Rows a checkpoint marked deleted are not part of the graph.
            if let Some(d) = &t.deleted {
                let keep: Vec<bool> = (0..rg.n_rows).map(|r| !d.get(rg.first_row + r)).collect();
                if keep.iter().any(|k| !k) {
                    cols = cols.iter().map(|c| c.filter(&keep)).collect();
                }
            }
            sink.write(cols)?;
        }
        sink.finish()?;
        written.push(path);
    }
    let ids = if db.rel_types().is_empty() {
        None
    } else {
        Some(Ids::load(&db)?)
    };
    for (ri, r) in db.rel_types().iter().enumerate() {
        let ids = ids.as_ref().context("id table")?;
        let id_type = DataType::Scalar(if ids.all_integer() {
            ScalarType::Long
        } else {
            ScalarType::String
        });
        let mut header = vec![
            (
                format!(
                    ":START_ID{}",
                    space_suffix(&m.id_spaces, r.meta.start_space)
                ),
                id_type,
            ),
            (
                format!(":END_ID{}", space_suffix(&m.id_spaces, r.meta.end_space)),
                id_type,
            ),
            (":TYPE".to_string(), DataType::Scalar(ScalarType::String)),
        ];
        for c in &r.meta.columns {
            header.push((format!("{}:{}", c.name, c.dtype.name()), c.dtype));
        }
        let stem = format!("rels-{ri:04}-{}", file_name(&r.meta.name));
        let (mut sink, path) = Sink::create(a.format, &a.out, &stem, &header)?;
        let fresh =
            || -> Vec<ColumnBuilder> { header.iter().map(|h| ColumnBuilder::new(h.1)).collect() };
        let mut batch = fresh();
        let (mut srcs, mut dsts) = (Vec::with_capacity(REL_BATCH), Vec::with_capacity(REL_BATCH));
        let footer = r.props_footer().cloned();
        // The decoded property row group last used: edges in source order mostly walk
        // edge ids in order, so this is decoded once per row group.
        let mut cached: Option<(usize, Vec<ColumnBuilder>)> = None;
        let mut err: Option<anyhow::Error> = None;
        db.scan_edges(ri, Direction::Out, |src, dst, eid| {
            if err.is_some() {
                return;
            }
            srcs.push(src as u64);
            dsts.push(dst as u64);
            batch[2].push_bytes(r.meta.name.as_bytes());
            if let Some(ft) = &footer {
                let rg = ft
                    .row_groups
                    .partition_point(|g| g.first_row + g.n_rows <= eid);
                let row = (eid - ft.row_groups.get(rg).map_or(0, |g| g.first_row)) as usize;
                if cached.as_ref().is_none_or(|c| c.0 != rg) {
                    let cols: Result<Vec<ColumnBuilder>, _> = (0..ft.columns.len())
                        .map(|ci| db.with_rel_chunk(ri, rg, ci, |ch| ch.to_builder()))
                        .collect();
                    match cols {
                        Ok(cols) => cached = Some((rg, cols)),
                        Err(e) => {
                            err = Some(e.into());
                            return;
                        }
                    }
                }
                if let Some((_, cols)) = &cached {
                    for (ci, c) in cols.iter().enumerate() {
                        batch[3 + ci].push_row_from(c, row);
                    }
                }
            }
            if srcs.len() == REL_BATCH {
                ids.push(&srcs, &mut batch[0]);
                ids.push(&dsts, &mut batch[1]);
                if let Err(e) = sink.write(std::mem::replace(&mut batch, fresh())) {
                    err = Some(e);
                }
                srcs.clear();
                dsts.clear();
            }
        })?;
        if let Some(e) = err {
            return Err(e);
        }
        ids.push(&srcs, &mut batch[0]);
        ids.push(&dsts, &mut batch[1]);
        sink.write(batch)?;
        sink.finish()?;
        written.push(path);
    }
    for p in &written {
        println!("{}", p.display());
    }
    Ok(())
}
