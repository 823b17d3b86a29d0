//! The queries running on a store, for `SHOW TRANSACTIONS`: each one's text, start,
//! client and memory budget (its grant: granted, peak, waiting for, waited).
//!
//! A query registers when it starts and is removed when its [`Running`] ticket drops,
//! however it ends.

use crate::error::lock;
use quiver_common::memory::MemoryBudget;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

/// Who runs a query (empty for the CLI and in-process callers).
#[derive(Debug, Clone, Default)]
pub struct Client {
    /// `bolt-<n>` for a Bolt connection.
    pub connection: String,
    /// The peer's address.
    pub address: String,
    pub user: String,
}

/// One running query.
#[derive(Debug, Clone)]
pub struct Query {
    pub id: u64,
    pub text: String,
    pub client: Client,
    pub started: SystemTime,
    pub since: Instant,
    /// Its memory budget (a child of the database's).
    pub memory: MemoryBudget,
}

/// The running queries of a store.
#[derive(Debug, Default)]
pub struct Activity {
    next: AtomicU64,
    running: Mutex<BTreeMap<u64, Query>>,
}

impl Activity {
    /// Registers a query until the ticket drops.
    pub fn start(self: &Arc<Self>, text: &str, client: &Client, memory: &MemoryBudget) -> Running {
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let q = Query {
            id,
            text: text.to_string(),
            client: client.clone(),
            started: SystemTime::now(),
            since: Instant::now(),
            memory: memory.clone(),
        };
        lock(&self.running).insert(id, q);
        Running {
            activity: self.clone(),
            id,
        }
    }

    /// The queries running now, oldest first.
    pub fn list(&self) -> Vec<Query> {
        lock(&self.running).values().cloned().collect()
    }
}

/// A registered query; dropping it removes the query from the list.
#[derive(Debug)]
pub struct Running {
    activity: Arc<Activity>,
    pub id: u64,
}

impl Drop for Running {
    fn drop(&mut self) {
        lock(&self.activity.running).remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_listed_while_its_ticket_lives() {
        let a = Arc::new(Activity::default());
        let m = MemoryBudget::new(10);
        let t1 = a.start("RETURN 1", &Client::default(), &m);
        let t2 = a.start("RETURN 2", &Client::default(), &m);
        assert_eq!(
            a.list().iter().map(|q| q.text.as_str()).collect::<Vec<_>>(),
            ["RETURN 1", "RETURN 2"]
        );
        drop(t1);
        assert_eq!(a.list().len(), 1);
        assert_eq!(a.list()[0].id, t2.id);
        drop(t2);
        assert!(a.list().is_empty());
    }
}
