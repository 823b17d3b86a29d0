//! `quiver check`: opens the database and verifies every checksum.

use anyhow::Result;
use quiver_storage::{Database, OpenMode};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    #[arg(long)]
    db: PathBuf,
}

pub fn run(a: Args) -> Result<()> {
    let db = Database::open(&a.db, OpenMode::Mapped)?;
    db.verify()?;
    println!(
        "{}: ok ({} bytes verified)",
        a.db.display(),
        db.disk_bytes()
    );
    Ok(())
}
