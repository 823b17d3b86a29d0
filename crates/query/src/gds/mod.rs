//! Graph algorithms from Cypher, in Neo4j GDS's shape: a catalog of named projections
//! (`gds.graph.project`, `.list`, `.drop`, `.exists`), each a view over the stored
//! graph as of its projection (labels choose nodes, types and orientations choose CSR
//! segments, a weight is a column), and the algorithms of `quiver-algo` called as
//! `gds.<algo>.<mode>` with GDS's configuration keys and YIELD columns; Memgraph
//! MAGE's names (`pagerank.get()`...) run the same code over the whole graph.
//!
//! `view.rs` is the adjacency the algorithms read; `algos.rs` the procedures; this
//! file the catalog, projections and configuration maps.

use crate::error::QueryError;
use crate::graph::Graph;
use crate::value::Value;
use quiver_engine::Delta;
use quiver_storage::read::Database;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

pub(crate) mod algos;
pub(crate) mod view;

pub use algos::find;

/// A mutex taken whatever panicked elsewhere (the catalog holds no invariant a panic
/// could break mid-way).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How a relationship type is projected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Orientation {
    Natural,
    Reverse,
    Undirected,
}

impl Orientation {
    fn parse(s: &str) -> Result<Orientation, QueryError> {
        match s.to_ascii_uppercase().as_str() {
            "NATURAL" => Ok(Orientation::Natural),
            "REVERSE" => Ok(Orientation::Reverse),
            "UNDIRECTED" => Ok(Orientation::Undirected),
            _ => Err(QueryError::Procedure(format!(
                "orientation must be NATURAL, REVERSE or UNDIRECTED, got {s}"
            ))),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Orientation::Natural => "NATURAL",
            Orientation::Reverse => "REVERSE",
            Orientation::Undirected => "UNDIRECTED",
        }
    }
}

/// A relationship property a projection carries: its name in the projection, the
/// stored property it reads, and the value of relationships without it.
#[derive(Debug, Clone)]
pub struct RelProperty {
    pub name: String,
    pub property: String,
    pub default: f64,
}

/// One projected relationship type.
#[derive(Debug, Clone)]
pub struct RelSpec {
    /// The name the projection gives it (a map projection's key).
    pub name: String,
    /// The stored type (`*`: every type).
    pub ty: String,
    pub orientation: Orientation,
    pub properties: Vec<RelProperty>,
}

/// A named projection: the snapshot it was taken on (a later write does not change
/// it, as in GDS), the labels and relationship types it selects, and the node
/// properties algorithms' `mutate` mode added.
pub struct Projection {
    pub name: String,
    pub db: Arc<Database>,
    pub delta: Option<Arc<Delta>>,
    /// `None`: every label.
    pub labels: Option<Vec<String>>,
    pub rels: Vec<RelSpec>,
    pub node_count: u64,
    pub relationship_count: u64,
    pub created: jiff::Timestamp,
    /// Properties `mutate` added, by name: a value per node id.
    pub mutated: Mutex<BTreeMap<String, Arc<Vec<Value>>>>,
    /// The members as bits by node id, and how many (computed at projection).
    pub members: Mutex<Option<(Arc<Vec<u64>>, u64)>>,
    pub node_spec: Value,
    pub rel_spec: Value,
}

impl Projection {
    /// The graph the projection reads.
    pub fn graph(&self) -> Graph<'_> {
        Graph::with_delta(&self.db, self.delta.clone(), false)
    }
}

/// The projections of one database, shared by its sessions.
#[derive(Default)]
pub struct Catalog {
    graphs: Mutex<BTreeMap<String, Arc<Projection>>>,
    store: Mutex<Option<std::sync::Weak<quiver_engine::Store>>>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(lock(&self.graphs).keys()).finish()
    }
}

impl Catalog {
    /// The catalog of `store` (made on first use and kept with the store).
    pub fn of(store: &Arc<quiver_engine::Store>) -> Arc<Catalog> {
        let any = store
            .attached
            .get_or_init(|| {
                let c = Catalog::default();
                *lock(&c.store) = Some(Arc::downgrade(store));
                Arc::new(c)
            })
            .clone();
        match any.downcast::<Catalog>() {
            Ok(c) => c,
            // (Nothing else is attached to a store.)
            Err(_) => Arc::new(Catalog::default()),
        }
    }

    pub fn get(&self, name: &str) -> Result<Arc<Projection>, QueryError> {
        lock(&self.graphs)
            .get(name)
            .cloned()
            .ok_or_else(|| {
                QueryError::Procedure(format!(
                    "there is no projected graph named {name}: project it with gds.graph.project('{name}', nodes, relationships); gds.graph.list() lists those there are"
                ))
            })
    }

    pub(crate) fn insert(&self, p: Projection) -> Result<Arc<Projection>, QueryError> {
        let mut g = lock(&self.graphs);
        if g.contains_key(&p.name) {
            return Err(QueryError::Procedure(format!(
                "a graph named {} is already projected: drop it first with gds.graph.drop('{}')",
                p.name, p.name
            )));
        }
        let p = Arc::new(p);
        g.insert(p.name.clone(), p.clone());
        Ok(p)
    }

    pub(crate) fn remove(&self, name: &str) -> Option<Arc<Projection>> {
        lock(&self.graphs).remove(name)
    }

    pub(crate) fn all(&self) -> Vec<Arc<Projection>> {
        lock(&self.graphs).values().cloned().collect()
    }

    /// The store's committed state now.
    pub(crate) fn snapshot(&self) -> Option<quiver_engine::Snapshot> {
        lock(&self.store)
            .as_ref()
            .and_then(|w| w.upgrade())
            .map(|s| s.snapshot())
    }
}

/// A configuration map as GDS takes one: typed reads by key, and at the end an error
/// for every key no read asked for (GDS refuses unknown keys, so a misspelt one is
/// never silently ignored).
pub(crate) struct Config {
    pub(crate) map: BTreeMap<String, Value>,
    seen: std::cell::RefCell<Vec<String>>,
    pub(crate) what: String,
}

fn type_name(v: &Value) -> &'static str {
    v.type_name()
}

impl Config {
    pub(crate) fn new(v: Option<&Value>, what: &str) -> Result<Config, QueryError> {
        let mut map = BTreeMap::new();
        match v {
            None | Some(Value::Null) => {}
            Some(Value::Map(m)) => {
                for (k, v) in m.iter() {
                    map.insert(k.to_string(), v.clone());
                }
            }
            Some(v) => {
                return Err(QueryError::Procedure(format!(
                    "{what}: the configuration must be a map, got {}",
                    type_name(v)
                )))
            }
        }
        Ok(Config {
            map,
            seen: Default::default(),
            what: what.to_string(),
        })
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        self.seen.borrow_mut().push(key.to_string());
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn bad(&self, key: &str, want: &str, v: &Value) -> QueryError {
        QueryError::Procedure(format!(
            "{}: `{key}` must be {want}, got {} ({})",
            self.what,
            type_name(v),
            crate::expr::to_string(v)
        ))
    }

    pub(crate) fn float(&self, key: &str, default: f64) -> Result<f64, QueryError> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::Float(f)) => Ok(*f),
            Some(Value::Int(i)) => Ok(*i as f64),
            Some(v) => Err(self.bad(key, "a number", v)),
        }
    }

    pub(crate) fn int(&self, key: &str, default: i64, min: i64) -> Result<i64, QueryError> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::Int(i)) if *i >= min => Ok(*i),
            Some(v) => Err(self.bad(key, &format!("an integer of at least {min}"), v)),
        }
    }

    pub(crate) fn boolean(&self, key: &str, default: bool) -> Result<bool, QueryError> {
        match self.get(key) {
            None => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(v) => Err(self.bad(key, "a boolean", v)),
        }
    }

    pub(crate) fn string(&self, key: &str) -> Result<Option<String>, QueryError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Str(s)) => Ok(Some(s.to_string())),
            Some(v) => Err(self.bad(key, "a string", v)),
        }
    }

    /// Nodes given as nodes or ids, one or a list.
    pub(crate) fn nodes(&self, key: &str) -> Result<Vec<u32>, QueryError> {
        let Some(v) = self.get(key) else {
            return Ok(Vec::new());
        };
        let one = |v: &Value| match v {
            Value::Node(n) => Ok(*n as u32),
            Value::Int(i) if *i >= 0 => Ok(*i as u32),
            v => Err(self.bad(key, "a node, a node id or a list of them", v)),
        };
        match v {
            Value::List(l) => l.iter().map(one).collect(),
            v => Ok(vec![one(v)?]),
        }
    }

    /// The map of every key given, for a `configuration` column.
    pub(crate) fn echo(&self) -> Value {
        Value::Map(Arc::new(
            self.map
                .iter()
                .map(|(k, v)| (Arc::from(k.as_str()), v.clone()))
                .collect(),
        ))
    }

    /// Fails on the first key nothing read.
    pub(crate) fn finish(&self) -> Result<(), QueryError> {
        let seen = self.seen.borrow();
        for k in self.map.keys() {
            if !seen.iter().any(|s| s == k) {
                return Err(QueryError::Procedure(format!(
                    "{}: unexpected configuration key `{k}`",
                    self.what
                )));
            }
        }
        Ok(())
    }
}

pub(crate) fn map_value(pairs: Vec<(&str, Value)>) -> Value {
    Value::Map(Arc::new(
        pairs.into_iter().map(|(k, v)| (Arc::from(k), v)).collect(),
    ))
}

/// Names given as one string, a list of strings, or a map's keys with their own
/// fields (`{Alias: {label: 'L'}}`): (alias, the map's fields or none).
fn names_of(v: &Value, what: &str) -> Result<Vec<(String, Option<Value>)>, QueryError> {
    match v {
        Value::Str(s) => Ok(vec![(s.to_string(), None)]),
        Value::List(l) => l
            .iter()
            .map(|x| match x {
                Value::Str(s) => Ok((s.to_string(), None)),
                x => Err(QueryError::Procedure(format!(
                    "{what}: a list of names holds strings, got {}",
                    x.type_name()
                ))),
            })
            .collect(),
        Value::Map(m) => Ok(m
            .iter()
            .map(|(k, v)| (k.to_string(), Some(v.clone())))
            .collect()),
        v => Err(QueryError::Procedure(format!(
            "{what} must be a string, a list of strings or a map, got {}",
            v.type_name()
        ))),
    }
}

/// A node projection's labels (`None`: every label).
pub(crate) fn parse_labels(v: &Value) -> Result<Option<Vec<String>>, QueryError> {
    let mut out = Vec::new();
    for (alias, fields) in names_of(v, "the node projection")? {
        let label = match &fields {
            Some(f) => {
                let c = Config::new(Some(f), "the node projection")?;
                let l = c.string("label")?.unwrap_or(alias.clone());
                // Node properties are read from the stored graph when asked for.
                let _ = c.get("properties");
                c.finish()?;
                l
            }
            None => alias,
        };
        if label == "*" {
            return Ok(None);
        }
        out.push(label);
    }
    Ok(Some(out))
}

/// A relationship projection's types.
pub(crate) fn parse_rels(v: &Value) -> Result<Vec<RelSpec>, QueryError> {
    let mut out = Vec::new();
    for (alias, fields) in names_of(v, "the relationship projection")? {
        let mut spec = RelSpec {
            name: alias.clone(),
            ty: alias,
            orientation: Orientation::Natural,
            properties: Vec::new(),
        };
        if let Some(f) = &fields {
            let c = Config::new(Some(f), "the relationship projection")?;
            if let Some(t) = c.string("type")? {
                spec.ty = t;
            }
            if let Some(o) = c.string("orientation")? {
                spec.orientation = Orientation::parse(&o)?;
            }
            // GDS's aggregation of parallel relationships: NONE keeps them.
            if let Some(a) = c.string("aggregation")? {
                if !a.eq_ignore_ascii_case("NONE") && !a.eq_ignore_ascii_case("DEFAULT") {
                    return Err(QueryError::Procedure(format!(
                        "aggregation {a} is not supported: parallel relationships are kept (NONE)"
                    )));
                }
            }
            if let Some(p) = c.get("properties").cloned() {
                for (name, pf) in names_of(&p, "relationship properties")? {
                    let mut rp = RelProperty {
                        property: name.clone(),
                        name,
                        default: f64::NAN,
                    };
                    if let Some(pf) = pf {
                        match pf {
                            Value::Str(s) => rp.property = s.to_string(),
                            pf => {
                                let pc = Config::new(Some(&pf), "a relationship property")?;
                                if let Some(s) = pc.string("property")? {
                                    rp.property = s;
                                }
                                rp.default = pc.float("defaultValue", f64::NAN)?;
                                let _ = pc.get("aggregation");
                                pc.finish()?;
                            }
                        }
                    }
                    spec.properties.push(rp);
                }
            }
            c.finish()?;
        }
        out.push(spec);
    }
    Ok(out)
}

/// The projection's node and relationship specs as GDS echoes them.
pub(crate) fn echo_specs(labels: &Option<Vec<String>>, rels: &[RelSpec]) -> (Value, Value) {
    let nodes = match labels {
        None => map_value(vec![(
            "__ALL__",
            map_value(vec![
                ("label", Value::str("*")),
                ("properties", map_value(Vec::new())),
            ]),
        )]),
        Some(ls) => Value::Map(Arc::new(
            ls.iter()
                .map(|l| {
                    (
                        Arc::from(l.as_str()),
                        map_value(vec![
                            ("label", Value::str(l)),
                            ("properties", map_value(Vec::new())),
                        ]),
                    )
                })
                .collect(),
        )),
    };
    let rels = Value::Map(Arc::new(
        rels.iter()
            .map(|r| {
                let props = Value::Map(Arc::new(
                    r.properties
                        .iter()
                        .map(|p| {
                            (
                                Arc::from(p.name.as_str()),
                                map_value(vec![
                                    ("property", Value::str(&p.property)),
                                    (
                                        "defaultValue",
                                        if p.default.is_nan() {
                                            Value::Null
                                        } else {
                                            Value::Float(p.default)
                                        },
                                    ),
                                ]),
                            )
                        })
                        .collect(),
                ));
                (
                    Arc::from(if r.name == "*" {
                        "__ALL__"
                    } else {
                        r.name.as_str()
                    }),
                    map_value(vec![
                        ("type", Value::str(&r.ty)),
                        ("orientation", Value::str(r.orientation.name())),
                        ("aggregation", Value::str("DEFAULT")),
                        ("properties", props),
                    ]),
                )
            })
            .collect(),
    ));
    (nodes, rels)
}
