//! Commands: index and constraint DDL (`CREATE ... INDEX`, `CREATE CONSTRAINT`, `DROP`),
//! `SHOW ...` with its `YIELD` / `WHERE` tail, and the other administrative statements.

use super::*;

impl<'t> Parser<'t> {
    /// `:L(p)` or `FOR (n:L) ON (n.p)` after CREATE/DROP INDEX [name].
    pub(super) fn index_target(&mut self) -> R<(String, String)> {
        if self.eat_kw("ON") {
            self.expect_p(":")?;
            let label = self.any_name("a label")?;
            self.expect_p("(")?;
            let prop = self.any_name("a property")?;
            self.expect_p(")")?;
            return Ok((label, prop));
        }
        if !self.is_kw("FOR") {
            // an index name
            self.bump();
        }
        self.for_label_on_prop()
    }

    /// `FOR ()-[r:TYPE]-() ON r.prop` (either arrow, or none): the type and property.
    pub(super) fn for_type_on_prop(&mut self) -> R<(String, String)> {
        self.expect_kw("FOR")?;
        self.expect_p("(")?;
        self.expect_p(")")?;
        if !self.eat_p("<-") {
            self.expect_p("-")?;
        }
        self.expect_p("[")?;
        let v = self.name("a variable")?;
        self.expect_p(":")?;
        let ty = self.any_name("a relationship type")?;
        self.expect_p("]")?;
        if !self.eat_p("->") {
            self.expect_p("-")?;
        }
        self.expect_p("(")?;
        self.expect_p(")")?;
        Ok((ty, self.on_prop(&v)?))
    }

    /// `FOR (n:Label) ON (n.prop)` (the parentheses around `n.prop` optional, as a
    /// vector index writes it): the label and the property.
    pub(super) fn for_label_on_prop(&mut self) -> R<(String, String)> {
        self.expect_kw("FOR")?;
        self.expect_p("(")?;
        let v = self.name("a variable")?;
        self.expect_p(":")?;
        let label = self.any_name("a label")?;
        self.expect_p(")")?;
        Ok((label, self.on_prop(&v)?))
    }

    /// After `CREATE <KIND> INDEX` (three words, skipped here): the index's name (or a
    /// parameter giving it) and whether IF NOT EXISTS follows.
    /// `v.prop` in index and constraint DDL, where the variable must be the pattern's
    /// `v`: the property's name.
    pub(super) fn prop_of(&mut self, v: &str) -> R<String> {
        let v2 = self.name("a variable")?;
        if v2 != v {
            return self.err(&format!("the variable {v}"));
        }
        self.expect_p(".")?;
        self.any_name("a property")
    }

    pub(super) fn index_name(&mut self) -> R<(Expr, bool)> {
        self.bump();
        self.bump();
        self.bump();
        let name = match self.peek().clone() {
            Tok::Param(p) => {
                self.bump();
                Expr::Param(p)
            }
            _ => Expr::Str(self.any_name("an index name")?),
        };
        Ok((name, self.if_not_exists()?))
    }

    /// `OPTIONS {...}` after an index's target, if written.
    pub(super) fn index_options(&mut self) -> R<Option<Expr>> {
        Ok(if self.eat_kw("OPTIONS") {
            Some(self.expr()?)
        } else {
            None
        })
    }

    /// `ON v.prop` or `ON (v.prop)`, `v` the pattern's variable: the property.
    pub(super) fn on_prop(&mut self, v: &str) -> R<String> {
        self.expect_kw("ON")?;
        let paren = self.eat_p("(");
        let prop = self.prop_of(&v)?;
        if paren {
            self.expect_p(")")?;
        }
        Ok(prop)
    }

    /// `ON (n:L) ASSERT n.p IS UNIQUE` or `FOR (n:L) REQUIRE n.p IS UNIQUE` (or
    /// `REQUIRE (n.a, n.b) IS UNIQUE`), after CREATE/DROP CONSTRAINT [name]
    /// [IF NOT EXISTS]; gives the name, the label, the properties and whether IF NOT
    /// EXISTS was written.
    #[allow(clippy::type_complexity)]
    pub(super) fn constraint_target(&mut self) -> R<(Option<String>, String, Vec<String>, bool)> {
        let mut name = None;
        if !self.is_kw("ON") && !self.is_kw("FOR") && !self.is_kw("IF") {
            name = Some(self.any_name("a constraint name")?);
        }
        let if_not_exists = self.if_not_exists()?;
        let neo5 = if self.eat_kw("FOR") {
            true
        } else {
            self.expect_kw("ON")?;
            false
        };
        self.expect_p("(")?;
        let v = self.name("a variable")?;
        self.expect_p(":")?;
        let label = self.any_name("a label")?;
        self.expect_p(")")?;
        self.expect_kw(if neo5 { "REQUIRE" } else { "ASSERT" })?;
        // `n.p`, or Neo4j 5's `(n.p)` and composite `(n.a, n.b)`.
        let paren = self.eat_p("(");
        let mut props = Vec::new();
        loop {
            let prop = self.prop_of(&v)?;
            if props.contains(&prop) {
                return self.err(&format!("another property than {prop} (it is named twice)"));
            }
            props.push(prop);
            if !(paren && self.eat_p(",")) {
                break;
            }
        }
        if paren {
            self.expect_p(")")?;
        }
        self.expect_kw("IS")?;
        if !self.eat_kw("UNIQUE") {
            return self.err(
                "UNIQUE (uniqueness is the only constraint Quiver keeps yet: not IS NOT NULL, IS NODE KEY or IS :: TYPE)",
            );
        }
        Ok((name, label, props, if_not_exists))
    }

    /// Skips what a SHOW command's words are followed by up to its `YIELD` or `WHERE`.
    pub(super) fn skip_to_show_tail(&mut self) {
        while !matches!(self.peek(), Tok::Eof)
            && !self.is_p(";")
            && !self.is_kw("YIELD")
            && !self.is_kw("WHERE")
        {
            self.bump();
        }
    }

    /// `YIELD items [ORDER BY ...] [SKIP n] [LIMIT n] [WHERE ...] [RETURN ...]` or
    /// `WHERE ...` after a SHOW command (see [`Command::Shown`]); the command alone
    /// when neither follows.
    pub(super) fn show_tail(&mut self, c: Command) -> R<Command> {
        let yields = self.eat_kw("YIELD");
        if !yields && !self.is_kw("WHERE") {
            return Ok(c);
        }
        let start = self.toks[self.pos].offset;
        let mut columns = None;
        if yields && !self.eat_p("*") {
            let mut names = Vec::new();
            loop {
                let mut n = self.any_name("a column to YIELD")?;
                if self.eat_kw("AS") {
                    n = self.any_name("a name")?;
                }
                names.push(n);
                if !self.eat_p(",") {
                    break;
                }
            }
            columns = Some(names);
        }
        let mut returns = false;
        while !matches!(self.peek(), Tok::Eof) && !self.is_p(";") {
            returns |= self.is_kw("RETURN");
            self.bump();
        }
        let end = self.toks[self.pos].offset;
        Ok(Command::Shown {
            inner: Box::new(c),
            text: self.text[start..end].trim().to_string(),
            yields,
            columns,
            returns,
        })
    }

    pub(super) fn command(&mut self) -> R<Option<Command>> {
        let c = if self.eat_kw("BEGIN") {
            Command::Begin
        } else if self.eat_kw("COMMIT") {
            Command::Commit
        } else if self.eat_kw("ROLLBACK") {
            Command::Rollback
        } else if self.eat_kw("CHECKPOINT") {
            if self.eat_kw("COMPACT") {
                Command::CheckpointCompact
            } else {
                Command::Checkpoint
            }
        } else if self.eat_kws("FREE", "MEMORY") {
            Command::FreeMemory
        } else if self.eat_kws("SHOW", "STORAGE") {
            self.expect_kw("INFO")?;
            Command::ShowStorageInfo
        } else if self.eat_kws("SHOW", "DATABASES")
            || self.eat_kws("SHOW", "DATABASE")
            || (self.is_kw("SHOW")
                && (self.is_kw_at(1, "DEFAULT") || self.is_kw_at(1, "HOME"))
                && self.is_kw_at(2, "DATABASE"))
        {
            // SHOW DATABASE name / SHOW DEFAULT DATABASE / SHOW HOME DATABASE.
            self.skip_to_show_tail();
            self.show_tail(Command::ShowDatabases)?
        } else if self.eat_kws("SHOW", "TRANSACTIONS") || self.eat_kws("SHOW", "TRANSACTION") {
            // Neo4j's transaction ids are not read: every transaction.
            self.skip_to_show_tail();
            self.show_tail(Command::ShowTransactions)?
        } else if self.is_kw("SHOW")
            && [
                "FUNCTION",
                "FUNCTIONS",
                "PROCEDURE",
                "PROCEDURES",
                "ALL",
                "BUILT",
                "USER",
            ]
            .iter()
            .any(|k| self.is_kw_at(1, k))
            && (0..5).any(|i| {
                ["FUNCTION", "FUNCTIONS", "PROCEDURE", "PROCEDURES"]
                    .iter()
                    .any(|k| self.is_kw_at(i, k))
            })
        {
            // SHOW [ALL | BUILT IN | USER DEFINED] FUNCTIONS | PROCEDURES [EXECUTABLE [BY ...]]:
            // every one is built in and anyone may run it.
            let functions =
                (0..5).any(|i| self.is_kw_at(i, "FUNCTION") || self.is_kw_at(i, "FUNCTIONS"));
            self.skip_to_show_tail();
            let c = if functions {
                Command::ShowFunctions
            } else {
                Command::ShowProcedures
            };
            self.show_tail(c)?
        } else if self.eat_kws("SHOW", "INDEXES") || self.eat_kws("SHOW", "INDEX") {
            self.eat_kw("INFO");
            self.show_tail(Command::ShowIndexes)?
        } else if self.eat_kws("SHOW", "CONSTRAINTS") || self.eat_kws("SHOW", "CONSTRAINT") {
            self.eat_kw("INFO");
            self.show_tail(Command::ShowConstraints)?
        } else if (self.is_kw("CREATE") || self.is_kw("DROP")) && self.is_kw_at(1, "CONSTRAINT") {
            let create = self.is_kw("CREATE");
            self.bump();
            self.bump();
            // Neo4j 5's `DROP CONSTRAINT name [IF EXISTS]`.
            if !create && !self.is_kw("ON") && !self.is_kw("FOR") {
                let name = self.any_name("a constraint name")?;
                let if_exists = self.eat_kw("IF");
                if if_exists {
                    self.expect_kw("EXISTS")?;
                }
                Command::DropConstraint {
                    name: Some(name),
                    label: String::new(),
                    props: Vec::new(),
                    if_exists,
                }
            } else {
                let (name, label, props, if_not_exists) = self.constraint_target()?;
                if create {
                    Command::CreateConstraint {
                        name,
                        label,
                        props,
                        if_not_exists,
                    }
                } else {
                    Command::DropConstraint {
                        name,
                        label,
                        props,
                        if_exists: false,
                    }
                }
            }
        } else if self.eat_kws("STORAGE", "MODE") {
            Command::StorageMode(self.any_name("IN_MEMORY_TRANSACTIONAL or IN_MEMORY_ANALYTICAL")?)
        } else if self.is_kw("CREATE") && self.is_kw_at(1, "FULLTEXT") && self.is_kw_at(2, "INDEX")
        {
            let (name, if_not_exists) = self.index_name()?;
            self.expect_kw("FOR")?;
            self.expect_p("(")?;
            let v = self.name("a variable")?;
            self.expect_p(":")?;
            let mut labels = vec![self.any_name("a label")?];
            while self.eat_p("|") {
                labels.push(self.any_name("a label")?);
            }
            self.expect_p(")")?;
            self.expect_kw("ON")?;
            self.expect_kw("EACH")?;
            self.expect_p("[")?;
            let mut props = Vec::new();
            loop {
                props.push(self.prop_of(&v)?);
                if !self.eat_p(",") {
                    break;
                }
            }
            self.expect_p("]")?;
            let options = self.index_options()?;
            Command::CreateFulltextIndex {
                name,
                if_not_exists,
                labels,
                props,
                options,
            }
        } else if self.is_kw("CREATE") && self.is_kw_at(1, "VECTOR") && self.is_kw_at(2, "INDEX") {
            let (name, if_not_exists) = self.index_name()?;
            let relationship = self.is_kw("FOR")
                && matches!(self.peek_at(1), Tok::Punct(x) if *x == "(")
                && matches!(self.peek_at(2), Tok::Punct(x) if *x == ")");
            let (label, prop) = if relationship {
                self.for_type_on_prop()?
            } else {
                self.for_label_on_prop()?
            };
            // `WITH [n.a, n.b]`: properties to filter on (Neo4j 2025); kept by nothing.
            if self.eat_kw("WITH") {
                self.expr()?;
            }
            let options = self.index_options()?;
            Command::CreateVectorIndex {
                name,
                if_not_exists,
                label,
                prop,
                options,
                relationship,
            }
        } else if self.is_kw("DROP")
            && self.is_kw_at(1, "INDEX")
            && matches!(self.peek_at(2), Tok::Ident(_) | Tok::Quoted(_))
            && !self.is_kw_at(2, "ON")
            && !self.is_kw_at(2, "FOR")
            && (matches!(self.peek_at(3), Tok::Eof | Tok::Punct(";"))
                || (self.is_kw_at(3, "IF") && self.is_kw_at(4, "EXISTS")))
        {
            self.bump();
            self.bump();
            let name = self.any_name("an index name")?;
            let if_exists = self.eat_kw("IF");
            if if_exists {
                self.expect_kw("EXISTS")?;
            }
            Command::DropIndexNamed { name, if_exists }
        } else if (self.is_kw("CREATE") || self.is_kw("DROP"))
            && (self.is_kw_at(1, "INDEX")
                || (self.is_kw_at(1, "RANGE") && self.is_kw_at(2, "INDEX")))
        {
            let create = self.is_kw("CREATE");
            self.bump();
            if self.is_kw("RANGE") {
                self.bump();
            }
            self.bump();
            // Neo4j 5: `CREATE [RANGE] INDEX [name] [IF NOT EXISTS] FOR (n:L) ON (n.p)`.
            let mut if_not_exists = false;
            if create && !self.is_kw("ON") && !self.is_kw("FOR") {
                if !self.is_kw("IF") {
                    self.any_name("an index name")?;
                }
                if_not_exists = self.if_not_exists()?;
            }
            let (label, prop) = self.index_target()?;
            if create {
                Command::CreateIndex {
                    label,
                    prop,
                    if_not_exists,
                }
            } else {
                Command::DropIndex { label, prop }
            }
        } else {
            return Ok(None);
        };
        self.end()?;
        Ok(Some(c))
    }
}
