//! `quiver export`: the graph back as CSV in the import header convention, so that
//! `quiver import` of the export gives the same graph. Each node file carries a `:LABEL`
//! column with all labels of the node; relationships carry `:TYPE`.

use anyhow::{Context, Result};
use quiver_common::types::{DataType, Physical, ScalarType};
use quiver_csv::value::{format_date, format_datetime, format_local_datetime};
use quiver_format::column::ColumnBuilder;
use quiver_storage::manifest::IdSpaceMeta;
use quiver_storage::{Database, Direction, OpenMode};
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[arg(long)]
    db: PathBuf,
    /// Output directory (created).
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value = "mapped", value_parser = super::parse_open)]
    open: OpenMode,
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

    fn format(&self, node: u64, out: &mut String) {
        let ti = self
            .tables
            .partition_point(|t| t.0 <= node)
            .saturating_sub(1);
        if let Some((first, Some(col))) = self.tables.get(ti) {
            let row = (node - first) as usize;
            if row < col.len() {
                match col.dtype.element().physical() {
                    Physical::I64 => out.push_str(&col.i64_values()[row].to_string()),
                    _ => out.push_str(&String::from_utf8_lossy(col.bytes_at(row))),
                }
                return;
            }
        }
        out.push_str(&format!("@{node}"));
    }
}

pub fn run(a: Args) -> Result<()> {
    let db = Database::open(&a.db, a.open)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let m = db.manifest();
    let mut written = Vec::new();
    for (ti, t) in db.node_tables().iter().enumerate() {
        let path = a
            .out
            .join(format!("nodes-{ti:04}-{}.csv", file_name(&t.meta.name)));
        let mut w = csv::Writer::from_writer(BufWriter::new(
            File::create(&path).with_context(|| path.display().to_string())?,
        ));
        let mut header: Vec<String> = Vec::new();
        for (ci, c) in t.footer.columns.iter().enumerate() {
            if Some(ci) == t.meta.label_column {
                continue;
            }
            if Some(ci) == t.meta.id_column {
                header.push(format!(
                    "{}:ID{}",
                    c.name,
                    space_suffix(&m.id_spaces, t.meta.id_space)
                ));
            } else {
                header.push(format!("{}:{}", c.name, c.dtype.name()));
            }
        }
        header.push(":LABEL".into());
        w.write_record(&header)?;
        let fixed: Vec<&str> = t
            .meta
            .labels
            .iter()
            .map(|&l| m.labels[l as usize].as_str())
            .collect();
        let mut fields: Vec<String> = vec![String::new(); header.len()];
        for (rgi, rg) in t.footer.row_groups.iter().enumerate() {
            // Decode the row group's chunks once, then write row by row.
            let mut cols: Vec<ColumnBuilder> = Vec::new();
            for ci in 0..t.footer.columns.len() {
                cols.push(db.with_node_chunk(ti, rgi, ci, |ch| ch.to_builder())?);
            }
            let chunks = &cols;
            for row in 0..rg.n_rows as usize {
                // Rows a checkpoint marked deleted are not part of the graph.
                if t.deleted
                    .as_ref()
                    .is_some_and(|d| d.get(rg.first_row + row as u64))
                {
                    continue;
                }
                let mut k = 0;
                for (ci, ch) in chunks.iter().enumerate() {
                    if Some(ci) == t.meta.label_column {
                        continue;
                    }
                    fields[k].clear();
                    format_value(ch, row, &mut fields[k]);
                    k += 1;
                }
                let lf = &mut fields[k];
                lf.clear();
                lf.push_str(&fixed.join(";"));
                if let Some(lc) = t.meta.label_column {
                    let mut extra = String::new();
                    format_value(&chunks[lc], row, &mut extra);
                    if !extra.is_empty() {
                        if !lf.is_empty() {
                            lf.push(';');
                        }
                        lf.push_str(&extra);
                    }
                }
                w.write_record(&fields)?;
            }
        }
        w.flush()?;
        written.push(path);
    }
    let ids = if db.rel_types().is_empty() {
        None
    } else {
        Some(Ids::load(&db)?)
    };
    for (ri, r) in db.rel_types().iter().enumerate() {
        let path = a
            .out
            .join(format!("rels-{ri:04}-{}.csv", file_name(&r.meta.name)));
        let mut w = csv::Writer::from_writer(BufWriter::new(
            File::create(&path).with_context(|| path.display().to_string())?,
        ));
        let mut header = vec![
            format!(
                ":START_ID{}",
                space_suffix(&m.id_spaces, r.meta.start_space)
            ),
            format!(":END_ID{}", space_suffix(&m.id_spaces, r.meta.end_space)),
            ":TYPE".to_string(),
        ];
        for c in &r.meta.columns {
            header.push(format!("{}:{}", c.name, c.dtype.name()));
        }
        w.write_record(&header)?;
        let ids = ids.as_ref().context("id table")?;
        let mut fields: Vec<String> = vec![String::new(); header.len()];
        let footer = r.props_footer().cloned();
        // The decoded property row group last used: edges in source order mostly walk
        // edge ids in order, so this is decoded once per row group.
        let mut cached: Option<(usize, Vec<ColumnBuilder>)> = None;
        let mut err = None;
        db.scan_edges(ri, Direction::Out, |src, dst, eid| {
            if err.is_some() {
                return;
            }
            for f in fields.iter_mut() {
                f.clear();
            }
            ids.format(src as u64, &mut fields[0]);
            ids.format(dst as u64, &mut fields[1]);
            fields[2].push_str(&r.meta.name);
            if let Some(ft) = &footer {
                let rg = ft
                    .row_groups
                    .partition_point(|g| g.first_row + g.n_rows <= eid);
                let row = (eid - ft.row_groups.get(rg).map_or(0, |g| g.first_row)) as usize;
                if cached.as_ref().is_none_or(|c| c.0 != rg) {
                    let mut cols = Vec::new();
                    for ci in 0..ft.columns.len() {
                        match db.with_rel_chunk(ri, rg, ci, |ch| ch.to_builder()) {
                            Ok(b) => cols.push(b),
                            Err(e) => {
                                err = Some(e);
                                return;
                            }
                        }
                    }
                    cached = Some((rg, cols));
                }
                if let Some((_, cols)) = &cached {
                    for (ci, c) in cols.iter().enumerate() {
                        format_value(c, row, &mut fields[3 + ci]);
                    }
                }
            }
            if let Err(e) = w.write_record(&fields) {
                err = Some(quiver_storage::ReadError::Io {
                    path: path.clone(),
                    source: e.into(),
                });
            }
        })?;
        if let Some(e) = err {
            return Err(e.into());
        }
        w.flush()?;
        written.push(path);
    }
    for p in &written {
        println!("{}", p.display());
    }
    Ok(())
}
