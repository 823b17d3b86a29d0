//! Repository rules that a reviewer would otherwise have to remember: every Rust file
//! opens with a `//!` paragraph saying what the module is (rust-analyzer's habit), and
//! library code holds no `todo!()` / `unimplemented!()` stubs.

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn every_rust_file_says_what_it_is() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    rust_files(&crates, &mut files);
    assert!(
        files.len() > 20,
        "found only {} files under {}",
        files.len(),
        crates.display()
    );
    let mut missing = Vec::new();
    let mut stubs = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        if !first.starts_with("//!") {
            missing.push(f.display().to_string());
        }
        let in_tests = f.components().any(|c| c.as_os_str() == "tests");
        let (todo, unimpl) = (concat!("todo", "!("), concat!("unimplemented", "!("));
        if !in_tests && (text.contains(todo) || text.contains(unimpl)) {
            stubs.push(f.display().to_string());
        }
    }
    assert!(
        missing.is_empty(),
        "files without a //! header: {missing:#?}"
    );
    assert!(stubs.is_empty(), "stubs in library code: {stubs:#?}");
}
