//! `quiver info`: what a database holds, from the manifest and the segment footers.

use anyhow::Result;
use quiver_common::size::{current_rss_bytes, human_bytes};
use quiver_storage::{Database, OpenMode};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    #[arg(long)]
    db: PathBuf,
    /// mapped (instant, pages on demand), loaded (all in RAM, checksums verified), offline.
    #[arg(long, default_value = "mapped", value_parser = super::parse_open)]
    open: OpenMode,
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<()> {
    let rss_before = current_rss_bytes().unwrap_or(0);
    let t = Instant::now();
    let db = Database::open(&a.db, a.open)?;
    let open_ms = t.elapsed().as_secs_f64() * 1e3;
    let rss_after = current_rss_bytes().unwrap_or(0);
    let m = db.manifest();
    let mut tables = Vec::new();
    for (ti, t) in db.node_tables().iter().enumerate() {
        let mut cols = Vec::new();
        for (ci, c) in t.footer.columns.iter().enumerate() {
            let bytes: u64 = t.footer.row_groups.iter().map(|rg| rg.chunks[ci].len).sum();
            let encoding = if t.footer.row_groups.is_empty() {
                "-".to_string()
            } else {
                db.with_node_chunk(ti, 0, ci, |ch| ch.encoding_name().to_string())
                    .unwrap_or_else(|e| format!("({e})"))
            };
            cols.push(serde_json::json!({"name": c.name, "type": c.dtype.name(), "bytes": bytes, "encoding": encoding}));
        }
        let labels: Vec<&str> = t
            .meta
            .labels
            .iter()
            .map(|&l| m.labels[l as usize].as_str())
            .collect();
        tables.push(serde_json::json!({
            "name": t.meta.name, "labels": labels, "rows": t.meta.n_rows, "first_node": t.meta.first_node,
            "row_groups": t.footer.row_groups.len(), "bytes": t.meta.segments.iter().map(|s| s.bytes).sum::<u64>(), "segments": t.meta.segments.len(), "columns": cols,
        }));
    }
    let mut rels = Vec::new();
    for (ri, r) in db.rel_types().iter().enumerate() {
        let (ob, ib) = db.csr_bytes(ri);
        let e = r.meta.n_edges.max(1) as f64;
        rels.push(serde_json::json!({
            "type": r.meta.name, "edges": r.meta.n_edges - db.n_deleted_edges(ri),
            "out_bytes": ob, "in_bytes": ib,
            "bits_per_edge_out": ob as f64 * 8.0 / e, "bits_per_edge_both": (ob + ib) as f64 * 8.0 / e,
            "properties": r.meta.columns.iter().map(|c| format!("{}:{}", c.name, c.dtype.name())).collect::<Vec<_>>(),
            "property_bytes": r.meta.segments.iter().filter_map(|s| s.props.as_ref()).map(|p| p.bytes).sum::<u64>(),
            "segments": r.meta.segments.len(),
        }));
    }
    let spaces: Vec<_> = m
        .id_spaces
        .iter()
        .map(|s| serde_json::json!({"name": s.name, "id_type": format!("{:?}", s.id_type).to_lowercase(), "ids": s.n_ids, "bytes": s.index.bytes}))
        .collect();
    let indexes: Vec<_> = m
        .indexes
        .iter()
        .map(|i| serde_json::json!({"label": i.label, "property": i.property, "entries": i.n_entries, "bytes": i.segment.bytes}))
        .collect();
    let labels: Vec<_> = m
        .labels
        .iter()
        .enumerate()
        .map(|(li, l)| {
            let fixed: u64 = m
                .node_tables
                .iter()
                .filter(|t| t.labels.contains(&(li as u32)))
                .map(|t| t.n_rows)
                .sum();
            serde_json::json!({"label": l, "nodes_with_fixed_label": fixed})
        })
        .collect();
    let info = serde_json::json!({
        "db": a.db, "generation": m.generation, "format_version": m.format_version, "written_by": m.written_by,
        "open_mode": format!("{:?}", a.open).to_lowercase(), "open_ms": open_ms,
        "rss_before_open_bytes": rss_before, "rss_after_open_bytes": rss_after, "resident_segment_bytes": db.resident_bytes(),
        "nodes": db.n_nodes() - db.n_deleted_nodes(),
        "relationships": (0..m.rel_types.len()).map(|r| m.rel_types[r].n_edges - db.n_deleted_edges(r)).sum::<u64>(),
        "disk_bytes": db.disk_bytes(), "labels": labels, "node_tables": tables, "relationship_types": rels, "id_spaces": spaces,
        "indexes": indexes,
    });
    if a.json {
        println!("{}", serde_json::to_string_pretty(&info)?);
        return Ok(());
    }
    println!(
        "{} (generation {}, format {}, written by {})",
        a.db.display(),
        m.generation,
        m.format_version,
        m.written_by
    );
    println!(
        "opened {} in {:.2} ms; resident set {} after open ({} before)",
        info["open_mode"].as_str().unwrap_or(""),
        open_ms,
        human_bytes(rss_after),
        human_bytes(rss_before)
    );
    println!(
        "nodes {}, relationships {}, on disk {}",
        info["nodes"],
        info["relationships"],
        human_bytes(db.disk_bytes())
    );
    for t in &tables {
        println!(
            "node table {}  labels {}  rows {}  row groups {}  {}",
            t["name"].as_str().unwrap_or(""),
            t["labels"],
            t["rows"],
            t["row_groups"],
            human_bytes(t["bytes"].as_u64().unwrap_or(0))
        );
        for c in t["columns"].as_array().into_iter().flatten() {
            println!(
                "    {:<24} {:<16} {:<12} {}",
                c["name"].as_str().unwrap_or(""),
                c["type"].as_str().unwrap_or(""),
                c["encoding"].as_str().unwrap_or(""),
                human_bytes(c["bytes"].as_u64().unwrap_or(0))
            );
        }
    }
    for r in &rels {
        println!(
            "relationships [:{}]  {} edges  out {}  in {}  {:.1} bits/edge one way, {:.1} both  properties {}",
            r["type"].as_str().unwrap_or(""),
            r["edges"],
            human_bytes(r["out_bytes"].as_u64().unwrap_or(0)),
            human_bytes(r["in_bytes"].as_u64().unwrap_or(0)),
            r["bits_per_edge_out"].as_f64().unwrap_or(0.0),
            r["bits_per_edge_both"].as_f64().unwrap_or(0.0),
            r["properties"]
        );
    }
    for s in &spaces {
        println!(
            "id space {}  {} ids ({})  index {}",
            s["name"].as_str().unwrap_or("(global)"),
            s["ids"],
            s["id_type"].as_str().unwrap_or(""),
            human_bytes(s["bytes"].as_u64().unwrap_or(0))
        );
    }
    for i in &indexes {
        println!(
            "index :{}({})  {} entries  {}",
            i["label"].as_str().unwrap_or(""),
            i["property"].as_str().unwrap_or(""),
            i["entries"],
            human_bytes(i["bytes"].as_u64().unwrap_or(0))
        );
    }
    Ok(())
}
