//! Expressions, lowest precedence first (OR, XOR, AND, NOT, comparisons, string
//! operators, arithmetic, unary, postfix), then atoms: literals, calls, CASE, list and
//! pattern comprehensions, map projections, EXISTS / COUNT / COLLECT subqueries.

use super::*;

impl<'t> Parser<'t> {
    pub(super) fn expr(&mut self) -> R<Expr> {
        self.enter()?;
        let e = self.or();
        self.depth -= 1;
        e
    }

    pub(super) fn or(&mut self) -> R<Expr> {
        self.chain(|p| {
            let mut e = p.xor()?;
            while p.eat_kw("OR") {
                p.link()?;
                e = Expr::Binary(BinOp::Or, Box::new(e), Box::new(p.xor()?));
            }
            Ok(e)
        })
    }

    pub(super) fn xor(&mut self) -> R<Expr> {
        self.chain(|p| {
            let mut e = p.and()?;
            while p.eat_kw("XOR") {
                p.link()?;
                e = Expr::Binary(BinOp::Xor, Box::new(e), Box::new(p.and()?));
            }
            Ok(e)
        })
    }

    pub(super) fn and(&mut self) -> R<Expr> {
        self.chain(|p| {
            let mut e = p.not()?;
            while p.eat_kw("AND") {
                p.link()?;
                e = Expr::Binary(BinOp::And, Box::new(e), Box::new(p.not()?));
            }
            Ok(e)
        })
    }

    pub(super) fn not(&mut self) -> R<Expr> {
        if self.eat_kw("NOT") {
            self.enter()?;
            let e = self.not();
            self.depth -= 1;
            return Ok(Expr::Unary(UnOp::Not, Box::new(e?)));
        }
        self.comparison()
    }

    /// One left-associative level: `next (op next)*` for the punctuation operators in
    /// `ops`.
    pub(super) fn left_assoc(
        &mut self,
        next: fn(&mut Self) -> R<Expr>,
        ops: &[(&str, BinOp)],
    ) -> R<Expr> {
        self.chain(|p| {
            let mut e = next(p)?;
            loop {
                let op = match p.peek() {
                    Tok::Punct(t) => match ops.iter().find(|(o, _)| o == t) {
                        Some(&(_, op)) => op,
                        None => return Ok(e),
                    },
                    _ => return Ok(e),
                };
                p.bump();
                p.link()?;
                e = Expr::Binary(op, Box::new(e), Box::new(next(p)?));
            }
        })
    }

    pub(super) fn comparison(&mut self) -> R<Expr> {
        use BinOp::*;
        let ops = [
            ("=", Eq),
            ("<>", Ne),
            ("!=", Ne),
            ("<", Lt),
            ("<=", Le),
            (">", Gt),
            (">=", Ge),
            ("=~", Regex),
        ];
        // A chain `a < b < c` is `a < b AND b < c`, as openCypher reads it.
        self.chain(|p| {
            let mut left = p.string_ops()?;
            let mut out: Option<Expr> = None;
            loop {
                let op = match p.peek() {
                    Tok::Punct(t) => match ops.iter().find(|(o, _)| o == t) {
                        Some(&(_, op)) => op,
                        None => break,
                    },
                    _ => break,
                };
                p.bump();
                p.link()?;
                let right = p.string_ops()?;
                let cmp = Expr::Binary(op, Box::new(left), Box::new(right.clone()));
                out = Some(match out {
                    None => cmp,
                    Some(prev) => Expr::Binary(And, Box::new(prev), Box::new(cmp)),
                });
                left = right;
            }
            Ok(out.unwrap_or(left))
        })
    }

    pub(super) fn string_ops(&mut self) -> R<Expr> {
        self.chain(Self::string_ops_chain)
    }

    pub(super) fn string_ops_chain(&mut self) -> R<Expr> {
        let mut e = self.additive()?;
        loop {
            self.link()?;
            if self.is_kw("STARTS") && self.is_kw_at(1, "WITH") {
                self.bump();
                self.bump();
                e = Expr::Binary(BinOp::StartsWith, Box::new(e), Box::new(self.additive()?));
            } else if self.is_kw("ENDS") && self.is_kw_at(1, "WITH") {
                self.bump();
                self.bump();
                e = Expr::Binary(BinOp::EndsWith, Box::new(e), Box::new(self.additive()?));
            } else if self.eat_kw("CONTAINS") {
                e = Expr::Binary(BinOp::Contains, Box::new(e), Box::new(self.additive()?));
            } else if self.eat_kw("IN") {
                e = Expr::Binary(BinOp::In, Box::new(e), Box::new(self.additive()?));
            } else if self.is_kw("IS")
                && matches!(e, Expr::Var(..))
                && !self.is_kw_at(1, "NOT")
                && !self.is_kw_at(1, "NULL")
                && matches!(
                    self.peek_at(1),
                    Tok::Ident(_) | Tok::Quoted(_) | Tok::Punct("!" | "%" | "(")
                )
            {
                // `n IS Person`: GQL's spelling of `n:Person`.
                self.is_at.get_or_insert(self.toks[self.pos].offset);
                self.bump();
                let at = self.toks[self.pos].offset;
                let t = self.label_term(false)?;
                e = self.label_test(e, t, at)?;
            } else if self.is_kw("IS") {
                self.bump();
                let not = self.eat_kw("NOT");
                self.expect_kw("NULL")?;
                e = Expr::IsNull(Box::new(e), !not);
            } else {
                return Ok(e);
            }
        }
    }

    pub(super) fn additive(&mut self) -> R<Expr> {
        self.left_assoc(
            Self::multiplicative,
            &[("+", BinOp::Add), ("-", BinOp::Sub)],
        )
    }

    pub(super) fn multiplicative(&mut self) -> R<Expr> {
        self.left_assoc(
            Self::power,
            &[("*", BinOp::Mul), ("/", BinOp::Div), ("%", BinOp::Mod)],
        )
    }

    /// `^` is left-associative in openCypher: `4 ^ 3 ^ 2` is `(4 ^ 3) ^ 2`.
    pub(super) fn power(&mut self) -> R<Expr> {
        self.left_assoc(Self::unary, &[("^", BinOp::Pow)])
    }

    pub(super) fn unary(&mut self) -> R<Expr> {
        if self.eat_p("-") {
            if matches!(self.peek(), Tok::Int(i64::MIN)) {
                // `-9223372036854775808`: the one literal whose magnitude is not an i64.
                self.bump();
                return Ok(Expr::Int(i64::MIN));
            }
            self.enter()?;
            let e = self.unary();
            self.depth -= 1;
            return Ok(match e? {
                Expr::Int(i) => Expr::Int(-i),
                Expr::Float(f) => Expr::Float(-f),
                other => Expr::Unary(UnOp::Neg, Box::new(other)),
            });
        }
        if self.eat_p("+") {
            return self.unary();
        }
        self.postfix()
    }

    pub(super) fn postfix(&mut self) -> R<Expr> {
        self.chain(Self::postfix_chain)
    }

    pub(super) fn postfix_chain(&mut self) -> R<Expr> {
        let mut e = self.atom()?;
        loop {
            self.link()?;
            if self.eat_p(".") {
                let key = self.any_name("a property name after '.'")?;
                e = Expr::Prop(Box::new(e), key);
            } else if self.is_p("[") {
                self.bump();
                if self.eat_p("..") {
                    let hi = if self.is_p("]") {
                        None
                    } else {
                        Some(Box::new(self.expr()?))
                    };
                    self.expect_p("]")?;
                    e = Expr::Slice(Box::new(e), None, hi);
                    continue;
                }
                let first = self.expr()?;
                if self.eat_p("..") {
                    let hi = if self.is_p("]") {
                        None
                    } else {
                        Some(Box::new(self.expr()?))
                    };
                    self.expect_p("]")?;
                    e = Expr::Slice(Box::new(e), Some(Box::new(first)), hi);
                } else {
                    self.expect_p("]")?;
                    e = Expr::Index(Box::new(e), Box::new(first));
                }
            } else if self.is_p(":") && matches!(e, Expr::Var(..)) {
                self.bump();
                let at = self.toks[self.pos].offset;
                let t = self.label_term(true)?;
                e = self.label_test(e, t, at)?;
            } else {
                return Ok(e);
            }
        }
    }

    pub(super) fn atom(&mut self) -> R<Expr> {
        self.enter()?;
        let e = self.atom_inner();
        self.depth -= 1;
        e
    }

    pub(super) fn atom_inner(&mut self) -> R<Expr> {
        match self.peek().clone() {
            Tok::BadNumber(s) => Err(error_at(
                self.text,
                self.toks[self.pos].offset,
                format!(
                    "bad number {s}: a number is digits, with an optional fraction and exponent"
                ),
            )
            .with_detail(Detail::InvalidNumberLiteral)),
            Tok::Int(i64::MIN) => Err(error_at(
                self.text,
                self.toks[self.pos].offset,
                "integer too large: the largest is 9223372036854775807".into(),
            )
            .with_detail(Detail::IntegerOverflow)),
            Tok::Int(i) => {
                self.bump();
                Ok(Expr::Int(i))
            }
            Tok::Float(f) => {
                self.bump();
                Ok(Expr::Float(f))
            }
            Tok::Str(s) => {
                self.bump();
                Ok(Expr::Str(s))
            }
            Tok::Param(p) => {
                self.bump();
                Ok(Expr::Param(p))
            }
            Tok::Punct("[") => self.list_or_comprehension(),
            Tok::Punct("{") => {
                self.bump();
                let mut entries = Vec::new();
                if !self.is_p("}") {
                    loop {
                        let k = self.any_name("a map key")?;
                        self.expect_p(":")?;
                        entries.push((k, self.expr()?));
                        if !self.eat_p(",") {
                            break;
                        }
                    }
                }
                self.expect_p("}")?;
                Ok(Expr::Map(entries))
            }
            Tok::Punct("(") => {
                // A parenthesized expression, or a pattern used as a predicate.
                let save = self.pos;
                if let Ok(p) = self.path_body() {
                    if !p.steps.is_empty() {
                        return Ok(Expr::PatternPred(Box::new(p)));
                    }
                }
                self.pos = save;
                self.bump();
                let bar = std::mem::replace(&mut self.no_bar, false);
                let e = self.expr();
                self.no_bar = bar;
                let e = e?;
                self.expect_p(")")?;
                Ok(e)
            }
            Tok::Ident(s) if s.eq_ignore_ascii_case("true") => {
                self.bump();
                Ok(Expr::Bool(true))
            }
            Tok::Ident(s) if s.eq_ignore_ascii_case("false") => {
                self.bump();
                Ok(Expr::Bool(false))
            }
            Tok::Ident(s) if s.eq_ignore_ascii_case("null") => {
                self.bump();
                Ok(Expr::Null)
            }
            Tok::Ident(s) if s.eq_ignore_ascii_case("CASE") => self.case(),
            Tok::Ident(s)
                if (s.eq_ignore_ascii_case("EXISTS")
                    || s.eq_ignore_ascii_case("COUNT")
                    || s.eq_ignore_ascii_case("COLLECT"))
                    && matches!(self.peek_at(1), Tok::Punct("{")) =>
            {
                self.subquery_expr()
            }
            Tok::Ident(_) | Tok::Quoted(_)
                if matches!(self.peek_at(1), Tok::Punct("(")) || self.namespaced_call() =>
            {
                self.call()
            }
            Tok::Ident(_) | Tok::Quoted(_) => {
                let at = self.toks[self.pos].offset;
                let v = Expr::Var(self.name("an expression")?, at);
                if self.is_p("{")
                    && matches!(
                        self.peek_at(1),
                        Tok::Punct("." | "}") | Tok::Ident(_) | Tok::Quoted(_)
                    )
                {
                    return self.map_projection(v);
                }
                Ok(v)
            }
            _ => self.err("an expression"),
        }
    }

    /// After CALL: `ns.proc[(args)] [YIELD * | YIELD out [AS name], ...] [WHERE p]`.
    pub(super) fn proc_call(&mut self) -> R<ProcCall> {
        let at = self.toks[self.pos].offset;
        let mut name = self.any_name("a procedure name")?;
        while self.eat_p(".") {
            name.push('.');
            name.push_str(&self.any_name("a procedure name")?);
        }
        let args = if self.eat_p("(") {
            let mut a = Vec::new();
            if !self.is_p(")") {
                loop {
                    a.push(self.expr()?);
                    if !self.eat_p(",") {
                        break;
                    }
                }
            }
            self.expect_p(")")?;
            Some(a)
        } else {
            None
        };
        let (mut yields, mut star) = (None, false);
        if self.eat_kw("YIELD") {
            if self.eat_p("*") {
                star = true;
                yields = Some(Vec::new());
            } else {
                let mut y = Vec::new();
                loop {
                    let out = self.name("a procedure output")?;
                    let alias = if self.eat_kw("AS") {
                        self.name("a variable name")?
                    } else {
                        out.clone()
                    };
                    y.push((out, alias));
                    if !self.eat_p(",") {
                        break;
                    }
                }
                yields = Some(y);
            }
        }
        let where_ = if yields.is_some() && self.eat_kw("WHERE") {
            Some(self.expr()?)
        } else {
            None
        };
        Ok(ProcCall {
            name,
            at,
            args,
            yields,
            star,
            where_,
        })
    }

    /// `date.truncate(`, `duration.between(`: a dotted function name.
    pub(super) fn namespaced_call(&self) -> bool {
        let mut i = 1;
        while matches!(self.peek_at(i), Tok::Punct("."))
            && matches!(self.peek_at(i + 1), Tok::Ident(_))
        {
            i += 2;
        }
        i > 1 && matches!(self.peek_at(i), Tok::Punct("("))
    }

    pub(super) fn call(&mut self) -> R<Expr> {
        let mut name = self.any_name("a function name")?;
        while self.eat_p(".") {
            name.push('.');
            name.push_str(&self.any_name("a function name")?);
        }
        self.expect_p("(")?;
        if name.eq_ignore_ascii_case("count") && self.eat_p("*") {
            self.expect_p(")")?;
            return Ok(Expr::CountStar);
        }
        // Memgraph's and old Cypher's `extract(x IN list | e)` and `filter(x IN list WHERE p)`
        // are list comprehensions.
        if (name.eq_ignore_ascii_case("extract") || name.eq_ignore_ascii_case("filter"))
            && matches!(self.peek(), Tok::Ident(_) | Tok::Quoted(_))
            && self.is_kw_at(1, "IN")
        {
            return self.comprehension(")");
        }
        // Quantifiers `all|any|none|single(x IN list WHERE p)` become the function of
        // that name over `[x IN list | p]`: the predicate's value per element, so the
        // function sees nulls and applies three-valued logic.
        if ["all", "any", "none", "single"]
            .iter()
            .any(|q| name.eq_ignore_ascii_case(q))
            && matches!(self.peek(), Tok::Ident(_) | Tok::Quoted(_))
            && self.is_kw_at(1, "IN")
        {
            let (var, list) = self.var_in_list()?;
            if !self.eat_kw("WHERE") {
                return self.err("WHERE and a predicate");
            }
            let pred = self.expr()?;
            self.expect_p(")")?;
            name.make_ascii_lowercase();
            return Ok(Expr::Call {
                name,
                distinct: false,
                args: vec![Expr::ListComp {
                    var,
                    list,
                    pred: None,
                    map: Some(Box::new(pred)),
                }],
            });
        }
        // `reduce(acc = init, x IN list | expr)`.
        if name.eq_ignore_ascii_case("reduce")
            && matches!(self.peek(), Tok::Ident(_) | Tok::Quoted(_))
            && matches!(self.peek_at(1), Tok::Punct("="))
        {
            let acc = self.name("an accumulator variable")?;
            self.expect_p("=")?;
            let init = Box::new(self.expr()?);
            self.expect_p(",")?;
            if !(matches!(self.peek(), Tok::Ident(_) | Tok::Quoted(_)) && self.is_kw_at(1, "IN")) {
                return self.err("`x IN list` after reduce's accumulator");
            }
            let (var, list) = self.var_in_list()?;
            self.expect_p("|")?;
            let expr = Box::new(self.expr()?);
            self.expect_p(")")?;
            return Ok(Expr::Reduce {
                acc,
                init,
                var,
                list,
                expr,
            });
        }
        let distinct = self.eat_kw("DISTINCT");
        let mut args = Vec::new();
        if !self.is_p(")") {
            loop {
                args.push(self.expr()?);
                if !self.eat_p(",") {
                    break;
                }
            }
        }
        self.expect_p(")")?;
        name.make_ascii_lowercase();
        // `normalize(s, NFD)`: the normal form is a keyword in Neo4j 5, read as its name.
        if name == "normalize" {
            if let Some(Expr::Var(form, _)) = args.get(1) {
                let f = form.to_ascii_uppercase();
                if matches!(f.as_str(), "NFC" | "NFD" | "NFKC" | "NFKD") {
                    args[1] = Expr::Str(f);
                }
            }
        }
        Ok(Expr::Call {
            name,
            distinct,
            args,
        })
    }

    pub(super) fn case(&mut self) -> R<Expr> {
        self.bump();
        let subject = if self.is_kw("WHEN") {
            None
        } else {
            Some(Box::new(self.expr()?))
        };
        let mut arms = Vec::new();
        while self.eat_kw("WHEN") {
            let w = self.expr()?;
            self.expect_kw("THEN")?;
            arms.push((w, self.expr()?));
        }
        if arms.is_empty() {
            return self.err("WHEN");
        }
        let default = if self.eat_kw("ELSE") {
            Some(Box::new(self.expr()?))
        } else {
            None
        };
        self.expect_kw("END")?;
        Ok(Expr::Case {
            subject,
            arms,
            default,
        })
    }

    /// `x IN list [WHERE p] [| e]` and the closing `close`.
    /// `x IN list`, the head of a comprehension or a quantifier (`IN` is known to follow).
    pub(super) fn var_in_list(&mut self) -> R<(String, Box<Expr>)> {
        let var = self.name("a variable")?;
        self.bump();
        Ok((var, Box::new(self.expr()?)))
    }

    /// Memgraph's `(e, n | expr)`.
    pub(super) fn lambda(&mut self) -> R<Lambda> {
        self.expect_p("(")?;
        let rel = self.name("the lambda's relationship variable")?;
        self.expect_p(",")?;
        let node = self.name("the lambda's node variable")?;
        self.expect_p("|")?;
        let expr = Box::new(self.expr()?);
        self.expect_p(")")?;
        Ok(Lambda { rel, node, expr })
    }

    pub(super) fn comprehension(&mut self, close: &str) -> R<Expr> {
        let (var, list) = self.var_in_list()?;
        let pred = if self.eat_kw("WHERE") {
            Some(Box::new(self.bar_ends(Self::expr)?))
        } else {
            None
        };
        let map = if self.eat_p("|") {
            Some(Box::new(self.expr()?))
        } else {
            None
        };
        self.expect_p(close)?;
        Ok(Expr::ListComp {
            var,
            list,
            pred,
            map,
        })
    }

    /// `n {.name, .*, key: expr, var}` after the variable: a map of the node's,
    /// relationship's or map's chosen properties, every property, computed entries and
    /// variables (later entries win), null for a null subject. Read as
    /// `CASE WHEN n IS NULL THEN null ELSE apoc.map.merge(properties(n), {...}) END`
    /// (without `.*`, the literal map alone).
    pub(super) fn map_projection(&mut self, subject: Expr) -> R<Expr> {
        self.expect_p("{")?;
        let mut all = false;
        let mut entries: Vec<(String, Expr)> = Vec::new();
        let put = |entries: &mut Vec<(String, Expr)>, k: String, e: Expr| {
            entries.retain(|(x, _)| *x != k);
            entries.push((k, e));
        };
        if !self.is_p("}") {
            loop {
                if self.eat_p(".") {
                    if self.eat_p("*") {
                        all = true;
                    } else {
                        let k = self.any_name("a property key")?;
                        put(
                            &mut entries,
                            k.clone(),
                            Expr::Prop(Box::new(subject.clone()), k),
                        );
                    }
                } else {
                    let at = self.toks[self.pos].offset;
                    let k = self.any_name("a property key, .key, .* or a variable")?;
                    if self.eat_p(":") {
                        let e = self.expr()?;
                        put(&mut entries, k, e);
                    } else {
                        put(&mut entries, k.clone(), Expr::Var(k, at));
                    }
                }
                if !self.eat_p(",") {
                    break;
                }
            }
        }
        self.expect_p("}")?;
        let map = Expr::Map(entries);
        let value = if all {
            Expr::Call {
                name: "apoc.map.merge".into(),
                distinct: false,
                args: vec![
                    Expr::Call {
                        name: "properties".into(),
                        distinct: false,
                        args: vec![subject.clone()],
                    },
                    map,
                ],
            }
        } else {
            map
        };
        Ok(Expr::Case {
            subject: None,
            arms: vec![(Expr::IsNull(Box::new(subject), true), Expr::Null)],
            default: Some(Box::new(value)),
        })
    }

    /// `EXISTS { ... }` and `COUNT { ... }` over one pattern: `{ pattern [WHERE p] }` or
    /// `{ MATCH pattern [WHERE p] [RETURN ...] }`, read as the size of the pattern
    /// comprehension `[pattern WHERE p | 1]` (above 0 for EXISTS). A body with more
    /// clauses is refused by name.
    pub(super) fn subquery_expr(&mut self) -> R<Expr> {
        let exists = self.is_kw("EXISTS");
        let collect = self.is_kw("COLLECT");
        self.bump();
        self.expect_p("{")?;
        let body_at = self.pos;
        let full = self.eat_kw("MATCH");
        if collect && !full {
            return self.expect_kw("MATCH").map(|_| Expr::Null);
        }
        let pattern = self.pattern()?;
        let kind = if collect {
            SubqueryKind::Collect
        } else if exists {
            SubqueryKind::Exists
        } else {
            SubqueryKind::Count
        };
        if self.is_p(",") && full {
            return self.whole_subquery(body_at, kind);
        }
        if self.is_p(",") {
            return self.err("one pattern in EXISTS { }, COUNT { } and COLLECT { } without MATCH (write MATCH first for several), found ','");
        }
        let pred = if self.eat_kw("WHERE") {
            Some(Box::new(self.expr()?))
        } else {
            None
        };
        if collect {
            // `COLLECT { MATCH pattern [WHERE pred] RETURN expr }`: the list of `expr`
            // over the pattern's matches, a pattern comprehension.
            if !self.is_kw("RETURN") {
                return self.whole_subquery(body_at, kind);
            }
            self.expect_kw("RETURN")?;
            let distinct = self.eat_kw("DISTINCT");
            let map = self.expr()?;
            if self.eat_kw("AS") {
                self.any_name("a name")?;
            }
            if self.is_p(",") {
                return self.err("'}' (COLLECT { } returns one column)");
            }
            if !self.is_p("}") {
                return self.whole_subquery(body_at, kind);
            }
            self.bump();
            if pattern.kind != PathKind::Plain {
                return self.err("a plain pattern in COLLECT { }");
            }
            let list = Expr::PatternComp {
                pattern: Box::new(pattern),
                pred,
                map: Box::new(map),
            };
            // `RETURN DISTINCT`: the list without repeats, in order of first match.
            return Ok(if distinct {
                Expr::Call {
                    name: "apoc.coll.toset".into(),
                    distinct: false,
                    args: vec![list],
                }
            } else {
                list
            });
        }
        if full && self.eat_kw("RETURN") {
            // What it returns does not change whether or how often the pattern matches.
            self.eat_kw("DISTINCT");
            loop {
                self.expr()?;
                if self.eat_kw("AS") {
                    self.any_name("a name")?;
                }
                if !self.eat_p(",") {
                    break;
                }
            }
        }
        if !self.is_p("}") {
            if full {
                return self.whole_subquery(body_at, kind);
            }
            return self.err("'}' to close EXISTS { } or COUNT { }");
        }
        self.bump();
        if pattern.kind != PathKind::Plain {
            return self.err("a plain pattern in EXISTS { } and COUNT { }");
        }
        // `EXISTS { (a)-[:T]->(:L) }` from a named start with nothing else named or
        // filtered is a pattern predicate: it stops at the first match.
        let anonymous = pattern.var.is_none()
            && pattern.start.var.is_some()
            && pattern.start.props.is_none()
            && !pattern.steps.is_empty()
            && pattern.steps.iter().all(|(r, n)| {
                r.var.is_none() && r.props.is_none() && n.var.is_none() && n.props.is_none()
            });
        if exists && pred.is_none() && anonymous {
            // As `exists(pattern)`: a value wherever it stands (a bare pattern is a
            // predicate only), compiled to the pattern itself.
            return Ok(Expr::Call {
                name: "exists".into(),
                distinct: false,
                args: vec![Expr::PatternPred(Box::new(pattern))],
            });
        }
        let size = Expr::Call {
            name: "size".into(),
            distinct: false,
            args: vec![Expr::PatternComp {
                pattern: Box::new(pattern),
                pred,
                map: Box::new(Expr::Int(1)),
            }],
        };
        Ok(if exists {
            Expr::Binary(BinOp::Gt, Box::new(size), Box::new(Expr::Int(0)))
        } else {
            size
        })
    }

    /// `EXISTS { ... }` / `COUNT { ... }` whose body is a whole query (WITH,
    /// aggregation, several patterns), parsed again from `at` (its first clause).
    pub(super) fn whole_subquery(&mut self, at: usize, kind: SubqueryKind) -> R<Expr> {
        self.pos = at;
        let mut body = self.single_query_inner()?;
        // `A UNION [ALL] B ...`: the parts as a CALL { } inside, whose column the body
        // returns (and EXISTS / COUNT count).
        let mut unions = Vec::new();
        while self.eat_kw("UNION") {
            let all = self.eat_kw("ALL");
            unions.push((all, self.single_query_inner()?));
        }
        if !unions.is_empty() {
            if unions.iter().any(|(a, _)| *a) && unions.iter().any(|(a, _)| !*a) {
                return self.err("UNION or UNION ALL throughout the subquery, not both");
            }
            let name = match body.clauses.last() {
                Some(Clause::Return(p)) if p.items.len() == 1 && !p.star => p.items[0]
                    .1
                    .clone()
                    .or_else(|| p.texts.first().cloned())
                    .unwrap_or_default(),
                _ => {
                    return self
                        .err("RETURN of one column to end each part of a UNION in a subquery")
                }
            };
            body = SingleQuery {
                clauses: vec![
                    Clause::CallSubquery {
                        body: Box::new(body),
                        optional: false,
                        sees_all: true,
                        unions,
                    },
                    Clause::Return(Projection {
                        distinct: false,
                        star: false,
                        items: vec![(Expr::Var(name.clone(), at), None)],
                        order: Vec::new(),
                        skip: None,
                        limit: None,
                        where_: None,
                        texts: vec![name],
                    }),
                ],
            };
        }
        if !self.is_p("}") {
            return self.err("'}' to close the subquery");
        }
        if body.writes() {
            return self.err_detail(Detail::InvalidClauseComposition, "a subquery that only reads (EXISTS { }, COUNT { } and COLLECT { } cannot CREATE, MERGE, SET, REMOVE or DELETE)");
        }
        if kind == SubqueryKind::Collect
            && !matches!(body.clauses.last(), Some(Clause::Return(p)) if p.items.len() == 1 && !p.star)
        {
            return self.err("RETURN of one column to end COLLECT { }");
        }
        self.bump();
        Ok(Expr::Subquery {
            kind,
            body: Box::new(body),
        })
    }

    /// After `[`: `[var =] pattern [WHERE pred] | map ]`, or `None` when the text is not
    /// one.
    pub(super) fn pattern_comprehension(&mut self) -> R<Option<Expr>> {
        let mut var = None;
        let mut var_at = 0;
        if matches!(self.peek(), Tok::Ident(_) | Tok::Quoted(_))
            && matches!(self.peek_at(1), Tok::Punct("="))
        {
            var_at = self.toks[self.pos].offset;
            var = Some(self.name("a path variable")?);
            self.bump();
        }
        if !self.is_p("(") {
            return Ok(None);
        }
        let mut pattern = self.path_body()?;
        pattern.var = var;
        pattern.var_at = var_at;
        let pred = if self.eat_kw("WHERE") {
            Some(Box::new(self.bar_ends(Self::expr)?))
        } else {
            None
        };
        if !self.eat_p("|") {
            return Ok(None);
        }
        let map = Box::new(self.expr()?);
        self.expect_p("]")?;
        Ok(Some(Expr::PatternComp {
            pattern: Box::new(pattern),
            pred,
            map,
        }))
    }

    pub(super) fn list_or_comprehension(&mut self) -> R<Expr> {
        self.expect_p("[")?;
        // `[x IN list ...]` is a comprehension.
        if matches!(self.peek(), Tok::Ident(_) | Tok::Quoted(_)) && self.is_kw_at(1, "IN") {
            return self.comprehension("]");
        }
        // `[p = (a)-->(b) WHERE pred | map]` is a pattern comprehension: tried first,
        // and read as a list when it is not one.
        let save = self.pos;
        if let Ok(Some(e)) = self.pattern_comprehension() {
            return Ok(e);
        }
        self.pos = save;
        let mut items = Vec::new();
        if !self.is_p("]") {
            loop {
                items.push(self.expr()?);
                if !self.eat_p(",") {
                    break;
                }
            }
        }
        self.expect_p("]")?;
        Ok(Expr::List(items))
    }
}
