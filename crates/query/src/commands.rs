//! The statements that are not queries, as a `Session` runs them: transaction control
//! (BEGIN, COMMIT, ROLLBACK), CHECKPOINT, storage modes, FREE MEMORY and the SHOW
//! commands (storage info, databases, indexes, constraints, transactions, functions,
//! procedures), each answering as Neo4j's columns do.

use crate::batch::Batch;
use crate::cache::Prepared;
use crate::error::QueryError;
use crate::graph::Graph;
use crate::index;
use crate::options::*;
use crate::plan::Params;
use crate::procs;
use crate::render;
use crate::session::Session;
use crate::value::Value;
use quiver_common::size::human_bytes;
use quiver_cypher::ast::{Command, Parsed};
use quiver_engine::StorageMode;
use quiver_storage::Database;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A row of SHOW INDEXES: Neo4j 5's columns (`(type, indexProvider)`, the label and
/// property, the owning constraint, the index config), then Quiver's kind and entries.
fn index_row(
    id: usize,
    name: &str,
    (ty, provider): (&str, &str),
    (label, prop): (&str, &str),
    owner: Value,
    config: Vec<(&str, Value)>,
    (kind, entries): (&str, Value),
) -> Vec<Value> {
    vec![
        Value::Int(id as i64),
        Value::str(name),
        Value::str("ONLINE"),
        Value::Float(100.0),
        Value::str(ty),
        Value::str("NODE"),
        Value::list(vec![Value::str(label)]),
        Value::list(vec![Value::str(prop)]),
        Value::str(provider),
        owner,
        Value::Null,
        Value::Null,
        index::options_map(provider, config),
        Value::str(kind),
        entries,
    ]
}

/// A command's result rows (plain values) as one batch to `sink`.
fn table(
    db: &Database,
    columns: &[&str],
    rows: Vec<Vec<Value>>,
    t0: Instant,
    sink: &mut Sink,
) -> Result<Summary, QueryError> {
    let n = rows.len() as u64;
    if n > 0 {
        let mut b = Batch::empty(columns.len());
        for r in rows {
            b.push_row(r);
        }
        sink(&Graph::new(db), &b)?;
    }
    Ok(Summary {
        columns: columns.iter().map(|c| c.to_string()).collect(),
        rows: n,
        elapsed: t0.elapsed(),
        ..Summary::default()
    })
}

/// The parameter that carries a SHOW command's rows into its YIELD / WHERE query.
const SHOWN_ROWS: &str = "__shown_rows";

/// The query that a SHOW command's `YIELD ...` or `WHERE ...` (`text`) reads as over
/// its rows (maps of `cols`): each column bound by name, then `text` as a `WITH` (after
/// YIELD) or its `WHERE`, and a `RETURN` of what was yielded when `text` has none.
fn shown_query(
    cols: &[String],
    text: &str,
    yields: bool,
    yielded: Option<&[String]>,
    returns: bool,
) -> String {
    let q = |c: &str| {
        let plain = c.chars().next().is_some_and(|f| f.is_ascii_alphabetic())
            && c.chars().all(|x| x.is_ascii_alphanumeric() || x == '_');
        if plain {
            c.to_string()
        } else {
            format!("`{}`", c.replace('`', "``"))
        }
    };
    let bind: Vec<String> = cols
        .iter()
        .map(|c| format!("__r.{} AS {}", q(c), q(c)))
        .collect();
    let mut out = format!("UNWIND ${SHOWN_ROWS} AS __r WITH {}", bind.join(", "));
    if yields {
        out += " WITH ";
    } else {
        out += " ";
    }
    out += text;
    if !returns {
        let shown = yielded.map_or_else(|| cols.to_vec(), <[String]>::to_vec);
        out += " RETURN ";
        out += &shown.iter().map(|c| q(c)).collect::<Vec<_>>().join(", ");
    }
    out
}

impl Session {
    pub(crate) fn command(
        &mut self,
        c: Command,
        t0: Instant,
        params: &Params,
        sink: &mut Sink,
    ) -> Result<Summary, QueryError> {
        let schema = matches!(
            c,
            Command::CreateIndex { .. }
                | Command::DropIndex { .. }
                | Command::CreateVectorIndex { .. }
                | Command::CreateFulltextIndex { .. }
                | Command::DropIndexNamed { .. }
                | Command::CreateConstraint { .. }
                | Command::DropConstraint { .. }
        );
        let reopen = schema && self.suspend_for_schema()?;
        let r = self.command_inner(c, t0, params, sink);
        if reopen {
            self.tx = Some(self.store.begin());
        }
        r
    }

    fn command_inner(
        &mut self,
        c: Command,
        t0: Instant,
        params: &Params,
        sink: &mut Sink,
    ) -> Result<Summary, QueryError> {
        match c {
            Command::Begin => {
                if self.tx.is_some() {
                    return Err(QueryError::Argument(
                        "a transaction is already open; COMMIT or ROLLBACK it first".into(),
                    ));
                }
                self.tx = Some(self.store.begin());
                Ok(summary_msg(t0, "transaction started".into()))
            }
            Command::Commit => {
                let tx = self.tx.take().ok_or_else(|| {
                    QueryError::Argument("no transaction is open (BEGIN starts one)".into())
                })?;
                let counters = tx.counters;
                tx.commit()?;
                self.maybe_checkpoint();
                let mut s = summary_msg(t0, "committed".into());
                s.counters = counters;
                Ok(s)
            }
            Command::Rollback => {
                let tx = self.tx.take().ok_or_else(|| {
                    QueryError::Argument("no transaction is open (BEGIN starts one)".into())
                })?;
                tx.rollback();
                Ok(summary_msg(t0, "rolled back".into()))
            }
            Command::Checkpoint | Command::CheckpointCompact => {
                let compact = matches!(c, Command::CheckpointCompact);
                self.no_tx(if compact {
                    "CHECKPOINT COMPACT"
                } else {
                    "CHECKPOINT"
                })?;
                let r = if compact {
                    self.store.checkpoint_compacting()?
                } else {
                    self.store.checkpoint()?
                };
                Ok(summary_msg(
                    t0,
                    format!(
                        "checkpoint: generation {}, {} nodes and {} relationships written to segments, {} property values folded into columns, {} deletions marked, {} tables compacted, {} ids indexed, {} relationship segments merged, {} changes carried as ops, {} of log freed, {:.1} ms",
                        r.generation,
                        r.nodes_written,
                        r.relationships_written,
                        r.values_folded,
                        r.entities_deleted,
                        r.tables_compacted,
                        r.ids_indexed,
                        r.rel_segments_merged,
                        r.carried_ops,
                        human_bytes(r.log_bytes_freed),
                        r.elapsed.as_secs_f64() * 1e3
                    ),
                ))
            }
            Command::StorageMode(name) => {
                let mode = match name.to_ascii_uppercase().as_str() {
                    "IN_MEMORY_TRANSACTIONAL" => StorageMode::InMemoryTransactional,
                    "IN_MEMORY_ANALYTICAL" => StorageMode::InMemoryAnalytical,
                    _ => {
                        return Err(QueryError::Argument(format!(
                            "unknown storage mode {name}: IN_MEMORY_TRANSACTIONAL or IN_MEMORY_ANALYTICAL"
                        )))
                    }
                };
                self.store.set_mode(mode, usize::from(self.tx.is_some()))?;
                Ok(summary_msg(t0, format!("storage mode: {}", mode.name())))
            }
            Command::FreeMemory => {
                // Old versions live in snapshots; they are freed when the last
                // transaction holding one ends. What remains is the live delta.
                let snap = self.store.snapshot();
                Ok(summary_msg(
                    t0,
                    format!(
                        "versions no open transaction can see are released as their snapshots close ({} open); the live delta holds {}",
                        self.store.active_transactions(),
                        human_bytes(snap.delta.bytes)
                    ),
                ))
            }
            Command::ShowStorageInfo => {
                let snap = self.store.snapshot();
                let d = &snap.delta;
                let live_nodes = snap.db.n_nodes()
                    - snap.db.n_deleted_nodes()
                    - d.nodes
                        .range(..d.base_nodes)
                        .filter(|(_, r)| r.deleted && !r.created)
                        .count() as u64
                    // (Created nodes below `base_nodes`: ids a checkpoint left as
                    // deleted rows for the transaction that then committed them.)
                    + d.nodes
                        .iter()
                        .filter(|(_, r)| r.created && !r.deleted)
                        .count() as u64;
                let seg_edges: u64 = (0..snap.db.rel_types().len())
                    .map(|t| snap.db.rel_types()[t].meta.n_edges - snap.db.n_deleted_edges(t))
                    .sum();
                let created_rels = d
                    .rels
                    .iter()
                    .filter(|(_, r)| r.created && !r.deleted)
                    .count() as u64;
                let deleted_seg_rels = d
                    .rels
                    .iter()
                    .filter(|(_, r)| !r.created && r.deleted)
                    .count() as u64
                    + quiver_engine::view::View::new(&snap.db, d).rels_deleted_with_ends()?;
                let mode = self.store.mode();
                let rows: Vec<(&str, Value)> = vec![
                    ("storage_mode", Value::str(mode.name())),
                    (
                        "durability",
                        Value::str(match mode {
                            StorageMode::InMemoryTransactional => "every commit is in the write-ahead log (fsync)",
                            StorageMode::InMemoryAnalytical => "writes are durable after CHECKPOINT (no log, no rollback across statements, no isolation)",
                        }),
                    ),
                    ("nodes", Value::Int(live_nodes as i64)),
                    ("relationships", Value::Int((seg_edges + created_rels - deleted_seg_rels) as i64)),
                    ("generation", Value::Int(snap.db.manifest().generation as i64)),
                    ("segment_bytes", Value::Int(snap.db.disk_bytes() as i64)),
                    ("segment_resident_bytes", Value::Int(snap.db.resident_bytes() as i64)),
                    ("delta_bytes", Value::Int(d.bytes as i64)),
                    ("delta_changes", Value::Int(d.changes as i64)),
                    ("log_bytes", Value::Int(self.store.log_bytes() as i64)),
                    ("open_transactions", Value::Int(self.store.active_transactions() as i64)),
                    ("memory_limit", Value::Int(self.store.memory.limit_bytes() as i64)),
                    ("memory_in_use", Value::Int(self.store.memory.used_bytes() as i64)),
                    ("memory_delta_granted", Value::Int(self.store.delta_granted_bytes() as i64)),
                    ("query_memory_limit", Value::Int(self.opts.memory_limit as i64)),
                ];
                let rows = rows
                    .into_iter()
                    .map(|(k, v)| vec![Value::str(k), v])
                    .collect();
                table(&snap.db, &["key", "value"], rows, t0, sink)
            }
            Command::ShowDatabases => {
                let db = self.db();
                let row = vec![
                    Value::str("neo4j"),
                    Value::str("standard"),
                    Value::list(Vec::new()),
                    Value::str(if self.store.is_writable() {
                        "read-write"
                    } else {
                        "read-only"
                    }),
                    Value::str("primary"),
                    Value::Bool(true),
                    Value::str("online"),
                    Value::str("online"),
                    Value::str(""),
                    Value::Bool(true),
                    Value::Bool(true),
                    Value::list(Vec::new()),
                ];
                table(
                    &db,
                    &[
                        "name",
                        "type",
                        "aliases",
                        "access",
                        "role",
                        "writer",
                        "requestedStatus",
                        "currentStatus",
                        "statusMessage",
                        "default",
                        "home",
                        "constituents",
                    ],
                    vec![row],
                    t0,
                    sink,
                )
            }
            Command::CreateVectorIndex {
                name,
                if_not_exists,
                label,
                prop,
                options,
                relationship,
            } => self.create_vector_index(
                t0,
                params,
                &name,
                if_not_exists,
                (label, relationship),
                prop,
                options,
            ),
            Command::CreateFulltextIndex {
                name,
                if_not_exists,
                labels,
                props,
                options,
            } => {
                self.create_fulltext_index(t0, params, &name, if_not_exists, labels, props, options)
            }
            Command::DropIndexNamed { name, if_exists } => {
                self.drop_index_named(t0, &name, if_exists)
            }
            Command::ShowIndexes => {
                let db = self.db();
                // Neo4j 5's columns, then Quiver's own: what kind of index, how many
                // entries.
                let rows = index::show(&db)
                    .into_iter()
                    .enumerate()
                    .map(|(n, i)| {
                        let props = vec![i.property.clone()];
                        let key = index::constraint_name(&i.label, &props);
                        let (name, owner) = match i.kind {
                            "unique" => (key.clone(), Value::str(&key)),
                            "id (automatic)" => (key.replacen("constraint", "id", 1), Value::Null),
                            _ => (key.replacen("constraint", "index", 1), Value::Null),
                        };
                        index_row(
                            n + 1,
                            &name,
                            ("RANGE", "range-1.0"),
                            (&i.label, &i.property),
                            owner,
                            Vec::new(),
                            (i.kind, Value::Int(i.entries as i64)),
                        )
                    })
                    .collect();
                let mut rows: Vec<Vec<Value>> = rows;
                for v in &db.manifest().vector_indexes {
                    let kind = match (v.relationship, &v.file) {
                        (false, Some(_)) => ("vector (HNSW)", Value::Int(v.entries as i64)),
                        _ => ("vector (exact search)", Value::Null),
                    };
                    let mut row = index_row(
                        rows.len() + 1,
                        &v.name,
                        ("VECTOR", "vector-2.0"),
                        (&v.label, &v.property),
                        Value::Null,
                        vec![
                            (
                                "vector.dimensions",
                                match v.dimensions {
                                    0 => Value::Null,
                                    d => Value::Int(d as i64),
                                },
                            ),
                            ("vector.similarity_function", Value::str(&v.similarity)),
                        ],
                        kind,
                    );
                    if v.relationship {
                        row[5] = Value::str("RELATIONSHIP");
                    }
                    rows.push(row);
                }
                for f in &db.manifest().fulltext_indexes {
                    let mut row = index_row(
                        rows.len() + 1,
                        &f.name,
                        ("FULLTEXT", "fulltext-1.0"),
                        ("", ""),
                        Value::Null,
                        vec![
                            ("fulltext.analyzer", Value::str(&f.analyzer)),
                            ("fulltext.eventually_consistent", Value::Bool(false)),
                        ],
                        ("fulltext (scan)", Value::Null),
                    );
                    row[6] = Value::list(f.labels.iter().map(|l| Value::str(l)).collect());
                    row[7] = Value::list(f.properties.iter().map(|p| Value::str(p)).collect());
                    rows.push(row);
                }
                table(
                    &db,
                    &[
                        "id",
                        "name",
                        "state",
                        "populationPercent",
                        "type",
                        "entityType",
                        "labelsOrTypes",
                        "properties",
                        "indexProvider",
                        "owningConstraint",
                        "lastRead",
                        "readCount",
                        "options",
                        "kind",
                        "entries",
                    ],
                    rows,
                    t0,
                    sink,
                )
            }
            Command::CreateIndex {
                label,
                prop,
                if_not_exists: true,
            } if self
                .db()
                .manifest()
                .indexes
                .iter()
                .any(|i| i.label == label && i.property == prop) =>
            {
                Ok(summary_msg(
                    t0,
                    format!("index on :{label}({prop}) exists already; nothing changed"),
                ))
            }
            Command::CreateIndex { label, prop, .. } => self.schema_ddl(t0, |dir, db, budget| {
                let n = index::create_in(dir, db, &label, &prop, true, budget)?;
                Ok(format!("index on :{label}({prop}) created, {n} entries"))
            }),
            Command::DropIndex { label, prop } => self.schema_ddl(t0, |dir, db, _| {
                index::drop_in(dir, db, &label, &prop, true)?;
                Ok(format!("index on :{label}({prop}) dropped"))
            }),
            Command::CreateConstraint {
                name,
                label,
                props,
                if_not_exists,
            } => {
                let shown = format!("(:{label} {{{}}})", props.join(", "));
                let existing = index::constraints(&self.db());
                let same = existing.iter().find(|c| c.1 == label && c.2 == props);
                let named = name
                    .as_ref()
                    .and_then(|n| existing.iter().find(|c| &c.0 == n));
                match (same.or(named), if_not_exists) {
                    (Some(c), true) => {
                        return Ok(summary_msg(
                            t0,
                            format!("constraint {} exists already; nothing changed", c.0),
                        ))
                    }
                    (Some(c), false) if same.is_some() => {
                        return Err(QueryError::Index(format!(
                            "a uniqueness constraint on {shown} exists already ({}); IF NOT EXISTS accepts that",
                            c.0
                        )))
                    }
                    (Some(c), false) => {
                        return Err(QueryError::Index(format!(
                            "a constraint named {} exists already (on :{}({})); choose another name",
                            c.0,
                            c.1,
                            c.2.join(", ")
                        )))
                    }
                    (None, _) => {}
                }
                if let [prop] = props.as_slice() {
                    return self.schema_ddl(t0, |dir, db, budget| {
                        index::constrain_in(
                            dir,
                            db,
                            name.as_deref(),
                            &label,
                            prop,
                            true,
                            true,
                            budget,
                        )
                    });
                }
                self.no_tx("index and constraint DDL")?;
                // Two nodes that already share every value refuse it, as Neo4j does.
                let q = |x: &str| format!("`{}`", x.replace('`', "``"));
                let vals: Vec<String> = props.iter().map(|p| format!("n.{}", q(p))).collect();
                let text = format!(
                    "MATCH (n:{}) WHERE {} WITH {}, collect(id(n)) AS ids WHERE size(ids) > 1 RETURN ids[0], ids[1], [{}] LIMIT 1",
                    q(&label),
                    vals.iter().map(|v| format!("{v} IS NOT NULL")).collect::<Vec<_>>().join(" AND "),
                    vals.iter().enumerate().map(|(i, v)| format!("{v} AS k{i}")).collect::<Vec<_>>().join(", "),
                    (0..vals.len()).map(|i| format!("k{i}")).collect::<Vec<_>>().join(", "),
                );
                let mut dup = None;
                self.run(&text, &Params::new(), &mut |g, b| {
                    if b.len > 0 {
                        dup = Some((
                            render::text(g, &b.cols[0][0])?,
                            render::text(g, &b.cols[1][0])?,
                            render::text(g, &b.cols[2][0])?,
                        ));
                    }
                    Ok(())
                })?;
                if let Some((a, b, v)) = dup {
                    return Err(QueryError::Index(format!(
                        "cannot add the constraint: nodes {a} and {b} with label :{label} both have ({}) = {v}",
                        props.join(", ")
                    )));
                }
                let name = name.unwrap_or_else(|| index::constraint_name(&label, &props));
                self.schema_ddl(t0, |dir, db, budget| {
                    index::constrain_composite_in(
                        dir,
                        db,
                        Some(&name),
                        &label,
                        &props,
                        true,
                        budget,
                    )
                })
            }
            Command::DropConstraint {
                name,
                mut label,
                mut props,
                if_exists,
            } => {
                if let Some(n) = &name {
                    if label.is_empty() {
                        match index::constraints(&self.db()).into_iter().find(|c| &c.0 == n) {
                            Some((_, l, p)) => (label, props) = (l, p),
                            None if if_exists => {
                                return Ok(summary_msg(
                                    t0,
                                    format!("there is no constraint named {n}; nothing changed"),
                                ))
                            }
                            None => {
                                return Err(QueryError::Index(format!(
                                    "there is no constraint named {n}; SHOW CONSTRAINTS lists them (DROP CONSTRAINT {n} IF EXISTS accepts that)"
                                )))
                            }
                        }
                    }
                }
                if let [prop] = props.as_slice() {
                    self.schema_ddl(t0, |dir, db, budget| {
                        index::constrain_in(dir, db, None, &label, prop, false, true, budget)
                    })
                } else {
                    self.schema_ddl(t0, |dir, db, budget| {
                        index::constrain_composite_in(dir, db, None, &label, &props, true, budget)
                    })
                }
            }
            Command::ShowTransactions => {
                let db = self.db();
                // The listing lists itself, as Neo4j's does.
                let _me = self.store.activity.start(
                    "SHOW TRANSACTIONS",
                    &self.opts.client,
                    &self.store.memory.child(self.opts.memory_limit),
                );
                let rows = self
                    .store
                    .activity
                    .list()
                    .into_iter()
                    .map(|q| {
                        let m = &q.memory;
                        let waiting = m.waiting_for_bytes();
                        let status = if waiting > 0 {
                            format!("Waiting for memory ({} more)", human_bytes(waiting))
                        } else {
                            "Running".to_string()
                        };
                        let us = q
                            .started
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_micros() as i64);
                        let mut start = String::new();
                        quiver_csv::value::format_datetime(us, &mut start);
                        let dur = |d: Duration| {
                            Value::Duration(Arc::new(quiver_engine::value::Dur {
                                months: 0,
                                days: 0,
                                secs: d.as_secs() as i64,
                                nanos: d.subsec_nanos() as i32,
                            }))
                        };
                        vec![
                            Value::str("neo4j"),
                            Value::str(&format!("neo4j-transaction-{}", q.id)),
                            Value::str(&format!("query-{}", q.id)),
                            Value::str(&q.client.connection),
                            Value::str(&q.client.address),
                            Value::str(&q.client.user),
                            Value::str(&q.text),
                            Value::str(&start),
                            Value::str(&status),
                            dur(q.since.elapsed()),
                            Value::Int(m.used_bytes() as i64),
                            Value::Int((m.used_bytes() + waiting) as i64),
                            Value::Int(m.peak_bytes() as i64),
                            Value::Int(waiting as i64),
                            dur(m.waited()),
                            Value::Int(m.limit_bytes() as i64),
                            Value::Map(Arc::new(Vec::new())),
                            Value::Map(Arc::new(Vec::new())),
                        ]
                    })
                    .collect();
                table(
                    &db,
                    &[
                        "database",
                        "transactionId",
                        "currentQueryId",
                        "connectionId",
                        "clientAddress",
                        "username",
                        "currentQuery",
                        "startTime",
                        "status",
                        "elapsedTime",
                        "estimatedUsedHeapMemory",
                        "memoryAskedBytes",
                        "memoryPeakBytes",
                        "memoryWaitingForBytes",
                        "memoryWaited",
                        "memoryLimitBytes",
                        "metaData",
                        "parameters",
                    ],
                    rows,
                    t0,
                    sink,
                )
            }
            Command::Shown {
                inner,
                text,
                yields,
                columns,
                returns,
            } => {
                // The command's rows, then the YIELD / WHERE / RETURN as a query over them.
                let mut rows: Vec<Vec<Value>> = Vec::new();
                let cols = self
                    .command(*inner, t0, &Params::new(), &mut |_, b| {
                        for r in 0..b.len {
                            rows.push(b.row(r));
                        }
                        Ok(())
                    })?
                    .columns;
                let q = shown_query(&cols, &text, yields, columns.as_deref(), returns);
                let maps = rows
                    .into_iter()
                    .map(|r| {
                        let m: Vec<(Arc<str>, Value)> =
                            cols.iter().map(|c| Arc::from(c.as_str())).zip(r).collect();
                        Value::Map(Arc::new(m))
                    })
                    .collect();
                // The user's parameters (`WHERE name = $index_name`) and the rows.
                let mut params = params.clone();
                params.insert(SHOWN_ROWS.into(), Value::list(maps));
                let stmt = match quiver_cypher::parse(&q)? {
                    Parsed::Query(s) => Prepared::new(s),
                    Parsed::Command(_) => {
                        return Err(QueryError::Argument(format!("not a query: {q}")))
                    }
                };
                self.query(&q, &stmt, &params, sink)
            }
            Command::ShowFunctions => {
                let db = self.db();
                let mut names = crate::expr::Func::names();
                names.sort_unstable_by_key(|n| n.to_lowercase());
                let rows = names
                    .into_iter()
                    .map(|n| {
                        vec![
                            Value::str(&n),
                            Value::str(""),
                            Value::str(""),
                            Value::str(&format!("{n}(..)")),
                            Value::Bool(true),
                            Value::Bool(false),
                        ]
                    })
                    .collect();
                table(
                    &db,
                    &[
                        "name",
                        "category",
                        "description",
                        "signature",
                        "isBuiltIn",
                        "aggregating",
                    ],
                    rows,
                    t0,
                    sink,
                )
            }
            Command::ShowProcedures => {
                let db = self.db();
                let mut procs: Vec<Arc<procs::Procedure>> = procs::builtins().to_vec();
                procs.extend(crate::gds::algos::all().into_iter().map(Arc::new));
                procs.extend(self.opts.procedures.registered.iter().cloned());
                procs.sort_by(|a, b| a.name.cmp(&b.name));
                procs.dedup_by(|a, b| a.name == b.name);
                let rows = procs
                    .iter()
                    .map(|p| {
                        vec![
                            Value::str(&p.name),
                            Value::str(""),
                            // (A graph algorithm's write mode sets properties.)
                            Value::str(
                                if p.name.starts_with("gds.") && p.name.ends_with(".write") {
                                    "WRITE"
                                } else {
                                    "READ"
                                },
                            ),
                            Value::Bool(false),
                            Value::str(&p.signature()),
                        ]
                    })
                    .collect();
                table(
                    &db,
                    &["name", "description", "mode", "worksOnSystem", "signature"],
                    rows,
                    t0,
                    sink,
                )
            }
            Command::ShowConstraints => {
                // Neo4j 5's columns; the index that keeps a constraint shares its name.
                let db = self.db();
                let rows = index::constraints(&db)
                    .into_iter()
                    .enumerate()
                    .map(|(i, (name, label, props))| {
                        vec![
                            Value::Int(i as i64 + 1),
                            Value::str(&name),
                            Value::str("UNIQUENESS"),
                            Value::str("NODE"),
                            Value::List(vec![Value::str(&label)].into()),
                            Value::List(
                                props
                                    .iter()
                                    .map(|p| Value::str(p))
                                    .collect::<Vec<_>>()
                                    .into(),
                            ),
                            Value::str(&name),
                            Value::Null,
                        ]
                    })
                    .collect();
                table(
                    &db,
                    &[
                        "id",
                        "name",
                        "type",
                        "entityType",
                        "labelsOrTypes",
                        "properties",
                        "ownedIndex",
                        "propertyType",
                    ],
                    rows,
                    t0,
                    sink,
                )
            }
        }
    }

    pub(crate) fn no_tx(&self, what: &str) -> Result<(), QueryError> {
        match self.tx {
            Some(_) => Err(QueryError::Argument(format!(
                "{what} cannot run inside a transaction; COMMIT or ROLLBACK first"
            ))),
            None => Ok(()),
        }
    }
}
