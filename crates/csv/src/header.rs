//! The Neo4j import header convention: `name:TYPE` per column.
//!
//! Nodes: `userId:ID(User)`, `:ID`, `name`, `age:int`, `tags:string[]`, `:LABEL`, `:IGNORE`.
//! Relationships: `:START_ID(User)`, `:END_ID(User)`, `:TYPE`, typed properties.
//! An untyped column is a string. The text after the last `:` is the type; a name may
//! therefore contain colons (`a:b:int` is property `a:b` of type int).

use quiver_common::limits::CSV_COLUMNS_MAX;
use quiver_common::types::{DataType, ScalarType};

/// What a column is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// The node's external id, in an id space (`ID(User)`; `None` is the global space).
    Id {
        space: Option<String>,
    },
    /// Extra labels, separated by the array delimiter.
    Label,
    /// The relationship type.
    Type,
    StartId {
        space: Option<String>,
    },
    EndId {
        space: Option<String>,
    },
    Ignore,
    Property,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderColumn {
    /// Property name (for `Id`, the name the id is stored under; may be empty).
    pub name: String,
    pub role: Role,
    /// Value type of `Property` columns; `Id` columns hold strings or integers per
    /// `--id-type`; other roles hold strings.
    pub dtype: DataType,
    /// The header text as written.
    pub raw: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderKind {
    Nodes,
    Relationships,
}

/// A problem with a header, pointing at its column (0-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderError {
    pub column: usize,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub columns: Vec<HeaderColumn>,
}

fn space_of(spec: &str, prefix: &str) -> Option<Option<String>> {
    let upper = spec.to_ascii_uppercase();
    if upper == prefix {
        return Some(None);
    }
    if upper.starts_with(prefix) && spec[prefix.len()..].starts_with('(') && spec.ends_with(')') {
        let inner = &spec[prefix.len() + 1..spec.len() - 1];
        return Some(Some(inner.to_string()));
    }
    None
}

/// A header row with no annotation at all (no `:` in any field) is a newcomer's file,
/// not one written for Neo4j's convention: its fields rewritten in that convention, or
/// `None` for an annotated header (read by Neo4j's rules exactly). Nodes: the id column is
/// `id` (any case), else `<label>_id` or `<label>Id` for the group's first label, else the
/// first column when `need_id` (relationships are imported beside: they refer to nodes
/// by id), else none (a table of rows, such as the wide workload's, where a first column
/// with repeats must not become duplicate ids). Relationships: the endpoints are a pair named `src`/`dst`,
/// `source`/`target`, `from`/`to` or `start`/`end` (any case), else the first two
/// columns (Kùzu's rule). Both resolve in the global id space; the other columns stay
/// untyped properties (the import sniffs their types).
///
/// `rules` may name the columns instead (`--id-column`, `--start-column`, `--end-column`);
/// a name the header lacks is an error.
pub fn annotate_plain(
    fields: &[&[u8]],
    kind: HeaderKind,
    rules: &PlainRules<'_>,
) -> Result<Option<Vec<String>>, HeaderError> {
    if fields.is_empty() || fields.iter().any(|f| f.contains(&b':')) {
        return Ok(None);
    }
    let PlainRules {
        label,
        need_id,
        id,
        start,
        end,
    } = *rules;
    let names: Vec<String> = fields
        .iter()
        .map(|f| String::from_utf8_lossy(f).trim().to_string())
        .collect();
    let lower: Vec<String> = names.iter().map(|n| n.to_ascii_lowercase()).collect();
    let find = |want: &str| lower.iter().position(|n| n == want);
    // A column the user named: by its exact name, else in any case.
    let named = |flag: &str, want: &str| -> Result<usize, HeaderError> {
        names
            .iter()
            .position(|n| n == want)
            .or_else(|| find(&want.to_ascii_lowercase()))
            .ok_or_else(|| HeaderError {
                column: 0,
                message: format!(
                    "{flag} names column `{want}`, but the header's columns are {}",
                    names.join(", ")
                ),
            })
    };
    let mut out = names.clone();
    match kind {
        HeaderKind::Nodes => {
            let label = label
                .and_then(|l| l.split(':').next())
                .map(|l| l.trim().to_ascii_lowercase())
                .filter(|l| !l.is_empty());
            let chosen = id.map(|c| named("--id-column", c)).transpose()?;
            let at = chosen
                .or_else(|| find("id"))
                .or_else(|| {
                    let l = label.as_ref()?;
                    find(&format!("{l}_id")).or_else(|| find(&format!("{l}id")))
                })
                .or(need_id.then_some(0));
            if let Some(at) = at {
                out[at] = format!("{}:ID", names[at]);
            }
        }
        HeaderKind::Relationships => {
            if fields.len() < 2 {
                return Ok(None);
            }
            let pairs = [
                ("src", "dst"),
                ("source", "target"),
                ("from", "to"),
                ("start", "end"),
            ];
            let (mut a, mut b) = pairs
                .iter()
                .find_map(|(a, b)| Some((find(a)?, find(b)?)))
                .unwrap_or((0, 1));
            if let Some(c) = start {
                a = named("--start-column", c)?;
            }
            if let Some(c) = end {
                b = named("--end-column", c)?;
            }
            if a == b {
                return Err(HeaderError {
                    column: a,
                    message: format!("column `{}` cannot be both endpoints", names[a]),
                });
            }
            out[a] = format!("{}:START_ID", names[a]);
            out[b] = format!("{}:END_ID", names[b]);
        }
    }
    Ok(Some(out))
}

/// How [`annotate_plain`] reads a plain header: the group's label (nodes), whether nodes
/// need an id column, and the columns the user named.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlainRules<'a> {
    pub label: Option<&'a str>,
    pub need_id: bool,
    pub id: Option<&'a str>,
    pub start: Option<&'a str>,
    pub end: Option<&'a str>,
}

impl Header {
    /// Parses header fields. `fields` are the header row's fields, already unquoted.
    pub fn parse(fields: &[&[u8]], kind: HeaderKind) -> Result<Header, HeaderError> {
        if fields.len() > CSV_COLUMNS_MAX {
            return Err(HeaderError {
                column: CSV_COLUMNS_MAX,
                message: format!(
                    "{} columns; at most {CSV_COLUMNS_MAX} are supported",
                    fields.len()
                ),
            });
        }
        let mut columns = Vec::with_capacity(fields.len());
        for (i, f) in fields.iter().enumerate() {
            let raw = std::str::from_utf8(f).map_err(|_| HeaderError {
                column: i,
                message: "header is not valid UTF-8".into(),
            })?;
            let raw = raw.trim().to_string();
            let (name, spec) = match raw.rfind(':') {
                Some(p) => (raw[..p].to_string(), Some(raw[p + 1..].to_string())),
                None => (raw.clone(), None),
            };
            let string = DataType::Scalar(ScalarType::String);
            let (role, dtype) = match spec.as_deref() {
                None => (Role::Property, string),
                Some(spec) => {
                    if let Some(space) = space_of(spec, "ID") {
                        (Role::Id { space }, string)
                    } else if let Some(space) = space_of(spec, "START_ID") {
                        (Role::StartId { space }, string)
                    } else if let Some(space) = space_of(spec, "END_ID") {
                        (Role::EndId { space }, string)
                    } else if spec.eq_ignore_ascii_case("LABEL") {
                        (Role::Label, string)
                    } else if spec.eq_ignore_ascii_case("TYPE") {
                        (Role::Type, string)
                    } else if spec.eq_ignore_ascii_case("IGNORE") {
                        (Role::Ignore, string)
                    } else if let Some(t) = DataType::from_name(spec) {
                        (Role::Property, t)
                    } else {
                        return Err(HeaderError {
                            column: i,
                            message: format!(
                                "unknown type '{spec}' in header '{raw}'; expected one of int, long, short, byte, float, double, boolean, string, char, date, localdatetime, datetime (optionally with []), ID, LABEL, TYPE, START_ID, END_ID, IGNORE"
                            ),
                        });
                    }
                }
            };
            if role == Role::Property && name.is_empty() {
                return Err(HeaderError {
                    column: i,
                    message: format!("property column '{raw}' has no name"),
                });
            }
            let allowed = match kind {
                HeaderKind::Nodes => matches!(
                    role,
                    Role::Id { .. } | Role::Label | Role::Ignore | Role::Property
                ),
                HeaderKind::Relationships => {
                    matches!(
                        role,
                        Role::StartId { .. }
                            | Role::EndId { .. }
                            | Role::Type
                            | Role::Ignore
                            | Role::Property
                    )
                }
            };
            if !allowed {
                return Err(HeaderError {
                    column: i,
                    message: format!(
                        "'{raw}' is not allowed in a {} file",
                        if kind == HeaderKind::Nodes {
                            "nodes"
                        } else {
                            "relationships"
                        }
                    ),
                });
            }
            columns.push(HeaderColumn {
                name,
                role,
                dtype,
                raw,
            });
        }
        let h = Header { columns };
        h.validate(kind)?;
        Ok(h)
    }

    fn validate(&self, kind: HeaderKind) -> Result<(), HeaderError> {
        let count = |f: &dyn Fn(&Role) -> bool| self.columns.iter().filter(|c| f(&c.role)).count();
        let once =
            |name: &str, f: &dyn Fn(&Role) -> bool, required: bool| -> Result<(), HeaderError> {
                let n = count(f);
                if n > 1 || (required && n == 0) {
                    let idx = self
                        .columns
                        .iter()
                        .enumerate()
                        .filter(|(_, c)| f(&c.role))
                        .nth(1)
                        .map_or(0, |(i, _)| i);
                    return Err(HeaderError {
                        column: if n == 0 { 0 } else { idx },
                        message: if n == 0 {
                            format!("the header has no {name} column")
                        } else {
                            format!("the header has {n} {name} columns; exactly one is allowed")
                        },
                    });
                }
                Ok(())
            };
        match kind {
            HeaderKind::Nodes => {
                once(":ID", &|r| matches!(r, Role::Id { .. }), false)?;
                once(":LABEL", &|r| matches!(r, Role::Label), false)?;
            }
            HeaderKind::Relationships => {
                once(":START_ID", &|r| matches!(r, Role::StartId { .. }), true)?;
                once(":END_ID", &|r| matches!(r, Role::EndId { .. }), true)?;
                once(":TYPE", &|r| matches!(r, Role::Type), false)?;
            }
        }
        // Property names are unique.
        let mut seen = std::collections::HashSet::new();
        for (i, c) in self.columns.iter().enumerate() {
            let stored = matches!(c.role, Role::Property)
                || (matches!(c.role, Role::Id { .. }) && !c.name.is_empty());
            if stored && !seen.insert(c.name.as_str()) {
                return Err(HeaderError {
                    column: i,
                    message: format!("property '{}' appears twice in the header", c.name),
                });
            }
        }
        Ok(())
    }

    /// Index of the first column with this role kind.
    pub fn find(&self, f: impl Fn(&Role) -> bool) -> Option<usize> {
        self.columns.iter().position(|c| f(&c.role))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(h: &str, kind: HeaderKind) -> Result<Header, HeaderError> {
        let fields: Vec<&[u8]> = h.split(',').map(|s| s.as_bytes()).collect();
        Header::parse(&fields, kind)
    }

    #[test]
    fn node_header() {
        let h = parse(
            "userId:ID(User),name,age:int,tags:string[],:LABEL,skip:IGNORE,a:b:long",
            HeaderKind::Nodes,
        )
        .unwrap();
        assert_eq!(
            h.columns[0].role,
            Role::Id {
                space: Some("User".into())
            }
        );
        assert_eq!(h.columns[0].name, "userId");
        assert_eq!(h.columns[1].dtype, DataType::Scalar(ScalarType::String));
        assert_eq!(h.columns[2].dtype, DataType::Scalar(ScalarType::Int));
        assert_eq!(h.columns[3].dtype, DataType::Array(ScalarType::String));
        assert_eq!(h.columns[4].role, Role::Label);
        assert_eq!(h.columns[5].role, Role::Ignore);
        assert_eq!(h.columns[6].name, "a:b");
    }

    #[test]
    fn rel_header() {
        let h = parse(
            ":START_ID(User),:END_ID(User),:TYPE,since:date",
            HeaderKind::Relationships,
        )
        .unwrap();
        assert_eq!(
            h.columns[1].role,
            Role::EndId {
                space: Some("User".into())
            }
        );
        assert!(parse(":START_ID,since:date", HeaderKind::Relationships)
            .unwrap_err()
            .message
            .contains("END_ID"));
    }

    #[test]
    fn errors_point_at_columns() {
        let e = parse("id:ID,age:integr", HeaderKind::Nodes).unwrap_err();
        assert_eq!(e.column, 1);
        assert!(e.message.contains("unknown type 'integr'"));
        let e = parse("a:ID,b:ID", HeaderKind::Nodes).unwrap_err();
        assert_eq!(e.column, 1);
        let e = parse("a,b,a:int", HeaderKind::Nodes).unwrap_err();
        assert_eq!(e.column, 2);
        assert!(parse(":START_ID,:END_ID", HeaderKind::Nodes).is_err());
    }
}
