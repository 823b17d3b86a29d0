//! The `quiver` command. One module per subcommand under `cmd/`; this file only parses
//! arguments and maps errors to exit codes (1: the operation failed, 2: bad usage).

mod cmd;

use clap::{Parser, Subcommand};

/// Makes large buffers (4 MiB and more) come from and go back to the OS directly, so
/// that the resident set follows what the memory budget accounts for. Measured on the
/// dolt 1m file at a 64 MiB budget: glibc's defaults peaked at 103 MiB and mimalloc's at
/// 215 MiB (both keep freed memory for reuse); this setting at 85 MiB. A heap top of
/// up to 32 MiB is kept for reuse: trimming at 1 MiB made page faults a quarter of the
/// dolt import profile (4 MiB / 32 MiB: 0.5 s of system time instead of 0.9 s on dolt 1m).
///
/// Two arenas, not glibc's default of eight per core: each arena keeps its own free
/// memory, and an import runs a dozen threads (parsers, reader, writers). On the 20M-id
/// graph at 256 MiB, six arenas held 95 MiB between them at the peak (328 MiB); with two
/// the peak is 281 MiB and the import 5% faster (87.5 s against 92.6 s). Social scale 4
/// at 256 MiB peaks at 297-304 MiB with two, 322 with four and 324 with eight. The cost
/// is contention on dolt 1m: 0.78 s of user time against 0.73 (3 runs each).
fn tune_allocator() {
    // SAFETY: mallopt only sets allocator parameters; called before any thread starts.
    unsafe {
        libc::mallopt(
            libc::M_MMAP_THRESHOLD,
            quiver_common::memory::MMAP_THRESHOLD as i32,
        );
        libc::mallopt(libc::M_TRIM_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[derive(Parser)]
#[command(
    name = "quiver",
    version,
    about = "Quiver: a property-graph database that gets CSV in at hardware speed, within a memory budget"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Import CSV files (Neo4j header convention) into a new database.
    Import(cmd::import::Args),
    /// Run a Cypher query (or CREATE INDEX / DROP INDEX / SHOW INDEXES) and print the rows.
    Query(cmd::query::Args),
    /// Interactive Cypher prompt: history, multi-line input, :help, :params, timing.
    Shell(cmd::shell::Args),
    /// Show what a database holds: counts, sizes, encodings, bits per edge.
    Info(cmd::info::Args),
    /// Write the database back as CSV files with typed headers.
    Export(cmd::export::Args),
    /// Generate a workload: dolt, wide, social or ids.
    Generate(cmd::generate::Args),
    /// Verify every checksum of a database.
    Check(cmd::check::Args),
    /// Serve the database over Bolt, for the Neo4j drivers and tools.
    Serve(cmd::serve::Args),
    /// Manage the users who may log in to `quiver serve`.
    User(cmd::user::Args),
}

fn main() {
    tune_allocator();
    quiver_arrow::register();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Import(a) => cmd::import::run(a),
        Command::Query(a) => cmd::query::run(a),
        Command::Shell(a) => cmd::shell::run(a),
        Command::Info(a) => cmd::info::run(a),
        Command::Export(a) => cmd::export::run(a),
        Command::Generate(a) => cmd::generate::run(a),
        Command::Check(a) => cmd::check::run(a),
        Command::Serve(a) => cmd::serve::run(a),
        Command::User(a) => cmd::user::run(a),
    };
    if let Err(e) = result {
        eprintln!("error: {}", message(&e));
        std::process::exit(1);
    }
}

/// The error and its causes, each once: an error whose message already quotes its cause
/// (`path: No space left on device`) does not get the cause appended again, as anyhow's
/// `{:#}` would.
fn message(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if out.contains(&c) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_printed_once() {
        let io = std::io::Error::from_raw_os_error(28);
        let e = anyhow::Error::new(quiver_import::ImportError::Io {
            path: "/data/run.bin".into(),
            source: io,
        });
        let m = message(&e);
        assert_eq!(m.matches("No space left on device").count(), 1, "{m}");
        assert!(m.starts_with("/data/run.bin: "), "{m}");
        let e = anyhow::anyhow!("inner").context("outer");
        assert_eq!(message(&e), "outer: inner");
    }
}
