//! The reader under hostile files: a file that shrinks or grows while it is read is an
//! error (not a prefix imported as the whole), and records or headers past the record
//! limit are errors naming their line, read in bounded memory.

use quiver_common::limits::CSV_RECORD_BYTES_MAX;
use quiver_csv::reader::{spawn_reader, Msg};
use quiver_csv::{Dialect, ReadError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

const WINDOW: usize = 64 << 10;

fn start(path: &Path) -> crossbeam_channel::Receiver<Msg> {
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap(),
    );
    let (rx, _recycle, _h) = spawn_reader(
        vec![path.to_path_buf()],
        None,
        Dialect::default(),
        WINDOW,
        16 << 10,
        true,
        Arc::new(AtomicBool::new(false)),
        pool,
    );
    rx
}

/// Receives messages until the reader stops; returns the error, if any, and the number
/// of windows received.
fn drain(rx: &crossbeam_channel::Receiver<Msg>) -> (Option<ReadError>, usize) {
    let mut windows = 0;
    while let Ok(m) = rx.recv() {
        match m {
            Msg::Error(e) => return (Some(e), windows),
            Msg::Window(_) => windows += 1,
            Msg::Header { .. } => {}
        }
    }
    (None, windows)
}

/// A file of `rows` records of 64 bytes under a header.
fn rows_file(dir: &Path, rows: usize) -> PathBuf {
    let p = dir.join("rows.csv");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&p).unwrap());
    writeln!(f, "id:ID,text").unwrap();
    for i in 0..rows {
        writeln!(f, "{i:>10},{:>52}", "x").unwrap();
    }
    f.flush().unwrap();
    p
}

/// Waits for the first window: the reader is then at most a few windows into the file
/// (its channel holds one message), far from the end of a file of many windows.
fn first_window(rx: &crossbeam_channel::Receiver<Msg>) {
    loop {
        match rx.recv().unwrap() {
            Msg::Window(_) => return,
            Msg::Header { .. } => {}
            Msg::Error(e) => panic!("{e}"),
        }
    }
}

#[test]
fn a_file_truncated_while_read_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = rows_file(dir.path(), 64 * 1024); // 4 MiB: 64 windows
    let rx = start(&p);
    first_window(&rx);
    let len = std::fs::metadata(&p).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    match drain(&rx) {
        (Some(ReadError::Changed { detail, .. }), _) => {
            assert!(detail.contains("when opened, it ended after"), "{detail}")
        }
        (other, n) => panic!("expected a change error, got {other:?} after {n} windows"),
    }
}

#[test]
fn a_file_that_grows_while_read_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = rows_file(dir.path(), 64 * 1024);
    let rx = start(&p);
    first_window(&rx);
    let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
    writeln!(f, "{:>10},{:>52}", "late", "y").unwrap();
    drop(f);
    let e = drain(&rx).0.expect("an error");
    assert!(
        e.to_string().contains("the file changed while it was read"),
        "{e}"
    );
}

#[test]
fn an_unchanged_file_reads_whole() {
    let dir = tempfile::tempdir().unwrap();
    let p = rows_file(dir.path(), 64 * 1024);
    let (e, windows) = drain(&start(&p));
    assert!(e.is_none(), "{e:?}");
    assert!(windows > 1);
}

/// `head`, then one field 1 MiB longer than the record limit, then `tail`.
fn past_the_limit(p: &Path, head: &[u8], tail: &[u8]) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(p).unwrap());
    f.write_all(head).unwrap();
    let block = vec![b'x'; 1 << 20];
    for _ in 0..(CSV_RECORD_BYTES_MAX >> 20) + 1 {
        f.write_all(&block).unwrap();
    }
    f.write_all(tail).unwrap();
    f.flush().unwrap();
}

#[test]
fn a_record_past_the_limit_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    for (name, quote) in [("plain.csv", false), ("quoted.csv", true)] {
        let p = dir.path().join(name);
        let head: &[u8] = if quote {
            b"id:ID,text\n1,a\n2,b\n3,\""
        } else {
            b"id:ID,text\n1,a\n2,b\n3,"
        };
        past_the_limit(&p, head, b"\n4,d\n");
        match drain(&start(&p)).0 {
            Some(ReadError::Input { line, message, .. }) => {
                assert_eq!(line, 3, "{message}");
                assert!(message.contains("longer than 64 MiB"), "{message}");
                assert_eq!(message.contains("never closed"), quote, "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn a_header_past_the_limit_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("h.csv");
    past_the_limit(&p, b"id:ID,", b"\n1,a\n");
    let e = drain(&start(&p)).0.expect("an error");
    assert!(
        e.to_string().contains("the header is longer than 64 MiB"),
        "{e}"
    );
}
