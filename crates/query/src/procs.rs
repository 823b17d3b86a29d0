//! Procedures that `CALL` runs: the built-in `db.*` ones (what the Neo4j tools call on
//! connect) and any a session registers (the TCK's test procedures, given as tables).

use crate::batch::Batch;
use crate::error::QueryError;
use crate::expr::{eval, CExpr};
use crate::graph::Graph;
use crate::ops::{BoxOp, Cx, Op};
use crate::value::{Key, Value};
use quiver_cypher::ast::{Clause, Expr, Statement};
use quiver_cypher::Detail;
use quiver_storage::read::Direction;
use std::sync::Arc;

/// The type of a procedure's input or output, as signatures write it (`INTEGER?`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PType {
    Any,
    Integer,
    Float,
    Number,
    String,
    Boolean,
    Other,
}

impl PType {
    pub fn parse(s: &str) -> PType {
        match s.trim().trim_end_matches('?').to_ascii_uppercase().as_str() {
            "ANY" => PType::Any,
            "INTEGER" | "INT" => PType::Integer,
            "FLOAT" => PType::Float,
            "NUMBER" => PType::Number,
            "STRING" => PType::String,
            "BOOLEAN" => PType::Boolean,
            _ => PType::Other,
        }
    }

    /// As signatures write it.
    pub fn name(self) -> &'static str {
        match self {
            PType::Any | PType::Other => "ANY",
            PType::Integer => "INTEGER",
            PType::Float => "FLOAT",
            PType::Number => "NUMBER",
            PType::String => "STRING",
            PType::Boolean => "BOOLEAN",
        }
    }

    /// Whether a value of this (literal) kind may be passed where `self` is declared.
    fn accepts(self, v: &Value) -> bool {
        match (self, v) {
            (_, Value::Null) | (PType::Any | PType::Other, _) => true,
            (PType::Integer, Value::Int(_)) => true,
            (PType::Float | PType::Number, Value::Int(_) | Value::Float(_)) => true,
            (PType::String, Value::Str(_)) => true,
            (PType::Boolean, Value::Bool(_)) => true,
            _ => false,
        }
    }
}

/// A procedure written in Rust: the graph and the arguments, to its rows.
pub type BuiltinFn = fn(&Graph, &[Value]) -> Result<Vec<Vec<Value>>, QueryError>;

/// A procedure's rows as they are made (a graph algorithm's stream: a row a node).
pub type Rows = Box<dyn Iterator<Item = Vec<Value>>>;

/// A procedure that needs the query's context (memory, cancellation, the graph
/// catalog, the transaction): the graph algorithms.
pub type AlgoFn =
    fn(&mut crate::gds::algos::AlgoCx<'_, '_>, &Procedure, &[Value]) -> Result<Rows, QueryError>;

/// What a procedure does.
#[derive(Clone)]
pub enum Body {
    /// Rows of (inputs, outputs): a call yields the outputs of the rows whose inputs
    /// equal its arguments.
    Table(Vec<(Vec<Value>, Vec<Value>)>),
    /// Its rows from the graph and the arguments given.
    Builtin(BuiltinFn),
    /// Its rows from the query's context and the arguments.
    Algo(AlgoFn),
}

#[derive(Clone)]
pub struct Procedure {
    pub name: String,
    pub inputs: Vec<(String, PType)>,
    /// How many of the last inputs a call may leave out (`apoc.meta.data()` and
    /// `apoc.meta.data({sample: 100})`).
    pub optional: usize,
    pub outputs: Vec<(String, PType)>,
    pub body: Body,
}

impl std::fmt::Debug for Procedure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}(..)", self.name)
    }
}

impl Procedure {
    /// Neo4j's form: `db.labels() :: (label :: STRING)`.
    pub fn signature(&self) -> String {
        let list = |v: &[(String, PType)]| {
            v.iter()
                .map(|(n, t)| format!("{n} :: {}", t.name()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!(
            "{}({}) :: ({})",
            self.name,
            list(&self.inputs),
            list(&self.outputs)
        )
    }

    fn call(&self, cx: &mut Cx, args: &[Value]) -> Result<Rows, QueryError> {
        let g = cx.env.g;
        match &self.body {
            Body::Builtin(f) => Ok(Box::new(f(g, args)?.into_iter())),
            Body::Algo(f) => {
                let mut acx = crate::gds::algos::AlgoCx {
                    g,
                    budget: &cx.budget,
                    cancel: cx.cancel,
                    deadline: cx.deadline,
                    catalog: cx.catalog.as_ref(),
                    tx: cx.tx.as_deref_mut(),
                };
                f(&mut acx, self, args)
            }
            Body::Table(rows) => Ok(Box::new(
                rows.iter()
                    .filter(|(ins, _)| {
                        ins.len() == args.len()
                            && ins
                                .iter()
                                .zip(args)
                                .all(|(a, b)| Key(a.clone()) == Key(b.clone()))
                    })
                    .map(|(_, outs)| outs.clone())
                    .collect::<Vec<_>>()
                    .into_iter(),
            )),
        }
    }
}

fn strings(mut v: Vec<String>) -> Vec<Vec<Value>> {
    v.sort();
    v.dedup();
    v.into_iter().map(|s| vec![Value::str(&s)]).collect()
}

fn db_labels(g: &Graph, _: &[Value]) -> Result<Vec<Vec<Value>>, QueryError> {
    Ok(strings(g.label_names()))
}

fn db_types(g: &Graph, _: &[Value]) -> Result<Vec<Vec<Value>>, QueryError> {
    Ok(strings(g.rel_type_names()))
}

fn db_keys(g: &Graph, _: &[Value]) -> Result<Vec<Vec<Value>>, QueryError> {
    Ok(strings(g.property_keys()))
}

/// `dbms.components()`: what Neo4j's tools read to learn the server's version. Quiver
/// answers as the Neo4j 5.26 it is compatible with, as its Bolt HELLO does.
fn dbms_components(_: &Graph, _: &[Value]) -> Result<Vec<Vec<Value>>, QueryError> {
    Ok(vec![vec![
        Value::str("Neo4j Kernel"),
        Value::list(vec![Value::str("5.26.0")]),
        Value::str("community"),
    ]])
}

/// `dbms.cluster.role()`: a single server is its database's primary.
fn dbms_cluster_role(_: &Graph, _: &[Value]) -> Result<Vec<Vec<Value>>, QueryError> {
    Ok(vec![vec![Value::str("PRIMARY")]])
}

/// `dbms.clientConfig()` / `dbms.listConfig()`: the settings Neo4j's tools read on
/// connect, as this server has them: the Browser keeps credentials and history, fetches
/// nothing from other hosts, and runs nothing after connecting.
fn dbms_config(_: &Graph, _: &[Value]) -> Result<Vec<Vec<Value>>, QueryError> {
    let rows = [
        (
            "browser.allow_outgoing_connections",
            "Whether the Browser may fetch remote content",
            "false",
        ),
        (
            "browser.credential_timeout",
            "How long the Browser keeps credentials (0s: for the session)",
            "0s",
        ),
        (
            "browser.post_connect_cmd",
            "Commands the Browser runs after connecting",
            "",
        ),
        (
            "browser.remote_content_hostname_allowlist",
            "Hosts the Browser may fetch content from",
            "",
        ),
        (
            "browser.retain_connection_credentials",
            "Whether the Browser keeps credentials",
            "true",
        ),
        (
            "browser.retain_editor_history",
            "Whether the Browser keeps its editor history",
            "true",
        ),
    ];
    Ok(rows
        .iter()
        .map(|(n, d, v)| {
            vec![
                Value::str(n),
                Value::str(d),
                Value::str(v),
                Value::Bool(false),
            ]
        })
        .collect())
}

/// How many nodes of each label (and relationships from them) `apoc.meta.data()`
/// samples, as APOC's `sample` setting does.
const META_SAMPLE: usize = 1000;

/// APOC's type name of a property value: Cypher's, but for the few APOC spells apart.
fn meta_type(v: &Value) -> &'static str {
    match v {
        Value::LocalTime(_) => "LOCAL_TIME",
        Value::LocalDateTime(_) => "LOCAL_DATE_TIME",
        Value::DateTime(..) => "DATE_TIME",
        Value::Bytes(_) => "BYTE_ARRAY",
        v => v.type_name(),
    }
}

/// `apoc.meta.data()`: the graph's schema as APOC samples it, what LangChain's and
/// neo4j-graphrag's schema readers ask. Per label, up to [`META_SAMPLE`] of its nodes:
/// a row per property (its type), a row per relationship type leaving them (`type`
/// `RELATIONSHIP`, `other`: the labels at the far end); per relationship type met, a row
/// per property of those relationships (`elementType` `relationship`).
fn apoc_meta_data(g: &Graph, args: &[Value]) -> Result<Vec<Vec<Value>>, QueryError> {
    // APOC's `sample` setting: how many nodes of each label are read.
    let limit = match args.first() {
        Some(Value::Map(m)) => match m.iter().find(|(k, _)| &**k == "sample") {
            Some((_, Value::Int(n))) if *n > 0 => *n as usize,
            _ => META_SAMPLE,
        },
        _ => META_SAMPLE,
    };
    use std::collections::BTreeMap;
    let mut rows = Vec::new();
    // (relationship type -> property -> (type, count))
    let mut rel_props: BTreeMap<String, BTreeMap<String, (&'static str, i64)>> = BTreeMap::new();
    for name in g.label_names() {
        let Some(label) = g.label_id(&name) else {
            continue;
        };
        let sample = g.label_nodes(label, limit)?;
        let mut props: BTreeMap<String, (&'static str, i64)> = BTreeMap::new();
        // (relationship type -> labels at the far end, count)
        let mut rels: BTreeMap<String, (Vec<String>, i64)> = BTreeMap::new();
        for &n in &sample {
            for (k, v) in g.node_props(n)? {
                let e = props.entry(k.to_string()).or_insert((meta_type(&v), 0));
                e.1 += 1;
            }
            for ty in 0..g.n_rel_types() as u32 {
                let mut far = Vec::new();
                g.for_each_neighbour(ty, n, Direction::Out, |nb, eid| far.push((nb, eid)))?;
                if far.is_empty() {
                    continue;
                }
                let tname = g.rel_type_name(ty).to_string();
                let entry = rels.entry(tname.clone()).or_default();
                for &(nb, eid) in far.iter().take(16) {
                    for l in g.labels(u64::from(nb))? {
                        if !entry.0.iter().any(|x| **x == *l) {
                            entry.0.push(l.to_string());
                        }
                    }
                    let r = g.rel_ref(ty, n, nb, eid, Direction::Out)?;
                    let rp = rel_props.entry(tname.clone()).or_default();
                    for (k, v) in g.rel_props(&r)? {
                        let e = rp.entry(k.to_string()).or_insert((meta_type(&v), 0));
                        e.1 += 1;
                    }
                }
                entry.1 += far.len() as i64;
            }
        }
        for (k, (ty, count)) in props {
            rows.push(meta_row(&name, &k, count, ty, &[], "node"));
        }
        for (t, (other, count)) in rels {
            rows.push(meta_row(&name, &t, count, "RELATIONSHIP", &other, "node"));
        }
    }
    for (t, props) in rel_props {
        for (k, (ty, count)) in props {
            rows.push(meta_row(&t, &k, count, ty, &[], "relationship"));
        }
    }
    Ok(rows)
}

/// `apoc.meta.graph()`: one row, `nodes` and `relationships`, each a list of maps with
/// APOC's virtual entities' properties: per label `{name, count}` (its live nodes), per
/// relationship type `{type, name, count}`. APOC returns virtual nodes and
/// relationships; Quiver has none, and the readers (neo4j-graphrag's enhanced schema)
/// read `name`, `type` and `count` through `x["name"]` or `apoc.any.property`, which a
/// map answers alike.
fn apoc_meta_graph(g: &Graph, _: &[Value]) -> Result<Vec<Vec<Value>>, QueryError> {
    let map = |pairs: Vec<(&str, Value)>| {
        Value::Map(Arc::new(
            pairs.into_iter().map(|(k, v)| (Arc::from(k), v)).collect(),
        ))
    };
    let n_nodes = g.n_nodes();
    let mut nodes = Vec::new();
    for name in g.label_names() {
        let Some(label) = g.label_id(&name) else {
            continue;
        };
        let count = g.label_nodes(label, usize::MAX)?.len() as i64;
        nodes.push(map(vec![
            ("name", Value::str(&name)),
            ("count", Value::Int(count)),
        ]));
    }
    let mut rels = Vec::new();
    for ty in 0..g.n_rel_types() as u32 {
        let mut count = 0i64;
        for n in 0..n_nodes {
            if g.node_live(n) {
                count += g.degree(ty, n, Direction::Out)? as i64;
            }
        }
        let name = g.rel_type_name(ty);
        rels.push(map(vec![
            ("type", Value::Str(name.clone())),
            ("name", Value::Str(name)),
            ("count", Value::Int(count)),
        ]));
    }
    Ok(vec![vec![Value::list(nodes), Value::list(rels)]])
}

/// `apoc.schema.nodes()`: a row per index on node properties (the automatic `:ID`
/// indexes and the declared ones), in APOC's columns; `valuesSelectivity` is distinct
/// values over entries, counted from the index's sorted keys.
fn apoc_schema_nodes(g: &Graph, _: &[Value]) -> Result<Vec<Vec<Value>>, QueryError> {
    let m = g.db.manifest();
    let mut rows = Vec::new();
    for i in crate::index::show(g.db) {
        let pos = m
            .indexes
            .iter()
            .position(|x| x.label == i.label && x.property == i.property);
        let distinct = match pos {
            // Unique, or the `:ID` index: every key once.
            _ if i.kind != "property" => i.entries,
            Some(p) => {
                let mut last: Option<Value> = None;
                let mut d = 0u64;
                g.db.index_entries(p, |k, _| {
                    let v = match k {
                        quiver_storage::read::IndexKey::Int(x) => Value::Int(x),
                        quiver_storage::read::IndexKey::Float(x) => Value::Float(x),
                        quiver_storage::read::IndexKey::Str(b) => {
                            Value::str(&String::from_utf8_lossy(b))
                        }
                    };
                    if last.as_ref() != Some(&v) {
                        d += 1;
                        last = Some(v);
                    }
                })?;
                d
            }
            None => i.entries,
        };
        let name = crate::index::constraint_name(&i.label, std::slice::from_ref(&i.property))
            .replacen("constraint", "index", 1);
        let selectivity = if i.entries == 0 {
            1.0
        } else {
            distinct as f64 / i.entries as f64
        };
        rows.push(vec![
            Value::str(&name),
            Value::str(&format!(":{}({})", i.label, i.property)),
            Value::list(vec![Value::str(&i.property)]),
            Value::str("ONLINE"),
            Value::str("RANGE"),
            Value::str("NO FAILURE"),
            Value::Float(100.0),
            Value::Int(i.entries as i64),
            Value::Float(selectivity),
            Value::str(&format!(
                "name='{name}', type='RANGE', schema=(:{} {{{}}}), indexProvider='range-1.0'",
                i.label, i.property
            )),
        ]);
    }
    Ok(rows)
}

/// `apoc.schema.properties.distinct(label, key)`: one row, the distinct values of
/// `key` over the nodes with `label`, in the order met.
fn apoc_schema_properties_distinct(
    g: &Graph,
    args: &[Value],
) -> Result<Vec<Vec<Value>>, QueryError> {
    let [Value::Str(label), Value::Str(key)] = args else {
        return Err(QueryError::ty(
            "apoc.schema.properties.distinct(label, key) takes two strings",
        ));
    };
    let mut seen = hashbrown::HashSet::new();
    let mut out = Vec::new();
    if let Some(l) = g.label_id(label) {
        for n in g.label_nodes(l, usize::MAX)? {
            let v = g.node_prop(n, key)?;
            if !v.is_null() && seen.insert(Key(v.clone())) {
                out.push(v);
            }
        }
    }
    Ok(vec![vec![Value::list(out)]])
}

/// `db.index.fulltext.queryNodes(index, query[, {skip, limit}])`: the nodes of the
/// index's labels whose indexed text matches `query` (Lucene's syntax), best first,
/// with BM25 scores ([`crate::fulltext::query_nodes`]).
fn fulltext_query_nodes(g: &Graph, args: &[Value]) -> Result<Vec<Vec<Value>>, QueryError> {
    let (name, query, opts) = match args {
        [n, q] => (n, q, None),
        [n, q, o] => (n, q, Some(o)),
        _ => {
            return Err(QueryError::Argument(
                "db.index.fulltext.queryNodes(indexName, queryString[, options])".into(),
            ))
        }
    };
    let (Value::Str(name), Value::Str(query)) = (name, query) else {
        return Err(QueryError::ty(
            "db.index.fulltext.queryNodes takes the index's name and the query as strings",
        ));
    };
    let Some(ix) =
        g.db.manifest()
            .fulltext_indexes
            .iter()
            .find(|f| *f.name == **name)
            .cloned()
    else {
        return Err(QueryError::Procedure(format!(
            "there is no full-text index named {name}; SHOW INDEXES lists them"
        )));
    };
    let opt = |k: &str| -> Result<Option<usize>, QueryError> {
        let Some(Value::Map(m)) = opts else {
            return Ok(None);
        };
        match m.iter().find(|(x, _)| &**x == k).map(|(_, v)| v) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Int(i)) if *i >= 0 => Ok(Some(*i as usize)),
            Some(v) => Err(QueryError::ArgumentValue(
                quiver_cypher::Detail::InvalidArgumentValue,
                format!(
                    "the full-text option {k} must be a non-negative integer, got {}",
                    crate::expr::to_string(v)
                ),
            )),
        }
    };
    let (skip, limit) = (
        opt("skip")?.unwrap_or(0),
        opt("limit")?.unwrap_or(usize::MAX),
    );
    let scored = crate::fulltext::query_nodes(g, &ix, query, skip, limit)?;
    Ok(scored
        .into_iter()
        .map(|(s, n)| vec![Value::Node(n), Value::Float(s)])
        .collect())
}

/// The index, `k` and query vector of a `db.index.vector.query*` call (`what`: its
/// signature, for the error of a wrong call), checked against the index's kind.
fn vector_args(
    g: &Graph,
    args: &[Value],
    what: &str,
    relationship: bool,
) -> Result<(quiver_storage::manifest::VectorIndexMeta, usize, Vec<f64>), QueryError> {
    let [name, k, query] = args else {
        return Err(QueryError::Argument(what.into()));
    };
    let Value::Str(name) = name else {
        return Err(QueryError::ty("the vector index's name must be a string"));
    };
    let Some(ix) = g
        .vector_indexes()
        .iter()
        .find(|v| *v.name == **name)
        .cloned()
    else {
        return Err(QueryError::Procedure(format!(
            "there is no vector index named {name}; SHOW INDEXES lists them"
        )));
    };
    if ix.relationship != relationship {
        let (is, call) = if ix.relationship {
            ("relationships", "db.index.vector.queryRelationships")
        } else {
            ("nodes", "db.index.vector.queryNodes")
        };
        return Err(QueryError::Procedure(format!(
            "vector index {name} indexes {is}: call {call}"
        )));
    }
    let k = match k {
        Value::Int(k) if *k >= 1 => *k as usize,
        v => {
            return Err(QueryError::ArgumentValue(
                quiver_cypher::Detail::NumberOutOfRange,
                format!(
                    "the number of nearest neighbours must be a positive integer, got {}",
                    crate::expr::to_string(v)
                ),
            ))
        }
    };
    // An index declared without dimensions takes a query of any (Neo4j compares it to
    // the vectors of its length).
    let dims = ix.dimensions as usize;
    let q: Option<Vec<f64>> = match query {
        Value::List(l) if !l.is_empty() && (dims == 0 || l.len() == dims) => l
            .iter()
            .map(|x| match x {
                Value::Int(i) => Some(*i as f64),
                Value::Float(f) => Some(*f),
                _ => None,
            })
            .collect(),
        _ => None,
    };
    let Some(q) = q else {
        return Err(QueryError::ArgumentValue(
            quiver_cypher::Detail::InvalidArgumentValue,
            format!(
                "the query vector of index {} must be a list of {} numbers",
                ix.name,
                if dims == 0 {
                    "some".to_string()
                } else {
                    dims.to_string()
                }
            ),
        ));
    };
    Ok((ix, k, q))
}

/// `db.index.vector.queryNodes(index, k, vector)`: the `k` nodes of the index's label
/// whose vectors score highest against `vector`, best first, with Neo4j's scores
/// ((1 + cosine) / 2, or 1 / (1 + squared distance)), from the index's HNSW graph and
/// the delta ([`crate::vector::query_nodes`]); a node whose property is not a list of
/// the index's dimensions is not a candidate.
fn vector_query_nodes(g: &Graph, args: &[Value]) -> Result<Vec<Vec<Value>>, QueryError> {
    let what = "db.index.vector.queryNodes(indexName, numberOfNearestNeighbours, query)";
    let (ix, k, q) = vector_args(g, args, what, false)?;
    let scored = crate::vector::query_nodes(g, &ix, &q, k)?;
    Ok(scored
        .into_iter()
        .map(|(s, n)| vec![Value::Node(n), Value::Float(s)])
        .collect())
}

/// `db.index.vector.queryRelationships(index, k, vector)`: as
/// [`vector_query_nodes`] for the relationships of the index's type, searched exactly
/// ([`crate::vector::query_relationships`]).
fn vector_query_relationships(g: &Graph, args: &[Value]) -> Result<Vec<Vec<Value>>, QueryError> {
    let what = "db.index.vector.queryRelationships(indexName, numberOfNearestNeighbours, query)";
    let (ix, k, q) = vector_args(g, args, what, true)?;
    let scored = crate::vector::query_relationships(g, &ix, &q, k)?;
    Ok(scored
        .into_iter()
        .map(|(s, r)| vec![Value::Rel(r), Value::Float(s)])
        .collect())
}

/// A row of `apoc.meta.data()` in APOC's columns.
fn meta_row(
    label: &str,
    property: &str,
    count: i64,
    ty: &str,
    other: &[String],
    element: &str,
) -> Vec<Value> {
    let others = Value::list(other.iter().map(|o| Value::str(o)).collect());
    vec![
        Value::str(label),
        Value::str(property),
        Value::Int(count),
        Value::Bool(false),
        Value::Bool(false),
        Value::Bool(false),
        Value::str(ty),
        Value::Bool(ty == "LIST"),
        Value::Null,
        Value::Int(0),
        Value::Int(0),
        others.clone(),
        others,
        Value::str(element),
    ]
}

/// `apoc.meta.schema({sample})`: one row, `value`, APOC's map of the schema: per label
/// `{type: 'node', count, labels: [], properties: {p: {type, indexed, unique,
/// existence, array}}, relationships: {T: {direction: 'out', labels, count,
/// properties: {}}}}`, per relationship type `{type: 'relationship', count,
/// properties}`; made from `apoc.meta.data`'s sampled rows, with whole counts.
fn apoc_meta_schema(g: &Graph, args: &[Value]) -> Result<Vec<Vec<Value>>, QueryError> {
    use std::collections::BTreeMap;
    let map = |pairs: Vec<(String, Value)>| {
        Value::Map(Arc::new(
            pairs
                .into_iter()
                .map(|(k, v)| (Arc::from(k.as_str()), v))
                .collect(),
        ))
    };
    let s = |x: &str| Value::str(x);
    // name -> (element, properties, relationships)
    type Entry = (String, Vec<(String, Value)>, Vec<(String, Value)>);
    let mut out: BTreeMap<String, Entry> = BTreeMap::new();
    for row in apoc_meta_data(g, args)? {
        let text = |i: usize| match &row[i] {
            Value::Str(x) => x.to_string(),
            _ => String::new(),
        };
        let (name, prop, ty, element) = (text(0), text(1), text(6), text(13));
        let e = out
            .entry(name)
            .or_insert_with(|| (element.clone(), Vec::new(), Vec::new()));
        if ty == "RELATIONSHIP" {
            e.2.push((
                prop,
                map(vec![
                    ("direction".into(), s("out")),
                    ("labels".into(), row[12].clone()),
                    ("count".into(), row[2].clone()),
                    ("properties".into(), map(Vec::new())),
                ]),
            ));
        } else {
            e.1.push((
                prop,
                map(vec![
                    ("type".into(), s(&ty)),
                    ("indexed".into(), Value::Bool(false)),
                    ("unique".into(), Value::Bool(false)),
                    ("existence".into(), Value::Bool(false)),
                    ("array".into(), Value::Bool(ty == "LIST")),
                ]),
            ));
        }
    }
    // Every relationship type, with properties or not.
    for ty in 0..g.n_rel_types() as u32 {
        out.entry(g.rel_type_name(ty).to_string())
            .or_insert_with(|| ("relationship".into(), Vec::new(), Vec::new()));
    }
    let mut entries = Vec::new();
    for (name, (element, props, rels)) in out {
        let count = if element == "node" {
            g.label_id(&name)
                .map(|l| g.label_nodes(l, usize::MAX).map(|v| v.len()))
                .transpose()?
                .unwrap_or(0)
        } else {
            let mut c = 0usize;
            if let Some(ty) = g.rel_type_id(&name) {
                for n in 0..g.n_nodes() {
                    if g.node_live(n) {
                        c += g.degree(ty, n, Direction::Out)? as usize;
                    }
                }
            }
            c
        };
        let mut fields = vec![
            ("type".to_string(), s(&element)),
            ("count".to_string(), Value::Int(count as i64)),
            ("properties".to_string(), map(props)),
        ];
        if element == "node" {
            fields.push(("labels".into(), Value::list(Vec::new())));
            fields.push(("relationships".into(), map(rels)));
        }
        entries.push((name, map(fields)));
    }
    Ok(vec![vec![map(entries)]])
}

/// The built-in procedures, made once.
pub fn builtins() -> &'static [Arc<Procedure>] {
    static BUILTINS: std::sync::OnceLock<Vec<Arc<Procedure>>> = std::sync::OnceLock::new();
    BUILTINS.get_or_init(|| make_builtins().into_iter().map(Arc::new).collect())
}

fn make_builtins() -> Vec<Procedure> {
    let one = |name: &str, out: &str, f| Procedure {
        name: name.into(),
        inputs: Vec::new(),
        optional: 0,
        outputs: vec![(out.into(), PType::String)],
        body: Body::Builtin(f),
    };
    vec![
        one("db.labels", "label", db_labels),
        one("db.relationshipTypes", "relationshipType", db_types),
        one("db.propertyKeys", "propertyKey", db_keys),
        Procedure {
            name: "dbms.components".into(),
            inputs: Vec::new(),
            optional: 0,
            outputs: vec![
                ("name".into(), PType::String),
                ("versions".into(), PType::Other),
                ("edition".into(), PType::String),
            ],
            body: Body::Builtin(dbms_components),
        },
        one("dbms.cluster.role", "role", dbms_cluster_role),
        Procedure {
            name: "apoc.meta.data".into(),
            inputs: vec![("config".into(), PType::Other)],
            optional: 1,
            outputs: [
                ("label", PType::String),
                ("property", PType::String),
                ("count", PType::Integer),
                ("unique", PType::Boolean),
                ("index", PType::Boolean),
                ("existence", PType::Boolean),
                ("type", PType::String),
                ("array", PType::Boolean),
                ("sample", PType::Other),
                ("left", PType::Integer),
                ("right", PType::Integer),
                ("other", PType::Other),
                ("otherLabels", PType::Other),
                ("elementType", PType::String),
            ]
            .into_iter()
            .map(|(n, t)| (n.to_string(), t))
            .collect(),
            body: Body::Builtin(apoc_meta_data),
        },
        Procedure {
            name: "apoc.meta.graph".into(),
            inputs: vec![("config".into(), PType::Other)],
            optional: 1,
            outputs: vec![
                ("nodes".into(), PType::Other),
                ("relationships".into(), PType::Other),
            ],
            body: Body::Builtin(apoc_meta_graph),
        },
        Procedure {
            name: "apoc.meta.schema".into(),
            inputs: vec![("config".into(), PType::Other)],
            optional: 1,
            outputs: vec![("value".into(), PType::Other)],
            body: Body::Builtin(apoc_meta_schema),
        },
        Procedure {
            // APOC's: the same counts, limited by a config Quiver reads as the whole
            // graph (LlamaIndex's schema reader calls it with `{}`).
            name: "apoc.meta.subGraph".into(),
            inputs: vec![("config".into(), PType::Other)],
            optional: 0,
            outputs: vec![
                ("nodes".into(), PType::Other),
                ("relationships".into(), PType::Other),
            ],
            body: Body::Builtin(apoc_meta_graph),
        },
        Procedure {
            name: "apoc.schema.nodes".into(),
            inputs: vec![("config".into(), PType::Other)],
            optional: 1,
            outputs: [
                ("name", PType::String),
                ("label", PType::String),
                ("properties", PType::Other),
                ("status", PType::String),
                ("type", PType::String),
                ("failure", PType::String),
                ("populationProgress", PType::Float),
                ("size", PType::Integer),
                ("valuesSelectivity", PType::Float),
                ("userDescription", PType::String),
            ]
            .into_iter()
            .map(|(n, t)| (n.to_string(), t))
            .collect(),
            body: Body::Builtin(apoc_schema_nodes),
        },
        Procedure {
            name: "apoc.schema.properties.distinct".into(),
            inputs: vec![
                ("label".into(), PType::String),
                ("key".into(), PType::String),
            ],
            optional: 0,
            outputs: vec![("value".into(), PType::Other)],
            body: Body::Builtin(apoc_schema_properties_distinct),
        },
        index_query(
            "db.index.fulltext.queryNodes",
            ("queryString", PType::String),
            "node",
            fulltext_query_nodes,
        ),
        index_query(
            "db.index.vector.queryRelationships",
            ("numberOfNearestNeighbours", PType::Integer),
            "relationship",
            vector_query_relationships,
        ),
        index_query(
            "db.index.vector.queryNodes",
            ("numberOfNearestNeighbours", PType::Integer),
            "node",
            vector_query_nodes,
        ),
        config("dbms.clientConfig"),
        config("dbms.listConfig"),
    ]
}

/// An index search procedure: `(indexName, second, third)` yielding `(entity, score)`;
/// the full-text one takes its third (options) optionally.
fn index_query(
    name: &str,
    (second, ty): (&str, PType),
    entity: &str,
    body: BuiltinFn,
) -> Procedure {
    let fulltext = name.starts_with("db.index.fulltext");
    let third = if fulltext { "options" } else { "query" };
    Procedure {
        name: name.into(),
        inputs: vec![
            ("indexName".into(), PType::String),
            (second.into(), ty),
            (third.into(), PType::Other),
        ],
        optional: fulltext as usize,
        outputs: vec![
            (entity.into(), PType::Other),
            ("score".into(), PType::Float),
        ],
        body: Body::Builtin(body),
    }
}

fn config(name: &str) -> Procedure {
    Procedure {
        name: name.into(),
        inputs: Vec::new(),
        optional: 0,
        outputs: vec![
            ("name".into(), PType::String),
            ("description".into(), PType::String),
            ("value".into(), PType::String),
            ("dynamic".into(), PType::Boolean),
        ],
        body: Body::Builtin(dbms_config),
    }
}

/// The procedures a session can call: the built-ins and those registered.
#[derive(Debug, Clone, Default)]
pub struct Procedures {
    pub registered: Vec<Arc<Procedure>>,
}

impl Procedures {
    pub fn find(&self, name: &str) -> Option<Arc<Procedure>> {
        self.registered
            .iter()
            .find(|p| p.name == name)
            .or_else(|| builtins().iter().find(|p| p.name == name))
            .cloned()
            .or_else(|| crate::gds::find(name))
    }
}

/// Checks every CALL of a statement against the procedures' signatures before it
/// runs (compile time): the procedure exists, the arguments are as many as its inputs
/// and literals of their types, YIELD names its outputs, an in-query call of a
/// procedure with outputs yields them, and `YIELD *` stands alone.
pub fn check(text: &str, stmt: &Statement, procs: &Procedures) -> Result<(), QueryError> {
    use quiver_cypher::parse::error_at;
    for part in &stmt.query.parts {
        let standalone = part.clauses.len() == 1;
        for c in &part.clauses {
            let Clause::CallProc(pc) = c else { continue };
            let syntax = |detail: Detail, msg: String| {
                QueryError::Parse(error_at(text, pc.at, msg).with_detail(detail))
            };
            let Some(p) = procs.find(&pc.name) else {
                return Err(QueryError::Procedure(
                    error_at(text, pc.at, format!("there is no procedure {}", pc.name)).to_string(),
                ));
            };
            match &pc.args {
                Some(a) => {
                    let least = p.inputs.len() - p.optional.min(p.inputs.len());
                    if a.len() < least || a.len() > p.inputs.len() {
                        return Err(syntax(
                            Detail::InvalidNumberOfArguments,
                            format!(
                                "{}() takes {} argument(s), got {}",
                                p.name,
                                if least == p.inputs.len() {
                                    least.to_string()
                                } else {
                                    format!("{least} to {}", p.inputs.len())
                                },
                                a.len()
                            ),
                        ));
                    }
                    for (e, (n, t)) in a.iter().zip(&p.inputs) {
                        let lit = match e {
                            Expr::Int(i) => Some(Value::Int(*i)),
                            Expr::Float(f) => Some(Value::Float(*f)),
                            Expr::Str(s) => Some(Value::str(s)),
                            Expr::Bool(b) => Some(Value::Bool(*b)),
                            _ => None,
                        };
                        if lit.is_some_and(|v| !t.accepts(&v)) {
                            return Err(syntax(
                                Detail::InvalidArgumentType,
                                format!(
                                    "argument `{n}` of {}() is {t:?}, and this literal is not",
                                    p.name
                                ),
                            ));
                        }
                    }
                }
                None if !standalone && !p.inputs.is_empty() => {
                    return Err(syntax(Detail::InvalidArgumentPassingMode, format!(
                        "{}() takes arguments: give them in parentheses (only a standalone CALL takes them from parameters)",
                        p.name
                    )));
                }
                None => {}
            }
            if pc.star && !standalone {
                return Err(syntax(
                    Detail::UnexpectedSyntax,
                    "YIELD * is only allowed in a standalone CALL".into(),
                ));
            }
            for (out, _) in pc.yields.iter().flatten() {
                if !p.outputs.iter().any(|(o, _)| o == out) {
                    return Err(syntax(
                        Detail::UndefinedVariable,
                        format!("{}() has no output `{out}`", p.name),
                    ));
                }
            }
            if pc.yields.is_none() && !standalone && !p.outputs.is_empty() {
                return Err(syntax(
                    Detail::UnexpectedSyntax,
                    format!(
                        "a CALL of {}() inside a query needs YIELD (its outputs: {})",
                        p.name,
                        p.outputs
                            .iter()
                            .map(|(o, _)| o.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Calls a procedure for each input row and appends the yielded outputs, a batch at a
/// time (a graph algorithm's stream may be a row a node); a procedure with no outputs
/// passes each row on once.
pub struct CallOp {
    pub input: BoxOp,
    pub proc: Arc<Procedure>,
    pub args: Vec<CExpr>,
    /// Indexes of the outputs appended, in slot order.
    pub outputs: Vec<usize>,
    pub void: bool,
    /// The input batch being answered, the row, and the rest of its call's rows.
    pub pending: Option<(Batch, usize, Rows)>,
}

impl CallOp {
    pub fn new(
        input: BoxOp,
        proc: Arc<Procedure>,
        args: Vec<CExpr>,
        outputs: Vec<usize>,
        void: bool,
    ) -> CallOp {
        CallOp {
            input,
            proc,
            args,
            outputs,
            void,
            pending: None,
        }
    }
}

impl Op for CallOp {
    fn next(&mut self, cx: &mut Cx) -> Result<Option<Batch>, QueryError> {
        loop {
            if self.pending.is_none() {
                let Some(b) = self.input.next(cx)? else {
                    return Ok(None);
                };
                self.pending = Some((b, 0, Box::new(std::iter::empty())));
            }
            let Some((b, row, rows)) = self.pending.as_mut() else {
                continue;
            };
            let mut out = Batch::empty(b.width() + self.outputs.len());
            let mut finished = false;
            while out.len < crate::batch::BATCH_ROWS {
                if let Some(r) = rows.next() {
                    let ext: Vec<Value> = self
                        .outputs
                        .iter()
                        .map(|&i| r.get(i).cloned().unwrap_or(Value::Null))
                        .collect();
                    out.push_row_from(b, *row - 1, &ext);
                    continue;
                }
                if *row >= b.len {
                    finished = true;
                    break;
                }
                let mut locals = Vec::new();
                let args = self
                    .args
                    .iter()
                    .map(|a| eval(&cx.env, a, b, *row, &mut locals))
                    .collect::<Result<Vec<_>, _>>()?;
                *row += 1;
                if self.void {
                    // Run for its effect; each row passes once.
                    for _ in self.proc.call(cx, &args)? {}
                    out.push_row_from(b, *row - 1, &[]);
                    continue;
                }
                *rows = self.proc.call(cx, &args)?;
            }
            if finished {
                self.pending = None;
            }
            if out.len > 0 {
                return Ok(Some(out));
            }
        }
    }
}
