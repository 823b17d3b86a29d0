//! Users of a database: names and salted Argon2id password hashes (PHC strings), one
//! per line in `<db>/users`, written atomically.

use argon2::password_hash::{
    rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString,
};
use argon2::Argon2;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The wait after a first failed login from an address; each further failure in a row
/// doubles it, up to [`LOGIN_WAIT_MAX`].
pub const LOGIN_WAIT: Duration = Duration::from_millis(500);
pub const LOGIN_WAIT_MAX: Duration = Duration::from_secs(16);
/// Failures older than this are forgotten.
const LOGIN_FAILURES_KEPT: Duration = Duration::from_secs(15 * 60);
/// Addresses remembered at most (a scan from many addresses cannot grow the map).
const LOGIN_ADDRESSES_MAX: usize = 10_000;

pub const FILE: &str = "users";

#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("a user name is 1 to 64 letters, digits, '_', '-' or '.': '{0}' is not")]
    BadName(String),
    #[error("the password is empty")]
    EmptyPassword,
    #[error("hashing the password: {0}")]
    Hash(String),
    #[error("{0}:{1}: not a `name:hash` line")]
    BadLine(PathBuf, usize),
}

/// The users file of a database.
#[derive(Debug, Default)]
pub struct Users {
    entries: Vec<(String, String)>,
    /// Failed logins by client address (see [`Users::login_failed`]).
    throttle: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, (u32, Instant)>>,
}

impl Users {
    pub fn path(db: &Path) -> PathBuf {
        db.join(FILE)
    }

    /// Loads `<db>/users` (no file: no users).
    pub fn load(db: &Path) -> Result<Users, UserError> {
        let p = Self::path(db);
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Users::default()),
            Err(e) => return Err(UserError::Io(p, e)),
        };
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let (name, hash) = line
                .split_once(':')
                .ok_or_else(|| UserError::BadLine(p.clone(), i + 1))?;
            entries.push((name.to_string(), hash.to_string()));
        }
        Ok(Users {
            entries,
            throttle: Default::default(),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(n, _)| n.as_str())
    }

    /// Adds or replaces `name` with a fresh salt, and writes the file.
    pub fn set(db: &Path, name: &str, password: &str) -> Result<(), UserError> {
        let ok = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
        if !ok {
            return Err(UserError::BadName(name.to_string()));
        }
        if password.is_empty() {
            return Err(UserError::EmptyPassword);
        }
        let salt = SaltString::generate(&mut OsRng);
        let hash = Argon2::default()
            .hash_password(password.as_bytes(), &salt)
            .map_err(|e| UserError::Hash(e.to_string()))?
            .to_string();
        let mut users = Self::load(db)?;
        users.entries.retain(|(n, _)| n != name);
        users.entries.push((name.to_string(), hash));
        let p = Self::path(db);
        let tmp = db.join("users.tmp");
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            for (n, h) in &users.entries {
                writeln!(f, "{n}:{h}")?;
            }
            f.sync_all()?;
            std::fs::rename(&tmp, &p)
        };
        write().map_err(|e| UserError::Io(p.clone(), e))
    }

    /// Whether `password` is `name`'s. Unknown users cost one hash too, so a timing
    /// does not tell which names exist.
    /// A login from `peer` (`ip:port`) failed: how long to wait before answering.
    /// Guessing from one address slows down as it goes on: 0.5 s, 1 s, 2 s ... 16 s.
    pub fn login_failed(&self, peer: &str) -> Duration {
        let Some(ip) = ip_of(peer) else {
            return LOGIN_WAIT;
        };
        let now = Instant::now();
        let mut t = self.throttle.lock().unwrap_or_else(|e| e.into_inner());
        if t.len() >= LOGIN_ADDRESSES_MAX {
            t.retain(|_, (_, at)| now.duration_since(*at) < LOGIN_FAILURES_KEPT);
            if t.len() >= LOGIN_ADDRESSES_MAX {
                t.clear();
            }
        }
        let e = t.entry(ip).or_insert((0, now));
        if now.duration_since(e.1) >= LOGIN_FAILURES_KEPT {
            e.0 = 0;
        }
        e.0 = e.0.saturating_add(1);
        e.1 = now;
        let doublings = (e.0 - 1).min(16);
        (LOGIN_WAIT * (1u32 << doublings)).min(LOGIN_WAIT_MAX)
    }

    /// A login from `peer` succeeded: its address's failures are forgotten.
    pub fn login_succeeded(&self, peer: &str) {
        if let Some(ip) = ip_of(peer) {
            let mut t = self.throttle.lock().unwrap_or_else(|e| e.into_inner());
            t.remove(&ip);
        }
    }

    pub fn verify(&self, name: &str, password: &str) -> bool {
        const DUMMY: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$3wE4rWbBHLJmCDzZqHM2Q6ZKn2GXzSBbVkEb+9yB9bc";
        let (hash, known) = match self.entries.iter().find(|(n, _)| n == name) {
            Some((_, h)) => (h.as_str(), true),
            None => (DUMMY, false),
        };
        let Ok(parsed) = PasswordHash::new(hash) else {
            return false;
        };
        let ok = Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok();
        ok && known
    }
}

/// The address of `ip:port` (IPv6 in brackets too).
fn ip_of(peer: &str) -> Option<std::net::IpAddr> {
    peer.parse::<std::net::SocketAddr>()
        .map(|a| a.ip())
        .ok()
        .or_else(|| peer.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_logins_from_one_address_wait_longer_each_time() {
        let u = Users::default();
        let waits: Vec<u64> = (0..8)
            .map(|_| u.login_failed("10.0.0.1:5000").as_millis() as u64)
            .collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 16000, 16000, 16000]);
        // Another port of the same address is the same client; another address is not.
        assert_eq!(u.login_failed("10.0.0.1:6000"), LOGIN_WAIT_MAX);
        assert_eq!(u.login_failed("[::1]:7000"), LOGIN_WAIT);
        // A success forgets the address's failures.
        u.login_succeeded("10.0.0.1:5001");
        assert_eq!(u.login_failed("10.0.0.1:5000"), LOGIN_WAIT);
        // Many addresses do not grow the map past its bound.
        for i in 0..(LOGIN_ADDRESSES_MAX as u32 + 10) {
            let a = std::net::Ipv4Addr::from(i);
            u.login_failed(&format!("{a}:1"));
        }
        assert!(u.throttle.lock().unwrap().len() <= LOGIN_ADDRESSES_MAX);
    }

    #[test]
    fn set_load_verify() {
        let d = tempfile::tempdir().unwrap();
        Users::set(d.path(), "alice", "s3cret").unwrap();
        Users::set(d.path(), "bob", "other").unwrap();
        Users::set(d.path(), "alice", "new").unwrap();
        let u = Users::load(d.path()).unwrap();
        assert_eq!(u.names().collect::<Vec<_>>(), ["bob", "alice"]);
        assert!(u.verify("alice", "new"));
        assert!(!u.verify("alice", "s3cret"));
        assert!(!u.verify("carol", "new"));
        let text = std::fs::read_to_string(Users::path(d.path())).unwrap();
        assert!(!text.contains("new") && text.contains("$argon2id$"));
        assert!(Users::set(d.path(), "a:b", "x").is_err());
    }
}
