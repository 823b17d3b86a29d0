//! Schema commands as a `Session` runs them: CREATE and DROP of indexes (range, vector,
//! full-text) and constraints, each building or removing its files and publishing a new
//! generation under the store's publisher lock, with the session's open transaction
//! suspended around it.

use crate::error::QueryError;
use crate::fulltext;
use crate::index;
use crate::options::*;
use crate::plan::Params;
use crate::session::Session;
use crate::value::Value;
use quiver_common::memory::MemoryBudget;
use quiver_storage::Database;
use std::path::Path;
use std::time::Instant;

impl Session {
    /// The value of an expression of constants and parameters (a DDL command's name or
    /// options), through `RETURN expr`.
    fn eval_const(
        &mut self,
        e: &quiver_cypher::ast::Expr,
        params: &Params,
    ) -> Result<Value, QueryError> {
        let text = format!("RETURN {} AS v", quiver_cypher::print::expr(e));
        let mut v = Value::Null;
        self.run(&text, params, &mut |_, b| {
            if b.len > 0 {
                v = b.cols[0][0].clone();
            }
            Ok(())
        })?;
        Ok(v)
    }

    /// `CREATE VECTOR INDEX`: its name and options evaluated, checked, and recorded in
    /// a new generation's manifest (searches read the vectors where they are stored).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create_vector_index(
        &mut self,
        t0: Instant,
        params: &Params,
        name: &quiver_cypher::ast::Expr,
        if_not_exists: bool,
        (label, relationship): (String, bool),
        prop: String,
        options: Option<quiver_cypher::ast::Expr>,
    ) -> Result<Summary, QueryError> {
        let (name, options) =
            self.index_name_options(name, options.as_ref(), params, "a vector index's")?;
        let (dimensions, similarity) = index::vector_options(&options)?;
        let meta = quiver_storage::manifest::VectorIndexMeta {
            name,
            label,
            property: prop,
            dimensions,
            similarity,
            file: None,
            covers_nodes: 0,
            entries: 0,
            relationship,
        };
        let db = self.db();
        if let Some(v) = db.manifest().vector_indexes.iter().find(|v| {
            v.name == meta.name
                || (v.label == meta.label
                    && v.property == meta.property
                    && v.relationship == meta.relationship)
        }) {
            if if_not_exists {
                return Ok(summary_msg(
                    t0,
                    format!("vector index {} exists already; nothing changed", v.name),
                ));
            }
            return Err(QueryError::Index(format!(
                "a vector index {} on :{}({}) exists already; IF NOT EXISTS accepts that",
                v.name, v.label, v.property
            )));
        }
        let on = if meta.relationship {
            format!("()-[:{}]-() ({})", meta.label, meta.property)
        } else {
            format!(":{}({})", meta.label, meta.property)
        };
        let dims = match meta.dimensions {
            0 => "the vectors' own dimensions".to_string(),
            d => format!("{d} dimensions"),
        };
        let shown = format!(
            "vector index {} on {on} created: {dims}, {}",
            meta.name, meta.similarity
        );
        self.schema_ddl(t0, move |dir, db, budget| {
            index::vector_create_in(dir, db, meta, true, budget)?;
            Ok(shown)
        })
    }

    /// An index DDL's name (a string, perhaps a parameter) and options (`Null` when
    /// none), evaluated; `kind` names the index in the error.
    fn index_name_options(
        &mut self,
        name: &quiver_cypher::ast::Expr,
        options: Option<&quiver_cypher::ast::Expr>,
        params: &Params,
        kind: &str,
    ) -> Result<(String, Value), QueryError> {
        let name = match self.eval_const(name, params)? {
            Value::Str(s) if !s.is_empty() => s.to_string(),
            v => {
                return Err(QueryError::Index(format!(
                    "{kind} name must be a string, got {}",
                    v.type_name()
                )))
            }
        };
        let options = match options {
            Some(e) => self.eval_const(e, params)?,
            None => Value::Null,
        };
        Ok((name, options))
    }

    /// `CREATE FULLTEXT INDEX`: recorded in a new generation (searches scan, so nothing
    /// is built).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create_fulltext_index(
        &mut self,
        t0: Instant,
        params: &Params,
        name: &quiver_cypher::ast::Expr,
        if_not_exists: bool,
        labels: Vec<String>,
        properties: Vec<String>,
        options: Option<quiver_cypher::ast::Expr>,
    ) -> Result<Summary, QueryError> {
        let (name, options) =
            self.index_name_options(name, options.as_ref(), params, "a full-text index's")?;
        let analyzer = fulltext::options(&options)?;
        let db = self.db();
        let m = db.manifest();
        if m.fulltext_indexes.iter().any(|f| f.name == name)
            || m.vector_indexes.iter().any(|v| v.name == name)
        {
            if if_not_exists {
                return Ok(summary_msg(
                    t0,
                    format!("an index named {name} exists already; nothing changed"),
                ));
            }
            return Err(QueryError::Index(format!(
                "an index named {name} exists already; IF NOT EXISTS accepts that"
            )));
        }
        let meta = quiver_storage::manifest::FulltextIndexMeta {
            name,
            labels,
            properties,
            analyzer,
        };
        let shown = format!(
            "full-text index {} on :{}({}) created",
            meta.name,
            meta.labels.join("|"),
            meta.properties.join(", ")
        );
        self.schema_ddl(t0, move |dir, db, _| {
            index::fulltext_create_in(dir, db, meta, true)?;
            Ok(shown)
        })
    }

    /// `DROP INDEX name [IF EXISTS]`: a vector index by its name, or a range index by
    /// the name SHOW INDEXES gives it.
    pub(crate) fn drop_index_named(
        &mut self,
        t0: Instant,
        name: &str,
        if_exists: bool,
    ) -> Result<Summary, QueryError> {
        let db = self.db();
        if db
            .manifest()
            .fulltext_indexes
            .iter()
            .any(|v| v.name == name)
        {
            let owned = name.to_string();
            return self.schema_ddl(t0, move |dir, db, _| {
                index::fulltext_drop_in(dir, db, &owned, true)?;
                Ok(format!("full-text index {owned} dropped"))
            });
        }
        if db.manifest().vector_indexes.iter().any(|v| v.name == name) {
            let owned = name.to_string();
            return self.schema_ddl(t0, move |dir, db, _| {
                index::vector_drop_in(dir, db, &owned, true)?;
                Ok(format!("vector index {owned} dropped"))
            });
        }
        let range = index::show(&db).into_iter().find(|i| {
            i.kind == "property"
                && index::constraint_name(&i.label, std::slice::from_ref(&i.property)).replacen(
                    "constraint",
                    "index",
                    1,
                ) == name
        });
        if let Some(i) = range {
            let (label, prop) = (i.label.clone(), i.property.clone());
            return self.schema_ddl(t0, move |dir, db, _| {
                index::drop_in(dir, db, &label, &prop, true)?;
                Ok(format!("index on :{label}({prop}) dropped"))
            });
        }
        if if_exists {
            return Ok(summary_msg(
                t0,
                format!("there is no index named {name}; nothing changed"),
            ));
        }
        Err(QueryError::Index(format!(
            "there is no index named {name}; SHOW INDEXES lists them (DROP INDEX {name} IF EXISTS accepts that)"
        )))
    }

    /// Index and constraint DDL inside an explicit transaction, as the drivers' managed
    /// transactions send it (LangChain's `CREATE CONSTRAINT IF NOT EXISTS`): a
    /// transaction that has not written lets its snapshot go, the DDL runs on its own
    /// (folding the delta and publishing a generation), and the transaction goes on
    /// with a fresh snapshot (`true`). After writes it is refused, as Neo4j refuses a
    /// schema change after a write in one transaction.
    pub(crate) fn suspend_for_schema(&mut self) -> Result<bool, QueryError> {
        match self.tx.take() {
            None => Ok(false),
            Some(tx) if tx.has_written() => {
                self.tx = Some(tx);
                Err(QueryError::Argument(
                    "a schema change (index or constraint) cannot follow writes in the same transaction; commit the writes first (Neo4j refuses this too)".into(),
                ))
            }
            Some(tx) => {
                tx.rollback();
                Ok(true)
            }
        }
    }

    /// CREATE INDEX (`create`) or DROP INDEX: a new generation over the segments.
    /// Index and constraint DDL: the delta is folded into segments first (an index is
    /// built over segments), `f` publishes a new generation, and the store reopens on it.
    pub(crate) fn schema_ddl(
        &mut self,
        t0: Instant,
        f: impl FnOnce(&Path, &Database, &MemoryBudget) -> Result<String, QueryError>,
    ) -> Result<Summary, QueryError> {
        self.no_tx("index and constraint DDL")?;
        if !self.store.snapshot().delta.is_empty() {
            self.store.checkpoint()?;
        }
        // No checkpoint publishes between this generation and the reload.
        let publishing = self.store.publishing();
        let db = self.db();
        let msg = f(self.store.dir(), &db, &self.store.memory)?;
        self.store.reload()?;
        drop(publishing);
        let mut s = summary_msg(t0, msg);
        s.changed = true;
        Ok(s)
    }
}
