//! Clauses: a statement and its parts (MATCH, OPTIONAL MATCH, WITH, RETURN, UNWIND,
//! CREATE, MERGE, SET, REMOVE, DELETE, CALL, LOAD CSV, FOREACH, UNION), projections
//! and their ORDER BY / SKIP / LIMIT tail.

use super::*;

impl<'t> Parser<'t> {
    pub(super) fn statement(&mut self) -> R<Statement> {
        let explain = if self.eat_kw("EXPLAIN") {
            Some(Explain::Explain)
        } else if self.eat_kw("PROFILE") {
            Some(Explain::Profile)
        } else {
            None
        };
        // Memgraph's `USING PARALLEL EXECUTION` hint: Quiver decides for itself.
        if self.is_kw("USING") && self.is_kw_at(1, "PARALLEL") && self.is_kw_at(2, "EXECUTION") {
            self.eat_kw("USING");
            self.eat_kw("PARALLEL");
            self.eat_kw("EXECUTION");
        }
        let mut parts = vec![self.single_query()?];
        let mut union_all = Vec::new();
        while self.is_kw("UNION") {
            let at = self.pos;
            self.bump();
            let all = self.eat_kw("ALL");
            if union_all.first().is_some_and(|&a| a != all) {
                self.pos = at;
                return self.err_detail(
                    Detail::InvalidClauseComposition,
                    "the same UNION throughout: a query cannot mix UNION and UNION ALL (one keeps duplicates, the other does not)",
                );
            }
            union_all.push(all);
            parts.push(self.single_query()?);
        }
        self.eat_p(";");
        if !matches!(self.peek(), Tok::Eof) {
            return self.err(
                "a clause (MATCH, WITH, RETURN, UNWIND, CREATE, MERGE, SET, DELETE, UNION) or the end of the query",
            );
        }
        Ok(Statement {
            explain,
            query: Query { parts, union_all },
        })
    }

    pub(super) fn clauses(&mut self) -> R<Vec<Clause>> {
        let mut clauses = Vec::new();
        loop {
            // Neo4j's label syntax rule holds clause by clause (a MATCH with its WHERE;
            // a subquery's clauses on their own).
            let outer = (
                self.colon_at.take(),
                self.symbol_at.take(),
                self.is_at.take(),
            );
            let more = self
                .clause(&mut clauses)
                .and_then(|more| self.label_syntax().map(|_| more));
            (self.colon_at, self.symbol_at, self.is_at) = outer;
            if !more? {
                break;
            }
        }
        Ok(clauses)
    }

    /// One clause onto `clauses`; `false` when there is none or it ends the query.
    pub(super) fn clause(&mut self, clauses: &mut Vec<Clause>) -> R<bool> {
        if self.is_kw("MATCH") || (self.is_kw("OPTIONAL") && self.is_kw_at(1, "MATCH")) {
            let optional = self.eat_kw("OPTIONAL");
            self.expect_kw("MATCH")?;
            let mut patterns = vec![self.pattern()?];
            while self.eat_p(",") {
                patterns.push(self.pattern()?);
            }
            let where_ = if self.eat_kw("WHERE") {
                Some(self.expr()?)
            } else {
                None
            };
            clauses.push(Clause::Match {
                optional,
                patterns,
                where_,
            });
        } else if self.eat_kw("UNWIND") {
            let expr = self.expr()?;
            self.expect_kw("AS")?;
            let var = self.name("a variable name")?;
            clauses.push(Clause::Unwind { expr, var });
        } else if self.eat_kw("WITH") {
            let mut p = self.projection()?;
            if self.eat_kw("WHERE") {
                p.where_ = Some(self.expr()?);
            }
            clauses.push(Clause::With(p));
        } else if self.eat_kw("RETURN") {
            clauses.push(Clause::Return(self.projection()?));
            return Ok(false);
        } else if self.eat_kw("CREATE") {
            let mut patterns = vec![self.pattern()?];
            while self.eat_p(",") {
                patterns.push(self.pattern()?);
            }
            clauses.push(Clause::Create(patterns));
        } else if self.eat_kw("MERGE") {
            let pattern = self.pattern()?;
            let (mut on_create, mut on_match) = (Vec::new(), Vec::new());
            while self.is_kw("ON") {
                self.bump();
                let create = if self.eat_kw("CREATE") {
                    true
                } else if self.eat_kw("MATCH") {
                    false
                } else {
                    return self.err("CREATE or MATCH after ON");
                };
                self.expect_kw("SET")?;
                let items = self.set_items()?;
                if create {
                    on_create.extend(items);
                } else {
                    on_match.extend(items);
                }
            }
            clauses.push(Clause::Merge {
                pattern,
                on_create,
                on_match,
            });
        } else if self.eat_kw("SET") {
            clauses.push(Clause::Set(self.set_items()?));
        } else if self.eat_kw("REMOVE") {
            let mut items = Vec::new();
            loop {
                if let Some((var, labels, exprs)) = self.labels_item()? {
                    if !labels.is_empty() {
                        items.push(RemoveItem::Labels {
                            var: var.clone(),
                            labels,
                        });
                    }
                    if !exprs.is_empty() {
                        items.push(RemoveItem::LabelExprs { var, exprs });
                    }
                } else {
                    let (target, key) = self.prop_target()?;
                    items.push(RemoveItem::Prop { target, key });
                }
                if !self.eat_p(",") {
                    break;
                }
            }
            clauses.push(Clause::Remove(items));
        } else if self.is_kw("DELETE") || (self.is_kw("DETACH") && self.is_kw_at(1, "DELETE")) {
            let detach = self.eat_kw("DETACH");
            self.expect_kw("DELETE")?;
            let mut exprs = vec![self.expr()?];
            while self.eat_p(",") {
                exprs.push(self.expr()?);
            }
            clauses.push(Clause::Delete { detach, exprs });
        } else if self.is_kw("LOAD") && self.is_kw_at(1, "CSV") {
            clauses.push(Clause::LoadCsv(self.load_csv()?));
        } else if (self.is_kw("CALL")
            && matches!(self.peek_at(1), Tok::Punct("{") | Tok::Punct("(")))
            || (self.is_kw("OPTIONAL")
                && self.is_kw_at(1, "CALL")
                && matches!(self.peek_at(2), Tok::Punct("{") | Tok::Punct("(")))
        {
            let optional = self.eat_kw("OPTIONAL");
            self.bump();
            // Neo4j 5's scope clause: `CALL (a, b) { ... }` imports a and b (read as
            // a leading `WITH a, b`); `CALL () { ... }` and `CALL (*) { ... }` add no
            // leading WITH.
            let mut imports = Vec::new();
            let mut sees_all = false;
            if self.eat_p("(") {
                if self.eat_p("*") {
                    sees_all = true;
                } else {
                    while !self.is_p(")") {
                        let at = self.toks[self.pos].offset;
                        imports.push((self.name("a variable to import")?, at));
                        if !self.eat_p(",") {
                            break;
                        }
                    }
                }
                self.expect_p(")")?;
            }
            self.expect_p("{")?;
            let mut body = self.single_query_inner()?;
            // `UNION [ALL]` between parts of the body, each importing as the first.
            let mut unions = Vec::new();
            while self.eat_kw("UNION") {
                let all = self.eat_kw("ALL");
                unions.push((all, self.single_query_inner()?));
            }
            if unions.iter().any(|(a, _)| *a) && unions.iter().any(|(a, _)| !*a) {
                return self.err("UNION or UNION ALL throughout a CALL { } body, not both");
            }
            if !imports.is_empty() {
                let texts = imports.iter().map(|(n, _)| n.clone()).collect();
                let lead = Clause::With(Projection {
                    distinct: false,
                    star: false,
                    items: imports
                        .into_iter()
                        .map(|(n, at)| (Expr::Var(n, at), None))
                        .collect(),
                    order: Vec::new(),
                    skip: None,
                    limit: None,
                    where_: None,
                    texts,
                });
                for part in std::iter::once(&mut body).chain(unions.iter_mut().map(|(_, p)| p)) {
                    part.clauses.insert(0, lead.clone());
                }
            }
            self.expect_p("}")?;
            let mut rows = None;
            let mut on_error = OnError::Fail;
            if self.eat_kw("IN") {
                if !unions.is_empty() {
                    return self.err("CALL { } IN TRANSACTIONS with UNION in its body is not supported; run the parts as batches of their own");
                }
                if optional {
                    return self.err("OPTIONAL CALL { } without IN TRANSACTIONS (a batched body has no rows to make optional)");
                }
                self.expect_kw("TRANSACTIONS")?;
                if self.eat_kw("OF") {
                    rows = Some(self.expr()?);
                    if !self.eat_kw("ROWS") {
                        self.expect_kw("ROW")?;
                    }
                }
                if self.eat_kw("ON") {
                    self.expect_kw("ERROR")?;
                    on_error = if self.eat_kw("CONTINUE") {
                        OnError::Continue
                    } else if self.eat_kw("BREAK") {
                        OnError::Break
                    } else {
                        self.expect_kw("FAIL")?;
                        OnError::Fail
                    };
                }
            } else {
                clauses.push(Clause::CallSubquery {
                    body: Box::new(body),
                    optional,
                    sees_all,
                    unions,
                });
                return Ok(true);
            }
            clauses.push(Clause::CallInTx {
                body: Box::new(body),
                rows,
                on_error,
                sees_all,
            });
        } else if self.eat_kw("CALL") {
            let pc = self.proc_call()?;
            // The APOC procedures client libraries write with, read as Cypher.
            match super::apoc::rewrite(&pc) {
                Some(Ok(cs)) => clauses.extend(cs),
                Some(Err(msg)) => return Err(error_at(self.text, pc.at, msg)),
                None => clauses.push(Clause::CallProc(pc)),
            }
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    pub(super) fn single_query(&mut self) -> R<SingleQuery> {
        let q = self.single_query_inner()?;
        if q.clauses.is_empty() {
            return self
                .err("MATCH, OPTIONAL MATCH, UNWIND, WITH, RETURN, CREATE, MERGE or LOAD CSV");
        }
        let last = q.clauses.last();
        let ends_ok = matches!(
            last,
            Some(
                Clause::Return(_)
                    | Clause::Create(_)
                    | Clause::Merge { .. }
                    | Clause::Set(_)
                    | Clause::Remove(_)
                    | Clause::Delete { .. }
                    | Clause::CallInTx { .. }
                    | Clause::CallProc(_)
            )
        ) || matches!(last, Some(Clause::CallSubquery { body, .. })
            if !matches!(body.clauses.last(), Some(Clause::Return(_))));
        if !ends_ok && !self.is_kw("UNION") {
            return self.err("RETURN or an updating clause (a query ends with RETURN, CREATE, MERGE, SET, REMOVE or DELETE) or another clause");
        }
        Ok(q)
    }

    pub(super) fn single_query_inner(&mut self) -> R<SingleQuery> {
        let clauses = self.clauses()?;
        Ok(SingleQuery { clauses })
    }

    /// `x.key` (or `(expr).key`) as the target of SET / REMOVE.
    pub(super) fn prop_target(&mut self) -> R<(Expr, String)> {
        let at = self.toks[self.pos].offset;
        match self.postfix()? {
            Expr::Prop(target, key) => Ok((*target, key)),
            _ => Err(error_at(
                self.text,
                at,
                "expected a property like n.name".into(),
            )),
        }
    }

    /// `IF NOT EXISTS` after a schema command's name, when it is there.
    pub(super) fn if_not_exists(&mut self) -> R<bool> {
        if !self.eat_kw("IF") {
            return Ok(false);
        }
        self.expect_kw("NOT")?;
        self.expect_kw("EXISTS")?;
        Ok(true)
    }

    /// `$(expr)` where a label or relationship type stands (Neo4j 5.26's dynamic
    /// labels and types), or `None` when a name stands there.
    pub(super) fn dynamic_name(&mut self) -> R<Option<Expr>> {
        if !(self.is_p("$") && matches!(self.peek_at(1), Tok::Punct("("))) {
            return Ok(None);
        }
        self.bump();
        self.bump();
        let e = self.expr()?;
        self.expect_p(")")?;
        Ok(Some(e))
    }

    pub(super) fn set_items(&mut self) -> R<Vec<SetItem>> {
        let mut items = Vec::new();
        loop {
            if let Some((var, labels, exprs)) = self.labels_item()? {
                if !labels.is_empty() {
                    items.push(SetItem::Labels {
                        var: var.clone(),
                        labels,
                    });
                }
                if !exprs.is_empty() {
                    items.push(SetItem::LabelExprs { var, exprs });
                }
            } else if matches!(self.peek_at(1), Tok::Punct("=") | Tok::Punct("+=")) {
                let var = self.name("a variable")?;
                if self.eat_p("+=") {
                    items.push(SetItem::Merge {
                        var,
                        value: self.expr()?,
                    });
                } else {
                    self.expect_p("=")?;
                    items.push(SetItem::Replace {
                        var,
                        value: self.expr()?,
                    });
                }
            } else {
                let at = self.toks[self.pos].offset;
                match self.postfix()? {
                    Expr::Prop(target, key) => {
                        self.expect_p("=")?;
                        items.push(SetItem::Prop {
                            target: *target,
                            key,
                            value: self.expr()?,
                        });
                    }
                    Expr::Index(target, key) => {
                        self.expect_p("=")?;
                        items.push(SetItem::DynProp {
                            target: *target,
                            key: *key,
                            value: self.expr()?,
                        });
                    }
                    _ => {
                        return Err(error_at(
                            self.text,
                            at,
                            "expected a property like n.name or n[key]".into(),
                        ))
                    }
                }
            }
            if !self.eat_p(",") {
                break;
            }
        }
        Ok(items)
    }

    pub(super) fn one_char(&mut self, what: &str) -> R<u8> {
        let at = self.toks[self.pos].offset;
        match self.bump() {
            Tok::Str(s) if s.len() == 1 => Ok(s.as_bytes()[0]),
            Tok::Str(s) if s == "\\t" || s == "\t" => Ok(b'\t'),
            _ => Err(error_at(
                self.text,
                at,
                format!("expected {what} as a one-character string like ','"),
            )),
        }
    }

    /// Neo4j: `LOAD CSV [WITH HEADERS] FROM 'file:///x.csv' AS row [FIELDTERMINATOR ';']`;
    /// Memgraph: `LOAD CSV FROM 'x.csv' WITH HEADER|NO HEADER [IGNORE BAD] [DELIMITER ',']
    /// [QUOTE '"'] [NULLIF 'NA'] AS row`. Both: any order of the options before `AS`.
    pub(super) fn load_csv(&mut self) -> R<LoadCsv> {
        let offset = self.toks[self.pos].offset;
        self.expect_kw("LOAD")?;
        self.expect_kw("CSV")?;
        let mut l = LoadCsv {
            source: Expr::Null,
            header: false,
            var: String::new(),
            delimiter: None,
            quote: None,
            null_if: None,
            ignore_bad: false,
            offset,
        };
        if self.eat_kw("WITH") {
            if !self.eat_kw("HEADERS") {
                self.expect_kw("HEADER")?;
            }
            l.header = true;
        }
        self.expect_kw("FROM")?;
        l.source = self.expr()?;
        loop {
            // `WITH` here only as `WITH HEADER[S]`: `... AS row WITH row.x AS x` is the
            // next clause.
            if self.eat_kws("WITH", "HEADER") || self.eat_kws("WITH", "HEADERS") {
                l.header = true;
            } else if self.eat_kws("NO", "HEADER") {
                l.header = false;
            } else if self.eat_kws("IGNORE", "BAD") {
                l.ignore_bad = true;
            } else if self.eat_kw("DELIMITER") || self.eat_kw("FIELDTERMINATOR") {
                l.delimiter = Some(self.one_char("a delimiter")?);
            } else if self.eat_kw("QUOTE") {
                l.quote = Some(self.one_char("a quote character")?);
            } else if self.eat_kw("NULLIF") {
                match self.bump() {
                    Tok::Str(s) => l.null_if = Some(s),
                    _ => return self.err("a string after NULLIF"),
                }
            } else if l.var.is_empty() && self.eat_kw("AS") {
                l.var = self.name("a variable name after AS")?;
            } else {
                break;
            }
        }
        if l.var.is_empty() {
            return self.err("AS and a row variable");
        }
        Ok(l)
    }

    pub(super) fn projection(&mut self) -> R<Projection> {
        let distinct = self.eat_kw("DISTINCT");
        let mut p = Projection {
            distinct,
            star: false,
            items: Vec::new(),
            order: Vec::new(),
            skip: None,
            limit: None,
            where_: None,
            texts: Vec::new(),
        };
        if self.eat_p("*") {
            p.star = true;
            if !self.eat_p(",") {
                return self.tail(p);
            }
        }
        loop {
            let start = self.toks[self.pos].offset;
            let e = self.expr()?;
            let end = self.toks[self.pos].offset.min(self.text.len());
            p.texts.push(self.text[start..end].trim().to_string());
            let alias = if self.eat_kw("AS") {
                Some(self.name("an alias after AS")?)
            } else {
                None
            };
            p.items.push((e, alias));
            if !self.eat_p(",") {
                break;
            }
        }
        self.tail(p)
    }

    pub(super) fn tail(&mut self, mut p: Projection) -> R<Projection> {
        if self.is_kw("ORDER") {
            self.bump();
            self.expect_kw("BY")?;
            loop {
                let e = self.expr()?;
                let desc = if self.eat_kw("DESC") || self.eat_kw("DESCENDING") {
                    true
                } else {
                    let _ = self.eat_kw("ASC") || self.eat_kw("ASCENDING");
                    false
                };
                p.order.push((e, desc));
                if !self.eat_p(",") {
                    break;
                }
            }
        }
        if self.eat_kw("SKIP") {
            p.skip = Some(self.expr()?);
        }
        if self.eat_kw("LIMIT") {
            p.limit = Some(self.expr()?);
        }
        Ok(p)
    }
}
