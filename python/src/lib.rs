//! `quiver._quiver`: the native half of the `quiver` Python package (the Python half,
//! `python/quiver/__init__.py`, adds the DataFrame conveniences).
//!
//! - `Connection`: a `query::Session` on an open database; `execute` runs a statement
//!   on the caller's thread with the GIL released, its rows held column by column
//!   (`quiver_arrow::result::Rows`) with the nodes and relationships they mention.
//! - `QueryResult`: those rows as Python values (`fetchone`, `fetchall`, iteration) or
//!   as an Arrow stream (`__arrow_c_stream__`, the Arrow PyCapsule interface), which
//!   pyarrow, polars and pandas read without a copy through Python objects.
//! - `import_graph`: the bulk import, from files (CSV, gzip, Parquet) or from any object
//!   with `__arrow_c_stream__` (pyarrow tables and readers, polars and pandas frames),
//!   read through `quiver_arrow::ArrowSource`.
//!
//! Ctrl-C: while a statement or an import runs on the main thread, SIGINT sets the
//! cancel flag they poll (a handler of our own, installed for the call and restored
//! after), and the call raises `KeyboardInterrupt`.

use arrow_array::ffi_stream::{FFI_ArrowArrayStream, RecordBatchStreamReader};
use arrow_array::{RecordBatchIterator, RecordBatchReader};
use pyo3::exceptions::{PyKeyboardInterrupt, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyCapsule, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use quiver_arrow::result::{rel_key, Rows};
use quiver_engine::value::{zone_id, zone_name, Dur, RelRef, Stamp};
use quiver_query::{Params, QueryError, Session, Value};
use quiver_storage::OpenMode;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};

pyo3::create_exception!(
    _quiver,
    QuiverError,
    pyo3::exceptions::PyException,
    "Every error Quiver raises."
);
pyo3::create_exception!(
    _quiver,
    CypherSyntaxError,
    QuiverError,
    "A statement that does not parse (message, line, column)."
);
pyo3::create_exception!(
    _quiver,
    CypherTypeError,
    QuiverError,
    "A value of the wrong type reached an operator or function."
);
pyo3::create_exception!(
    _quiver,
    ConstraintError,
    QuiverError,
    "A write broke a uniqueness constraint."
);
pyo3::create_exception!(
    _quiver,
    TransactionConflict,
    QuiverError,
    "Another transaction wrote the same entity first; retrying can succeed."
);
pyo3::create_exception!(
    _quiver,
    MemoryLimitExceeded,
    QuiverError,
    "A query or write needed more memory than its limit allows."
);
pyo3::create_exception!(
    _quiver,
    QueryCancelled,
    QuiverError,
    "The statement was cancelled."
);
pyo3::create_exception!(
    _quiver,
    ImportFailed,
    QuiverError,
    "A bulk import failed; the database is as it was."
);
pyo3::create_exception!(
    _quiver,
    DatabaseError,
    QuiverError,
    "Opening, reading or writing the database failed."
);

// ---------------------------------------------------------------- Ctrl-C

/// Set by our SIGINT handler; what statements and imports poll.
static CANCEL: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
    CANCEL.store(true, Ordering::SeqCst);
}

fn is_main_thread() -> bool {
    // The main thread's id is the process id on Linux.
    unsafe { libc::getpid() == libc::syscall(libc::SYS_gettid) as libc::pid_t }
}

/// Runs `f` with the GIL released and Ctrl-C cancelling it (main thread only: Python
/// delivers signals there). `Err(KeyboardInterrupt)` when it was.
fn interruptible<T: Send>(
    py: Python<'_>,
    f: impl FnOnce(Arc<AtomicBool>) -> T + Send,
) -> PyResult<T> {
    let main = is_main_thread();
    let flag = CANCEL.clone();
    let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
    if main {
        INTERRUPTED.store(false, Ordering::SeqCst);
        flag.store(false, Ordering::SeqCst);
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_sigint as *const () as usize;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(libc::SIGINT, &act, &mut old);
        }
    }
    let out = py.detach(|| f(flag.clone()));
    if main {
        unsafe {
            libc::sigaction(libc::SIGINT, &old, std::ptr::null_mut());
        }
        if INTERRUPTED.swap(false, Ordering::SeqCst) {
            flag.store(false, Ordering::SeqCst);
            return Err(PyKeyboardInterrupt::new_err("cancelled by Ctrl-C"));
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------- errors

/// A query error as the exception of its kind, with its message (for a statement that
/// rolled its transaction back, the kind of what failed and `rolled_back` set).
fn query_err(py: Python<'_>, e: &QueryError) -> PyErr {
    let err = error_of(py, e, e.to_string());
    if matches!(e, QueryError::RolledBack(_)) {
        let _ = err.value(py).setattr("rolled_back", true);
    }
    err
}

fn error_of(py: Python<'_>, e: &QueryError, msg: String) -> PyErr {
    use quiver_engine::EngineError as E;
    match e {
        QueryError::Parse(p) => {
            let err = CypherSyntaxError::new_err(msg);
            let v = err.value(py);
            let _ = v.setattr("line", p.line + 1);
            let _ = v.setattr("column", p.column + 1);
            let _ = v.setattr("description", p.message.clone());
            err
        }
        QueryError::UnknownFunction(_) | QueryError::MissingParam(_) | QueryError::Semantic(..) => {
            CypherSyntaxError::new_err(msg)
        }
        QueryError::Type(..) | QueryError::Engine(E::PropertyType(_)) => {
            CypherTypeError::new_err(msg)
        }
        QueryError::Engine(E::Constraint(_) | E::ConnectedNode { .. }) => {
            ConstraintError::new_err(msg)
        }
        QueryError::Engine(E::Conflict(_)) => TransactionConflict::new_err(msg),
        QueryError::Memory { .. } | QueryError::Engine(E::Memory(_)) => {
            MemoryLimitExceeded::new_err(msg)
        }
        QueryError::Cancelled => QueryCancelled::new_err(msg),
        QueryError::RolledBack(inner) => error_of(py, inner, msg),
        _ => DatabaseError::new_err(msg),
    }
}

// ---------------------------------------------------------------- values in

fn datetime_mod(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    py.import("datetime")
}

/// A Python value as a query parameter.
fn to_value(ob: &Bound<'_, PyAny>) -> PyResult<Value> {
    if ob.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = ob.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if ob.is_instance_of::<PyInt>() {
        return ob
            .extract::<i64>()
            .map(Value::Int)
            .map_err(|_| PyValueError::new_err(format!("{ob} does not fit in a 64-bit integer")));
    }
    if let Ok(f) = ob.cast::<PyFloat>() {
        return Ok(Value::Float(f.value()));
    }
    if let Ok(s) = ob.cast::<PyString>() {
        return Ok(Value::Str(Arc::from(s.to_cow()?.as_ref())));
    }
    if let Ok(b) = ob.cast::<PyBytes>() {
        return Ok(Value::Bytes(Arc::from(b.as_bytes())));
    }
    if let Ok(d) = ob.cast::<PyDict>() {
        let mut m = Vec::with_capacity(d.len());
        for (k, v) in d.iter() {
            let k: String = k
                .extract()
                .map_err(|_| PyTypeError::new_err("map keys must be strings"))?;
            m.push((Arc::from(k.as_str()), to_value(&v)?));
        }
        return Ok(Value::Map(Arc::new(m)));
    }
    if ob.is_instance_of::<PyList>() || ob.is_instance_of::<PyTuple>() {
        let mut l = Vec::new();
        for x in ob.try_iter()? {
            l.push(to_value(&x?)?);
        }
        return Ok(Value::List(Arc::new(l)));
    }
    let py = ob.py();
    let dt = datetime_mod(py)?;
    if ob.is_instance(&dt.getattr("datetime")?)? {
        let days = days_of(ob)?;
        let secs = days * 86_400
            + ob.getattr("hour")?.extract::<i64>()? * 3600
            + ob.getattr("minute")?.extract::<i64>()? * 60
            + ob.getattr("second")?.extract::<i64>()?;
        let nanos = ob.getattr("microsecond")?.extract::<u32>()? * 1000;
        let off = ob.call_method0("utcoffset")?;
        if off.is_none() {
            return Ok(Value::LocalDateTime(Stamp { secs, nanos }));
        }
        let off_s = off.call_method0("total_seconds")?.extract::<f64>()? as i64;
        // A zoneinfo zone keeps its name.
        let tz = ob.getattr("tzinfo")?;
        let zone = tz
            .getattr("key")
            .ok()
            .and_then(|k| k.extract::<String>().ok())
            .map_or(0, |k| zone_id(&k));
        return Ok(Value::DateTime(
            Stamp {
                secs: secs - off_s,
                nanos,
            },
            off_s as i32,
            zone,
        ));
    }
    if ob.is_instance(&dt.getattr("date")?)? {
        return Ok(Value::Date(days_of(ob)?));
    }
    if ob.is_instance(&dt.getattr("time")?)? {
        let ns = (ob.getattr("hour")?.extract::<i64>()? * 3600
            + ob.getattr("minute")?.extract::<i64>()? * 60
            + ob.getattr("second")?.extract::<i64>()?)
            * 1_000_000_000
            + ob.getattr("microsecond")?.extract::<i64>()? * 1000;
        let off = ob.call_method0("utcoffset")?;
        if off.is_none() {
            return Ok(Value::LocalTime(ns));
        }
        let off_s = off.call_method0("total_seconds")?.extract::<f64>()? as i32;
        return Ok(Value::Time(ns, off_s));
    }
    if ob.is_instance(&dt.getattr("timedelta")?)? {
        return Ok(Value::Duration(Arc::new(Dur {
            months: 0,
            days: ob.getattr("days")?.extract()?,
            secs: ob.getattr("seconds")?.extract()?,
            nanos: ob.getattr("microseconds")?.extract::<i32>()? * 1000,
        })));
    }
    if let Ok(n) = ob.extract::<PyRef<'_, Node>>() {
        return Ok(Value::Node(n.id));
    }
    // numpy scalars and the like.
    if let Ok(i) = ob
        .call_method0("__index__")
        .and_then(|i| i.extract::<i64>())
    {
        return Ok(Value::Int(i));
    }
    if let Ok(f) = ob
        .call_method0("__float__")
        .and_then(|f| f.extract::<f64>())
    {
        return Ok(Value::Float(f));
    }
    Err(PyTypeError::new_err(format!(
        "a parameter of type {} has no Cypher value",
        ob.get_type().name()?
    )))
}

fn days_of(ob: &Bound<'_, PyAny>) -> PyResult<i64> {
    // date.toordinal() counts from 0001-01-01 (ordinal 1); 1970-01-01 is 719163.
    Ok(ob.call_method0("toordinal")?.extract::<i64>()? - 719_163)
}

fn params_of(p: Option<&Bound<'_, PyDict>>) -> PyResult<Params> {
    let mut out = Params::new();
    if let Some(d) = p {
        for (k, v) in d.iter() {
            let k: String = k
                .extract()
                .map_err(|_| PyTypeError::new_err("parameter names must be strings"))?;
            out.insert(k, to_value(&v)?);
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------- values out

/// A node of a result: its id, labels and properties as they were when it was read.
#[pyclass(frozen, module = "quiver")]
struct Node {
    #[pyo3(get)]
    id: u64,
    #[pyo3(get)]
    labels: Py<PyAny>,
    #[pyo3(get)]
    properties: Py<PyDict>,
}

#[pymethods]
impl Node {
    /// The element id the Bolt server and `elementId(n)` give.
    #[getter]
    fn element_id(&self) -> String {
        self.id.to_string()
    }
    fn __getitem__<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        self.properties.bind(py).as_any().get_item(key)
    }
    fn get<'py>(
        &self,
        py: Python<'py>,
        key: &str,
        default: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        Ok(match self.properties.bind(py).get_item(key)? {
            Some(v) => v,
            None => default.unwrap_or_else(|| py.None().into_bound(py)),
        })
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .extract::<PyRef<'_, Node>>()
            .is_ok_and(|o| o.id == self.id)
    }
    fn __hash__(&self) -> u64 {
        self.id
    }
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Node(id={}, labels={}, properties={})",
            self.id,
            self.labels.bind(py).repr()?,
            self.properties.bind(py).repr()?
        ))
    }
}

/// A relationship of a result.
#[pyclass(frozen, module = "quiver")]
struct Relationship {
    #[pyo3(get)]
    element_id: String,
    #[pyo3(get)]
    r#type: String,
    #[pyo3(get)]
    start: u64,
    #[pyo3(get)]
    end: u64,
    #[pyo3(get)]
    properties: Py<PyDict>,
}

#[pymethods]
impl Relationship {
    fn __getitem__<'py>(&self, py: Python<'py>, key: &str) -> PyResult<Bound<'py, PyAny>> {
        self.properties.bind(py).as_any().get_item(key)
    }
    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .extract::<PyRef<'_, Relationship>>()
            .is_ok_and(|o| o.element_id == self.element_id)
    }
    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.element_id.hash(&mut h);
        h.finish()
    }
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Relationship(element_id={:?}, type={:?}, start={}, end={}, properties={})",
            self.element_id,
            self.r#type,
            self.start,
            self.end,
            self.properties.bind(py).repr()?
        ))
    }
}

/// A path: its nodes and the relationships between them, in order.
#[pyclass(frozen, module = "quiver")]
struct Path_ {
    #[pyo3(get)]
    nodes: Py<PyList>,
    #[pyo3(get)]
    relationships: Py<PyList>,
}

#[pymethods]
impl Path_ {
    fn __len__(&self, py: Python<'_>) -> usize {
        self.relationships.bind(py).len()
    }
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!(
            "Path(nodes={}, relationships={})",
            self.nodes.bind(py).repr()?,
            self.relationships.bind(py).repr()?
        ))
    }
}

/// A Cypher duration (months and days are not a fixed number of seconds).
#[pyclass(frozen, module = "quiver")]
struct Duration {
    #[pyo3(get)]
    months: i64,
    #[pyo3(get)]
    days: i64,
    #[pyo3(get)]
    seconds: i64,
    #[pyo3(get)]
    nanoseconds: i32,
}

#[pymethods]
impl Duration {
    /// As a `datetime.timedelta` (months counted as 30 days would be a guess: refused).
    fn to_timedelta<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        if self.months != 0 {
            return Err(PyValueError::new_err(
                "a duration with months has no fixed length",
            ));
        }
        datetime_mod(py)?.getattr("timedelta")?.call1((
            self.days,
            self.seconds,
            self.nanoseconds / 1000,
        ))
    }
    fn __repr__(&self) -> String {
        format!(
            "Duration(months={}, days={}, seconds={}, nanoseconds={})",
            self.months, self.days, self.seconds, self.nanoseconds
        )
    }
}

/// Converts result values to Python, sharing the nodes and relationships of a result.
struct Out<'a, 'py> {
    py: Python<'py>,
    rows: &'a Rows,
    dt: Bound<'py, PyModule>,
}

impl<'py> Out<'_, 'py> {
    fn props(&self, p: &[(Arc<str>, Value)]) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(self.py);
        for (k, v) in p {
            d.set_item(k.as_ref(), self.value(v)?)?;
        }
        Ok(d)
    }

    fn node(&self, n: u64) -> PyResult<Bound<'py, PyAny>> {
        let (labels, props) = match self.rows.nodes.get(&n) {
            Some(d) => (
                d.labels.iter().map(|l| l.to_string()).collect::<Vec<_>>(),
                self.props(&d.props)?,
            ),
            None => (Vec::new(), PyDict::new(self.py)),
        };
        Ok(Bound::new(
            self.py,
            Node {
                id: n,
                labels: PyList::new(self.py, labels)?.into_any().unbind(),
                properties: props.unbind(),
            },
        )?
        .into_any())
    }

    fn rel(&self, r: &RelRef) -> PyResult<Bound<'py, PyAny>> {
        let (ty, props) = match self.rows.rels.get(&rel_key(r)) {
            Some(d) => (d.ty.to_string(), self.props(&d.props)?),
            None => (String::new(), PyDict::new(self.py)),
        };
        Ok(Bound::new(
            self.py,
            Relationship {
                element_id: format!("{}:{}", r.ty, r.eid),
                r#type: ty,
                start: r.src as u64,
                end: r.dst as u64,
                properties: props.unbind(),
            },
        )?
        .into_any())
    }

    fn date(&self, days: i64) -> PyResult<Bound<'py, PyAny>> {
        let (y, m, d) = quiver_csv::value::civil_from_days(days);
        self.dt.getattr("date")?.call1((y, m, d))
    }

    fn local_datetime(&self, s: &Stamp) -> PyResult<Bound<'py, PyAny>> {
        let (y, m, d) = quiver_csv::value::civil_from_days(s.secs.div_euclid(86_400));
        let t = s.secs.rem_euclid(86_400);
        self.dt
            .getattr("datetime")?
            .call1((y, m, d, t / 3600, t / 60 % 60, t % 60, s.nanos / 1000))
    }

    fn time_of(&self, ns: i64) -> (i64, i64, i64, i64) {
        let s = ns / 1_000_000_000;
        (s / 3600, s / 60 % 60, s % 60, ns % 1_000_000_000 / 1000)
    }

    fn offset_tz(&self, off: i32) -> PyResult<Bound<'py, PyAny>> {
        let td = self.dt.getattr("timedelta")?.call1((0, off))?;
        self.dt.getattr("timezone")?.call1((td,))
    }

    fn value(&self, v: &Value) -> PyResult<Bound<'py, PyAny>> {
        let py = self.py;
        Ok(match v {
            Value::Null => py.None().into_bound(py),
            Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
            Value::Int(i) => i.into_pyobject(py)?.into_any(),
            Value::Float(f) => PyFloat::new(py, *f).into_any(),
            Value::Str(s) => PyString::new(py, s).into_any(),
            Value::Bytes(b) => PyBytes::new(py, b).into_any(),
            Value::List(l) => {
                let out = PyList::empty(py);
                for x in l.iter() {
                    out.append(self.value(x)?)?;
                }
                out.into_any()
            }
            Value::Map(m) => self.props(m)?.into_any(),
            Value::Node(n) => self.node(*n)?,
            Value::Rel(r) => self.rel(r)?,
            Value::Path(p) => {
                let nodes = PyList::empty(py);
                for &n in &p.nodes {
                    nodes.append(self.node(n)?)?;
                }
                let rels = PyList::empty(py);
                for r in &p.rels {
                    rels.append(self.rel(r)?)?;
                }
                Bound::new(
                    py,
                    Path_ {
                        nodes: nodes.unbind(),
                        relationships: rels.unbind(),
                    },
                )?
                .into_any()
            }
            Value::Date(d) => self.date(*d)?,
            Value::LocalDateTime(s) => self.local_datetime(s)?,
            Value::DateTime(s, off, z) => {
                let utc = self.local_datetime(s)?;
                let tz_utc = self.dt.getattr("timezone")?.getattr("utc")?;
                let kw = PyDict::new(py);
                kw.set_item("tzinfo", tz_utc)?;
                let aware = utc.call_method("replace", (), Some(&kw))?;
                let tz = match zone_name(*z) {
                    Some(name) => match py
                        .import("zoneinfo")
                        .and_then(|m| m.getattr("ZoneInfo")?.call1((name.as_ref(),)))
                    {
                        Ok(tz) => tz,
                        Err(_) => self.offset_tz(*off)?,
                    },
                    None => self.offset_tz(*off)?,
                };
                aware.call_method1("astimezone", (tz,))?
            }
            Value::LocalTime(ns) => {
                let (h, m, s, us) = self.time_of(*ns);
                self.dt.getattr("time")?.call1((h, m, s, us))?
            }
            Value::Time(ns, off) => {
                let (h, m, s, us) = self.time_of(*ns);
                self.dt
                    .getattr("time")?
                    .call1((h, m, s, us, self.offset_tz(*off)?))?
            }
            Value::Duration(d) => Bound::new(
                py,
                Duration {
                    months: d.months,
                    days: d.days,
                    seconds: d.secs,
                    nanoseconds: d.nanos,
                },
            )?
            .into_any(),
        })
    }
}

// ---------------------------------------------------------------- results

/// The rows of a statement, read once front to back (`fetchone`, `fetchmany`,
/// `fetchall`, iteration) or handed over whole as Arrow (`__arrow_c_stream__`).
#[pyclass(module = "quiver")]
struct QueryResult {
    rows: Arc<Rows>,
    pos: usize,
    #[pyo3(get)]
    columns: Vec<String>,
    /// What the statement wrote, and its timing.
    counters: quiver_engine::Counters,
    elapsed_ms: f64,
    #[pyo3(get)]
    message: Option<String>,
}

impl QueryResult {
    fn row<'py>(
        &self,
        py: Python<'py>,
        out: &Out<'_, 'py>,
        r: usize,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let vals: Vec<Bound<'py, PyAny>> = self
            .rows
            .cols
            .iter()
            .map(|c| out.value(&c[r]))
            .collect::<PyResult<_>>()?;
        PyTuple::new(py, vals)
    }

    /// Values for row access, made once from the record batches of a result read
    /// straight into Arrow.
    fn values(&mut self, py: Python<'_>) {
        if self.rows.needs_values() {
            let rows = self.rows.clone();
            self.rows = Arc::new(py.detach(move || rows.with_values()));
        }
    }

    fn out<'a, 'py>(&'a self, py: Python<'py>) -> PyResult<Out<'a, 'py>> {
        Ok(Out {
            py,
            rows: &self.rows,
            dt: datetime_mod(py)?,
        })
    }
}

#[pymethods]
impl QueryResult {
    /// The next row as a tuple, or `None` at the end.
    fn fetchone<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        if self.pos >= self.rows.len {
            return Ok(None);
        }
        self.values(py);
        let out = self.out(py)?;
        let r = self.row(py, &out, self.pos)?;
        self.pos += 1;
        Ok(Some(r))
    }

    /// The next `size` rows (fewer at the end).
    #[pyo3(signature = (size=1))]
    fn fetchmany<'py>(&mut self, py: Python<'py>, size: usize) -> PyResult<Bound<'py, PyList>> {
        self.values(py);
        let out = self.out(py)?;
        let l = PyList::empty(py);
        let end = (self.pos + size).min(self.rows.len);
        for r in self.pos..end {
            l.append(self.row(py, &out, r)?)?;
        }
        self.pos = end;
        Ok(l)
    }

    /// The rows not fetched yet, as a list of tuples.
    fn fetchall<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        self.fetchmany(py, usize::MAX - self.pos)
    }

    /// Column `i` (of the rows not fetched yet) as a list of Python values.
    fn column<'py>(&mut self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyList>> {
        self.values(py);
        let c = self
            .rows
            .cols
            .get(i)
            .ok_or_else(|| PyValueError::new_err(format!("no column {i}")))?;
        let out = self.out(py)?;
        let l = PyList::empty(py);
        for v in &c[self.pos.min(c.len())..] {
            l.append(out.value(v)?)?;
        }
        Ok(l)
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.fetchone(py)
    }

    fn __len__(&self) -> usize {
        self.rows.len
    }

    /// Counters of what the statement wrote (`nodes_created`, ...) and `elapsed_ms`.
    #[getter]
    fn summary<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = &self.counters;
        let d = PyDict::new(py);
        d.set_item("elapsed_ms", self.elapsed_ms)?;
        // Read straight from the column chunks (`quiver_arrow::scan`), not run as a query.
        d.set_item("columnar", self.rows.arrow.is_some())?;
        d.set_item("nodes_created", c.nodes_created)?;
        d.set_item("nodes_deleted", c.nodes_deleted)?;
        d.set_item("relationships_created", c.relationships_created)?;
        d.set_item("relationships_deleted", c.relationships_deleted)?;
        d.set_item("properties_set", c.properties_set)?;
        d.set_item("labels_added", c.labels_added)?;
        d.set_item("labels_removed", c.labels_removed)?;
        Ok(d)
    }

    /// The Arrow PyCapsule interface: the whole result as a stream of record batches
    /// (`pyarrow.table(result)`, `polars.from_arrow`...). Rows already fetched are
    /// included: Arrow is the result, not a cursor.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        let rows = self.rows.clone();
        let (schema, batches) = py
            .detach(move || rows.to_arrow(64 * 1024))
            .map_err(DatabaseError::new_err)?;
        let reader: Box<dyn RecordBatchReader + Send> = Box::new(RecordBatchIterator::new(
            batches.into_iter().map(Ok),
            schema,
        ));
        let stream = FFI_ArrowArrayStream::new(reader);
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }
}

// ---------------------------------------------------------------- streams

/// What a stream's statement thread sends: parts of rows, then the end (the columns,
/// or the error that ended the statement).
enum Part {
    Rows(Rows),
    Done(Result<Vec<String>, QueryError>),
}

/// The receiving end of a stream's statement thread. Dropped: the statement is
/// cancelled (its next send fails, its cancel flag is set) and its thread joined, so
/// that the session is back in its connection.
struct Feed {
    rx: Option<std::sync::mpsc::Receiver<Part>>,
    cancel: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Feed {
    fn next(&mut self) -> Option<Part> {
        self.rx.as_ref()?.recv().ok()
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::SeqCst);
        self.rx.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The parts of a feed as record batches of the first part's types.
struct FeedBatches {
    feed: Option<Feed>,
    types: quiver_arrow::result::StreamTypes,
    first: Option<Rows>,
}

impl Iterator for FeedBatches {
    type Item = Result<arrow_array::RecordBatch, arrow_schema::ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        let rows = match self.first.take() {
            Some(r) => r,
            None => match self.feed.as_mut()?.next()? {
                Part::Rows(r) => r,
                Part::Done(Ok(_)) => {
                    self.feed = None;
                    return None;
                }
                Part::Done(Err(e)) => {
                    self.feed = None;
                    return Some(Err(arrow_schema::ArrowError::ExternalError(Box::new(e))));
                }
            },
        };
        Some(
            self.types
                .batch(&rows)
                .map_err(arrow_schema::ArrowError::InvalidArgumentError),
        )
    }
}

/// A statement's rows as they are made (`Connection.stream`): iterated as tuples, or
/// handed over once as an Arrow stream of record batches.
#[pyclass(module = "quiver", unsendable)]
struct ResultStream {
    /// `None` once the statement ended (or the stream went to Arrow).
    feed: Option<Feed>,
    /// The part being read, and the next row of it.
    cur: Option<Rows>,
    pos: usize,
    #[pyo3(get)]
    columns: Vec<String>,
}

impl ResultStream {
    /// The next part into `cur`; false at the end.
    fn advance(&mut self, py: Python<'_>) -> PyResult<bool> {
        let Some(feed) = self.feed.as_mut() else {
            return Ok(false);
        };
        match py.detach(|| feed.next()) {
            Some(Part::Rows(r)) => {
                self.cur = Some(r);
                self.pos = 0;
                Ok(true)
            }
            Some(Part::Done(Ok(_))) | None => {
                self.feed = None;
                Ok(false)
            }
            Some(Part::Done(Err(e))) => {
                self.feed = None;
                Err(query_err(py, &e))
            }
        }
    }
}

#[pymethods]
impl ResultStream {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next row as a tuple.
    fn __next__<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        while self.cur.as_ref().is_none_or(|c| self.pos >= c.len) {
            self.cur = None;
            if !self.advance(py)? {
                return Ok(None);
            }
        }
        let Some(rows) = self.cur.as_ref() else {
            return Ok(None);
        };
        let out = Out {
            py,
            rows,
            dt: datetime_mod(py)?,
        };
        let vals: Vec<Bound<'py, PyAny>> = rows
            .cols
            .iter()
            .map(|c| out.value(&c[self.pos]))
            .collect::<PyResult<_>>()?;
        self.pos += 1;
        PyTuple::new(py, vals).map(Some)
    }

    /// The Arrow PyCapsule interface: the rows not read yet as a stream of record
    /// batches, typed by the first part (`pyarrow.RecordBatchReader.from_stream`).
    /// Once: the stream is then the reader's.
    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &mut self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let _ = requested_schema;
        // The part at hand, unless it was read to its end (then the next types the
        // stream: an empty part would type every column null).
        if self.cur.as_ref().is_some_and(|c| self.pos >= c.len) {
            self.cur = None;
        }
        if self.cur.is_none() {
            self.advance(py)?;
        }
        let first = match self.cur.take() {
            Some(c) if self.pos > 0 => c.slice(self.pos),
            Some(c) => c,
            // Nothing left: an empty stream with the columns (untyped).
            None => Rows {
                columns: self.columns.clone(),
                cols: vec![Vec::new(); self.columns.len()],
                ..Rows::default()
            },
        };
        let types = quiver_arrow::result::StreamTypes::new(&first);
        let schema = types.schema();
        let batches = FeedBatches {
            feed: self.feed.take(),
            types,
            first: Some(first),
        };
        let reader: Box<dyn RecordBatchReader + Send> =
            Box::new(RecordBatchIterator::new(batches, schema));
        let stream = FFI_ArrowArrayStream::new(reader);
        PyCapsule::new_with_value(py, stream, c"arrow_array_stream")
    }

    /// Stops the statement (if it still runs) and gives the connection back.
    fn close(&mut self, py: Python<'_>) {
        let feed = self.feed.take();
        py.detach(move || drop(feed));
        self.cur = None;
    }
}

// ---------------------------------------------------------------- connection

/// An open database.
#[pyclass(module = "quiver")]
struct Connection {
    /// `None` when closed, or while a [`ResultStream`]'s statement has it on its thread.
    session: Arc<Mutex<Option<Session>>>,
    /// A stream's statement holds the session.
    streaming: Arc<AtomicBool>,
    #[pyo3(get)]
    path: PathBuf,
    mode: OpenMode,
    memory_limit: Option<u64>,
    query_memory_limit: Option<u64>,
}

fn bytes_arg(v: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<u64>> {
    let Some(v) = v else { return Ok(None) };
    if v.is_none() {
        return Ok(None);
    }
    if let Ok(n) = v.extract::<u64>() {
        return Ok(Some(n));
    }
    let s: String = v.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what}: bytes as an int or a size such as '512MiB'"
        ))
    })?;
    quiver_common::size::parse_bytes(&s)
        .map(Some)
        .map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

fn open_session(
    path: &Path,
    mode: OpenMode,
    memory_limit: Option<u64>,
    query_memory_limit: Option<u64>,
    create: bool,
) -> Result<Session, String> {
    if !create && !path.join("CURRENT").exists() {
        return Err(format!(
            "{}: no quiver database here (connect with create=True for an empty one)",
            path.display()
        ));
    }
    let opts = quiver_engine::StoreOptions {
        open_mode: mode,
        memory_limit: memory_limit.unwrap_or_else(quiver_engine::store::default_memory_limit),
        ..Default::default()
    };
    let mut s = Session::open_opts(path, opts, true).map_err(|e| e.to_string())?;
    if let Some(l) = query_memory_limit {
        s.opts.memory_limit = l;
    }
    Ok(s)
}

impl Connection {
    fn with_session<T>(&self, f: impl FnOnce(&mut Session) -> PyResult<T>) -> PyResult<T> {
        let mut g = self.session.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_mut() {
            Some(s) => f(s),
            None => Err(DatabaseError::new_err(self.gone())),
        }
    }

    /// Why the session is not at hand.
    fn gone(&self) -> &'static str {
        if self.streaming.load(Ordering::SeqCst) {
            "a result stream is open on this connection: read it to the end or close() it first"
        } else {
            "the connection is closed"
        }
    }
}

/// An input group of `import_graph`: files, or an Arrow stream.
fn input_group(
    py: Python<'_>,
    spec: String,
    input: &Bound<'_, PyAny>,
    names: Option<Vec<String>>,
) -> PyResult<quiver_import::InputGroup> {
    let paths: Option<Vec<PathBuf>> = if let Ok(s) = input.extract::<PathBuf>() {
        Some(vec![s])
    } else if input.is_instance_of::<PyList>() || input.is_instance_of::<PyTuple>() {
        input.extract::<Vec<PathBuf>>().ok()
    } else {
        None
    };
    if let Some(files) = paths {
        let source = quiver_arrow::source::parquet_group(&files).map_err(ImportFailed::new_err)?;
        return Ok(quiver_import::InputGroup {
            spec: Some(spec),
            files,
            source,
        });
    }
    if !input.hasattr("__arrow_c_stream__")? {
        return Err(PyTypeError::new_err(format!(
            "{spec}: give a file path, a list of paths, or a table with __arrow_c_stream__ (pyarrow, polars, pandas); got {}",
            input.get_type().name()?
        )));
    }
    // A table can be read again (a second read, when ids spill); a reader cannot.
    let reopenable = !input.hasattr("read_next_batch")?;
    let bytes = input
        .getattr("nbytes")
        .ok()
        .and_then(|b| b.extract::<u64>().ok())
        .unwrap_or(0);
    let obj: Py<PyAny> = input.clone().unbind();
    let name = PathBuf::from(format!("<{} {spec}>", input.get_type().name()?));
    // Batches as the table has them (the import cuts them to its windows).
    let open = move |_rows: usize| -> Result<
        (arrow_schema::SchemaRef, quiver_arrow::source::Batches),
        String,
    > {
        let reader = Python::attach(|py| arrow_stream(obj.bind(py))).map_err(|e| e.to_string())?;
        let schema = reader.schema();
        Ok((schema, Box::new(reader)))
    };
    let src = py
        .detach(|| quiver_arrow::ArrowSource::new(Box::new(open), reopenable, names, bytes, &name))
        .map_err(ImportFailed::new_err)?;
    Ok(quiver_import::InputGroup {
        spec: Some(spec),
        files: vec![name],
        source: Some(Arc::new(src)),
    })
}

fn summary_dict<'py>(
    py: Python<'py>,
    s: &quiver_import::ImportSummary,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("nodes", s.n_nodes)?;
    d.set_item("relationships", s.n_rels)?;
    d.set_item(
        "nodes_by_label",
        s.nodes_by_label.iter().cloned().collect::<HashMap<_, _>>(),
    )?;
    d.set_item(
        "relationships_by_type",
        s.rels_by_type.iter().cloned().collect::<HashMap<_, _>>(),
    )?;
    d.set_item("rows_read", s.rows_read)?;
    d.set_item("rows_rejected", s.rows_rejected)?;
    d.set_item("rejects_file", s.rejects_path.clone())?;
    d.set_item("seconds", s.seconds)?;
    d.set_item("rows_per_second", s.rows_per_second())?;
    d.set_item("memory_budget_bytes", s.budget_bytes)?;
    d.set_item("budget_peak_bytes", s.budget_peak_bytes)?;
    d.set_item("peak_rss_bytes", s.peak_rss_bytes)?;
    d.set_item("database_bytes", s.db_bytes)?;
    d.set_item(
        "inferred_headers",
        s.inferred_headers
            .iter()
            .map(|(f, h)| (f.display().to_string(), h.clone()))
            .collect::<HashMap<_, _>>(),
    )?;
    Ok(d)
}

#[pymethods]
impl Connection {
    #[new]
    #[pyo3(signature = (path, mode="mapped", memory_limit=None, query_memory_limit=None, create=true))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        mode: &str,
        memory_limit: Option<Bound<'_, PyAny>>,
        query_memory_limit: Option<Bound<'_, PyAny>>,
        create: bool,
    ) -> PyResult<Connection> {
        let mode: OpenMode = mode
            .parse()
            .map_err(|e: String| PyValueError::new_err(format!("mode: {e}")))?;
        let memory_limit = bytes_arg(memory_limit.as_ref(), "memory_limit")?;
        let query_memory_limit = bytes_arg(query_memory_limit.as_ref(), "query_memory_limit")?;
        let p = path.clone();
        let s = py
            .detach(move || open_session(&p, mode, memory_limit, query_memory_limit, create))
            .map_err(DatabaseError::new_err)?;
        Ok(Connection {
            session: Arc::new(Mutex::new(Some(s))),
            streaming: Arc::new(AtomicBool::new(false)),
            path,
            mode,
            memory_limit,
            query_memory_limit,
        })
    }

    /// Runs one statement (a query, a write, or a command such as `BEGIN`,
    /// `CHECKPOINT`, `CREATE INDEX`) with `parameters`; returns its rows.
    #[pyo3(signature = (query, parameters=None))]
    fn execute(
        &self,
        py: Python<'_>,
        query: &str,
        parameters: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<QueryResult> {
        let params = params_of(parameters)?;
        self.with_session(|s| {
            // A projection of a label scan on a database with no pending writes reads
            // its columns straight into Arrow (`quiver_arrow::scan`).
            let projection = (params.is_empty() && !s.in_transaction())
                .then(|| quiver_arrow::scan::projection(query))
                .flatten();
            if let Some(p) = projection {
                let t0 = std::time::Instant::now();
                let snap = s.store().snapshot();
                if snap.delta.is_empty() {
                    let fast = py.detach(|| quiver_arrow::scan::label_projection(&snap.db, &p));
                    if let Some(r) = fast {
                        let (schema, batches) = r.map_err(DatabaseError::new_err)?;
                        let columns: Vec<String> =
                            schema.fields().iter().map(|f| f.name().clone()).collect();
                        return Ok(QueryResult {
                            columns: columns.clone(),
                            rows: Arc::new(Rows::of_arrow(columns, schema, batches)),
                            pos: 0,
                            counters: Default::default(),
                            elapsed_ms: t0.elapsed().as_secs_f64() * 1e3,
                            message: None,
                        });
                    }
                }
            }
            let r = interruptible(py, |cancel| {
                s.opts.cancel = Some(cancel);
                let mut rows = Rows::default();
                let r = s.run(query, &params, &mut |g, b| rows.push(g, b));
                s.opts.cancel = None;
                r.map(|sum| (sum, rows))
            })?;
            let (sum, mut rows) = r.map_err(|e| query_err(py, &e))?;
            rows.columns = sum.columns.clone();
            rows.cols.resize_with(rows.columns.len(), Vec::new);
            Ok(QueryResult {
                columns: rows.columns.clone(),
                rows: Arc::new(rows),
                pos: 0,
                counters: sum.counters,
                elapsed_ms: sum.elapsed.as_secs_f64() * 1e3,
                message: sum.message,
            })
        })
    }

    /// Runs one statement on a thread of its own and hands its rows over in parts of
    /// about `batch_rows` as they are made: a result larger than memory streams (two
    /// parts in flight at most). The connection runs nothing else until the stream is
    /// read to its end or closed.
    #[pyo3(signature = (query, parameters=None, batch_rows=65536))]
    fn stream(
        &self,
        py: Python<'_>,
        query: String,
        parameters: Option<&Bound<'_, PyDict>>,
        batch_rows: usize,
    ) -> PyResult<ResultStream> {
        let params = params_of(parameters)?;
        let mut session = {
            let mut g = self.session.lock().unwrap_or_else(|e| e.into_inner());
            g.take()
                .ok_or_else(|| DatabaseError::new_err(self.gone()))?
        };
        self.streaming.store(true, Ordering::SeqCst);
        let (tx, rx) = std::sync::mpsc::sync_channel::<Part>(1);
        let cancel = Arc::new(AtomicBool::new(false));
        let (home, streaming, stop) =
            (self.session.clone(), self.streaming.clone(), cancel.clone());
        let batch_rows = batch_rows.max(1);
        let handle = std::thread::Builder::new()
            .name("quiver-stream".into())
            .spawn(move || {
                let columns: Arc<Mutex<Vec<String>>> = Arc::default();
                let seen = columns.clone();
                let hook = quiver_query::ColumnsHook(Arc::new(move |c: &[String]| {
                    *seen.lock().unwrap_or_else(|e| e.into_inner()) = c.to_vec();
                }));
                let before = (session.opts.cancel.take(), session.opts.on_columns.take());
                session.opts.cancel = Some(stop);
                session.opts.on_columns = Some(hook);
                let named = |mut part: Rows| {
                    part.columns = columns.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    part.cols.resize_with(part.columns.len(), Vec::new);
                    part
                };
                let mut part = Rows::default();
                let r = session.run(&query, &params, &mut |g, b| {
                    part.push(g, b)?;
                    if part.len >= batch_rows {
                        let full = named(std::mem::take(&mut part));
                        tx.send(Part::Rows(full))
                            .map_err(|_| QueryError::Cancelled)?;
                    }
                    Ok(())
                });
                (session.opts.cancel, session.opts.on_columns) = before;
                *home.lock().unwrap_or_else(|e| e.into_inner()) = Some(session);
                streaming.store(false, Ordering::SeqCst);
                let end = match r {
                    Ok(sum) => {
                        *columns.lock().unwrap_or_else(|e| e.into_inner()) = sum.columns;
                        if part.len > 0 {
                            let _ = tx.send(Part::Rows(named(part)));
                        }
                        Ok(named(Rows::default()).columns)
                    }
                    Err(e) => Err(e),
                };
                let _ = tx.send(Part::Done(end));
            })
            .map_err(|e| {
                DatabaseError::new_err(format!("cannot start the stream's thread: {e}"))
            })?;
        let mut feed = Feed {
            rx: Some(rx),
            cancel,
            handle: Some(handle),
        };
        // The first part (or the end) now: a statement that fails, fails here, and the
        // columns are known.
        let first = py.detach(|| feed.next());
        let (cur, columns, done) = match first {
            Some(Part::Rows(r)) => {
                let c = r.columns.clone();
                (Some(r), c, false)
            }
            Some(Part::Done(Ok(columns))) => (None, columns, true),
            Some(Part::Done(Err(e))) => return Err(query_err(py, &e)),
            None => {
                return Err(DatabaseError::new_err(
                    "the stream's thread ended without a result",
                ))
            }
        };
        Ok(ResultStream {
            feed: (!done).then_some(feed),
            cur,
            pos: 0,
            columns,
        })
    }

    /// Whether an explicit transaction (`BEGIN`) is open.
    #[getter]
    fn in_transaction(&self) -> PyResult<bool> {
        self.with_session(|s| Ok(s.in_transaction()))
    }

    /// Bulk import. `nodes` maps labels (`"User"`, `"User:Person"`) to inputs,
    /// `relationships` types to inputs; an input is a path (CSV, gzip, Parquet, or a
    /// folder of Parquet parts), a list of paths, or a table with `__arrow_c_stream__`.
    /// Into an empty database: a new import. Into one with data: an append.
    #[pyo3(signature = (nodes=None, relationships=None, memory_budget=None, threads=None, id_type=None, delimiter=None, array_delimiter=None, quote=None, skip_bad_rows=false, rejects=None, null_markers=None, id_columns=None, start_columns=None, end_columns=None, column_names=None))]
    #[allow(clippy::too_many_arguments)]
    fn import_graph<'py>(
        &self,
        py: Python<'py>,
        nodes: Option<Bound<'py, PyDict>>,
        relationships: Option<Bound<'py, PyDict>>,
        memory_budget: Option<Bound<'py, PyAny>>,
        threads: Option<usize>,
        id_type: Option<String>,
        delimiter: Option<String>,
        array_delimiter: Option<String>,
        quote: Option<String>,
        skip_bad_rows: bool,
        rejects: Option<PathBuf>,
        null_markers: Option<Vec<String>>,
        id_columns: Option<HashMap<String, String>>,
        start_columns: Option<HashMap<String, String>>,
        end_columns: Option<HashMap<String, String>>,
        column_names: Option<HashMap<String, Vec<String>>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut cfg = quiver_import::ImportConfig::new(&self.path);
        let one = |what: &str, s: &Option<String>| -> PyResult<Option<u8>> {
            match s {
                None => Ok(None),
                Some(s) if s.len() == 1 => Ok(Some(s.as_bytes()[0])),
                Some(s) if s == "\\t" => Ok(Some(b'\t')),
                Some(s) => Err(PyValueError::new_err(format!(
                    "{what}: one character, not {s:?}"
                ))),
            }
        };
        let given_quote = match &quote {
            None => None,
            Some(q) if q.eq_ignore_ascii_case("none") => Some(None),
            Some(q) => Some(one("quote", &Some(q.clone()))?),
        };
        let names = column_names.unwrap_or_default();
        for (dict, kind) in [(&nodes, 0), (&relationships, 1)] {
            if let Some(d) = dict {
                for (k, v) in d.iter() {
                    let spec: String = k.extract()?;
                    let g = input_group(py, spec.clone(), &v, names.get(&spec).cloned())?;
                    if kind == 0 {
                        cfg.nodes.push(g);
                    } else {
                        cfg.relationships.push(g);
                    }
                }
            }
        }
        if cfg.nodes.is_empty() && cfg.relationships.is_empty() {
            return Err(PyValueError::new_err(
                "nothing to import: pass nodes={label: input} and/or relationships={type: input}",
            ));
        }
        if let Some(b) = bytes_arg(memory_budget.as_ref(), "memory_budget")? {
            cfg.memory_budget_bytes = b;
        }
        if let Some(t) = threads {
            cfg.threads = t.max(1);
        }
        cfg.skip_bad_rows = skip_bad_rows;
        cfg.rejects = rejects;
        cfg.null_markers = null_markers
            .unwrap_or_default()
            .into_iter()
            .map(String::into_bytes)
            .collect();
        cfg.id_columns = id_columns.unwrap_or_default().into_iter().collect();
        cfg.start_columns = start_columns.unwrap_or_default().into_iter().collect();
        cfg.end_columns = end_columns.unwrap_or_default().into_iter().collect();
        let explicit_ids = id_type.is_some();
        let failed = |e: quiver_import::ImportError| ImportFailed::new_err(e.to_string());
        // How the files are read: what was given, the rest decided from the files, as
        // `quiver import` decides it (a `;`-separated pair reads the same here).
        let given = quiver_import::decide::Given {
            delimiter: one("delimiter", &delimiter)?,
            quote: given_quote,
            array_delimiter: one("array_delimiter", &array_delimiter)?,
            id_type: match id_type.as_deref() {
                Some("integer") => Some(quiver_storage::manifest::IdType::Integer),
                Some("string") => Some(quiver_storage::manifest::IdType::String),
                None => None,
                Some(o) => {
                    return Err(PyValueError::new_err(format!(
                        "id_type: 'integer' or 'string', not {o:?}"
                    )))
                }
            },
            appending: false,
        };
        quiver_import::decide::settle(&mut cfg, &given).map_err(failed)?;
        let (mode, ml, qml) = (self.mode, self.memory_limit, self.query_memory_limit);
        let mut guard = self.session.lock().unwrap_or_else(|e| e.into_inner());
        let Some(session) = guard.take() else {
            return Err(DatabaseError::new_err(self.gone()));
        };
        let path = self.path.clone();
        let r = interruptible(py, move |cancel| {
            cfg.cancel = cancel;
            let store = session.store().clone();
            if !store.is_writable() {
                return (
                    Some(session),
                    Err(format!(
                        "{} is open for writing by another process; close it there first",
                        path.display()
                    )),
                );
            }
            let snap = store.snapshot().db;
            let empty = snap.manifest().node_tables.is_empty()
                && snap.manifest().rel_types.is_empty()
                && !store.has_uncheckpointed_writes();
            let result = if empty {
                drop((snap, store, session));
                cfg.overwrite = true;
                quiver_import::import(&cfg, &quiver_import::NoProgress).map_err(|e| e.to_string())
            } else {
                let r = (|| {
                    if store.has_uncheckpointed_writes() {
                        store.checkpoint().map_err(|e| e.to_string())?;
                    }
                    let base = store.snapshot().db;
                    if !explicit_ids {
                        if let Some(s) = base.manifest().id_spaces.first() {
                            cfg.id_type = s.id_type;
                        }
                    }
                    quiver_import::append(&cfg, &base, &quiver_import::NoProgress)
                        .map_err(|e| e.to_string())
                })();
                drop((snap, store, session));
                r
            };
            (None, result)
        });
        // Reopen (a new import, or the declared indexes brought up to date).
        let reopened = py.detach(|| open_session(&self.path, mode, ml, qml, true));
        match (r, reopened) {
            (Ok((kept, result)), reopened) => {
                *guard = match kept {
                    Some(s) => Some(s),
                    None => Some(reopened.map_err(DatabaseError::new_err)?),
                };
                let s = result.map_err(ImportFailed::new_err)?;
                summary_dict(py, &s)
            }
            (Err(e), reopened) => {
                *guard = reopened.ok();
                Err(e)
            }
        }
    }

    /// Closes the database (the connection can no longer run statements). An open
    /// transaction is rolled back.
    fn close(&self) {
        let mut g = self.session.lock().unwrap_or_else(|e| e.into_inner());
        *g = None;
    }

    #[getter]
    fn closed(&self) -> bool {
        self.session.lock().map(|g| g.is_none()).unwrap_or(true)
    }
}

/// The record batches of a Python object with `__arrow_c_stream__` (a pyarrow table or
/// record batch reader, polars or pandas frames).
fn arrow_stream(data: &Bound<'_, PyAny>) -> PyResult<RecordBatchStreamReader> {
    if !data.hasattr("__arrow_c_stream__")? {
        return Err(PyTypeError::new_err(format!(
            "give a table with __arrow_c_stream__ (pyarrow, polars, pandas); got {}",
            data.get_type().name()?
        )));
    }
    let cap = data.call_method0("__arrow_c_stream__")?;
    let cap = cap.cast::<PyCapsule>()?;
    let ptr = cap.pointer_checked(Some(c"arrow_array_stream"))?;
    // SAFETY: the capsule holds an ArrowArrayStream (its name says so); from_raw moves it
    // out and leaves the capsule's released, as the PyCapsule interface asks.
    let stream =
        unsafe { FFI_ArrowArrayStream::from_raw(ptr.as_ptr() as *mut FFI_ArrowArrayStream) };
    RecordBatchStreamReader::try_new(stream).map_err(|e| ImportFailed::new_err(e.to_string()))
}

fn part_result(
    r: Result<quiver_arrow::parts::PartInfo, quiver_arrow::parts::PartError>,
) -> PyResult<String> {
    let info = r.map_err(|e| ImportFailed::new_err(e.to_string()))?;
    serde_json::to_string(&info).map_err(|e| DatabaseError::new_err(e.to_string()))
}

/// The delimiter and quote of a CSV file, as `quiver import` decides them when they are
/// not given (`quiver_import::decide`): the Spark build reads CSV inputs with them.
#[pyfunction]
fn csv_dialect(path: PathBuf) -> (String, String) {
    let (d, q) = quiver_import::decide::dialect_of(&[path.as_path()]);
    ((d as char).to_string(), (q as char).to_string())
}

/// Writes a table part (node rows, or relationship property rows in edge-id order) from
/// `data` into the folder `parts_dir`; returns its description as JSON.
#[pyfunction]
fn write_table_part(
    py: Python<'_>,
    parts_dir: PathBuf,
    name: String,
    data: &Bound<'_, PyAny>,
) -> PyResult<String> {
    let reader = arrow_stream(data)?;
    part_result(py.detach(|| quiver_arrow::parts::write_table_part(&parts_dir, &name, reader)))
}

/// Writes one CSR part over nodes `first_node .. first_node + n_nodes` from `data`'s
/// (node, neighbour[, edge id]) rows in any order; returns its description as JSON.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn write_csr_part(
    py: Python<'_>,
    parts_dir: PathBuf,
    name: String,
    first_node: u64,
    n_nodes: u64,
    n_nodes_total: u64,
    n_edges_total: u64,
    with_edge_ids: bool,
    data: &Bound<'_, PyAny>,
) -> PyResult<String> {
    let reader = arrow_stream(data)?;
    let whole = quiver_storage::write::CsrPartOf {
        first_node,
        n_nodes: n_nodes_total,
        n_edges: n_edges_total,
    };
    part_result(py.detach(|| {
        quiver_arrow::parts::write_csr_part(
            &parts_dir,
            &name,
            first_node,
            n_nodes,
            whole,
            with_edge_ids,
            reader,
        )
    }))
}

/// Writes the id index from `data`'s (id, node) rows sorted by id.
#[pyfunction]
fn write_id_index_part(
    py: Python<'_>,
    parts_dir: PathBuf,
    name: String,
    n_nodes_total: u64,
    data: &Bound<'_, PyAny>,
) -> PyResult<String> {
    let reader = arrow_stream(data)?;
    part_result(py.detach(|| {
        quiver_arrow::parts::write_id_index_part(&parts_dir, &name, n_nodes_total, reader)
    }))
}

/// Publishes the parts a build spec (JSON) names as the database `db`; returns what it
/// made as JSON.
#[pyfunction]
#[pyo3(signature = (db, parts_dir, spec, overwrite=false))]
fn publish_parts(
    py: Python<'_>,
    db: PathBuf,
    parts_dir: PathBuf,
    spec: &str,
    overwrite: bool,
) -> PyResult<String> {
    let spec: quiver_arrow::parts::BuildSpec = serde_json::from_str(spec)
        .map_err(|e| PyValueError::new_err(format!("the build spec: {e}")))?;
    let done = py
        .detach(|| quiver_arrow::parts::publish_parts(&db, &parts_dir, &spec, overwrite))
        .map_err(|e| ImportFailed::new_err(e.to_string()))?;
    serde_json::to_string(&done).map_err(|e| DatabaseError::new_err(e.to_string()))
}

#[pymodule]
fn _quiver(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    quiver_arrow::register();
    m.add_class::<Connection>()?;
    m.add_class::<QueryResult>()?;
    m.add_class::<ResultStream>()?;
    m.add_class::<Node>()?;
    m.add_class::<Relationship>()?;
    m.add("Path", py.get_type::<Path_>())?;
    m.add_class::<Duration>()?;
    m.add("QuiverError", py.get_type::<QuiverError>())?;
    m.add("CypherSyntaxError", py.get_type::<CypherSyntaxError>())?;
    m.add("CypherTypeError", py.get_type::<CypherTypeError>())?;
    m.add("ConstraintError", py.get_type::<ConstraintError>())?;
    m.add("TransactionConflict", py.get_type::<TransactionConflict>())?;
    m.add("MemoryLimitExceeded", py.get_type::<MemoryLimitExceeded>())?;
    m.add("QueryCancelled", py.get_type::<QueryCancelled>())?;
    m.add("ImportFailed", py.get_type::<ImportFailed>())?;
    m.add("DatabaseError", py.get_type::<DatabaseError>())?;
    m.add_function(wrap_pyfunction!(csv_dialect, m)?)?;
    m.add_function(wrap_pyfunction!(write_table_part, m)?)?;
    m.add_function(wrap_pyfunction!(write_csr_part, m)?)?;
    m.add_function(wrap_pyfunction!(write_id_index_part, m)?)?;
    m.add_function(wrap_pyfunction!(publish_parts, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
