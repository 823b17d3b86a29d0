//! Patterns: paths of node and relationship patterns, with variables, labels,
//! properties, types, directions and lengths.

use super::*;

impl<'t> Parser<'t> {
    pub(super) fn pattern(&mut self) -> R<Pattern> {
        let var_at = self.toks[self.pos].offset;
        let var = if matches!(self.peek(), Tok::Ident(_) | Tok::Quoted(_))
            && matches!(self.peek_at(1), Tok::Punct("="))
        {
            let v = self.name("a path variable")?;
            self.bump();
            Some(v)
        } else {
            None
        };
        let kind = if self.is_kw("shortestPath") && matches!(self.peek_at(1), Tok::Punct("(")) {
            PathKind::Shortest
        } else if self.is_kw("allShortestPaths") && matches!(self.peek_at(1), Tok::Punct("(")) {
            PathKind::AllShortest
        } else {
            PathKind::Plain
        };
        if kind != PathKind::Plain {
            self.bump();
            self.expect_p("(")?;
            let mut inner = self.path_body()?;
            self.expect_p(")")?;
            inner.var = var;
            inner.var_at = var_at;
            inner.kind = kind;
            return Ok(inner);
        }
        let mut p = self.path_body()?;
        p.var = var;
        p.var_at = var_at;
        Ok(p)
    }

    pub(super) fn path_body(&mut self) -> R<Pattern> {
        let start = self.node_pattern()?;
        let mut steps = Vec::new();
        while self.is_p("-") || self.is_p("<-") {
            let rel = self.rel_pattern()?;
            let node = self.node_pattern()?;
            steps.push((rel, node));
        }
        Ok(Pattern {
            var: None,
            var_at: 0,
            kind: PathKind::Plain,
            start,
            steps,
        })
    }

    pub(super) fn node_pattern(&mut self) -> R<NodePattern> {
        self.expect_p("(")?;
        let mut n = NodePattern::default();
        if matches!(self.peek(), Tok::Ident(_) | Tok::Quoted(_)) && !self.is_kw("IS") {
            n.var_at = self.toks[self.pos].offset;
            n.var = Some(self.name("a node variable")?);
        }
        let bar = std::mem::replace(&mut self.no_bar, false);
        let labels = if self.eat_p(":") {
            self.node_labels(&mut n, true)
        } else if self.is_kw("IS") {
            self.is_at.get_or_insert(self.toks[self.pos].offset);
            self.bump();
            self.node_labels(&mut n, false)
        } else {
            Ok(())
        };
        self.no_bar = bar;
        labels?;
        if self.is_p("{") || matches!(self.peek(), Tok::Param(_)) {
            n.props = Some(self.atom()?);
        }
        self.expect_p(")")?;
        Ok(n)
    }

    pub(super) fn rel_pattern(&mut self) -> R<RelPattern> {
        let left = self.eat_p("<-");
        if !left {
            self.expect_p("-")?;
        }
        let mut r = RelPattern {
            var: None,
            var_at: 0,
            types: Vec::new(),
            dyn_types: Vec::new(),
            type_expr: None,
            props: None,
            dir: Dir::Both,
            range: None,
            bfs: false,
            weighted: None,
            filter: None,
        };
        if self.eat_p("[") {
            if matches!(self.peek(), Tok::Ident(_) | Tok::Quoted(_))
                && !self.is_kw("BFS")
                && !self.is_kw("ALLSHORTEST")
                && !self.is_kw("WSHORTEST")
            {
                r.var_at = self.toks[self.pos].offset;
                r.var = Some(self.name("a relationship variable")?);
            }
            if self.eat_p(":") || self.eat_kw("IS") {
                let at = self.toks[self.pos].offset;
                let bar = std::mem::replace(&mut self.no_bar, false);
                self.in_types = true;
                let t = self.label_term(false);
                self.in_types = false;
                self.no_bar = bar;
                let t = t?;
                if t.is_flat(true) {
                    flatten(t, &mut r.types, &mut r.dyn_types);
                } else {
                    match static_names(&t) {
                        Some(e) => r.type_expr = Some(Box::new(e)),
                        None => {
                            return Err(error_at(
                                self.text,
                                at,
                                "a type given by $(...) joins others with '|' only".into(),
                            ))
                        }
                    }
                }
            }
            if self.is_p("*") && r.type_expr.is_some() {
                return self.err_detail(
                    Detail::InvalidRelationshipPattern,
                    "a type list joined by '|' (a variable-length relationship takes no type expression, as in Neo4j)",
                );
            }
            if self.eat_p("*") {
                r.bfs = self.eat_kw("BFS");
                let weighted_all = if self.eat_kw("ALLSHORTEST") {
                    Some(true)
                } else if self.eat_kw("WSHORTEST") {
                    Some(false)
                } else {
                    None
                };
                r.bfs |= weighted_all.is_some();
                let lo = match self.peek() {
                    Tok::Int(i) if *i >= 0 => {
                        let v = *i as u64;
                        self.bump();
                        Some(v)
                    }
                    _ => None,
                };
                r.range = Some(if self.eat_p("..") {
                    let hi = match self.peek() {
                        Tok::Int(i) if *i >= 0 => {
                            let v = *i as u64;
                            self.bump();
                            Some(v)
                        }
                        _ => None,
                    };
                    (lo, hi)
                } else {
                    // `*3` is exactly three hops; `*` alone is one or more. (Memgraph's
                    // `*WSHORTEST 10` is an upper bound.)
                    if weighted_all.is_some() {
                        (Some(1), lo)
                    } else {
                        (lo.or(Some(1)), lo)
                    }
                });
                if let Some(all) = weighted_all {
                    let weight = self.lambda()?;
                    let total = self.name("the variable of the total weight")?;
                    r.weighted = Some(Weighted { all, weight, total });
                }
                if r.bfs && self.is_p("(") {
                    r.filter = Some(self.lambda()?);
                }
                if self.is_p("-") || matches!(self.peek(), Tok::Int(i) if *i < 0) {
                    return self.err_detail(
                        Detail::InvalidRelationshipPattern,
                        "a bound that is not negative (-[:T*1..3]->)",
                    );
                }
            } else if self.is_p("..") || matches!(self.peek(), Tok::Int(_)) {
                return self.err_detail(
                    Detail::InvalidRelationshipPattern,
                    "'*' before a length (-[:T*1..3]->)",
                );
            }
            if self.is_p("{") || matches!(self.peek(), Tok::Param(_)) {
                r.props = Some(self.atom()?);
            }
            self.expect_p("]")?;
        }
        let right = if self.eat_p("->") {
            true
        } else {
            self.expect_p("-")?;
            false
        };
        r.dir = match (left, right) {
            (true, false) => Dir::In,
            (false, true) => Dir::Out,
            // `<-->` is openCypher's other spelling of either direction.
            (false, false) | (true, true) => Dir::Both,
        };
        Ok(r)
    }
}
