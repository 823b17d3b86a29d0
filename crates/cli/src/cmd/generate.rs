//! `quiver generate`: the workloads of the brief, seeded and deterministic.

use anyhow::{Context, Result};
use quiver_datagen::{dolt, hashids, social, wide};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// dolt, wide, social, or ids (a graph keyed by 40-character hash ids: the case
    /// where the ids outgrow the memory budget).
    #[arg(value_parser = ["dolt", "wide", "social", "ids"])]
    workload: String,
    /// Output directory.
    #[arg(long, default_value = "data")]
    out: PathBuf,
    /// Rows (dolt: default 100000; wide: default 100000; ids: nodes, default 1000000).
    #[arg(long)]
    rows: Option<u64>,
    /// dolt: primary key order.
    #[arg(long, default_value = "sorted", value_parser = ["sorted", "random", "both"])]
    order: String,
    /// wide: columns and characters per value.
    #[arg(long, default_value_t = 100)]
    cols: usize,
    #[arg(long, default_value_t = 10)]
    width: usize,
    /// social: 1.0 is Pokec size (1,632,803 users, ~30.6M edges).
    #[arg(long, default_value_t = 0.01)]
    scale: f64,
    /// social: edge line order.
    #[arg(long, default_value = "sorted", value_parser = ["sorted", "random"])]
    edge_order: String,
    /// ids: relationships (default: 5 per node).
    #[arg(long)]
    rels: Option<u64>,
    #[arg(long, default_value_t = 42)]
    seed: u64,
}

fn short(n: u64) -> String {
    match n {
        n if n >= 1_000_000 && n % 1_000_000 == 0 => format!("{}m", n / 1_000_000),
        n if n >= 1_000 && n % 1_000 == 0 => format!("{}k", n / 1_000),
        n => n.to_string(),
    }
}

pub fn run(a: Args) -> Result<()> {
    let t = Instant::now();
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    match a.workload.as_str() {
        "dolt" => {
            let rows = a.rows.unwrap_or(100_000);
            let orders: Vec<&str> = if a.order == "both" {
                vec!["sorted", "random"]
            } else {
                vec![a.order.as_str()]
            };
            for o in &orders {
                let p = a.out.join(format!("dolt-{}-{o}.csv", short(rows)));
                dolt::generate(&p, rows, *o == "random", a.seed)
                    .with_context(|| format!("writing {}", p.display()))?;
                println!("{}  ({rows} rows)", p.display());
            }
        }
        "wide" => {
            let rows = a.rows.unwrap_or(100_000);
            let p = a.out.join(format!("wide-{}.csv", short(rows)));
            wide::generate(&p, rows, a.cols, a.width, a.seed)
                .with_context(|| format!("writing {}", p.display()))?;
            let h = a.out.join("wide-header.csv");
            let mut header = String::from("c0");
            for c in 1..a.cols {
                header.push_str(&format!(",c{c}"));
            }
            header.push('\n');
            std::fs::write(&h, header)?;
            println!(
                "{}  ({rows} rows x {} columns; header-only file {})",
                p.display(),
                a.cols,
                h.display()
            );
        }
        "ids" => {
            let n = a.rows.unwrap_or(1_000_000);
            let m = a.rels.unwrap_or(n * 5);
            hashids::generate(&a.out, n, m, a.seed)
                .with_context(|| format!("writing into {}", a.out.display()))?;
            println!(
                "{}/nodes.csv  ({n} nodes)\n{}/edges.csv  ({m} relationships)",
                a.out.display(),
                a.out.display()
            );
        }
        _ => {
            let (n, m) = social::generate(&a.out, a.scale, a.edge_order == "random", a.seed)
                .with_context(|| format!("writing into {}", a.out.display()))?;
            println!(
                "{}/nodes.csv  ({n} users)\n{}/edges.csv  ({m} follows)",
                a.out.display(),
                a.out.display()
            );
        }
    }
    eprintln!("generated in {:.1} s", t.elapsed().as_secs_f64());
    Ok(())
}
