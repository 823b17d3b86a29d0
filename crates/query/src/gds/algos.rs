//! The procedures: the graph catalog's (`gds.graph.*`), every algorithm in GDS's
//! modes (`stream`, `stats`, `mutate`, `write`, and `.estimate` of each), the path
//! searches, and MAGE's names. One function runs them all ([`run`]), dispatching on the
//! procedure's name; [`find`] makes a procedure's signature from its name.
//!
//! A run takes its working memory as a grant from the query's budget before it starts
//! (what `.estimate` reports is what it takes), and stops when the query is cancelled.

use super::view::{members, View};
use super::{echo_specs, map_value, parse_labels, parse_rels, Catalog, Config, Projection};
use crate::error::QueryError;
use crate::graph::Graph;
use crate::procs::{Body, PType, Procedure, Rows};
use crate::value::Value;
use quiver_algo::{centrality, community, components, paths, structure, Adjacency, Run, Side};
use quiver_common::memory::MemoryBudget;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

/// What a GDS procedure runs with (made by `CallOp` from the query's context).
pub struct AlgoCx<'a, 'g> {
    pub g: &'a Graph<'g>,
    pub budget: &'a MemoryBudget,
    pub cancel: Option<&'a AtomicBool>,
    pub deadline: Option<Instant>,
    pub catalog: Option<&'a Arc<Catalog>>,
    pub tx: Option<&'a mut quiver_engine::Txn>,
}

/// The node algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Algo {
    PageRank,
    ArticleRank,
    Eigenvector,
    Betweenness,
    Closeness,
    Harmonic,
    Degree,
    Wcc,
    Scc,
    Triangles,
    Clustering,
    KCore,
    Lpa,
    Louvain,
}

/// (GDS name, algorithm, the value's column, its type, the stats columns).
const ALGOS: &[(&str, Algo, &str, PType, &[(&str, PType)])] = &[
    (
        "pageRank",
        Algo::PageRank,
        "score",
        PType::Float,
        RANK_STATS,
    ),
    (
        "articleRank",
        Algo::ArticleRank,
        "score",
        PType::Float,
        RANK_STATS,
    ),
    (
        "eigenvector",
        Algo::Eigenvector,
        "score",
        PType::Float,
        RANK_STATS,
    ),
    (
        "betweenness",
        Algo::Betweenness,
        "score",
        PType::Float,
        &[("centralityDistribution", PType::Other)],
    ),
    (
        "closeness.harmonic",
        Algo::Harmonic,
        "score",
        PType::Float,
        &[("centralityDistribution", PType::Other)],
    ),
    (
        "closeness",
        Algo::Closeness,
        "score",
        PType::Float,
        &[("centralityDistribution", PType::Other)],
    ),
    (
        "degree",
        Algo::Degree,
        "score",
        PType::Float,
        &[("centralityDistribution", PType::Other)],
    ),
    (
        "wcc",
        Algo::Wcc,
        "componentId",
        PType::Integer,
        COMPONENT_STATS,
    ),
    (
        "scc",
        Algo::Scc,
        "componentId",
        PType::Integer,
        COMPONENT_STATS,
    ),
    (
        "triangleCount",
        Algo::Triangles,
        "triangleCount",
        PType::Integer,
        &[
            ("globalTriangleCount", PType::Integer),
            ("nodeCount", PType::Integer),
        ],
    ),
    (
        "localClusteringCoefficient",
        Algo::Clustering,
        "localClusteringCoefficient",
        PType::Float,
        &[
            ("averageClusteringCoefficient", PType::Float),
            ("nodeCount", PType::Integer),
        ],
    ),
    (
        "kcore",
        Algo::KCore,
        "coreValue",
        PType::Integer,
        &[("degeneracy", PType::Integer)],
    ),
    (
        "labelPropagation",
        Algo::Lpa,
        "communityId",
        PType::Integer,
        &[
            ("ranIterations", PType::Integer),
            ("didConverge", PType::Boolean),
            ("communityCount", PType::Integer),
            ("communityDistribution", PType::Other),
        ],
    ),
    (
        "louvain",
        Algo::Louvain,
        "communityId",
        PType::Integer,
        &[
            ("modularity", PType::Float),
            ("modularities", PType::Other),
            ("ranLevels", PType::Integer),
            ("communityCount", PType::Integer),
            ("communityDistribution", PType::Other),
        ],
    ),
];

const RANK_STATS: &[(&str, PType)] = &[
    ("ranIterations", PType::Integer),
    ("didConverge", PType::Boolean),
    ("centralityDistribution", PType::Other),
];

const COMPONENT_STATS: &[(&str, PType)] = &[
    ("componentCount", PType::Integer),
    ("componentDistribution", PType::Other),
];

const TIMES: &[(&str, PType)] = &[
    ("preProcessingMillis", PType::Integer),
    ("computeMillis", PType::Integer),
    ("postProcessingMillis", PType::Integer),
];

const ESTIMATE: &[(&str, PType)] = &[
    ("requiredMemory", PType::String),
    ("treeView", PType::String),
    ("mapView", PType::Other),
    ("bytesMin", PType::Integer),
    ("bytesMax", PType::Integer),
    ("nodeCount", PType::Integer),
    ("relationshipCount", PType::Integer),
    ("heapPercentageMin", PType::Float),
    ("heapPercentageMax", PType::Float),
];

const PATH_COLUMNS: &[(&str, PType)] = &[
    ("index", PType::Integer),
    ("sourceNode", PType::Integer),
    ("targetNode", PType::Integer),
    ("totalCost", PType::Float),
    ("nodeIds", PType::Other),
    ("costs", PType::Other),
    ("path", PType::Other),
];

fn cols(v: &[(&str, PType)]) -> Vec<(String, PType)> {
    v.iter().map(|(n, t)| (n.to_string(), *t)).collect()
}

fn proc(
    name: String,
    inputs: &[(&str, PType)],
    optional: usize,
    outputs: Vec<(String, PType)>,
) -> Procedure {
    Procedure {
        name,
        inputs: cols(inputs),
        optional,
        outputs,
        body: Body::Algo(run),
    }
}

/// The procedure named `name`, if it is one of these.
pub fn find(name: &str) -> Option<Arc<Procedure>> {
    static ALL: std::sync::OnceLock<Vec<Arc<Procedure>>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| all().into_iter().map(Arc::new).collect())
        .iter()
        .find(|p| p.name == name)
        .cloned()
}

/// Every procedure's signature (`SHOW PROCEDURES` and the checks read them).
pub fn all() -> Vec<Procedure> {
    let graph_in: &[(&str, PType)] = &[("graphName", PType::Any), ("configuration", PType::Other)];
    let mut out = vec![
        proc(
            "gds.graph.project".into(),
            &[
                ("graphName", PType::String),
                ("nodeProjection", PType::Any),
                ("relationshipProjection", PType::Any),
                ("configuration", PType::Other),
            ],
            1,
            cols(&[
                ("nodeProjection", PType::Other),
                ("relationshipProjection", PType::Other),
                ("graphName", PType::String),
                ("nodeCount", PType::Integer),
                ("relationshipCount", PType::Integer),
                ("projectMillis", PType::Integer),
            ]),
        ),
        proc(
            "gds.graph.list".into(),
            &[("graphName", PType::String)],
            1,
            cols(&[
                ("graphName", PType::String),
                ("database", PType::String),
                ("nodeProjection", PType::Other),
                ("relationshipProjection", PType::Other),
                ("nodeCount", PType::Integer),
                ("relationshipCount", PType::Integer),
                ("density", PType::Float),
                ("creationTime", PType::Other),
                ("sizeInBytes", PType::Integer),
                ("memoryUsage", PType::String),
                ("schema", PType::Other),
            ]),
        ),
        proc(
            "gds.graph.drop".into(),
            &[
                ("graphName", PType::String),
                ("failIfMissing", PType::Boolean),
            ],
            1,
            cols(&[
                ("graphName", PType::String),
                ("nodeCount", PType::Integer),
                ("relationshipCount", PType::Integer),
            ]),
        ),
        proc(
            "gds.graph.exists".into(),
            &[("graphName", PType::String)],
            0,
            cols(&[("graphName", PType::String), ("exists", PType::Boolean)]),
        ),
        proc(
            "gds.graph.nodeProperty.stream".into(),
            &[
                ("graphName", PType::String),
                ("nodeProperty", PType::String),
            ],
            0,
            cols(&[("nodeId", PType::Integer), ("propertyValue", PType::Any)]),
        ),
        proc(
            "gds.nodeSimilarity.stream".into(),
            graph_in,
            1,
            cols(&[
                ("node1", PType::Integer),
                ("node2", PType::Integer),
                ("similarity", PType::Float),
            ]),
        ),
        proc(
            "gds.nodeSimilarity.stats".into(),
            graph_in,
            1,
            cols(&[
                ("nodesCompared", PType::Integer),
                ("similarityPairs", PType::Integer),
                ("similarityDistribution", PType::Other),
                ("computeMillis", PType::Integer),
                ("configuration", PType::Other),
            ]),
        ),
        proc(
            "gds.shortestPath.dijkstra.stream".into(),
            graph_in,
            0,
            cols(PATH_COLUMNS),
        ),
        proc(
            "gds.allShortestPaths.dijkstra.stream".into(),
            graph_in,
            0,
            cols(PATH_COLUMNS),
        ),
        proc(
            "pagerank.get".into(),
            &[
                ("max_iterations", PType::Integer),
                ("damping_factor", PType::Float),
                ("stop_epsilon", PType::Float),
            ],
            3,
            cols(&[("node", PType::Other), ("rank", PType::Float)]),
        ),
        proc(
            "weakly_connected_components.get".into(),
            &[],
            0,
            cols(&[("node", PType::Other), ("component_id", PType::Integer)]),
        ),
        proc(
            "community_detection.get".into(),
            &[],
            0,
            cols(&[("node", PType::Other), ("community_id", PType::Integer)]),
        ),
        proc(
            "degree_centrality.get".into(),
            &[("type", PType::String)],
            1,
            cols(&[("node", PType::Other), ("degree", PType::Float)]),
        ),
    ];
    for traversal in ["gds.bfs.stream", "gds.dfs.stream"] {
        let outputs = cols(&[
            ("sourceNode", PType::Integer),
            ("nodeIds", PType::Other),
            ("path", PType::Other),
        ]);
        out.push(proc(traversal.into(), graph_in, 0, outputs));
    }
    for &(name, algo, value, ty, stats) in ALGOS {
        let mut stream = vec![("nodeId", PType::Integer), (value, ty)];
        if algo == Algo::Louvain {
            stream.push(("intermediateCommunityIds", PType::Other));
        }
        let mut tail: Vec<(&str, PType)> = stats.to_vec();
        tail.extend_from_slice(TIMES);
        tail.push(("configuration", PType::Other));
        let with = |extra: &[(&str, PType)]| {
            let mut v: Vec<(&str, PType)> = extra.to_vec();
            v.extend(tail.iter().copied());
            cols(&v)
        };
        let modes: [(&str, Vec<(String, PType)>); 4] = [
            ("stream", cols(&stream)),
            ("stats", with(&[])),
            (
                "mutate",
                with(&[
                    ("mutateMillis", PType::Integer),
                    ("nodePropertiesWritten", PType::Integer),
                ]),
            ),
            (
                "write",
                with(&[
                    ("writeMillis", PType::Integer),
                    ("nodePropertiesWritten", PType::Integer),
                ]),
            ),
        ];
        for (mode, outputs) in modes {
            out.push(proc(format!("gds.{name}.{mode}"), graph_in, 1, outputs));
            out.push(proc(
                format!("gds.{name}.{mode}.estimate"),
                graph_in,
                1,
                cols(ESTIMATE),
            ));
        }
    }
    out
}

fn err(e: quiver_algo::AlgoError) -> QueryError {
    match e {
        quiver_algo::AlgoError::Cancelled => QueryError::Cancelled,
        e => QueryError::Procedure(e.to_string()),
    }
}

/// Per-node results.
enum Values {
    Float(Vec<f64>),
    /// `u32::MAX`: none.
    Id(Vec<u32>),
    Count(Vec<u64>),
}

impl Values {
    fn at(&self, v: u32) -> Value {
        match self {
            Values::Float(x) => Value::Float(x[v as usize]),
            Values::Id(x) => match x[v as usize] {
                u32::MAX => Value::Null,
                c => Value::Int(c as i64),
            },
            Values::Count(x) => Value::Int(x[v as usize] as i64),
        }
    }
}

/// What a node algorithm gives: values by node, and its stats columns by name.
struct Outcome {
    values: Values,
    stats: Vec<(&'static str, Value)>,
}

fn catalog<'a>(cx: &AlgoCx<'a, '_>) -> Result<&'a Arc<Catalog>, QueryError> {
    cx.catalog.ok_or_else(|| {
        QueryError::Procedure(
            "projected graphs need an open database (a session); this query runs on bare segments"
                .into(),
        )
    })
}

fn text_arg(args: &[Value], i: usize, what: &str) -> Result<String, QueryError> {
    match args.get(i) {
        Some(Value::Str(s)) => Ok(s.to_string()),
        Some(v) => Err(QueryError::Procedure(format!(
            "{what} must be a string, got {}",
            v.type_name()
        ))),
        None => Err(QueryError::Procedure(format!("{what} is missing"))),
    }
}

fn human(bytes: u64) -> String {
    quiver_common::size::human_bytes(bytes)
}

/// The one body of every procedure here.
pub(crate) fn run(
    cx: &mut AlgoCx<'_, '_>,
    p: &Procedure,
    args: &[Value],
) -> Result<Rows, QueryError> {
    let name = p.name.as_str();
    match name {
        "gds.graph.project" => return project(cx, args),
        "gds.graph.list" => return list(cx, args),
        "gds.graph.drop" => return drop_graph(cx, args),
        "gds.graph.exists" => {
            let g = text_arg(args, 0, "graphName")?;
            let exists = catalog(cx)?.get(&g).is_ok();
            return Ok(one(vec![Value::str(&g), Value::Bool(exists)]));
        }
        "gds.graph.nodeProperty.stream" => return node_property(cx, args),
        "gds.nodeSimilarity.stream" | "gds.nodeSimilarity.stats" => {
            return similarity(cx, name, args)
        }
        "gds.bfs.stream"
        | "gds.dfs.stream"
        | "gds.shortestPath.dijkstra.stream"
        | "gds.allShortestPaths.dijkstra.stream" => return path_search(cx, name, args),
        "pagerank.get"
        | "weakly_connected_components.get"
        | "community_detection.get"
        | "degree_centrality.get" => return mage(cx, name, args),
        _ => {}
    }
    let rest = name
        .strip_prefix("gds.")
        .ok_or_else(|| QueryError::Procedure(format!("there is no procedure {name}")))?;
    // (A name another extends comes after it in the list: closeness.harmonic first.)
    let &(algo_name, algo, value_col, _, _) = ALGOS
        .iter()
        .find(|a| rest.strip_prefix(a.0).is_some_and(|m| m.starts_with('.')))
        .ok_or_else(|| QueryError::Procedure(format!("there is no procedure {name}")))?;
    let mode = &rest[algo_name.len() + 1..];
    let (mode, estimate) = match mode.strip_suffix(".estimate") {
        Some(m) => (m, true),
        None => (mode, false),
    };
    let t0 = Instant::now();
    let cfg = Config::new(args.get(1), name)?;
    let proj = match args.first() {
        Some(Value::Str(g)) => catalog(cx)?.get(g)?,
        // GDS's estimate of a graph not projected: its counts given.
        Some(m @ Value::Map(_)) if estimate => {
            let c = Config::new(Some(m), name)?;
            let n = c.int("nodeCount", 0, 0)? as u64;
            let rels = c.int("relationshipCount", 0, 0)? as u64;
            for k in [
                "nodeProjection",
                "relationshipProjection",
                "nodeProperties",
                "relationshipProperties",
            ] {
                let _ = c.get(k);
            }
            c.finish()?;
            let weight = cfg.string("relationshipWeightProperty")?;
            for k in [
                "concurrency",
                "jobId",
                "logProgress",
                "sudo",
                "writeConcurrency",
                "mutateProperty",
                "writeProperty",
            ] {
                let _ = cfg.get(k);
            }
            let threads = cfg.int("concurrency", rayon::current_num_threads() as i64, 1)? as usize;
            let plan = Plan::read(algo, &cfg, weight.is_some(), false, threads)?;
            cfg.finish()?;
            let bytes = plan.estimate(n, rels) + if weight.is_some() { rels * 8 } else { 0 };
            return Ok(estimate_row(algo_name, bytes, n, rels, cx.budget));
        }
        Some(v) => {
            return Err(QueryError::Procedure(format!(
                "{name}: the first argument is a projected graph's name, got {}",
                v.type_name()
            )))
        }
        None => {
            return Err(QueryError::Procedure(format!(
                "{name}: a graph name is missing"
            )))
        }
    };
    let threads = cfg.int("concurrency", rayon::current_num_threads() as i64, 1)? as usize;
    for k in [
        "jobId",
        "logProgress",
        "sudo",
        "writeConcurrency",
        "readConcurrency",
    ] {
        let _ = cfg.get(k);
    }
    let prop_key = match mode {
        "mutate" => Some(cfg.string("mutateProperty")?.ok_or_else(|| {
            QueryError::Procedure(format!("{name}: `mutateProperty` is required"))
        })?),
        "write" => Some(cfg.string("writeProperty")?.ok_or_else(|| {
            QueryError::Procedure(format!("{name}: `writeProperty` is required"))
        })?),
        _ => None,
    };
    let weight = if matches!(
        algo,
        Algo::PageRank
            | Algo::ArticleRank
            | Algo::Eigenvector
            | Algo::Degree
            | Algo::Lpa
            | Algo::Louvain
    ) {
        cfg.string("relationshipWeightProperty")?
    } else {
        None
    };
    let pg = proj.graph();
    let (members, member_count) = projection_members(&proj, &pg)?;
    let n = pg.n_nodes();
    let m = proj.relationship_count;
    // Configuration read before any work, so a wrong key fails fast.
    let undirected = proj
        .rels
        .iter()
        .all(|r| r.orientation == super::Orientation::Undirected);
    let plan = Plan::read(algo, &cfg, weight.is_some(), undirected, threads)?;
    cfg.finish()?;
    // The weights the view reads (a `f64` an edge id) are held while it runs.
    let bytes = plan.estimate(n, m) + if weight.is_some() { m * 8 } else { 0 };
    if estimate {
        return Ok(estimate_row(algo_name, bytes, member_count, m, cx.budget));
    }
    let mut grant = cx.budget.empty_grant("graph algorithm");
    crate::memory::account(&mut grant, bytes, "graph algorithm")?;
    let view = View::of_projection(&pg, &proj, members, member_count, weight.as_deref())?;
    let run = Run {
        threads,
        stop: cx.cancel,
        deadline: cx.deadline,
    };
    let pre = t0.elapsed();
    let t1 = Instant::now();
    let out = plan.run(&view, &run)?;
    let compute = t1.elapsed();
    let t2 = Instant::now();
    let member_list = quiver_algo::members(&view);
    let config = cfg.echo();
    let values = Arc::new(out.values);
    match mode {
        "stream" => {
            let louvain = algo == Algo::Louvain;
            Ok(Box::new(member_list.into_iter().map(move |v| {
                let mut row = vec![Value::Int(v as i64), values.at(v)];
                if louvain {
                    row.push(Value::Null);
                }
                row
            })))
        }
        "stats" | "mutate" | "write" => {
            let mut written = 0i64;
            let mut side_ms = 0i64;
            if let Some(key) = &prop_key {
                let t = Instant::now();
                if mode == "mutate" {
                    let mut by_node = vec![Value::Null; n as usize];
                    for &v in &member_list {
                        by_node[v as usize] = values.at(v);
                    }
                    super::lock(&proj.mutated).insert(key.clone(), Arc::new(by_node));
                    written = member_list.len() as i64;
                } else {
                    written = write_back(cx, name, key, &member_list, &values)?;
                }
                side_ms = t.elapsed().as_millis() as i64;
            }
            let post = t2.elapsed();
            let mut row = Vec::new();
            if prop_key.is_some() {
                row.push(Value::Int(side_ms));
                row.push(Value::Int(written));
            }
            row.extend(out.stats.into_iter().map(|(_, v)| v));
            row.push(Value::Int(pre.as_millis() as i64));
            row.push(Value::Int(compute.as_millis() as i64));
            row.push(Value::Int(post.as_millis() as i64));
            row.push(config);
            let _ = value_col;
            Ok(one(row))
        }
        _ => Err(QueryError::Procedure(format!(
            "there is no procedure {name}"
        ))),
    }
}

/// `.estimate`'s row.
fn estimate_row(algo: &str, bytes: u64, nodes: u64, rels: u64, budget: &MemoryBudget) -> Rows {
    one(vec![
        Value::str(&human(bytes)),
        Value::str(&format!("{algo}: {}", human(bytes))),
        map_value(vec![
            ("name", Value::str(algo)),
            ("memoryUsage", Value::str(&human(bytes))),
        ]),
        Value::Int(bytes as i64),
        Value::Int(bytes as i64),
        Value::Int(nodes as i64),
        Value::Int(rels as i64),
        Value::Float(percent(bytes, budget)),
        Value::Float(percent(bytes, budget)),
    ])
}

fn percent(bytes: u64, budget: &MemoryBudget) -> f64 {
    let limit = budget.limit_bytes().max(1) as f64;
    (bytes as f64 / limit * 1000.0).round() / 10.0
}

fn one(row: Vec<Value>) -> Rows {
    Box::new(std::iter::once(row))
}

/// A projection's members, computed once per generation of its graph (the projection
/// keeps its snapshot, so once).
fn projection_members(p: &Projection, g: &Graph) -> Result<(Arc<Vec<u64>>, u64), QueryError> {
    let mut cache = super::lock(&p.members);
    if let Some(m) = &*cache {
        return Ok(m.clone());
    }
    let (bits, count) = members(g, &p.labels)?;
    let m = (Arc::new(bits), count);
    *cache = Some(m.clone());
    Ok(m)
}

/// An algorithm with its configuration read.
enum Plan {
    Rank(centrality::PageRank, Scaler),
    Eigen(centrality::Eigenvector, Scaler),
    /// Sampled sources and their seed, undirected, threads.
    Betweenness(Option<u32>, u64, bool, usize),
    /// Harmonic, threads.
    Closeness(bool, usize),
    Degree(Side, bool),
    Wcc(bool),
    Scc(bool),
    Triangles,
    Clustering,
    KCore,
    Lpa(community::LabelPropagation, bool),
    Louvain(community::Louvain),
}

/// GDS's scalers of centrality scores.
#[derive(Clone, Copy)]
enum Scaler {
    None,
    MinMax,
    Max,
    Mean,
    Log,
    L1,
    L2,
    StdScore,
}

impl Scaler {
    fn parse(s: Option<String>) -> Result<Scaler, QueryError> {
        let Some(s) = s else { return Ok(Scaler::None) };
        Ok(match s.to_ascii_lowercase().as_str() {
            "none" => Scaler::None,
            "minmax" => Scaler::MinMax,
            "max" => Scaler::Max,
            "mean" => Scaler::Mean,
            "log" => Scaler::Log,
            "l1norm" => Scaler::L1,
            "l2norm" => Scaler::L2,
            "stdscore" => Scaler::StdScore,
            _ => {
                return Err(QueryError::Procedure(format!(
                "scaler {s} is not one of NONE, MINMAX, MAX, MEAN, LOG, L1NORM, L2NORM, STDSCORE"
            )))
            }
        })
    }

    fn apply(self, x: &mut [f64], member: impl Fn(usize) -> bool) {
        let vals: Vec<f64> = (0..x.len()).filter(|&i| member(i)).map(|i| x[i]).collect();
        if vals.is_empty() {
            return;
        }
        let n = vals.len() as f64;
        let (min, max) = vals
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                (a.min(v), b.max(v))
            });
        let mean = vals.iter().sum::<f64>() / n;
        let f: Box<dyn Fn(f64) -> f64> = match self {
            Scaler::None => return,
            Scaler::MinMax => Box::new(move |v| {
                if max > min {
                    (v - min) / (max - min)
                } else {
                    0.0
                }
            }),
            Scaler::Max => Box::new(move |v| if max != 0.0 { v / max.abs() } else { 0.0 }),
            Scaler::Mean => Box::new(move |v| {
                if max > min {
                    (v - mean) / (max - min)
                } else {
                    0.0
                }
            }),
            Scaler::Log => Box::new(|v: f64| (v + 1.0).ln()),
            Scaler::L1 => {
                let s: f64 = vals.iter().map(|v| v.abs()).sum();
                Box::new(move |v| if s > 0.0 { v / s } else { 0.0 })
            }
            Scaler::L2 => {
                let s: f64 = vals.iter().map(|v| v * v).sum::<f64>().sqrt();
                Box::new(move |v| if s > 0.0 { v / s } else { 0.0 })
            }
            Scaler::StdScore => {
                let sd = (vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
                Box::new(move |v| if sd > 0.0 { (v - mean) / sd } else { 0.0 })
            }
        };
        for (i, v) in x.iter_mut().enumerate() {
            if member(i) {
                *v = f(*v);
            }
        }
    }
}

impl Plan {
    fn read(
        algo: Algo,
        cfg: &Config,
        weighted: bool,
        undirected: bool,
        threads: usize,
    ) -> Result<Plan, QueryError> {
        Ok(match algo {
            Algo::Eigenvector => Plan::Eigen(
                centrality::Eigenvector {
                    max_iterations: cfg.int("maxIterations", 20, 0)? as u32,
                    tolerance: cfg.float("tolerance", 1e-7)?,
                    weighted,
                },
                Scaler::parse(cfg.string("scaler")?)?,
            ),
            Algo::Betweenness => {
                let sample = match cfg.get("samplingSize") {
                    None => None,
                    Some(_) => Some(cfg.int("samplingSize", 0, 0)? as u32),
                };
                Plan::Betweenness(
                    sample,
                    cfg.int("samplingSeed", 0, i64::MIN)? as u64,
                    undirected,
                    threads,
                )
            }
            Algo::Closeness | Algo::Harmonic => {
                // GDS's closeness: reached nodes over the sum of their distances.
                if cfg.boolean("useWassermanFaust", false)? {
                    return Err(QueryError::Procedure(
                        "useWassermanFaust is not supported: closeness is reached nodes over their distances' sum".into(),
                    ));
                }
                Plan::Closeness(algo == Algo::Harmonic, threads)
            }
            Algo::PageRank | Algo::ArticleRank => {
                let pr = centrality::PageRank {
                    damping: cfg.float("dampingFactor", 0.85)?,
                    max_iterations: cfg.int("maxIterations", 20, 0)? as u32,
                    tolerance: cfg.float("tolerance", 1e-7)?,
                    sources: cfg.nodes("sourceNodes")?,
                    weighted,
                    article: algo == Algo::ArticleRank,
                };
                Plan::Rank(pr, Scaler::parse(cfg.string("scaler")?)?)
            }
            Algo::Degree => {
                let side = match cfg.string("orientation")?.map(|s| s.to_ascii_uppercase()) {
                    None => Side::Out,
                    Some(s) if s == "NATURAL" => Side::Out,
                    Some(s) if s == "REVERSE" => Side::In,
                    Some(s) if s == "UNDIRECTED" => Side::Both,
                    Some(s) => {
                        return Err(QueryError::Procedure(format!(
                            "orientation must be NATURAL, REVERSE or UNDIRECTED, got {s}"
                        )))
                    }
                };
                Plan::Degree(side, weighted)
            }
            Algo::Wcc => Plan::Wcc(cfg.boolean("consecutiveIds", false)?),
            Algo::Scc => Plan::Scc(cfg.boolean("consecutiveIds", false)?),
            Algo::Triangles => Plan::Triangles,
            Algo::Clustering => Plan::Clustering,
            Algo::KCore => Plan::KCore,
            Algo::Lpa => Plan::Lpa(
                community::LabelPropagation {
                    max_iterations: cfg.int("maxIterations", 10, 1)? as u32,
                    weighted,
                    seed: cfg.int("randomSeed", 42, i64::MIN)? as u64,
                },
                cfg.boolean("consecutiveIds", false)?,
            ),
            Algo::Louvain => {
                // Communities come numbered 0.. already (consecutive); intermediate
                // levels are not kept (the column is null).
                cfg.boolean("consecutiveIds", false)?;
                cfg.boolean("includeIntermediateCommunities", false)?;
                Plan::Louvain(community::Louvain {
                    max_levels: cfg.int("maxLevels", 10, 1)? as u32,
                    max_iterations: cfg.int("maxIterations", 10, 1)? as u32,
                    tolerance: cfg.float("tolerance", 1e-4)?,
                    weighted,
                })
            }
        })
    }

    /// The bytes a run takes beyond the view (results included).
    fn estimate(&self, n: u64, m: u64) -> u64 {
        let results = n * 8;
        results
            + match self {
                Plan::Rank(pr, _) => pr.estimate(n),
                Plan::Eigen(e, _) => e.estimate(n),
                Plan::Betweenness(_, _, _, t) => paths::betweenness_estimate(n, m, *t),
                Plan::Closeness(_, t) => paths::closeness_estimate(n, m, *t),
                Plan::Degree(..) => centrality::degree_estimate(n),
                Plan::Wcc(_) => components::wcc_estimate(n),
                Plan::Scc(_) => components::scc_estimate(n),
                Plan::Triangles | Plan::Clustering => structure::triangles_estimate(n, m),
                Plan::KCore => structure::kcore_estimate(n, m),
                Plan::Lpa(..) => community::lpa_estimate(n),
                Plan::Louvain(..) => community::louvain_estimate(n, m),
            }
    }

    fn run(&self, g: &dyn Adjacency, run: &Run) -> Result<Outcome, QueryError> {
        let member = |v: usize| g.is_member(v as u32);
        let dist = |x: &[f64]| {
            let mut vals: Vec<f64> = (0..x.len()).filter(|&i| member(i)).map(|i| x[i]).collect();
            distribution_value(&mut vals)
        };
        Ok(match self {
            Plan::Rank(pr, scaler) => {
                let mut r = pr.run(g, run).map_err(err)?;
                scaler.apply(&mut r.scores, member);
                let d = dist(&r.scores);
                Outcome {
                    stats: vec![
                        ("ranIterations", Value::Int(r.iterations as i64)),
                        ("didConverge", Value::Bool(r.converged)),
                        ("centralityDistribution", d),
                    ],
                    values: Values::Float(r.scores),
                }
            }
            Plan::Eigen(e, scaler) => {
                let mut r = e.run(g, run).map_err(err)?;
                scaler.apply(&mut r.scores, member);
                let d = dist(&r.scores);
                Outcome {
                    stats: vec![
                        ("ranIterations", Value::Int(r.iterations as i64)),
                        ("didConverge", Value::Bool(r.converged)),
                        ("centralityDistribution", d),
                    ],
                    values: Values::Float(r.scores),
                }
            }
            Plan::Betweenness(sample, seed, undirected, _) => {
                let b = paths::betweenness(g, run, *sample, *seed, *undirected).map_err(err)?;
                Outcome {
                    stats: vec![("centralityDistribution", dist(&b))],
                    values: Values::Float(b),
                }
            }
            Plan::Closeness(harmonic, _) => {
                let c = paths::closeness(g, run, *harmonic).map_err(err)?;
                Outcome {
                    stats: vec![("centralityDistribution", dist(&c))],
                    values: Values::Float(c),
                }
            }
            Plan::Degree(side, weighted) => {
                let d = centrality::degree(g, run, *side, *weighted).map_err(err)?;
                Outcome {
                    stats: vec![("centralityDistribution", dist(&d))],
                    values: Values::Float(d),
                }
            }
            Plan::Wcc(consecutive) | Plan::Scc(consecutive) => {
                let mut c = match self {
                    Plan::Wcc(_) => components::wcc(g, run),
                    _ => components::scc(g, run),
                }
                .map_err(err)?;
                let sizes = components::sizes(&c);
                if *consecutive {
                    renumber(&mut c, &sizes);
                }
                Outcome {
                    stats: vec![
                        ("componentCount", Value::Int(sizes.len() as i64)),
                        ("componentDistribution", size_distribution(&sizes)),
                    ],
                    values: Values::Id(c),
                }
            }
            Plan::Triangles | Plan::Clustering => {
                let t = structure::triangles(g, run).map_err(err)?;
                let members = g.member_count() as i64;
                if matches!(self, Plan::Triangles) {
                    Outcome {
                        stats: vec![
                            ("globalTriangleCount", Value::Int(t.total as i64)),
                            ("nodeCount", Value::Int(members)),
                        ],
                        values: Values::Count(t.per_node),
                    }
                } else {
                    let c = structure::clustering(&t);
                    let sum: f64 = (0..c.len()).filter(|&i| member(i)).map(|i| c[i]).sum();
                    Outcome {
                        stats: vec![
                            (
                                "averageClusteringCoefficient",
                                Value::Float(if members > 0 {
                                    sum / members as f64
                                } else {
                                    0.0
                                }),
                            ),
                            ("nodeCount", Value::Int(members)),
                        ],
                        values: Values::Float(c),
                    }
                }
            }
            Plan::KCore => {
                let k = structure::kcore(g, run).map_err(err)?;
                let degeneracy = (0..k.len())
                    .filter(|&i| member(i))
                    .map(|i| k[i])
                    .max()
                    .unwrap_or(0);
                Outcome {
                    stats: vec![("degeneracy", Value::Int(degeneracy as i64))],
                    values: Values::Count(k.into_iter().map(|x| x as u64).collect()),
                }
            }
            Plan::Lpa(lpa, consecutive) => {
                let mut r = lpa.run(g, run).map_err(err)?;
                let sizes = components::sizes(&r.labels);
                if *consecutive {
                    renumber(&mut r.labels, &sizes);
                }
                Outcome {
                    stats: vec![
                        ("ranIterations", Value::Int(r.iterations as i64)),
                        ("didConverge", Value::Bool(r.converged)),
                        ("communityCount", Value::Int(sizes.len() as i64)),
                        ("communityDistribution", size_distribution(&sizes)),
                    ],
                    values: Values::Id(r.labels),
                }
            }
            Plan::Louvain(l) => {
                let r = l.run(g, run).map_err(err)?;
                let sizes = components::sizes(&r.community);
                Outcome {
                    stats: vec![
                        ("modularity", Value::Float(r.modularity)),
                        (
                            "modularities",
                            Value::list(r.modularities.iter().map(|&q| Value::Float(q)).collect()),
                        ),
                        ("ranLevels", Value::Int(r.levels as i64)),
                        ("communityCount", Value::Int(sizes.len() as i64)),
                        ("communityDistribution", size_distribution(&sizes)),
                    ],
                    values: Values::Id(r.community),
                }
            }
        })
    }
}

/// Component ids as `0..k` in order of their smallest member.
fn renumber(c: &mut [u32], sizes: &[(u32, u64)]) {
    for x in c.iter_mut() {
        if *x != u32::MAX {
            *x = sizes.partition_point(|s| s.0 < *x) as u32;
        }
    }
}

fn distribution_value(vals: &mut [f64]) -> Value {
    map_value(
        quiver_algo::distribution(vals)
            .into_iter()
            .map(|(k, v)| (k, Value::Float(v)))
            .collect(),
    )
}

fn size_distribution(sizes: &[(u32, u64)]) -> Value {
    let mut v: Vec<f64> = sizes.iter().map(|s| s.1 as f64).collect();
    let m = quiver_algo::distribution(&mut v);
    map_value(
        m.into_iter()
            .map(|(k, x)| {
                (
                    k,
                    if k == "mean" {
                        Value::Float(x)
                    } else {
                        Value::Int(x as i64)
                    },
                )
            })
            .collect(),
    )
}

/// `write` mode: each member's value set as property `key` in the statement's
/// transaction (one commit with the statement).
fn write_back(
    cx: &mut AlgoCx<'_, '_>,
    name: &str,
    key: &str,
    members: &[u32],
    values: &Values,
) -> Result<i64, QueryError> {
    let Some(tx) = cx.tx.as_deref_mut() else {
        return Err(QueryError::Procedure(format!(
            "{name} writes the graph: it cannot run in a read-only transaction"
        )));
    };
    let key: Arc<str> = Arc::from(key);
    let mut written = 0;
    for (i, &v) in members.iter().enumerate() {
        if i % 4096 == 0
            && cx
                .cancel
                .is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed))
        {
            return Err(QueryError::Cancelled);
        }
        let value = values.at(v);
        if value.is_null() {
            continue;
        }
        tx.set_node_prop(v as u64, &key, value)?;
        written += 1;
    }
    Ok(written)
}

fn project(cx: &mut AlgoCx<'_, '_>, args: &[Value]) -> Result<Rows, QueryError> {
    let t0 = Instant::now();
    let name = text_arg(args, 0, "graphName")?;
    let labels = parse_labels(args.get(1).unwrap_or(&Value::Null))?;
    let rels = parse_rels(args.get(2).unwrap_or(&Value::Null))?;
    let cfg = Config::new(args.get(3), "gds.graph.project")?;
    for k in [
        "jobId",
        "logProgress",
        "sudo",
        "readConcurrency",
        "nodeProperties",
        "relationshipProperties",
        "validateRelationships",
    ] {
        let _ = cfg.get(k);
    }
    cfg.finish()?;
    let cat = catalog(cx)?;
    let snap = cat
        .snapshot()
        .ok_or_else(|| QueryError::Procedure("the database is closed".into()))?;
    let delta = (!snap.delta.is_empty()).then(|| snap.delta.clone());
    let g = Graph::with_delta(&snap.db, delta.clone(), false);
    let (bits, count) = members(&g, &labels)?;
    let bits = Arc::new(bits);
    let view = View::new(&g, &rels, labels.is_some(), bits.clone(), count, None)?;
    let relationship_count = view.relationship_count();
    drop(view);
    drop(g);
    let (node_spec, rel_spec) = echo_specs(&labels, &rels);
    let p = Projection {
        name: name.clone(),
        db: snap.db.clone(),
        delta,
        labels,
        rels,
        node_count: count,
        relationship_count,
        created: jiff::Timestamp::now(),
        mutated: Default::default(),
        members: std::sync::Mutex::new(Some((bits, count))),
        node_spec: node_spec.clone(),
        rel_spec: rel_spec.clone(),
    };
    cat.insert(p)?;
    Ok(one(vec![
        node_spec,
        rel_spec,
        Value::str(&name),
        Value::Int(count as i64),
        Value::Int(relationship_count as i64),
        Value::Int(t0.elapsed().as_millis() as i64),
    ]))
}

fn list(cx: &mut AlgoCx<'_, '_>, args: &[Value]) -> Result<Rows, QueryError> {
    let only = match args.first() {
        Some(Value::Str(s)) => Some(s.to_string()),
        _ => None,
    };
    let rows: Vec<Vec<Value>> = catalog(cx)?
        .all()
        .into_iter()
        .filter(|p| only.as_ref().is_none_or(|o| *o == p.name))
        .map(|p| {
            let n = p.node_count as f64;
            let density = if n > 1.0 {
                p.relationship_count as f64 / (n * (n - 1.0))
            } else {
                0.0
            };
            let bytes = p.db.n_nodes().div_ceil(8);
            vec![
                Value::str(&p.name),
                Value::str("neo4j"),
                p.node_spec.clone(),
                p.rel_spec.clone(),
                Value::Int(p.node_count as i64),
                Value::Int(p.relationship_count as i64),
                Value::Float(density),
                Value::str(&p.created.to_string()),
                Value::Int(bytes as i64),
                Value::str(&human(bytes)),
                map_value(vec![
                    ("nodes", p.node_spec.clone()),
                    ("relationships", p.rel_spec.clone()),
                    (
                        "mutatedProperties",
                        Value::list(
                            super::lock(&p.mutated)
                                .keys()
                                .map(|k| Value::str(k))
                                .collect(),
                        ),
                    ),
                ]),
            ]
        })
        .collect();
    Ok(Box::new(rows.into_iter()))
}

fn drop_graph(cx: &mut AlgoCx<'_, '_>, args: &[Value]) -> Result<Rows, QueryError> {
    let name = text_arg(args, 0, "graphName")?;
    let fail = !matches!(args.get(1), Some(Value::Bool(false)));
    let cat = catalog(cx)?;
    match cat.remove(&name) {
        Some(p) => Ok(one(vec![
            Value::str(&name),
            Value::Int(p.node_count as i64),
            Value::Int(p.relationship_count as i64),
        ])),
        None if fail => Err(cat.get(&name).err().unwrap_or_else(|| {
            QueryError::Procedure(format!("there is no projected graph named {name}"))
        })),
        None => Ok(Box::new(std::iter::empty())),
    }
}

fn node_property(cx: &mut AlgoCx<'_, '_>, args: &[Value]) -> Result<Rows, QueryError> {
    let name = text_arg(args, 0, "graphName")?;
    let key = text_arg(args, 1, "nodeProperty")?;
    let p = catalog(cx)?.get(&name)?;
    let values = super::lock(&p.mutated).get(&key).cloned();
    let Some(values) = values else {
        return Err(QueryError::Procedure(format!(
            "projected graph {name} has no node property {key}: an algorithm's mutate mode adds one"
        )));
    };
    let (bits, _) = super::lock(&p.members).clone().unwrap_or_default();
    let n = values.len();
    Ok(Box::new(
        (0..n as u32)
            .filter(move |&v| {
                bits.get((v / 64) as usize)
                    .is_some_and(|w| w & (1 << (v % 64)) != 0)
            })
            .map(move |v| vec![Value::Int(v as i64), values[v as usize].clone()]),
    ))
}

fn path_search(cx: &mut AlgoCx<'_, '_>, name: &str, args: &[Value]) -> Result<Rows, QueryError> {
    let gname = text_arg(args, 0, "graphName")?;
    let proj = catalog(cx)?.get(&gname)?;
    let cfg = Config::new(args.get(1), name)?;
    let threads = cfg.int("concurrency", 1, 1)? as usize;
    let source = *cfg
        .nodes("sourceNode")?
        .first()
        .ok_or_else(|| QueryError::Procedure(format!("{name}: `sourceNode` is required")))?;
    let traversal = name == "gds.bfs.stream" || name == "gds.dfs.stream";
    let weight = if traversal {
        None
    } else {
        cfg.string("relationshipWeightProperty")?
    };
    let targets = match name {
        "gds.bfs.stream" | "gds.dfs.stream" => cfg.nodes("targetNodes")?,
        "gds.shortestPath.dijkstra.stream" => cfg.nodes("targetNode")?,
        _ => Vec::new(),
    };
    let max_depth = if traversal {
        let d = cfg.int("maxDepth", -1, -1)?;
        (d >= 0).then_some(d as u32)
    } else {
        None
    };
    let _ = cfg.get("jobId");
    let _ = cfg.get("logProgress");
    cfg.finish()?;
    if name == "gds.shortestPath.dijkstra.stream" && targets.is_empty() {
        return Err(QueryError::Procedure(format!(
            "{name}: `targetNode` is required"
        )));
    }
    let pg = proj.graph();
    let (members, count) = projection_members(&proj, &pg)?;
    let view = View::of_projection(&pg, &proj, members, count, weight.as_deref())?;
    let mut grant = cx.budget.empty_grant("graph search");
    crate::memory::account(&mut grant, view.node_bound() as u64 * 40, "graph search")?;
    let run = Run {
        threads,
        stop: cx.cancel,
        deadline: cx.deadline,
    };
    if name == "gds.dfs.stream" {
        let order = paths::dfs(&view, &run, source, &targets, max_depth).map_err(err)?;
        if order.is_empty() {
            return Ok(Box::new(std::iter::empty()));
        }
        let ids = Value::list(order.iter().map(|&v| Value::Int(v as i64)).collect());
        return Ok(one(vec![Value::Int(source as i64), ids, Value::Null]));
    }
    if name == "gds.bfs.stream" {
        let r = paths::bfs(&view, &run, source, &targets, max_depth).map_err(err)?;
        if r.order.is_empty() {
            return Ok(Box::new(std::iter::empty()));
        }
        let ids = Value::list(r.order.iter().map(|&v| Value::Int(v as i64)).collect());
        return Ok(one(vec![Value::Int(source as i64), ids, Value::Null]));
    }
    let target = targets.first().copied();
    let r = paths::dijkstra(&view, &run, source, target, weight.is_some()).map_err(err)?;
    let index_of: std::collections::HashMap<u32, usize> =
        r.order.iter().enumerate().map(|(i, &v)| (v, i)).collect();
    let mut rows = Vec::new();
    for (i, &v) in r.order.iter().enumerate() {
        if target.is_some_and(|t| t != v) {
            continue;
        }
        let path = r.path(i, &|x| index_of.get(&x).copied());
        let costs: Vec<Value> = path
            .iter()
            .map(|x| Value::Float(index_of.get(x).map_or(0.0, |&j| r.dist[j])))
            .collect();
        rows.push(vec![
            Value::Int(rows.len() as i64),
            Value::Int(source as i64),
            Value::Int(v as i64),
            Value::Float(r.dist[i]),
            Value::list(path.iter().map(|&x| Value::Int(x as i64)).collect()),
            Value::list(costs),
            Value::Null,
        ]);
    }
    Ok(Box::new(rows.into_iter()))
}

/// `gds.nodeSimilarity.stream|stats`: Jaccard (or overlap) of the nodes' neighbour
/// sets, the `topK` best of each node.
fn similarity(cx: &mut AlgoCx<'_, '_>, name: &str, args: &[Value]) -> Result<Rows, QueryError> {
    let gname = text_arg(args, 0, "graphName")?;
    let proj = catalog(cx)?.get(&gname)?;
    let cfg = Config::new(args.get(1), name)?;
    let threads = cfg.int("concurrency", rayon::current_num_threads() as i64, 1)? as usize;
    let metric = cfg
        .string("similarityMetric")?
        .unwrap_or_else(|| "JACCARD".into());
    let overlap = match metric.to_ascii_uppercase().as_str() {
        "JACCARD" => false,
        "OVERLAP" => true,
        m => {
            return Err(QueryError::Procedure(format!(
                "{name}: similarityMetric must be JACCARD or OVERLAP, got {m}"
            )))
        }
    };
    let sim = structure::Similarity {
        top_k: cfg.int("topK", 10, 1)? as usize,
        cutoff: cfg.float("similarityCutoff", 1e-42)?,
        degree_cutoff: cfg.int("degreeCutoff", 1, 1)? as u32,
        overlap,
    };
    for k in ["jobId", "logProgress", "sudo"] {
        let _ = cfg.get(k);
    }
    cfg.finish()?;
    let pg = proj.graph();
    let (members, count) = projection_members(&proj, &pg)?;
    let mut grant = cx.budget.empty_grant("graph algorithm");
    crate::memory::account(
        &mut grant,
        sim.estimate(pg.n_nodes(), threads),
        "gds.nodeSimilarity",
    )?;
    let view = View::of_projection(&pg, &proj, members, count, None)?;
    let run = Run {
        threads,
        stop: cx.cancel,
        deadline: cx.deadline,
    };
    let t = Instant::now();
    let pairs = sim.run(&view, &run).map_err(err)?;
    if name.ends_with(".stats") {
        let mut all: Vec<f64> = pairs
            .iter()
            .flat_map(|(_, l)| l.iter().map(|p| p.1))
            .collect();
        let n_pairs = all.len() as i64;
        return Ok(one(vec![
            Value::Int(pairs.len() as i64),
            Value::Int(n_pairs),
            distribution_value(&mut all),
            Value::Int(t.elapsed().as_millis() as i64),
            cfg.echo(),
        ]));
    }
    Ok(Box::new(pairs.into_iter().flat_map(|(a, l)| {
        l.into_iter()
            .map(move |(b, x)| vec![Value::Int(a as i64), Value::Int(b as i64), Value::Float(x)])
    })))
}

/// MAGE's calls, over the whole graph as the statement sees it.
fn mage(cx: &mut AlgoCx<'_, '_>, name: &str, args: &[Value]) -> Result<Rows, QueryError> {
    let g = cx.g;
    let all = super::RelSpec {
        name: "*".into(),
        ty: "*".into(),
        orientation: super::Orientation::Natural,
        properties: Vec::new(),
    };
    let (bits, count) = members(g, &None)?;
    let view = View::new(g, &[all], false, Arc::new(bits), count, None)?;
    let n = view.node_bound() as u64;
    let m = view.relationship_count();
    let run = Run {
        threads: rayon::current_num_threads(),
        stop: cx.cancel,
        deadline: cx.deadline,
    };
    let num = |i: usize, d: f64| match args.get(i) {
        Some(Value::Int(x)) => *x as f64,
        Some(Value::Float(x)) => *x,
        _ => d,
    };
    let mut grant = cx.budget.empty_grant("graph algorithm");
    let values = match name {
        "pagerank.get" => {
            let pr = centrality::PageRank {
                max_iterations: num(0, 100.0) as u32,
                damping: num(1, 0.85),
                tolerance: num(2, 1e-5),
                ..Default::default()
            };
            crate::memory::account(&mut grant, pr.estimate(n) + n * 8, "pagerank.get")?;
            let mut r = pr.run(&view, &run).map_err(err)?;
            // MAGE's ranks sum to 1.
            let sum: f64 = r.scores.iter().sum();
            if sum > 0.0 {
                r.scores.iter_mut().for_each(|s| *s /= sum);
            }
            Values::Float(r.scores)
        }
        "weakly_connected_components.get" => {
            crate::memory::account(
                &mut grant,
                components::wcc_estimate(n) + n * 8,
                "weakly_connected_components.get",
            )?;
            let mut c = components::wcc(&view, &run).map_err(err)?;
            let sizes = components::sizes(&c);
            renumber(&mut c, &sizes);
            Values::Id(c)
        }
        "community_detection.get" => {
            crate::memory::account(
                &mut grant,
                community::louvain_estimate(n, m) + n * 8,
                "community_detection.get",
            )?;
            let r = community::Louvain::default()
                .run(&view, &run)
                .map_err(err)?;
            Values::Id(r.community)
        }
        _ => {
            let side = match args.first() {
                Some(Value::Str(s)) if s.eq_ignore_ascii_case("in") => Side::In,
                Some(Value::Str(s)) if s.eq_ignore_ascii_case("out") => Side::Out,
                _ => Side::Both,
            };
            crate::memory::account(&mut grant, n * 16, "degree_centrality.get")?;
            let mut d = centrality::degree(&view, &run, side, false).map_err(err)?;
            // MAGE's degree centrality is normalized by the other nodes.
            let others = (count.max(2) - 1) as f64;
            d.iter_mut().for_each(|x| *x /= others);
            Values::Float(d)
        }
    };
    let list = quiver_algo::members(&view);
    Ok(Box::new(
        list.into_iter()
            .map(move |v| vec![Value::Node(v as u64), values.at(v)]),
    ))
}
