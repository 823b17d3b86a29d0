//! The control port of `quiver serve`: how `quiver import --append` hands its files to
//! the server that holds the database, which appends them beside its readers and
//! writers (`quiver_query::append`), at the import's speed.
//!
//! The server listens on a loopback port and writes `<db>/serve.control` (readable by
//! its owner only): the port, a random token and its process id. A client that can
//! read that file (and so could read and write the database's files anyway) connects,
//! sends one request line (JSON: the token, the import's arguments, its working
//! directory) and reads reply lines: progress, then the import's summary or an error.
//! A client that hangs up cancels the append (nothing is published).

use super::import;
use anyhow::{bail, Context, Result};
use quiver_engine::store::Store;
use quiver_import::{ImportSummary, Phase, Progress};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The file in the database directory that says where its server's control port is.
pub const CONTROL_FILE: &str = "serve.control";

/// The longest request line a server reads.
const REQUEST_BYTES_MAX: u64 = 1 << 20;

#[derive(Serialize, Deserialize)]
struct Endpoint {
    port: u16,
    token: String,
    pid: u32,
}

#[derive(Serialize, Deserialize)]
struct Request {
    token: String,
    /// The arguments of `quiver import` (after the subcommand), `--append` among them.
    append: Vec<String>,
    cwd: PathBuf,
    /// The database the client means (its canonical path): a control file copied with
    /// a database folder names another database's server.
    db: PathBuf,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Reply {
    Phase { name: String, total: u64 },
    Advance { done: u64, rows: u64 },
    Done(Box<ImportSummary>),
    Error(String),
}

/// The running control port; dropping it removes its file.
pub struct Control {
    path: PathBuf,
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Starts the control port of the server of `store` (a thread that accepts, and one
/// per request).
pub fn start(store: Arc<Store>) -> Result<Control> {
    let listener = TcpListener::bind(("127.0.0.1", 0)).context("opening the control port")?;
    let port = listener.local_addr()?.port();
    let token = format!("{:032x}", rand::random::<u128>());
    let path = store.dir().join(CONTROL_FILE);
    let body = serde_json::to_vec(&Endpoint {
        port,
        token: token.clone(),
        pid: std::process::id(),
    })?;
    let tmp = store.dir().join(format!("{CONTROL_FILE}.tmp"));
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .with_context(|| format!("writing {}", tmp.display()))?;
        f.write_all(&body)?;
    }
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    std::thread::Builder::new()
        .name("quiver-control".into())
        .spawn(move || {
            for conn in listener.incoming().flatten() {
                let (store, token) = (store.clone(), token.clone());
                let _ = std::thread::Builder::new()
                    .name("quiver-append".into())
                    .spawn(move || handle(conn, &store, &token));
            }
        })?;
    Ok(Control { path })
}

/// Progress sent to the client; a client gone cancels the append.
struct Remote {
    out: Mutex<TcpStream>,
    cancel: Arc<AtomicBool>,
}

impl Remote {
    fn send(&self, r: &Reply) {
        let Ok(mut line) = serde_json::to_vec(r) else {
            return;
        };
        line.push(b'\n');
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        if out.write_all(&line).is_err() {
            self.cancel.store(true, Ordering::SeqCst);
        }
    }
}

impl Progress for Remote {
    fn phase(&self, phase: Phase, total: u64) {
        self.send(&Reply::Phase {
            name: phase.name().to_string(),
            total,
        });
    }

    fn advance(&self, done: u64, rows: u64) {
        self.send(&Reply::Advance { done, rows });
    }
}

fn handle(conn: TcpStream, store: &Arc<Store>, token: &str) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    // A client that stops reading its progress must not hold the append (and the
    // publishing turn it holds) forever: a write that cannot go out cancels it.
    let _ = conn.set_write_timeout(Some(Duration::from_secs(30)));
    let Ok(reader) = conn.try_clone() else { return };
    let mut line = String::new();
    let read = BufReader::new(reader.take(REQUEST_BYTES_MAX)).read_line(&mut line);
    let remote = Remote {
        out: Mutex::new(conn),
        cancel: Arc::new(AtomicBool::new(false)),
    };
    let req: Request = match read.ok().and_then(|_| serde_json::from_str(&line).ok()) {
        Some(r) => r,
        None => {
            return remote.send(&Reply::Error(
                "not a request of quiver import --append".into(),
            ))
        }
    };
    if req.token != token {
        return remote.send(&Reply::Error(
            "the control token does not match: the server was restarted; append again".into(),
        ));
    }
    let mine = store
        .dir()
        .canonicalize()
        .unwrap_or_else(|_| store.dir().to_path_buf());
    if req.db != mine {
        return remote.send(&Reply::Error(format!(
            "this server serves {}, not {}: its control file was copied with the database folder; delete {} there",
            mine.display(),
            req.db.display(),
            CONTROL_FILE
        )));
    }
    let reply = match run_append(store, &req, &remote) {
        Ok(summary) => Reply::Done(Box::new(summary)),
        Err(e) => Reply::Error(format!("{e:#}")),
    };
    remote.send(&reply);
}

/// The clap wrapper that parses a client's `quiver import` arguments.
#[derive(clap::Parser)]
#[command(name = "quiver import", no_binary_name = true)]
struct ImportCommand {
    #[command(flatten)]
    args: import::Args,
}

fn run_append(store: &Arc<Store>, req: &Request, remote: &Remote) -> Result<ImportSummary> {
    use clap::Parser;
    let a = ImportCommand::try_parse_from(&req.append)
        .map_err(|e| anyhow::anyhow!("{}", e.render()))?
        .args;
    if !a.append {
        bail!("the database is served: only --append can add to it while it is");
    }
    let mut cfg = import::config(&a, Some(&req.cwd))?;
    cfg.cancel = remote.cancel.clone();
    let id_type = a.id_type.is_some().then_some(cfg.id_type);
    let client = quiver_engine::activity::Client {
        connection: "control".into(),
        address: "127.0.0.1".into(),
        user: String::new(),
    };
    let budget_given = a.memory_budget.is_some();
    let done = quiver_query::append::append(store, cfg, id_type, budget_given, &client, remote)?;
    // (Not eprintln!: a closed standard error must not fail the append.)
    let _ = writeln!(
        std::io::stderr(),
        "quiver: appended {} nodes and {} relationships for a client in {:.2} s (waited {:.2} s for memory)",
        done.summary.n_nodes,
        done.summary.n_rels,
        done.summary.seconds,
        done.waited_for_memory.as_secs_f64()
    );
    Ok(done.summary)
}

/// `quiver import --append` into a database a server holds: the server appends, this
/// process shows its progress. `None` when no server answers for `db`.
pub fn append_remote(db: &Path, progress: &dyn Progress) -> Result<Option<ImportSummary>> {
    let Ok(text) = std::fs::read(db.join(CONTROL_FILE)) else {
        return Ok(None);
    };
    let Ok(ep) = serde_json::from_slice::<Endpoint>(&text) else {
        return Ok(None);
    };
    // No process holds the database: the file is a dead server's (or a copy's).
    if quiver_storage::write::lock_database(db).is_ok() {
        return Ok(None);
    }
    // A file a killed server left: nothing listens (or not the server: the token says).
    let Ok(mut conn) = TcpStream::connect(("127.0.0.1", ep.port)) else {
        return Ok(None);
    };
    let args: Vec<String> = std::env::args()
        .skip_while(|x| x != "import")
        .skip(1)
        .collect();
    let req = Request {
        token: ep.token,
        append: args,
        cwd: std::env::current_dir()?,
        db: db.canonicalize()?,
    };
    let mut line = serde_json::to_vec(&req)?;
    line.push(b'\n');
    conn.write_all(&line)
        .context("sending the append to the server")?;
    eprintln!(
        "{} is served (process {}): the server appends the files",
        db.display(),
        ep.pid
    );
    for line in BufReader::new(conn).lines() {
        let line = line.context("reading the server's reply")?;
        match serde_json::from_str::<Reply>(&line) {
            Ok(Reply::Phase { name, total }) => {
                if let Some(p) = Phase::from_name(&name) {
                    progress.phase(p, total);
                }
            }
            Ok(Reply::Advance { done, rows }) => progress.advance(done, rows),
            Ok(Reply::Done(summary)) => {
                progress.finish();
                return Ok(Some(*summary));
            }
            Ok(Reply::Error(e)) => bail!("{e}"),
            Err(e) => bail!(
                "the server sent a reply this quiver cannot read ({e}): are both the same version?"
            ),
        }
    }
    bail!("the server closed the connection before the append finished")
}
