//! Users of a database: names and salted Argon2id password hashes (PHC strings), one
//! per line in `<db>/users`, written atomically.

use argon2::password_hash::{
    rand_core::OsRng, PasswordHash, PasswordHasher, PasswordVerifier, SaltString,
};
use argon2::Argon2;
use std::io::Write;
use std::path::{Path, PathBuf};

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
        Ok(Users { entries })
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

#[cfg(test)]
mod tests {
    use super::*;

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
