//! `quiver shell`: an interactive Cypher prompt with history (in
//! `~/.quiver_history`), multi-line input ended by `;`, parameters and timing. Ctrl-C
//! stops a running query; at the prompt it clears the input; Ctrl-D leaves.

use super::query::{Format, Printer};
use anyhow::Result;
use quiver_common::size::human_bytes;
use quiver_query::{parse_param, Params, QueryError};
use rustyline::error::ReadlineError;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    db: super::DbArgs,
}

const HELP: &str = "\
Type Cypher and end it with ; (it may span lines). Commands:
  :help                 this text
  :param name=value     set a parameter ($name in queries); :param name removes it
  :params               list parameters
  :format table|csv|json
  :timing on|off        print rows, time and operator memory after each query
  :quit                 leave (or Ctrl-D)
Also: EXPLAIN <query>, PROFILE <query>, CREATE INDEX ON :Label(prop), DROP INDEX ON
:Label(prop), SHOW INDEXES.";

pub fn run(a: Args) -> Result<()> {
    let mut session = a.db.open(false)?;
    let cancel = Arc::new(AtomicBool::new(false));
    session.opts.cancel = Some(cancel.clone());
    {
        let c = cancel.clone();
        // A second handler may already be set (tests); the shell then just cannot cancel.
        let _ = ctrlc::set_handler(move || c.store(true, Ordering::Relaxed));
    }
    let mut rl = rustyline::DefaultEditor::new()?;
    let history = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".quiver_history"));
    if let Some(h) = &history {
        let _ = rl.load_history(h);
    }
    let mut params = Params::new();
    let mut format = Format::Table;
    let mut timing = true;
    let db = session.db();
    println!(
        "quiver shell: {} ({} nodes, {} relationship types). :help for help.",
        a.db.db.display(),
        db.n_nodes(),
        db.rel_types().len()
    );
    let mut buf = String::new();
    loop {
        let prompt = if buf.is_empty() {
            "quiver> "
        } else {
            "   ...> "
        };
        let line = match rl.readline(prompt) {
            Ok(l) => l,
            Err(ReadlineError::Interrupted) => {
                buf.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        };
        let t = line.trim();
        if buf.is_empty() && t.starts_with(':') {
            let _ = rl.add_history_entry(t);
            let (cmd, arg) = t.split_once(' ').unwrap_or((t, ""));
            let arg = arg.trim();
            match cmd {
                ":quit" | ":exit" | ":q" => break,
                ":help" => println!("{HELP}"),
                ":params" => {
                    for (k, v) in &params {
                        println!("${k} = {v:?}");
                    }
                }
                ":param" => {
                    if arg.contains('=') {
                        match parse_param(arg) {
                            Ok((k, v)) => {
                                params.insert(k, v);
                            }
                            Err(e) => eprintln!("error: {e}"),
                        }
                    } else {
                        params.remove(arg.trim_start_matches('$'));
                    }
                }
                ":format" => match arg {
                    "table" => format = Format::Table,
                    "csv" => format = Format::Csv,
                    "json" => format = Format::Json,
                    _ => eprintln!("error: :format table, csv or json"),
                },
                ":timing" => timing = arg != "off",
                _ => eprintln!("error: unknown command {cmd}; :help lists them"),
            }
            continue;
        }
        if !buf.is_empty() {
            buf.push('\n');
        }
        buf.push_str(&line);
        if !t.ends_with(';') {
            continue;
        }
        let text = std::mem::take(&mut buf);
        let _ = rl.add_history_entry(text.as_str());
        let text = text.trim().trim_end_matches(';').to_string();
        cancel.store(false, Ordering::Relaxed);
        let stdout = std::io::stdout();
        let mut printer = Printer::new(format, stdout.lock());
        if format != Format::Table && !quiver_query::is_command(&text) {
            printer.columns = super::query::columns_of(&mut session, &text, &params);
            let _ = printer.header();
        }
        let res: Result<_, QueryError> =
            session.run(&text, &params, &mut |g, b| printer.batch(g, b));
        match res {
            Ok(s) => {
                printer.columns = s.columns.clone();
                if !s.explained {
                    let _ = printer.finish(&s.columns);
                }
                drop(printer);
                if let Some(m) = &s.message {
                    println!("{m}");
                }
                if let Some(c) = quiver_query::counters_line(&s) {
                    println!("{c}");
                }
                if let Some(p) = &s.plan {
                    println!("{p}");
                }
                if timing {
                    println!(
                        "{} row{} in {:.3} ms (operators held {})",
                        s.rows,
                        if s.rows == 1 { "" } else { "s" },
                        s.elapsed.as_secs_f64() * 1e3,
                        human_bytes(s.peak_bytes)
                    );
                }
            }
            Err(e) => {
                drop(printer);
                eprintln!("error: {e}");
            }
        }
    }
    if let Some(h) = &history {
        let _ = rl.save_history(h);
    }
    Ok(())
}
