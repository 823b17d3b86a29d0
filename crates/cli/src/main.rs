//! The `quiver` command. One module per subcommand under `cmd/`; this file only parses
//! arguments and maps errors to exit codes (1: the operation failed, 2: bad usage).

mod cmd;

use clap::{Parser, Subcommand};

// mimalloc returns freed memory to the OS promptly, which keeps the resident set close to
// what the memory budget accounts for (glibc's per-thread arenas hold on to it).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(name = "quiver", version, about = "Quiver: a property-graph database that gets CSV in at hardware speed, within a memory budget")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Import CSV files (Neo4j header convention) into a new database.
    Import(cmd::import::Args),
    /// Show what a database holds: counts, sizes, encodings, bits per edge.
    Info(cmd::info::Args),
    /// Write the database back as CSV files with typed headers.
    Export(cmd::export::Args),
    /// Generate a workload: dolt, wide or social.
    Generate(cmd::generate::Args),
    /// Verify every checksum of a database.
    Check(cmd::check::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Import(a) => cmd::import::run(a),
        Command::Info(a) => cmd::info::run(a),
        Command::Export(a) => cmd::export::run(a),
        Command::Generate(a) => cmd::generate::run(a),
        Command::Check(a) => cmd::check::run(a),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
