//! How the input files are read, decided once for every front end: the delimiter, the
//! quote, the array delimiter and the id type, from what the user gave (a flag, a
//! keyword argument) and, where nothing was given, from what the files say (their
//! headers, their quoting, the ids in a sample). The CLI, the Python API and the Spark
//! build call [`settle`] on the config they built; what it decided from the files comes
//! back as [`Decided`] notes for the front end to show its user as it shows things.

use crate::{plain_ids_are_integers, sources_have_integer_ids, ImportConfig, ImportError};
use quiver_storage::manifest::IdType;
use std::path::Path;

/// What a front end was told; `None` leaves the choice to the files.
#[derive(Debug, Clone, Default)]
pub struct Given {
    pub delimiter: Option<u8>,
    /// `Some(None)`: no quoting at all (every quote character is data).
    pub quote: Option<Option<u8>>,
    pub array_delimiter: Option<u8>,
    pub id_type: Option<IdType>,
    /// Adding to a database: the plain files' ids are not sampled for integers (the
    /// database's id type stands).
    pub appending: bool,
}

/// A choice made from the files, not given: the front end tells its user (the CLI on
/// stderr unless asked to be quiet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decided {
    /// Fields split on this byte, as the headers do (not `,`).
    Delimiter(u8),
    /// Fields quoted with this byte, as the files quote them (not `"`).
    Quote(u8),
    /// Every id, start and end value sampled is an integer: integer ids.
    IntegerIds,
}

impl std::fmt::Display for Decided {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decided::Delimiter(d) => write!(
                f,
                "reading the files as `{}`-delimited, as their headers are (--delimiter chooses)",
                if *d == b'\t' {
                    "\\t".to_string()
                } else {
                    (*d as char).to_string()
                }
            ),
            Decided::Quote(q) => write!(
                f,
                "reading fields quoted with `{}`, as the files quote them (--quote chooses)",
                *q as char
            ),
            Decided::IntegerIds => f.write_str(
                "ids: integers (every id, start and end value sampled is one), so {id: 1} finds them; pass --id-type string to keep them as text",
            ),
        }
    }
}

/// Fills `cfg`'s dialect and id type from `given`, deciding what was not given from the
/// files (CSV groups only: a Parquet or Arrow source has its own schema). The groups'
/// files and sources must be set.
pub fn settle(cfg: &mut ImportConfig, given: &Given) -> Result<Vec<Decided>, ImportError> {
    let mut decided = Vec::new();
    let plain: Vec<std::path::PathBuf> = plain_files(cfg).map(Path::to_path_buf).collect();
    let plain: Vec<&Path> = plain.iter().map(|p| p.as_path()).collect();
    cfg.dialect.delimiter = match given.delimiter {
        Some(d) => d,
        None => {
            let d = dialect_of(&plain).0;
            if d != b',' {
                decided.push(Decided::Delimiter(d));
            }
            d
        }
    };
    cfg.dialect.quote = match given.quote {
        Some(q) => q,
        None => {
            let q = quiver_csv::sniff::quote(&plain, cfg.dialect.delimiter);
            if q != b'"' {
                decided.push(Decided::Quote(q));
            }
            Some(q)
        }
    };
    cfg.dialect.array_delimiter = match given.array_delimiter {
        Some(d) => d,
        // `;` separates fields here: arrays take `|`, Neo4j's other common choice.
        None if cfg.dialect.delimiter == b';' => b'|',
        None => b';',
    };
    if cfg.dialect.array_delimiter == cfg.dialect.delimiter {
        return Err(ImportError::Usage(format!(
            "the array delimiter and the field delimiter are both `{}`: arrays could not be told from fields; choose another array delimiter (--array-delimiter)",
            cfg.dialect.delimiter as char
        )));
    }
    cfg.id_type = match given.id_type {
        Some(t) => t,
        // Parquet or Arrow inputs whose id columns are integers by their schema.
        None if sources_have_integer_ids(cfg)? => IdType::Integer,
        // So are the ids of plain CSV headers whose id columns hold integers.
        None if !given.appending && plain_ids_are_integers(cfg)? => {
            decided.push(Decided::IntegerIds);
            IdType::Integer
        }
        None => IdType::String,
    };
    Ok(decided)
}

/// The delimiter and quote `files` are written with, as [`settle`] decides them when
/// neither is given: for a front end that reads the files with a reader of its own (the
/// Spark build hands them to Spark's CSV reader).
pub fn dialect_of(files: &[&Path]) -> (u8, u8) {
    let d = quiver_csv::sniff::delimiter(files);
    (d, quiver_csv::sniff::quote(files, d))
}

/// The first file of every group read as CSV (not from a Parquet or Arrow source).
fn plain_files(cfg: &ImportConfig) -> impl Iterator<Item = &Path> {
    cfg.nodes
        .iter()
        .chain(&cfg.relationships)
        .filter(|g| g.source.is_none())
        .filter_map(|g| g.files.first().map(|f| f.as_path()))
}
