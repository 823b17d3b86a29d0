//! The session's cache of parsed and planned statement texts: a text seen before skips
//! the parser and the binder (bounded in entries and in text length).

use super::*;

/// Queries parsed, by their text: a client that runs one text with new parameters (as
/// drivers do) parses it once. Commands are parsed each time. Bounded in entries and
/// text length, and shared by the sessions of a server ([`Session::share_parses`]), so
/// its memory does not grow with the connections.
#[derive(Default)]
pub struct ParseCache {
    pub(crate) texts: std::sync::Mutex<HashMap<Box<str>, Arc<Prepared>>>,
}

/// A parsed statement, and whether it passed `bind::check`. The check reads the text
/// alone, so a statement that passed it once passes again: a cached one is checked at
/// its first run only (2.5% of a point read's server CPU, checked every run).
pub(crate) struct Prepared {
    pub(crate) stmt: quiver_cypher::ast::Statement,
    pub(crate) checked: std::sync::atomic::AtomicBool,
}

impl Prepared {
    pub(crate) fn new(stmt: quiver_cypher::ast::Statement) -> Prepared {
        Prepared {
            stmt,
            checked: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// `bind::check`, unless it passed before.
    pub(crate) fn check(&self, text: &str) -> Result<(), QueryError> {
        use std::sync::atomic::Ordering::Relaxed;
        if !self.checked.load(Relaxed) {
            quiver_cypher::bind::check(text, &self.stmt)?;
            self.checked.store(true, Relaxed);
        }
        Ok(())
    }
}

/// Query texts a cache keeps; past it, it forgets them all.
pub(crate) const PARSED_TEXTS: usize = 1024;

/// ... and only texts of at most this many bytes (a long text, a literal's data, is not
/// worth its memory).
pub(crate) const PARSED_TEXT_BYTES: usize = 4 << 10;

impl std::fmt::Debug for ParseCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ParseCache({} texts)", self.lock().len())
    }
}

impl ParseCache {
    pub(crate) fn get(&self, text: &str) -> Option<Arc<Prepared>> {
        self.lock().get(text).cloned()
    }

    pub(crate) fn keep(&self, text: &str, stmt: &Arc<Prepared>) {
        if text.len() > PARSED_TEXT_BYTES {
            return;
        }
        let mut texts = self.lock();
        if texts.len() >= PARSED_TEXTS {
            texts.clear();
        }
        texts.insert(text.into(), stmt.clone());
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Box<str>, Arc<Prepared>>> {
        self.texts.lock().unwrap_or_else(|e| e.into_inner())
    }
}
