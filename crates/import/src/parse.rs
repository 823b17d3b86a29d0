//! One chunk of records -> one [`Batch`] of typed columns. Runs in parallel, one chunk per
//! task; nothing here is shared or locked. Rows that fail are not in the batch: each
//! becomes a [`RowError`] with its place and raw bytes, and the sequential stage decides
//! whether that stops the import or goes to the rejects file.

use crate::idmap::{IdMapWithGrant, Key};
use quiver_common::types::{DataType, ScalarType};
use quiver_csv::tokenize::{Fields, TokenError, Tokenizer};
use quiver_csv::{value, Dialect};
use quiver_format::column::ColumnBuilder;
use std::sync::Arc;

/// Why a row was rejected (a closed set, written to the rejects file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    Cast,
    FieldCount,
    UnterminatedQuote,
    StrayQuote,
    BadQuote,
    InvalidUtf8,
    EmptyId,
    DuplicateId,
    MissingNode,
    MissingType,
}

impl Reason {
    pub fn name(self) -> &'static str {
        match self {
            Reason::Cast => "Cast",
            Reason::FieldCount => "FieldCount",
            Reason::UnterminatedQuote => "UnterminatedQuote",
            Reason::StrayQuote => "StrayQuote",
            Reason::BadQuote => "BadQuote",
            Reason::InvalidUtf8 => "InvalidUtf8",
            Reason::EmptyId => "EmptyId",
            Reason::DuplicateId => "DuplicateId",
            Reason::MissingNode => "MissingNode",
            Reason::MissingType => "MissingType",
        }
    }
}

#[derive(Debug, Clone)]
pub struct RowError {
    /// Line relative to the chunk start; column within that line (0-based).
    pub line: u32,
    pub column: u32,
    pub reason: Reason,
    /// What went wrong, without text: a flood of bad rows (a relationship file whose
    /// every endpoint is missing) costs 28 bytes a row in flight, not a formatted
    /// message each; [`RowError::message`] writes it when the row is rejected.
    pub detail: Detail,
    /// Byte range of the raw record within the chunk.
    pub span: (u32, u32),
}

/// What went wrong in a row (see [`RowError::message`]).
#[derive(Debug, Clone, Copy)]
pub enum Detail {
    Token(TokenError),
    /// The record has this many fields, not the header's.
    FieldCount(u32),
    /// The field of this header column.
    Field(u32),
}

/// The 0-based byte column of header column `col` in the raw record `raw`.
pub fn field_column(plan: &Plan, raw: &[u8], col: usize) -> u32 {
    let mut tok = Tokenizer::new(raw, &plan.dialect);
    let mut fields = Fields::default();
    match tok.next_record(&mut fields) {
        Ok(Some(_)) if col < fields.len() => fields.column(col) as u32,
        _ => 0,
    }
}

impl RowError {
    /// The human message, from the raw record (`raw`, as the span cuts it).
    pub fn message(&self, plan: &Plan, raw: &[u8]) -> String {
        match self.detail {
            Detail::Token(e) => e.to_string(),
            Detail::FieldCount(found) => format!(
                "expected {} fields (as in the header), found {found}",
                plan.slots.len()
            ),
            Detail::Field(col) => {
                let mut tok = Tokenizer::new(raw, &plan.dialect);
                let mut fields = Fields::default();
                let f = match tok.next_record(&mut fields) {
                    Ok(Some(_)) if (col as usize) < fields.len() => fields.get(raw, col as usize),
                    _ => &[][..],
                };
                field_message(plan, col as usize, self.reason, f)
            }
        }
    }
}

/// The message of a bad field `f` in header column `col`.
fn field_message(plan: &Plan, col: usize, reason: Reason, f: &[u8]) -> String {
    match &plan.slots[col] {
        Slot::Prop { out, name, date } => {
            let t = plan.out_types[*out].element();
            if reason == Reason::InvalidUtf8 {
                format!("invalid UTF-8 in column {name}")
            } else if t == ScalarType::Date && *date != value::DateOrder::Iso {
                format!(
                    "'{}' is not a date ({}, as the column's sampled rows are) (column {name})",
                    show(f),
                    date.pattern()
                )
            } else {
                format!("'{}' is not {} (column {name})", show(f), describe(t))
            }
        }
        Slot::Id { .. } => match reason {
            Reason::EmptyId => "empty node id".to_string(),
            Reason::InvalidUtf8 => "invalid UTF-8 in the node id".to_string(),
            _ => format!("'{}' is not an integer id (--id-type integer)", show(f)),
        },
        Slot::Labels { .. } => "invalid UTF-8 in :LABEL".to_string(),
        Slot::Type => "empty relationship :TYPE".to_string(),
        slot @ (Slot::Start | Slot::End) => format!(
            "{} node '{}' does not exist (no node has this id)",
            if matches!(slot, Slot::Start) {
                "start"
            } else {
                "end"
            },
            show(f)
        ),
        Slot::Skip => format!("column {}", col + 1),
    }
}

/// What to do with one CSV column.
#[derive(Debug, Clone)]
pub enum Slot {
    Skip,
    /// A property into output column `out`.
    Prop {
        out: usize,
        name: String,
        /// How its dates are spelled (a sniffed column's order; ISO otherwise).
        date: value::DateOrder,
    },
    /// The node id; stored in output column `out`.
    Id {
        out: usize,
    },
    /// Extra labels into output column `out` (`string[]`).
    Labels {
        out: usize,
    },
    Type,
    Start,
    End,
}

/// How the columns of one file group map to outputs.
#[derive(Debug, Clone)]
pub struct Plan {
    pub slots: Vec<Slot>,
    pub out_types: Vec<DataType>,
    pub integer_ids: bool,
    pub dialect: Dialect,
    /// Field values that mean "no value" besides the empty field (`NA`, `\N`, `NULL`).
    pub null_markers: Arc<[Vec<u8>]>,
}

impl Plan {
    /// Whether a property field is one of the null markers (the empty field is null
    /// anyway).
    #[inline]
    pub fn is_marker(&self, f: &[u8]) -> bool {
        !self.null_markers.is_empty() && self.null_markers.iter().any(|m| m == f)
    }
}

/// Id maps for resolving relationship endpoints.
#[derive(Clone, Copy)]
pub struct Endpoints<'a> {
    pub start: &'a IdMapWithGrant,
    pub end: &'a IdMapWithGrant,
    pub start_integer: bool,
    pub end_integer: bool,
    /// An append: ids not among this import's nodes are looked up in the database's id
    /// index of that space.
    pub start_base: Option<(&'a quiver_storage::Database, usize)>,
    pub end_base: Option<(&'a quiver_storage::Database, usize)>,
    /// A side whose id space spilled to disk is not resolved here: its keys are kept
    /// (see [`Batch::start_keys`]) for the sort-merge join of `crate::spill`.
    pub start_spilled: bool,
    pub end_spilled: bool,
    /// Whether to keep the spilled sides' keys: the read that sorts them does, the read
    /// after the join (which goes by row ordinal) does not.
    pub keep_keys: bool,
}

/// Endpoint keys of a spilled side, one per good row, as the sort keys of
/// `crate::spill` (integers as [`crate::spill::int_key`]).
#[derive(Debug, Default)]
pub struct Keys {
    pub data: Vec<u8>,
    pub ends: Vec<u32>,
}

impl Keys {
    pub fn get(&self, i: usize) -> &[u8] {
        let s = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        &self.data[s..self.ends[i] as usize]
    }

    fn truncate(&mut self, n: usize) {
        self.ends.truncate(n);
        self.data
            .truncate(self.ends.last().map_or(0, |&e| e as usize));
    }

    fn push(&mut self, k: &[u8]) {
        self.data.extend_from_slice(k);
        self.ends.push(self.data.len() as u32);
    }
}

/// The parsed rows of one chunk.
pub struct Batch {
    pub columns: Vec<ColumnBuilder>,
    /// Raw record span and relative line of every good row (for duplicate-id rejects).
    pub spans: Vec<(u32, u32)>,
    pub lines: Vec<u32>,
    /// Relationship endpoints (internal ids) and type (index into `type_names`).
    /// Relationship endpoints as `src << 32 | dst` (internal ids), one per good row.
    pub edges: Vec<u64>,
    pub types: Vec<u32>,
    pub type_names: Vec<Vec<u8>>,
    /// Keys of the endpoints on spilled sides (empty otherwise); a row with one also
    /// has its span and line, since it may be rejected once the join has run.
    pub start_keys: Keys,
    pub end_keys: Keys,
    pub errors: Vec<RowError>,
    /// Records read (good and bad).
    pub records: u64,
    /// Lines the chunk spans.
    pub lines_total: u64,
}

impl Batch {
    pub fn n_rows(&self) -> usize {
        self.spans.len().max(self.edges.len())
    }
}

fn describe(t: ScalarType) -> &'static str {
    match t {
        ScalarType::Byte => "a byte (-128..127)",
        ScalarType::Short => "a short (-32768..32767)",
        ScalarType::Int => "an int (32-bit)",
        ScalarType::Long => "a long (64-bit integer)",
        ScalarType::Float => "a float",
        ScalarType::Double => "a double",
        ScalarType::Boolean => "a boolean (true or false)",
        ScalarType::String => "a string",
        ScalarType::Char => "a single character",
        ScalarType::Date => "a date (YYYY-MM-DD)",
        ScalarType::LocalDateTime => "a local date-time (YYYY-MM-DDTHH:MM:SS)",
        ScalarType::DateTime => "a date-time (YYYY-MM-DDTHH:MM:SS[Z|+HH:MM])",
    }
}

/// Parses one scalar into `b` (a date spelled in `date`); `Err` carries the reason.
#[inline]
fn push_scalar(
    b: &mut ColumnBuilder,
    t: ScalarType,
    f: &[u8],
    date: value::DateOrder,
) -> Result<(), Reason> {
    match t {
        ScalarType::Byte | ScalarType::Short | ScalarType::Int | ScalarType::Long => {
            let v = value::parse_i64(f).ok_or(Reason::Cast)?;
            if let Some((lo, hi)) = t.int_range() {
                if v < lo || v > hi {
                    return Err(Reason::Cast);
                }
            }
            b.push_i64(v);
        }
        ScalarType::Float => b.push_f64(value::parse_f32(f).ok_or(Reason::Cast)? as f64),
        ScalarType::Double => b.push_f64(value::parse_f64(f).ok_or(Reason::Cast)?),
        ScalarType::Boolean => b.push_bool(value::parse_bool(f).ok_or(Reason::Cast)?),
        ScalarType::String => {
            simdutf8::basic::from_utf8(f).map_err(|_| Reason::InvalidUtf8)?;
            b.push_bytes(f);
        }
        ScalarType::Char => {
            let s = simdutf8::basic::from_utf8(f).map_err(|_| Reason::InvalidUtf8)?;
            if s.chars().count() != 1 {
                return Err(Reason::Cast);
            }
            b.push_bytes(f);
        }
        ScalarType::Date => b.push_i64(value::parse_date_as(date, f).ok_or(Reason::Cast)?),
        ScalarType::LocalDateTime => {
            b.push_i64(value::parse_local_datetime(f).ok_or(Reason::Cast)?)
        }
        ScalarType::DateTime => b.push_i64(value::parse_datetime(f).ok_or(Reason::Cast)?),
    }
    Ok(())
}

fn push_value(
    b: &mut ColumnBuilder,
    dtype: DataType,
    f: &[u8],
    array_delim: u8,
    date: value::DateOrder,
) -> Result<(), Reason> {
    if f.is_empty() {
        b.push_null();
        return Ok(());
    }
    match dtype {
        DataType::Scalar(t) => push_scalar(b, t, f, date),
        DataType::Array(t) => {
            let child = b.list_child().ok_or(Reason::Cast)?;
            let before = child.len();
            for el in f.split(|&c| c == array_delim) {
                if let Err(r) = push_scalar(child, t, el, date) {
                    child.truncate(before);
                    return Err(r);
                }
            }
            b.end_list();
            Ok(())
        }
    }
}

fn show(f: &[u8]) -> String {
    let s = String::from_utf8_lossy(&f[..f.len().min(60)]).to_string();
    if f.len() > 60 {
        format!("{s}...")
    } else {
        s
    }
}

/// Parses the records of `chunk`.
pub fn parse_chunk(chunk: &[u8], plan: &Plan, endpoints: Option<&Endpoints<'_>>) -> Batch {
    let mut batch = Batch {
        columns: plan
            .out_types
            .iter()
            .map(|&t| ColumnBuilder::new(t))
            .collect(),
        spans: Vec::new(),
        lines: Vec::new(),
        edges: Vec::new(),
        types: Vec::new(),
        type_names: Vec::new(),
        start_keys: Keys::default(),
        end_keys: Keys::default(),
        errors: Vec::new(),
        records: 0,
        lines_total: 0,
    };
    let mut tok = Tokenizer::new(chunk, &plan.dialect);
    let mut fields = Fields::default();
    let n_fields = plan.slots.len();
    let array_delim = plan.dialect.array_delimiter;
    let mut lens: Vec<usize> = Vec::with_capacity(batch.columns.len());
    // Rows of a spilled side may be rejected after the join: they keep span and line.
    let keep_spans = endpoints.is_some_and(|e| e.start_spilled || e.end_spilled);
    // Both endpoints of a row looked up together, when both are string keys in memory.
    let pair = endpoints
        .filter(|e| !(e.start_spilled || e.end_spilled || e.start_integer || e.end_integer))
        .and_then(|e| {
            let at = |want: fn(&Slot) -> bool| plan.slots.iter().position(want);
            Some((
                e,
                at(|s| matches!(s, Slot::Start))?,
                at(|s| matches!(s, Slot::End))?,
            ))
        });
    loop {
        let span = match tok.next_record(&mut fields) {
            Ok(Some(s)) => s,
            Ok(None) => break,
            Err(f) => {
                batch.records += 1;
                let reason = match f.error {
                    TokenError::UnterminatedQuote => Reason::UnterminatedQuote,
                    TokenError::StrayQuote => Reason::StrayQuote,
                    TokenError::AfterClosingQuote(_) => Reason::BadQuote,
                };
                batch.errors.push(RowError {
                    line: f.position.line as u32,
                    column: f.position.column as u32,
                    reason,
                    detail: Detail::Token(f.error),
                    span: (f.record_start as u32, f.resume_at as u32),
                });
                continue;
            }
        };
        batch.records += 1;
        let fail = |batch: &mut Batch, col: usize, reason: Reason, detail: Detail| {
            batch.errors.push(RowError {
                line: span.line as u32,
                column: if col < fields.len() {
                    fields.column(col) as u32
                } else {
                    0
                },
                reason,
                detail,
                span: (span.start as u32, span.end as u32),
            });
        };
        if fields.len() != n_fields {
            let col = fields.len().min(n_fields);
            fail(
                &mut batch,
                col.min(fields.len().saturating_sub(1)),
                Reason::FieldCount,
                Detail::FieldCount(fields.len() as u32),
            );
            continue;
        }
        lens.clear();
        lens.extend(batch.columns.iter().map(|c| c.len()));
        let key_lens = (batch.start_keys.ends.len(), batch.end_keys.ends.len());
        let mut ok = true;
        let mut src = 0u32;
        let mut dst = 0u32;
        let mut ty: Option<u32> = None;
        let found_pair = pair.map(|(e, si, ei)| {
            e.start.get_two(
                Key::Str(fields.get(chunk, si)),
                e.end,
                Key::Str(fields.get(chunk, ei)),
            )
        });
        for (i, slot) in plan.slots.iter().enumerate() {
            let f = fields.get(chunk, i);
            let r: Result<(), Reason> = match slot {
                Slot::Skip => Ok(()),
                Slot::Prop { out, date, .. } => {
                    let dtype = plan.out_types[*out];
                    let f = if plan.is_marker(f) { &[][..] } else { f };
                    push_value(&mut batch.columns[*out], dtype, f, array_delim, *date)
                }
                Slot::Id { out } => {
                    if f.is_empty() {
                        Err(Reason::EmptyId)
                    } else if plan.integer_ids {
                        match value::parse_i64(f) {
                            Some(v) => {
                                batch.columns[*out].push_i64(v);
                                Ok(())
                            }
                            None => Err(Reason::Cast),
                        }
                    } else if simdutf8::basic::from_utf8(f).is_err() {
                        Err(Reason::InvalidUtf8)
                    } else {
                        batch.columns[*out].push_bytes(f);
                        Ok(())
                    }
                }
                Slot::Labels { out } => push_value(
                    &mut batch.columns[*out],
                    DataType::Array(ScalarType::String),
                    f,
                    array_delim,
                    value::DateOrder::Iso,
                ),
                Slot::Type => {
                    if f.is_empty() {
                        Err(Reason::MissingType)
                    } else {
                        let idx = match batch.type_names.iter().position(|t| t == f) {
                            Some(i) => i,
                            None => {
                                batch.type_names.push(f.to_vec());
                                batch.type_names.len() - 1
                            }
                        };
                        ty = Some(idx as u32);
                        Ok(())
                    }
                }
                Slot::Start | Slot::End => {
                    let start = matches!(slot, Slot::Start);
                    let e = endpoints.expect("relationship plan has endpoints");
                    let (map, integer, base, spilled) = if start {
                        (e.start, e.start_integer, e.start_base, e.start_spilled)
                    } else {
                        (e.end, e.end_integer, e.end_base, e.end_spilled)
                    };
                    let key = if integer {
                        value::parse_i64(f).map(Key::Int)
                    } else {
                        Some(Key::Str(f))
                    };
                    if spilled {
                        let keys = if start {
                            &mut batch.start_keys
                        } else {
                            &mut batch.end_keys
                        };
                        if let Some(k) = key.filter(|_| e.keep_keys) {
                            k.with_sort_bytes(|b| keys.push(b));
                        }
                        if key.is_none() {
                            Err(Reason::MissingNode)
                        } else {
                            Ok(())
                        }
                    } else {
                        let in_map = match found_pair {
                            Some((s, e)) => {
                                if start {
                                    s
                                } else {
                                    e
                                }
                            }
                            None => key.and_then(|k| map.get(k)),
                        };
                        let found = in_map.or_else(|| {
                            let (k, (db, space)) = (key?, base?);
                            // A read error of the index reads as a missing node (the
                            // row is rejected and says so), never a panic.
                            db.lookup_id(space, k.into()).ok().flatten()
                        });
                        match found {
                            Some(n) => {
                                if start {
                                    src = n;
                                } else {
                                    dst = n;
                                }
                                Ok(())
                            }
                            None => Err(Reason::MissingNode),
                        }
                    }
                }
            };
            if let Err(reason) = r {
                fail(&mut batch, i, reason, Detail::Field(i as u32));
                ok = false;
                break;
            }
        }
        if !ok {
            for (c, &l) in batch.columns.iter_mut().zip(&lens) {
                c.truncate(l);
            }
            batch.start_keys.truncate(key_lens.0);
            batch.end_keys.truncate(key_lens.1);
            continue;
        }
        if keep_spans {
            batch.spans.push((span.start as u32, span.end as u32));
            batch.lines.push(span.line as u32);
        }
        if endpoints.is_some() {
            // Relationships need no spans: their rows are never rejected after parsing.
            batch.edges.push((src as u64) << 32 | dst as u64);
            if let Some(t) = ty {
                batch.types.push(t);
            }
        } else {
            batch.spans.push((span.start as u32, span.end as u32));
            batch.lines.push(span.line as u32);
        }
    }
    batch.lines_total = tok.line();
    batch
}

// A bad row in flight costs this much, whatever its message (see `RowError::detail`).
const _: () = assert!(std::mem::size_of::<RowError>() <= 28);
