//! One chunk of records -> one [`Batch`] of typed columns. Runs in parallel, one chunk per
//! task; nothing here is shared or locked. Rows that fail are not in the batch: each
//! becomes a [`RowError`] with its place and raw bytes, and the sequential stage decides
//! whether that stops the import or goes to the rejects file.

use crate::idmap::{IdMapWithGrant, Key};
use quiver_common::types::{DataType, ScalarType};
use quiver_csv::reader::{TypedColumn, TypedRows};
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
    /// Added to the node ids this import's own maps give (an append into a live
    /// database whose new nodes start past ids it handed out meanwhile).
    pub shift: u32,
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
    /// Relationship endpoints as `src << 32 | dst` (internal ids), one per good row, and
    /// types (indexes into `type_names`).
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
/// `utf8`: `f` is known to be UTF-8 (its whole chunk was checked at once).
#[inline]
fn push_scalar(
    b: &mut ColumnBuilder,
    t: ScalarType,
    f: &[u8],
    date: value::DateOrder,
    utf8: bool,
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
            if !utf8 {
                simdutf8::basic::from_utf8(f).map_err(|_| Reason::InvalidUtf8)?;
            }
            b.push_bytes(f);
        }
        ScalarType::Char => {
            if !utf8 {
                simdutf8::basic::from_utf8(f).map_err(|_| Reason::InvalidUtf8)?;
            }
            // Characters of valid UTF-8: the bytes that are not continuation bytes.
            if f.iter().filter(|&&c| (c as i8) >= -0x40).count() != 1 {
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

#[inline]
fn push_value(
    b: &mut ColumnBuilder,
    dtype: DataType,
    f: &[u8],
    array_delim: u8,
    date: value::DateOrder,
    utf8: bool,
) -> Result<(), Reason> {
    if f.is_empty() {
        b.push_null();
        return Ok(());
    }
    match dtype {
        DataType::Scalar(t) => push_scalar(b, t, f, date, utf8),
        DataType::Array(t) => {
            let child = b.list_child().ok_or(Reason::Cast)?;
            let before = child.len();
            for el in f.split(|&c| c == array_delim) {
                if let Err(r) = push_scalar(child, t, el, date, utf8) {
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

impl Batch {
    fn new(plan: &Plan) -> Batch {
        Batch {
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
        }
    }

    /// At the `SIZE_SAMPLE_RECORDS`th record, whose start is `consumed` bytes into a
    /// chunk of `chunk_len`: sizes the batch for the chunk, as if the records so far
    /// fill it (with a tenth to spare).
    #[inline]
    fn size_from_sample(&mut self, chunk_len: usize, consumed: usize) {
        if self.records == SIZE_SAMPLE_RECORDS {
            let rows = (chunk_len as f64 / consumed.max(1) as f64
                * (SIZE_SAMPLE_RECORDS - 1) as f64
                * 1.1) as usize;
            self.reserve_like_sample(rows);
        }
    }

    /// Reserves room for `rows` rows in all, in the proportions of the rows held: a
    /// batch that grew from nothing by doubling copied each column's data about once
    /// more and faulted fresh pages in for every chunk (2% of the dolt import's time in
    /// `realloc`'s copies).
    fn reserve_like_sample(&mut self, rows: usize) {
        let held = self.n_rows().max(1);
        let more = rows.saturating_sub(held);
        for c in &mut self.columns {
            let per = c.string_bytes() as f64 / held as f64;
            c.reserve_exact(more, (per * more as f64) as usize);
        }
        if !self.spans.is_empty() {
            self.spans.reserve_exact(more);
            self.lines.reserve_exact(more);
        }
        if !self.edges.is_empty() {
            self.edges.reserve_exact(more);
        }
        if !self.types.is_empty() {
            self.types.reserve_exact(more);
        }
    }

    /// Where a row's values start (column lengths and key counts), to take back a row
    /// that fails half way.
    fn mark(&self, lens: &mut Vec<usize>) -> (usize, usize) {
        lens.clear();
        lens.extend(self.columns.iter().map(|c| c.len()));
        (self.start_keys.ends.len(), self.end_keys.ends.len())
    }

    fn undo(&mut self, lens: &[usize], keys: (usize, usize)) {
        for (c, &l) in self.columns.iter_mut().zip(lens) {
            c.truncate(l);
        }
        self.start_keys.truncate(keys.0);
        self.end_keys.truncate(keys.1);
    }

    /// Records a good row: its relationship (endpoints and type), and its span and line
    /// where it may be rejected later (every node row; a relationship row only when
    /// `keep_spans`, since it is never rejected after parsing unless a side spilled).
    #[inline]
    fn push_row(&mut self, row: &RowOut, keep_spans: bool, span: (u32, u32), line: u32) {
        if keep_spans || !row.rel {
            self.spans.push(span);
            self.lines.push(line);
        }
        if row.rel {
            self.edges.push((row.src as u64) << 32 | row.dst as u64);
            if let Some(t) = row.ty {
                self.types.push(t);
            }
        }
    }
}

/// What a parsed row adds beside its columns: a relationship's endpoints and type.
#[derive(Default)]
struct RowOut {
    rel: bool,
    src: u32,
    dst: u32,
    ty: Option<u32>,
}

/// How a chunk's rows resolve their endpoints: the spans kept, and both endpoints
/// looked up together when both are string keys in memory.
struct RowPlan<'e, 'p> {
    endpoints: Option<&'e Endpoints<'p>>,
    keep_spans: bool,
    pair: Option<(usize, usize)>,
}

impl<'e, 'p> RowPlan<'e, 'p> {
    fn new(plan: &Plan, endpoints: Option<&'e Endpoints<'p>>) -> Self {
        // Rows of a spilled side may be rejected after the join: they keep span and line.
        let keep_spans = endpoints.is_some_and(|e| e.start_spilled || e.end_spilled);
        let pair = endpoints
            .filter(|e| !(e.start_spilled || e.end_spilled || e.start_integer || e.end_integer))
            .and_then(|_| {
                let at = |want: fn(&Slot) -> bool| plan.slots.iter().position(want);
                Some((
                    at(|s| matches!(s, Slot::Start))?,
                    at(|s| matches!(s, Slot::End))?,
                ))
            });
        RowPlan {
            endpoints,
            keep_spans,
            pair,
        }
    }
}

/// One record's fields as [`parse_record`] reads them: CSV text, or a row of typed
/// columns. Generic (not a trait object) so that the CSV path compiles to what it was.
trait Record {
    /// Whether a field's text may be one of the plan's null markers (CSV text; typed
    /// input has real nulls).
    const MARKERS: bool;
    /// Field `i` as a CSV field's text, unquoted; empty for a null.
    fn text(&mut self, i: usize) -> Result<&[u8], Reason>;
    /// Fields `i` and `j` as text, together.
    fn text2(&mut self, i: usize, j: usize) -> (&[u8], &[u8]);
    /// Field `i` as an integer when the input holds it as one (`Some(None)`: a null).
    fn int(&self, i: usize) -> Option<Option<i64>>;
    /// Every field's text is known to be UTF-8 (checked once for the whole chunk).
    fn utf8(&self) -> bool;
    /// Pushes field `i` into `b` as `dtype` when the input holds it in that type (or
    /// it is null); `None`: read its text.
    fn push_typed(
        &self,
        i: usize,
        b: &mut ColumnBuilder,
        dtype: DataType,
    ) -> Option<Result<(), Reason>>;
}

struct CsvRecord<'a> {
    chunk: &'a [u8],
    fields: &'a Fields,
    /// The chunk is valid UTF-8, so every field is (a field is the chunk's bytes
    /// between ASCII delimiters, or them without doubled ASCII quotes).
    utf8: bool,
}

impl Record for CsvRecord<'_> {
    const MARKERS: bool = true;

    #[inline]
    fn text(&mut self, i: usize) -> Result<&[u8], Reason> {
        Ok(self.fields.get(self.chunk, i))
    }

    #[inline]
    fn text2(&mut self, i: usize, j: usize) -> (&[u8], &[u8]) {
        (
            self.fields.get(self.chunk, i),
            self.fields.get(self.chunk, j),
        )
    }

    #[inline]
    fn int(&self, _: usize) -> Option<Option<i64>> {
        None
    }

    #[inline]
    fn utf8(&self) -> bool {
        self.utf8
    }

    #[inline]
    fn push_typed(
        &self,
        _: usize,
        _: &mut ColumnBuilder,
        _: DataType,
    ) -> Option<Result<(), Reason>> {
        None
    }
}

/// Row `row` of typed columns (`cols[i]` is the input's column of slot `i`).
struct TypedRecord<'a> {
    rows: &'a dyn TypedRows,
    cols: &'a [TypedColumn<'a>],
    row: usize,
    scratch: [Vec<u8>; 2],
}

impl TypedRecord<'_> {
    fn valid(&self, i: usize) -> bool {
        self.cols[i].is_valid(self.row)
    }

    /// Writes field `i`'s text into scratch buffer `k`, unless it is a string read in
    /// place; false when it has no text form.
    fn fill(&mut self, i: usize, k: usize) -> bool {
        let (row, valid) = (self.row, self.valid(i));
        let out = &mut self.scratch[k];
        out.clear();
        match &self.cols[i] {
            TypedColumn::Str { .. } if valid => true,
            _ => self.rows.text(i, row, out).is_ok(),
        }
    }

    /// Field `i`'s text once [`Self::fill`] wrote it to buffer `k`.
    fn view(&self, i: usize, k: usize) -> &[u8] {
        match &self.cols[i] {
            TypedColumn::Str { offsets, data, .. } if self.valid(i) => {
                &data[offsets[self.row] as usize..offsets[self.row + 1] as usize]
            }
            _ => &self.scratch[k],
        }
    }
}

impl Record for TypedRecord<'_> {
    const MARKERS: bool = false;

    fn text(&mut self, i: usize) -> Result<&[u8], Reason> {
        if !self.fill(i, 0) {
            return Err(Reason::Cast);
        }
        Ok(self.view(i, 0))
    }

    fn text2(&mut self, i: usize, j: usize) -> (&[u8], &[u8]) {
        // A field with no text form reads as empty: no node has that key.
        if !self.fill(i, 0) {
            self.scratch[0].clear();
        }
        if !self.fill(j, 1) {
            self.scratch[1].clear();
        }
        (self.view(i, 0), self.view(j, 1))
    }

    fn int(&self, i: usize) -> Option<Option<i64>> {
        match &self.cols[i] {
            TypedColumn::Int { values, .. } => Some(self.valid(i).then(|| values[self.row])),
            _ => None,
        }
    }

    fn utf8(&self) -> bool {
        false
    }

    fn push_typed(
        &self,
        i: usize,
        b: &mut ColumnBuilder,
        dtype: DataType,
    ) -> Option<Result<(), Reason>> {
        if !self.valid(i) {
            b.push_null();
            return Some(Ok(()));
        }
        let row = self.row;
        match (dtype, &self.cols[i]) {
            (DataType::Scalar(t), c) => push_typed_scalar(c, row, t, b),
            (
                DataType::Array(t),
                TypedColumn::List {
                    offsets, values, ..
                },
            ) => {
                // Elements copied as they are when their type is the column's (an empty
                // list stays one: typed input tells it from a null); otherwise the text.
                let (s, e) = (offsets[row] as usize, offsets[row + 1] as usize);
                if s < e && !elements_fit(values, t) {
                    return None;
                }
                let child = b.list_child()?;
                let before = child.len();
                for j in s..e {
                    if !values.is_valid(j) {
                        child.push_null();
                    } else if let Some(Err(r)) = push_typed_scalar(values, j, t, child) {
                        // The row is taken back: its elements too (the list's own
                        // length has not moved, so the row's undo would miss them).
                        child.truncate(before);
                        return Some(Err(r));
                    }
                }
                b.end_list();
                Some(Ok(()))
            }
            _ => None,
        }
    }
}

/// Whether elements of `c` are copied as they are into a column of `t`.
fn elements_fit(c: &TypedColumn<'_>, t: ScalarType) -> bool {
    matches!(
        (c, t),
        (
            TypedColumn::Int { .. },
            ScalarType::Byte | ScalarType::Short | ScalarType::Int | ScalarType::Long
        ) | (
            TypedColumn::Float { .. },
            ScalarType::Double | ScalarType::Float
        ) | (TypedColumn::Bool { .. }, ScalarType::Boolean)
            | (TypedColumn::Str { .. }, ScalarType::String)
            | (TypedColumn::Days { .. }, ScalarType::Date)
            | (
                TypedColumn::Micros { .. },
                ScalarType::LocalDateTime | ScalarType::DateTime
            )
    )
}

/// Value `row` of `c` (not null) into a column of `t`: `None` when `c`'s values are not
/// of `t` (the caller reads the text), an error for an integer out of `t`'s range.
fn push_typed_scalar(
    c: &TypedColumn<'_>,
    row: usize,
    t: ScalarType,
    b: &mut ColumnBuilder,
) -> Option<Result<(), Reason>> {
    match (c, t) {
        (
            TypedColumn::Int { values, .. },
            ScalarType::Byte | ScalarType::Short | ScalarType::Int | ScalarType::Long,
        ) => {
            let v = values[row];
            if let Some((lo, hi)) = t.int_range() {
                if v < lo || v > hi {
                    return Some(Err(Reason::Cast));
                }
            }
            b.push_i64(v);
        }
        (TypedColumn::Float { values, .. }, ScalarType::Double) => b.push_f64(values[row]),
        (TypedColumn::Float { values, .. }, ScalarType::Float) => {
            b.push_f64(values[row] as f32 as f64)
        }
        (TypedColumn::Bool { values, .. }, ScalarType::Boolean) => b.push_bool(values.get(row)),
        (TypedColumn::Str { offsets, data, .. }, ScalarType::String) => {
            // An empty string stays one: typed input tells it from a null.
            b.push_bytes(&data[offsets[row] as usize..offsets[row + 1] as usize])
        }
        (TypedColumn::Days { values, .. }, ScalarType::Date) => b.push_i64(values[row] as i64),
        (TypedColumn::Micros { values, .. }, ScalarType::LocalDateTime | ScalarType::DateTime) => {
            b.push_i64(values[row])
        }
        _ => return None,
    }
    Some(Ok(()))
}

/// Parses one record's fields into `batch`'s columns (and the spilled sides' keys);
/// `Err` names the slot that failed and why (the caller takes the row back).
#[inline]
fn parse_record<R: Record>(
    rec: &mut R,
    plan: &Plan,
    rp: &RowPlan<'_, '_>,
    batch: &mut Batch,
) -> Result<RowOut, (usize, Reason)> {
    let array_delim = plan.dialect.array_delimiter;
    let utf8 = rec.utf8();
    let mut out = RowOut {
        rel: rp.endpoints.is_some(),
        ..RowOut::default()
    };
    let found_pair = match (rp.pair, rp.endpoints) {
        (Some((si, ei)), Some(e)) => {
            let (a, b) = rec.text2(si, ei);
            Some(e.start.get_two(Key::Str(a), e.end, Key::Str(b)))
        }
        _ => None,
    };
    for (i, slot) in plan.slots.iter().enumerate() {
        let r: Result<(), Reason> = match slot {
            Slot::Skip => Ok(()),
            Slot::Prop { out, date, .. } => {
                let dtype = plan.out_types[*out];
                let b = &mut batch.columns[*out];
                match rec.push_typed(i, b, dtype) {
                    Some(r) => r,
                    None => rec.text(i).and_then(|f| {
                        let f = if R::MARKERS && plan.is_marker(f) {
                            &[][..]
                        } else {
                            f
                        };
                        push_value(b, dtype, f, array_delim, *date, utf8)
                    }),
                }
            }
            Slot::Id { out } => match rec.int(i).filter(|_| plan.integer_ids) {
                Some(Some(v)) => {
                    batch.columns[*out].push_i64(v);
                    Ok(())
                }
                Some(None) => Err(Reason::EmptyId),
                None => rec.text(i).and_then(|f| {
                    if f.is_empty() {
                        Err(Reason::EmptyId)
                    } else if plan.integer_ids {
                        let v = value::parse_i64(f).ok_or(Reason::Cast)?;
                        batch.columns[*out].push_i64(v);
                        Ok(())
                    } else if !utf8 && simdutf8::basic::from_utf8(f).is_err() {
                        Err(Reason::InvalidUtf8)
                    } else {
                        batch.columns[*out].push_bytes(f);
                        Ok(())
                    }
                }),
            },
            Slot::Labels { out } => rec.text(i).and_then(|f| {
                push_value(
                    &mut batch.columns[*out],
                    DataType::Array(ScalarType::String),
                    f,
                    array_delim,
                    value::DateOrder::Iso,
                    utf8,
                )
            }),
            Slot::Type => rec.text(i).and_then(|f| {
                if f.is_empty() {
                    return Err(Reason::MissingType);
                }
                let idx = match batch.type_names.iter().position(|t| t == f) {
                    Some(i) => i,
                    None => {
                        batch.type_names.push(f.to_vec());
                        batch.type_names.len() - 1
                    }
                };
                out.ty = Some(idx as u32);
                Ok(())
            }),
            Slot::Start => endpoint::<R, true>(rec, i, rp, found_pair, batch, &mut out)?,
            Slot::End => endpoint::<R, false>(rec, i, rp, found_pair, batch, &mut out)?,
        };
        r.map_err(|reason| (i, reason))?;
    }
    Ok(out)
}

/// The start (`START`) or end field of a relationship row resolved into `out`: one
/// function for both sides, each compiled with its side fixed (a row's hottest code:
/// the side chosen at run time cost social's import 5% in instructions).
#[inline(always)]
fn endpoint<R: Record, const START: bool>(
    rec: &mut R,
    i: usize,
    rp: &RowPlan<'_, '_>,
    found_pair: Option<(Option<u32>, Option<u32>)>,
    batch: &mut Batch,
    out: &mut RowOut,
) -> Result<Result<(), Reason>, (usize, Reason)> {
    // Only a relationship plan has endpoint slots.
    let Some(e) = rp.endpoints else {
        return Err((i, Reason::MissingNode));
    };
    let (map, integer, base, spilled, keys, pair) = if START {
        (
            e.start,
            e.start_integer,
            e.start_base,
            e.start_spilled,
            &mut batch.start_keys,
            found_pair.map(|(s, _)| s),
        )
    } else {
        (
            e.end,
            e.end_integer,
            e.end_base,
            e.end_spilled,
            &mut batch.end_keys,
            found_pair.map(|(_, d)| d),
        )
    };
    Ok(resolve(
        rec,
        i,
        integer,
        (map, e.shift),
        base,
        spilled.then_some((keys, e.keep_keys)),
        pair,
    )
    .map(|n| {
        if START {
            out.src = n;
        } else {
            out.dst = n;
        }
    }))
}

/// The id-map key of an endpoint's text: an integer id space's value, or the bytes.
#[inline(always)]
fn text_key(f: &[u8], integer: bool) -> Option<Key<'_>> {
    if integer {
        value::parse_i64(f).map(Key::Int)
    } else {
        Some(Key::Str(f))
    }
}

/// An endpoint's internal id: found together with the other end (`pair`), in this
/// import's id map, or in the database's index (an append). A spilled side is not
/// resolved here: its key is kept for the sort-merge join (when `keep`), and 0 stands in.
#[inline(always)]
fn resolve<R: Record>(
    rec: &mut R,
    i: usize,
    integer: bool,
    (map, shift): (&IdMapWithGrant, u32),
    base: Option<(&quiver_storage::Database, usize)>,
    spilled: Option<(&mut Keys, bool)>,
    pair: Option<Option<u32>>,
) -> Result<u32, Reason> {
    let typed = if integer { rec.int(i) } else { None };
    let f: &[u8] = match typed {
        Some(_) => &[],
        None => rec.text(i)?,
    };
    let key = match typed {
        Some(v) => v.map(Key::Int),
        None => text_key(f, integer),
    };
    if let Some((keys, keep)) = spilled {
        let k = key.ok_or(Reason::MissingNode)?;
        if keep {
            k.with_sort_bytes(|b| keys.push(b));
        }
        return Ok(0);
    }
    let in_map = match pair {
        Some(p) => p,
        None => key.and_then(|k| map.get(k)),
    }
    .map(|n| n + shift);
    in_map
        .or_else(|| {
            let (k, (db, space)) = (key?, base?);
            // A read error of the index reads as a missing node (the row is rejected and
            // says so), never a panic.
            db.lookup_id(space, k.into()).ok().flatten()
        })
        .ok_or(Reason::MissingNode)
}

/// The records a chunk's batch is sized from (see `Batch::size_from_sample`).
const SIZE_SAMPLE_RECORDS: u64 = 33;

/// Reads the chunk's leading records of the form `<digits><delimiter><digits>\n` for a
/// plan of two endpoints and nothing else (a relationship file of ids, the commonest
/// there is), resolved in this import's maps (integer id spaces, or string ones, whose
/// keys are then these digits as they are: the default path's canonical integers);
/// returns where the first record of any other form (or with an endpoint not found)
/// starts, and its line, for the general path to take over from. It reads what the tokenizer, `parse_record` and
/// `resolve` would, with none of their per-field bookkeeping: on social's edges the
/// general path spent about 60 ns a record.
fn integer_pairs(
    chunk: &[u8],
    plan: &Plan,
    endpoints: Option<&Endpoints<'_>>,
    batch: &mut Batch,
) -> (usize, u64) {
    let Some(e) = endpoints else {
        return (0, 0);
    };
    let start_first = match plan.slots.as_slice() {
        [Slot::Start, Slot::End] => true,
        [Slot::End, Slot::Start] => false,
        _ => return (0, 0),
    };
    let plain_sides =
        !(e.start_spilled || e.end_spilled) && e.start_base.is_none() && e.end_base.is_none();
    let delim = plan.dialect.delimiter;
    if !plain_sides || !plan.out_types.is_empty() || delim.is_ascii_digit() {
        return (0, 0);
    }
    // Digits up to `stop`: the field and the position after `stop`.
    let field = |at: usize, stop: u8| -> Option<(&[u8], usize)> {
        let mut i = at;
        while i < chunk.len() && chunk[i].wrapping_sub(b'0') < 10 {
            i += 1;
        }
        if i == at || chunk.get(i) != Some(&stop) {
            return None;
        }
        Some((&chunk[at..i], i + 1))
    };
    let found =
        |f: &[u8], integer, map: &IdMapWithGrant| text_key(f, integer).and_then(|k| map.get(k));
    let (mut pos, mut line) = (0usize, 0u64);
    while pos < chunk.len() {
        let Some((a, mid)) = field(pos, delim) else {
            break;
        };
        let Some((b, next)) = field(mid, b'\n') else {
            break;
        };
        let (s, d) = if start_first { (a, b) } else { (b, a) };
        let (Some(src), Some(dst)) = (
            found(s, e.start_integer, e.start),
            found(d, e.end_integer, e.end),
        ) else {
            break;
        };
        batch.records += 1;
        batch.size_from_sample(chunk.len(), pos);
        let row = RowOut {
            rel: true,
            src: src + e.shift,
            dst: dst + e.shift,
            ty: None,
        };
        batch.push_row(&row, false, (pos as u32, next as u32), line as u32);
        pos = next;
        line += 1;
    }
    (pos, line)
}

/// Parses the records of `chunk`.
pub fn parse_chunk(chunk: &[u8], plan: &Plan, endpoints: Option<&Endpoints<'_>>) -> Batch {
    let mut batch = Batch::new(plan);
    let (pos, line) = integer_pairs(chunk, plan, endpoints, &mut batch);
    let mut tok = Tokenizer::resume(chunk, &plan.dialect, pos, line);
    let mut fields = Fields::default();
    let n_fields = plan.slots.len();
    let mut lens: Vec<usize> = Vec::with_capacity(batch.columns.len());
    let rp = RowPlan::new(plan, endpoints);
    // One check of the whole chunk (tens of GB/s) instead of one per field: per field
    // it was 5% of the dolt import's instructions.
    let utf8 = simdutf8::basic::from_utf8(chunk).is_ok();
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
        let at = (span.start as u32, span.end as u32);
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
                span: at,
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
        batch.size_from_sample(chunk.len(), span.start);
        let keys = batch.mark(&mut lens);
        let mut rec = CsvRecord {
            chunk,
            fields: &fields,
            utf8,
        };
        match parse_record(&mut rec, plan, &rp, &mut batch) {
            Ok(row) => batch.push_row(&row, rp.keep_spans, at, span.line as u32),
            Err((i, reason)) => {
                batch.undo(&lens, keys);
                fail(&mut batch, i, reason, Detail::Field(i as u32));
            }
        }
    }
    batch.lines_total = tok.line();
    batch
}

/// Parses rows `from..to` of typed input: values in the layouts of [`TypedColumn`] go
/// into the batch as they are, the others through their text, as a CSV field would.
/// A row's line is its ordinal in the chunk (one line a row), its span the row range
/// (`Window::raw` writes it as a record), its column the field's number (from 1).
pub fn parse_typed(
    rows: &dyn TypedRows,
    from: usize,
    to: usize,
    plan: &Plan,
    endpoints: Option<&Endpoints<'_>>,
) -> Batch {
    let mut batch = Batch::new(plan);
    let cols: Vec<TypedColumn<'_>> = (0..plan.slots.len()).map(|c| rows.column(c)).collect();
    let mut lens: Vec<usize> = Vec::with_capacity(batch.columns.len());
    let rp = RowPlan::new(plan, endpoints);
    let mut rec = TypedRecord {
        rows,
        cols: &cols,
        row: from,
        scratch: [Vec::new(), Vec::new()],
    };
    for row in from..to {
        rec.row = row;
        let keys = batch.mark(&mut lens);
        let (line, at) = (
            (row - from) as u32,
            ((row - from) as u32, (row - from + 1) as u32),
        );
        match parse_record(&mut rec, plan, &rp, &mut batch) {
            Ok(r) => batch.push_row(&r, rp.keep_spans, at, line),
            Err((i, reason)) => {
                batch.undo(&lens, keys);
                batch.errors.push(RowError {
                    line,
                    // Shown 1-based: the field's number (not a byte column, as in CSV).
                    column: i as u32,
                    reason,
                    detail: Detail::Field(i as u32),
                    span: at,
                });
            }
        }
    }
    batch.records = (to - from) as u64;
    batch.lines_total = (to - from) as u64;
    batch
}

// A bad row in flight costs this much, whatever its message (see `RowError::detail`).
const _: () = assert!(std::mem::size_of::<RowError>() <= 28);
