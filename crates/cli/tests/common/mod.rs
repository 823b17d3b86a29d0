//! Helpers for the CLI integration tests: run the built `quiver` binary, write files.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn quiver(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(args)
        .output()
        .expect("running quiver")
}

pub fn ok(args: &[&str]) -> String {
    let o = quiver(args);
    assert!(
        o.status.success(),
        "quiver {args:?} failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// Runs quiver expecting failure; returns stderr.
pub fn fails(args: &[&str]) -> String {
    let o = quiver(args);
    assert!(
        !o.status.success(),
        "quiver {args:?} unexpectedly succeeded: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stderr).to_string()
}

pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Reads every CSV file of an export dir into (header, rows) per file name prefix kind.
pub fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let mut r = csv::ReaderBuilder::new()
        .has_headers(true)
        .from_path(path)
        .unwrap();
    let header = r.headers().unwrap().iter().map(|s| s.to_string()).collect();
    let rows = r
        .records()
        .map(|rec| rec.unwrap().iter().map(|s| s.to_string()).collect())
        .collect();
    (header, rows)
}

pub fn export_files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    v.sort();
    v
}
