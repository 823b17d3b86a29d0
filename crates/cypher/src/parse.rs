//! Recursive descent over the tokens of [`lex`](crate::lex); expressions by precedence
//! climbing. The first error stops the parse and says where (line and column, 1-based
//! when shown, with the line and a caret) and what was expected.

use crate::ast::*;
use crate::detail::Detail;
use crate::lex::{lex, Tok, Token};

/// A syntax error with its place in the query text.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}, column {column}: {message}\n{snippet}", line = .line + 1, column = .column + 1)]
pub struct ParseError {
    /// 0-based line and column (in characters).
    pub line: usize,
    pub column: usize,
    pub message: String,
    /// The offending line with a caret under the column.
    pub snippet: String,
    /// A type error found before the query runs (`WITH 1 AS x RETURN x.num`), rather
    /// than a syntax error.
    pub type_error: bool,
    /// Why, as openCypher's detail code (`UnexpectedSyntax` unless a rule said more).
    pub detail: Detail,
}

impl ParseError {
    /// The same error with its detail code.
    pub fn with_detail(mut self, detail: Detail) -> ParseError {
        self.detail = detail;
        self
    }
}

pub fn error_at(text: &str, offset: usize, message: String) -> ParseError {
    let offset = offset.min(text.len());
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line = text[..offset].matches('\n').count();
    let column = text[line_start..offset].chars().count();
    let line_text = text[line_start..].lines().next().unwrap_or("");
    ParseError {
        line,
        column,
        message,
        snippet: snippet(line_text, column),
        type_error: false,
        detail: Detail::UnexpectedSyntax,
    }
}

/// Characters of the offending line shown before and after the column: a generated
/// query can be one line of megabytes.
const SNIPPET_BEFORE: usize = 60;
const SNIPPET_AFTER: usize = 40;

/// The line around `column` with a caret under it. Long lines are cut to a window
/// marked with `…`; control characters (a tab, an escape) show as one space, so the
/// caret stays aligned and the terminal receives nothing it would interpret.
fn snippet(line: &str, column: usize) -> String {
    let from = column.saturating_sub(SNIPPET_BEFORE);
    let mut shown = String::new();
    if from > 0 {
        shown.push('…');
    }
    let mut count = 0;
    for ch in line
        .chars()
        .skip(from)
        .take(column - from + SNIPPET_AFTER + 1)
    {
        shown.push(if ch.is_control() { ' ' } else { ch });
        count += 1;
    }
    if from + count < line.chars().count() {
        shown.push('…');
    }
    let caret = column - from + usize::from(from > 0);
    format!("{shown}\n{}^", " ".repeat(caret))
}

#[cfg(test)]
mod snippet_tests {
    use super::*;

    #[test]
    fn snippets_of_long_lines_are_windowed() {
        let line = "x".repeat(10_000);
        let s = snippet(&line, 5_000);
        let (text, caret) = s.split_once('\n').unwrap();
        assert!(
            text.chars().count() < SNIPPET_BEFORE + SNIPPET_AFTER + 4,
            "{text}"
        );
        assert!(text.starts_with('…') && text.ends_with('…'));
        assert_eq!(caret.chars().count(), SNIPPET_BEFORE + 2);
        assert_eq!(snippet("RETURN 1 +", 9), "RETURN 1 +\n         ^");
        assert_eq!(snippet("a\u{1b}[2Jb", 0), "a [2Jb\n^");
    }
}

/// Most nesting the parser follows (parentheses, lists, maps, CASE) before it refuses.
const DEPTH_MAX: usize = 256;

/// Deepest expression tree the parser builds, nesting plus the links of left-associative
/// chains (`a + b + c`, `x OR y`, `n.a.b`, `l[0][1]`): binding, planning, evaluation and
/// `Drop` all recurse over the tree, so its depth, not only the parser's, must be bounded.
/// 1,000 keeps the deepest pass (compiling, about 1 KiB of stack per level) within half
/// of a 2 MiB thread stack (tested in the query crate's `tests/deep.rs`) and still
/// allows an `OR` chain of 900 comparisons; longer ones belong in `x IN [..]`.
pub const TREE_DEPTH_MAX: usize = 1_000;

struct Parser<'t> {
    text: &'t str,
    toks: Vec<Token>,
    pos: usize,
    depth: usize,
    /// Links of the left-associative chains being built around the current token.
    links: usize,
    /// In a list comprehension's WHERE, the last `|` at its level ends the predicate: a
    /// label expression there takes the ones before it (`[x IN l WHERE x:A|B | x]`),
    /// and any inside parentheses (`x:(A|B)`).
    no_bar: bool,
    /// Where the clause first joins labels by `:` (`:A:B`), first uses a label
    /// expression symbol (`|` between labels, `&`, `!`, `%`, parentheses), and first
    /// uses `IS` for labels: Neo4j refuses a clause that mixes the first with either of
    /// the others, and so does Quiver (`Parser::label_syntax`).
    colon_at: Option<usize>,
    symbol_at: Option<usize>,
    is_at: Option<usize>,
    /// Parsing a relationship's types, where `|` (and `|:`) is the old syntax too.
    in_types: bool,
}

/// A name in a label expression as parsed: a name, or `$(expr)` (names per row).
enum Leaf {
    Name(String),
    Dyn(Expr),
}

/// A label expression as parsed, before it is sorted into the pattern's forms.
type LTerm = LabelExpr<Leaf>;

/// The expression over names alone, `None` if a dynamic name is in it.
fn static_names(t: &LTerm) -> Option<LabelExpr> {
    t.try_map(&mut |l| match l {
        Leaf::Name(n) => Ok(n.clone()),
        Leaf::Dyn(_) => Err(()),
    })
    .ok()
}

/// A flat term's names and dynamic names, in order.
fn flatten(t: LTerm, names: &mut Vec<String>, dyns: &mut Vec<Expr>) {
    let mut leaves = Vec::new();
    t.into_names(&mut leaves);
    for l in leaves {
        match l {
            Leaf::Name(n) => names.push(n),
            Leaf::Dyn(e) => dyns.push(e),
        }
    }
}

type R<T> = Result<T, ParseError>;

const RESERVED: [&str; 26] = [
    "MATCH", "OPTIONAL", "WHERE", "WITH", "RETURN", "ORDER", "BY", "SKIP", "LIMIT", "UNWIND",
    "UNION", "AS", "AND", "OR", "XOR", "NOT", "IN", "STARTS", "ENDS", "CONTAINS", "IS", "NULL",
    "DISTINCT", "CASE", "WHEN", "THEN",
];

impl<'t> Parser<'t> {
    fn new(text: &'t str) -> R<Parser<'t>> {
        let toks =
            lex(text).map_err(|e| error_at(text, e.offset, e.message).with_detail(e.detail))?;
        Ok(Parser {
            text,
            toks,
            pos: 0,
            depth: 0,
            links: 0,
            no_bar: false,
            colon_at: None,
            symbol_at: None,
            is_at: None,
            in_types: false,
        })
    }

    fn peek(&self) -> &Tok {
        &self.toks[self.pos].tok
    }

    fn peek_at(&self, k: usize) -> &Tok {
        &self.toks[(self.pos + k).min(self.toks.len() - 1)].tok
    }

    fn bump(&mut self) -> Tok {
        let t = self.toks[self.pos].tok.clone();
        if self.pos < self.toks.len() - 1 {
            self.pos += 1;
        }
        t
    }

    fn err<T>(&self, expected: &str) -> R<T> {
        Err(error_at(
            self.text,
            self.toks[self.pos].offset,
            format!("expected {expected}, found {}", self.peek()),
        ))
    }

    /// [`err`](Self::err) with a detail code other than `UnexpectedSyntax`.
    fn err_detail<T>(&self, detail: Detail, expected: &str) -> R<T> {
        self.err(expected).map_err(|e| e.with_detail(detail))
    }

    fn is_kw(&self, kw: &str) -> bool {
        matches!(self.peek(), Tok::Ident(s) if s.eq_ignore_ascii_case(kw))
    }

    fn is_kw_at(&self, k: usize, kw: &str) -> bool {
        matches!(self.peek_at(k), Tok::Ident(s) if s.eq_ignore_ascii_case(kw))
    }

    /// Consumes the current token when `hit` (the result of a test on it).
    fn eat(&mut self, hit: bool) -> bool {
        if hit {
            self.bump();
        }
        hit
    }

    /// Consumes two keywords in a row (`NO HEADER`, `STORAGE MODE`), or nothing.
    fn eat_kws(&mut self, a: &str, b: &str) -> bool {
        let hit = self.is_kw(a) && self.is_kw_at(1, b);
        if hit {
            self.bump();
            self.bump();
        }
        hit
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        let hit = self.is_kw(kw);
        self.eat(hit)
    }

    fn expect_kw(&mut self, kw: &str) -> R<()> {
        if self.eat_kw(kw) {
            Ok(())
        } else {
            self.err(kw)
        }
    }

    fn is_p(&self, p: &str) -> bool {
        matches!(self.peek(), Tok::Punct(x) if *x == p)
    }

    fn eat_p(&mut self, p: &str) -> bool {
        let hit = self.is_p(p);
        self.eat(hit)
    }

    fn expect_p(&mut self, p: &str) -> R<()> {
        if self.eat_p(p) {
            Ok(())
        } else {
            self.err(&format!("'{p}'"))
        }
    }

    /// A name: an identifier that is not a reserved word, or a `quoted` name.
    fn name(&mut self, what: &str) -> R<String> {
        match self.peek().clone() {
            Tok::Quoted(s) => {
                self.bump();
                Ok(s)
            }
            Tok::Ident(s) if !RESERVED.iter().any(|r| r.eq_ignore_ascii_case(&s)) => {
                self.bump();
                Ok(s)
            }
            _ => self.err(what),
        }
    }

    /// A symbolic name where reserved words are allowed too (labels, types, keys).
    fn any_name(&mut self, what: &str) -> R<String> {
        match self.peek().clone() {
            Tok::Quoted(s) | Tok::Ident(s) => {
                self.bump();
                Ok(s)
            }
            _ => self.err(what),
        }
    }

    fn enter(&mut self) -> R<()> {
        self.depth += 1;
        if self.depth > DEPTH_MAX {
            return Err(error_at(
                self.text,
                self.toks[self.pos].offset,
                format!("nesting deeper than {DEPTH_MAX}"),
            ));
        }
        Ok(())
    }

    /// One more link on a left-associative chain: the tree gets one level deeper.
    fn link(&mut self) -> R<()> {
        self.links += 1;
        if self.depth + self.links > TREE_DEPTH_MAX {
            return Err(error_at(
                self.text,
                self.toks[self.pos.saturating_sub(1)].offset,
                format!(
                    "expression deeper than {TREE_DEPTH_MAX} operators; split it up \
                     (a long OR of equalities is `x IN [..]`)"
                ),
            ));
        }
        Ok(())
    }

    /// Runs a chain-building rule, dropping its links once the chain is built.
    fn chain(&mut self, rule: impl FnOnce(&mut Self) -> R<Expr>) -> R<Expr> {
        let mark = self.links;
        let e = rule(self);
        self.links = mark;
        e
    }

    // -----------------------------------------------------------------------------------
    // Clauses

    fn statement(&mut self) -> R<Statement> {
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

    fn clauses(&mut self) -> R<Vec<Clause>> {
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
    fn clause(&mut self, clauses: &mut Vec<Clause>) -> R<bool> {
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
            match crate::apoc::rewrite(&pc) {
                Some(Ok(cs)) => clauses.extend(cs),
                Some(Err(msg)) => return Err(error_at(self.text, pc.at, msg)),
                None => clauses.push(Clause::CallProc(pc)),
            }
        } else {
            return Ok(false);
        }
        Ok(true)
    }

    fn single_query(&mut self) -> R<SingleQuery> {
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

    fn single_query_inner(&mut self) -> R<SingleQuery> {
        let clauses = self.clauses()?;
        Ok(SingleQuery { clauses })
    }

    /// `x.key` (or `(expr).key`) as the target of SET / REMOVE.
    fn prop_target(&mut self) -> R<(Expr, String)> {
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
    fn if_not_exists(&mut self) -> R<bool> {
        if !self.eat_kw("IF") {
            return Ok(false);
        }
        self.expect_kw("NOT")?;
        self.expect_kw("EXISTS")?;
        Ok(true)
    }

    /// `$(expr)` where a label or relationship type stands (Neo4j 5.26's dynamic
    /// labels and types), or `None` when a name stands there.
    fn dynamic_name(&mut self) -> R<Option<Expr>> {
        if !(self.is_p("$") && matches!(self.peek_at(1), Tok::Punct("("))) {
            return Ok(None);
        }
        self.bump();
        self.bump();
        let e = self.expr()?;
        self.expect_p(")")?;
        Ok(Some(e))
    }

    /// A label expression after `:` or `IS` (Neo4j 5, ISO GQL): `|` binds loosest,
    /// then `&`, then `!`; `%` is any label; parentheses group; `$(expr)` names labels
    /// per row. With `colon`, `:A:B` is `A&B`, openCypher's form, which does not mix
    /// with the symbols (as in Neo4j). `|:B` is the older spelling of `|B`.
    fn label_term(&mut self, colon: bool) -> R<LTerm> {
        let at = self.toks[self.pos].offset;
        let mut e = self.label_or()?;
        if colon && self.is_p(":") {
            self.colon_at.get_or_insert(at);
            let mut simple = matches!(e, LabelExpr::Name(_));
            while self.eat_p(":") {
                let next = self.label_or()?;
                simple &= matches!(next, LabelExpr::Name(_));
                e = LabelExpr::And(Box::new(e), Box::new(next));
            }
            if !simple {
                return Err(error_at(
                    self.text,
                    at,
                    "mixing the label expression symbols ('|', '&', '!', '%') with ':' between labels is not allowed; write :A&B".into(),
                ));
            }
        }
        Ok(e)
    }

    fn label_or(&mut self) -> R<LTerm> {
        self.enter()?;
        let mut e = self.label_and()?;
        while self.is_p("|") && (!self.no_bar || self.later_bar()) {
            if !self.in_types {
                self.symbol();
            }
            self.bump();
            self.eat_p(":");
            e = LabelExpr::Or(Box::new(e), Box::new(self.label_and()?));
        }
        self.depth -= 1;
        Ok(e)
    }

    fn label_and(&mut self) -> R<LTerm> {
        let mut e = self.label_not()?;
        while self.is_p("&") {
            self.symbol();
            self.bump();
            e = LabelExpr::And(Box::new(e), Box::new(self.label_not()?));
        }
        Ok(e)
    }

    /// Notes a label expression symbol at the current token.
    fn symbol(&mut self) {
        self.symbol_at.get_or_insert(self.toks[self.pos].offset);
    }

    /// Neo4j's rule: `:A:B` does not mix with the label expression symbols, nor with
    /// `IS`, in one statement.
    fn label_syntax(&self) -> R<()> {
        let Some(colon) = self.colon_at else {
            return Ok(());
        };
        let msg = if self.symbol_at.is_some() {
            "mixing label expression symbols ('|', '&', '!', and '%') with colon (':') between labels is not allowed; use one set of symbols (:A:B is :A&B)"
        } else if self.is_at.is_some() {
            "mixing the IS keyword with colon (':') between labels is not allowed (:A:B is IS A&B)"
        } else {
            return Ok(());
        };
        Err(error_at(self.text, colon, msg.into()))
    }

    fn label_not(&mut self) -> R<LTerm> {
        if matches!(self.peek(), Tok::Punct("!" | "%" | "(")) {
            self.symbol();
        }
        if self.eat_p("!") {
            self.enter()?;
            let e = self.label_not();
            self.depth -= 1;
            return Ok(LabelExpr::Not(Box::new(e?)));
        }
        if self.eat_p("%") {
            return Ok(LabelExpr::Any);
        }
        if self.eat_p("(") {
            let bar = std::mem::replace(&mut self.no_bar, false);
            let e = self.label_or();
            self.no_bar = bar;
            let e = e?;
            self.expect_p(")")?;
            return Ok(e);
        }
        match self.dynamic_name()? {
            Some(e) => Ok(LabelExpr::Name(Leaf::Dyn(e))),
            None => Ok(LabelExpr::Name(Leaf::Name(self.any_name("a label")?))),
        }
    }

    /// A node's label expression into its pattern: a conjunction of names as its
    /// labels (and dynamic labels), anything else as `label_expr`.
    fn node_labels(&mut self, n: &mut NodePattern, colon: bool) -> R<()> {
        let at = self.toks[self.pos].offset;
        let t = self.label_term(colon)?;
        if t.is_flat(false) {
            flatten(t, &mut n.labels, &mut n.dyn_labels);
            return Ok(());
        }
        match static_names(&t) {
            Some(e) => {
                n.label_expr = Some(Box::new(e));
                Ok(())
            }
            None => Err(error_at(
                self.text,
                at,
                "a label given by $(...) joins others with ':' or '&' only".into(),
            )),
        }
    }

    /// `n:A:B` in SET or REMOVE, when the next item is one: the variable, the labels
    /// named, and those given as `$(expr)`.
    #[allow(clippy::type_complexity)]
    fn labels_item(&mut self) -> R<Option<(String, Vec<String>, Vec<Expr>)>> {
        if !matches!(self.peek_at(1), Tok::Punct(":")) {
            return Ok(None);
        }
        let var = self.name("a variable")?;
        let (mut labels, mut exprs) = (Vec::new(), Vec::new());
        while self.eat_p(":") {
            match self.dynamic_name()? {
                Some(e) => exprs.push(e),
                None => labels.push(self.any_name("a label")?),
            }
        }
        Ok(Some((var, labels, exprs)))
    }

    fn set_items(&mut self) -> R<Vec<SetItem>> {
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

    fn one_char(&mut self, what: &str) -> R<u8> {
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
    fn load_csv(&mut self) -> R<LoadCsv> {
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

    fn projection(&mut self) -> R<Projection> {
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

    fn tail(&mut self, mut p: Projection) -> R<Projection> {
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

    // -----------------------------------------------------------------------------------
    // Patterns

    fn pattern(&mut self) -> R<Pattern> {
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

    fn path_body(&mut self) -> R<Pattern> {
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

    fn node_pattern(&mut self) -> R<NodePattern> {
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

    fn rel_pattern(&mut self) -> R<RelPattern> {
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

    // -----------------------------------------------------------------------------------
    // Expressions, lowest precedence first

    fn expr(&mut self) -> R<Expr> {
        self.enter()?;
        let e = self.or();
        self.depth -= 1;
        e
    }

    fn or(&mut self) -> R<Expr> {
        self.chain(|p| {
            let mut e = p.xor()?;
            while p.eat_kw("OR") {
                p.link()?;
                e = Expr::Binary(BinOp::Or, Box::new(e), Box::new(p.xor()?));
            }
            Ok(e)
        })
    }

    fn xor(&mut self) -> R<Expr> {
        self.chain(|p| {
            let mut e = p.and()?;
            while p.eat_kw("XOR") {
                p.link()?;
                e = Expr::Binary(BinOp::Xor, Box::new(e), Box::new(p.and()?));
            }
            Ok(e)
        })
    }

    fn and(&mut self) -> R<Expr> {
        self.chain(|p| {
            let mut e = p.not()?;
            while p.eat_kw("AND") {
                p.link()?;
                e = Expr::Binary(BinOp::And, Box::new(e), Box::new(p.not()?));
            }
            Ok(e)
        })
    }

    fn not(&mut self) -> R<Expr> {
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
    fn left_assoc(&mut self, next: fn(&mut Self) -> R<Expr>, ops: &[(&str, BinOp)]) -> R<Expr> {
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

    fn comparison(&mut self) -> R<Expr> {
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

    fn string_ops(&mut self) -> R<Expr> {
        self.chain(Self::string_ops_chain)
    }

    fn string_ops_chain(&mut self) -> R<Expr> {
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

    fn additive(&mut self) -> R<Expr> {
        self.left_assoc(
            Self::multiplicative,
            &[("+", BinOp::Add), ("-", BinOp::Sub)],
        )
    }

    fn multiplicative(&mut self) -> R<Expr> {
        self.left_assoc(
            Self::power,
            &[("*", BinOp::Mul), ("/", BinOp::Div), ("%", BinOp::Mod)],
        )
    }

    /// `^` is left-associative in openCypher: `4 ^ 3 ^ 2` is `(4 ^ 3) ^ 2`.
    fn power(&mut self) -> R<Expr> {
        self.left_assoc(Self::unary, &[("^", BinOp::Pow)])
    }

    fn unary(&mut self) -> R<Expr> {
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

    fn postfix(&mut self) -> R<Expr> {
        self.chain(Self::postfix_chain)
    }

    fn postfix_chain(&mut self) -> R<Expr> {
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

    /// `x:expr` in an expression: a conjunction of names as `HasLabels`, anything
    /// else as `LabelTest` (no dynamic names: `labels(n)` tests those).
    fn label_test(&self, x: Expr, t: LTerm, at: usize) -> R<Expr> {
        if t.is_flat(false) {
            let (mut names, mut dyns) = (Vec::new(), Vec::new());
            flatten(t, &mut names, &mut dyns);
            if dyns.is_empty() {
                return Ok(Expr::HasLabels(Box::new(x), names));
            }
        } else if let Some(l) = static_names(&t) {
            return Ok(Expr::LabelTest(Box::new(x), l));
        }
        Err(error_at(
            self.text,
            at,
            "a label given by $(...) is not a test; use any(l IN labels(n) WHERE ...)".into(),
        ))
    }

    fn atom(&mut self) -> R<Expr> {
        self.enter()?;
        let e = self.atom_inner();
        self.depth -= 1;
        e
    }

    fn atom_inner(&mut self) -> R<Expr> {
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
    fn proc_call(&mut self) -> R<ProcCall> {
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
    fn namespaced_call(&self) -> bool {
        let mut i = 1;
        while matches!(self.peek_at(i), Tok::Punct("."))
            && matches!(self.peek_at(i + 1), Tok::Ident(_))
        {
            i += 2;
        }
        i > 1 && matches!(self.peek_at(i), Tok::Punct("("))
    }

    fn call(&mut self) -> R<Expr> {
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

    fn case(&mut self) -> R<Expr> {
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

    /// In a comprehension's WHERE, whether another `|` follows the current one at the
    /// comprehension's level: then the current one joins labels, as Neo4j reads
    /// `[x IN l WHERE x:A|B | x.id]`, and the last one is the projection's.
    fn later_bar(&self) -> bool {
        let mut depth = 0usize;
        for t in &self.toks[self.pos + 1..] {
            match t.tok {
                Tok::Punct("(" | "[" | "{") => depth += 1,
                Tok::Punct(")" | "]" | "}") if depth == 0 => return false,
                Tok::Punct(")" | "]" | "}") => depth -= 1,
                Tok::Punct("|") if depth == 0 => return true,
                _ => {}
            }
        }
        false
    }

    /// `f` with `|` ending a label expression at its top level (a comprehension's
    /// WHERE, which `| map` may follow).
    fn bar_ends(&mut self, f: fn(&mut Self) -> R<Expr>) -> R<Expr> {
        let bar = std::mem::replace(&mut self.no_bar, true);
        let e = f(self);
        self.no_bar = bar;
        e
    }

    /// `x IN list [WHERE p] [| e]` and the closing `close`.
    /// `x IN list`, the head of a comprehension or a quantifier (`IN` is known to follow).
    fn var_in_list(&mut self) -> R<(String, Box<Expr>)> {
        let var = self.name("a variable")?;
        self.bump();
        Ok((var, Box::new(self.expr()?)))
    }

    /// Memgraph's `(e, n | expr)`.
    fn lambda(&mut self) -> R<Lambda> {
        self.expect_p("(")?;
        let rel = self.name("the lambda's relationship variable")?;
        self.expect_p(",")?;
        let node = self.name("the lambda's node variable")?;
        self.expect_p("|")?;
        let expr = Box::new(self.expr()?);
        self.expect_p(")")?;
        Ok(Lambda { rel, node, expr })
    }

    fn comprehension(&mut self, close: &str) -> R<Expr> {
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
    fn map_projection(&mut self, subject: Expr) -> R<Expr> {
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
    fn subquery_expr(&mut self) -> R<Expr> {
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
    fn whole_subquery(&mut self, at: usize, kind: SubqueryKind) -> R<Expr> {
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
    fn pattern_comprehension(&mut self) -> R<Option<Expr>> {
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

    fn list_or_comprehension(&mut self) -> R<Expr> {
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

/// Parses one statement (a read query, optionally under EXPLAIN or PROFILE).
impl Parser<'_> {
    fn end(&mut self) -> R<()> {
        self.eat_p(";");
        if matches!(self.peek(), Tok::Eof) {
            Ok(())
        } else {
            self.err("the end of the statement")
        }
    }

    /// `:L(p)` or `FOR (n:L) ON (n.p)` after CREATE/DROP INDEX [name].
    fn index_target(&mut self) -> R<(String, String)> {
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
    fn for_type_on_prop(&mut self) -> R<(String, String)> {
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
    fn for_label_on_prop(&mut self) -> R<(String, String)> {
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
    fn prop_of(&mut self, v: &str) -> R<String> {
        let v2 = self.name("a variable")?;
        if v2 != v {
            return self.err(&format!("the variable {v}"));
        }
        self.expect_p(".")?;
        self.any_name("a property")
    }

    fn index_name(&mut self) -> R<(Expr, bool)> {
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
    fn index_options(&mut self) -> R<Option<Expr>> {
        Ok(if self.eat_kw("OPTIONS") {
            Some(self.expr()?)
        } else {
            None
        })
    }

    /// `ON v.prop` or `ON (v.prop)`, `v` the pattern's variable: the property.
    fn on_prop(&mut self, v: &str) -> R<String> {
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
    fn constraint_target(&mut self) -> R<(Option<String>, String, Vec<String>, bool)> {
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
    fn skip_to_show_tail(&mut self) {
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
    fn show_tail(&mut self, c: Command) -> R<Command> {
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

    fn command(&mut self) -> R<Option<Command>> {
        let c = if self.eat_kw("BEGIN") {
            Command::Begin
        } else if self.eat_kw("COMMIT") {
            Command::Commit
        } else if self.eat_kw("ROLLBACK") {
            Command::Rollback
        } else if self.eat_kw("CHECKPOINT") {
            Command::Checkpoint
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

/// Parses a query or a command (transactions, storage, index DDL).
pub fn parse(text: &str) -> Result<Parsed, ParseError> {
    let mut p = Parser::new(text)?;
    // `command` consumes nothing unless it matched, so the query parse starts at 0.
    match p.command()? {
        Some(c) => Ok(Parsed::Command(c)),
        None => Ok(Parsed::Query(p.statement()?)),
    }
}

pub fn parse_query(text: &str) -> Result<Statement, ParseError> {
    Parser::new(text)?.statement()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ok(q: &str) -> Statement {
        parse_query(q).unwrap_or_else(|e| panic!("{q}\n{e}"))
    }

    fn err(q: &str) -> ParseError {
        parse_query(q).expect_err(q)
    }

    #[test]
    fn errors_carry_opencypher_detail_codes() {
        for (q, want) in [
            ("RETURN 42 \u{2014} 41", Detail::InvalidUnicodeCharacter),
            ("RETURN 1 # 2", Detail::UnexpectedSyntax),
            ("RETURN 12h5", Detail::InvalidNumberLiteral),
            ("RETURN {1B2: 1}", Detail::UnexpectedSyntax),
            ("RETURN 0xZZ", Detail::InvalidNumberLiteral),
            ("RETURN 9223372036854775808", Detail::IntegerOverflow),
            ("RETURN 1e999", Detail::FloatingPointOverflow),
            ("RETURN '\\u12'", Detail::InvalidUnicodeLiteral),
            (
                "MATCH (a)-[:T 1..2]->() RETURN a",
                Detail::InvalidRelationshipPattern,
            ),
            (
                "MATCH (a)-[:T*-2]->() RETURN a",
                Detail::InvalidRelationshipPattern,
            ),
            (
                "RETURN 1 AS x UNION RETURN 2 AS x UNION ALL RETURN 3 AS x",
                Detail::InvalidClauseComposition,
            ),
            ("RETURN", Detail::UnexpectedSyntax),
        ] {
            assert_eq!(err(q).detail, want, "{q}: {}", err(q));
        }
        // Unicode letters make names; Unicode white space separates.
        assert!(parse_query("WITH 1 AS café\u{a0}RETURN café").is_ok());
    }

    #[test]
    fn seed_003_queries_parse() {
        for q in [
            "MATCH (n:User) RETURN n.age, count(*) ORDER BY n.age",
            "MATCH (s:User {id: $id})-->()-->(n:User) RETURN DISTINCT n.id",
            "MATCH (s:User {id: $id})-[*1..2]->(n:User) RETURN DISTINCT n.id",
            "MATCH (s:User {id: $id})-[*1..2]->(n:User) RETURN DISTINCT n",
            "MATCH p = shortestPath((a:User {id: $a})-[*..15]->(b:User {id: $b})) RETURN length(p)",
            "MATCH (a:User {id: $a})-[*BFS ..15]->(b:User {id: $b}) RETURN b",
            "MATCH (n:User {id: $id}) RETURN n",
            "MATCH (a)-[r:FOLLOWS|KNOWS]-(b) WHERE a.age > 20 AND NOT b.name STARTS WITH 'x' RETURN a, r, b LIMIT 10",
            "OPTIONAL MATCH (n)<-[:R]-(m) WITH n, collect(m) AS ms WHERE size(ms) > 1 RETURN n SKIP 2 LIMIT 3",
            "UNWIND [1, 2, 3] AS x RETURN x * 2 AS y UNION ALL RETURN 7 AS y",
            "RETURN CASE WHEN 1 < 2 THEN 'a' ELSE 'b' END, [x IN range(1, 10) WHERE x % 2 = 0 | x ^ 2][1..3]",
            "MATCH (a), (b) WHERE (a)-->(b) AND a:User:Admin AND a.x IS NOT NULL RETURN count(DISTINCT a.x), {k: [1, 2.5, null, true]}",
            "EXPLAIN MATCH (n) RETURN n",
            "PROFILE MATCH (n) RETURN *",
        ] {
            ok(q);
        }
    }

    #[test]
    fn shapes() {
        let s = ok("MATCH (a:User)-[r:F*2]->(b) RETURN a.x + 1 * 2");
        let Clause::Match { patterns, .. } = &s.query.parts[0].clauses[0] else {
            panic!()
        };
        let (rel, node) = &patterns[0].steps[0];
        assert_eq!(
            (rel.dir, rel.range, rel.types.clone()),
            (Dir::Out, Some((Some(2), Some(2))), vec!["F".to_string()])
        );
        assert_eq!(node.var.as_deref(), Some("b"));
        let Clause::Return(p) = &s.query.parts[0].clauses[1] else {
            panic!()
        };
        // Precedence: a.x + (1 * 2).
        assert!(
            matches!(&p.items[0].0, Expr::Binary(BinOp::Add, _, r) if matches!(**r, Expr::Binary(BinOp::Mul, _, _)))
        );
        let s = ok("MATCH (a)<-[*]-(b) RETURN 2 ^ 3 ^ 2");
        let Clause::Match { patterns, .. } = &s.query.parts[0].clauses[0] else {
            panic!()
        };
        assert_eq!(
            (patterns[0].steps[0].0.dir, patterns[0].steps[0].0.range),
            (Dir::In, Some((Some(1), None)))
        );
    }

    #[test]
    fn label_expressions() {
        let s = ok("MATCH (a:A&B)-[r:T|:U]->(b:A|B)<-[:!T]-(c IS A&B)-[:%]-(d:(A|B)&!%) WHERE a:A|B RETURN a");
        let Clause::Match {
            patterns, where_, ..
        } = &s.query.parts[0].clauses[0]
        else {
            panic!()
        };
        let p = &patterns[0];
        let name = |s: &str| Box::new(LabelExpr::Name(s.into()));
        // A conjunction stays a list of labels, a disjunction of types a list of types.
        assert_eq!(
            (p.start.labels.clone(), &p.start.label_expr),
            (vec!["A".into(), "B".into()], &None)
        );
        assert_eq!(p.steps[0].0.types, vec!["T".to_string(), "U".to_string()]);
        assert_eq!(
            p.steps[0].1.label_expr.as_deref(),
            Some(&LabelExpr::Or(name("A"), name("B")))
        );
        assert_eq!(
            p.steps[1].0.type_expr.as_deref(),
            Some(&LabelExpr::Not(name("T")))
        );
        assert_eq!(p.steps[1].1.labels, vec!["A".to_string(), "B".to_string()]);
        assert_eq!(p.steps[2].0.type_expr.as_deref(), Some(&LabelExpr::Any));
        assert_eq!(
            p.steps[2].1.label_expr.as_deref(),
            Some(&LabelExpr::And(
                Box::new(LabelExpr::Or(name("A"), name("B"))),
                Box::new(LabelExpr::Not(Box::new(LabelExpr::Any)))
            ))
        );
        assert!(matches!(
            where_,
            Some(Expr::LabelTest(_, LabelExpr::Or(..)))
        ));
        // The colon between labels does not mix with the symbols, as in Neo4j.
        // Nor in one statement (Neo4j's rule), while types joined by `|:` mix with
        // anything, and a variable-length relationship takes only a list of types.
        for q in [
            "MATCH (n:A:B|C) RETURN n",
            "MATCH (n:A|B:C) RETURN n",
            "MATCH (n:!A:B) RETURN n",
            "MATCH (n:A:B), (m:A|B) RETURN n",
            "MATCH (n:A:B) WHERE n:!C RETURN n",
            "MATCH (n:A&B) WHERE n:A:B RETURN n",
            "MATCH (n:A:B), (m IS C) RETURN n",
            "MATCH (n)-[:!R*]->(m) RETURN n",
            "MATCH (n)-[:%*1..2]->(m) RETURN n",
        ] {
            assert!(parse_query(q).is_err(), "{q}");
        }
        for q in [
            "MATCH (n:A:B)-[:R|:S]->(m:C) WHERE n:D:E RETURN n",
            "MATCH (n:A:B) RETURN COUNT { (n)-[:!R]->() } AS c",
            "MATCH (n:A|B)-[:R|:S*1..2]->(m) RETURN n",
        ] {
            ok(q);
        }
    }

    #[test]
    fn errors_point_at_the_problem() {
        let e = err("MATCH (n:User)\nRETURN n.age,");
        assert_eq!((e.line, e.column), (1, 13));
        assert!(
            e.message
                .contains("expected an expression, found the end of the query"),
            "{e}"
        );
        assert!(
            e.to_string().contains("RETURN n.age,\n             ^"),
            "{e}"
        );
        let e = err("MATCH (n RETURN n");
        assert_eq!((e.line, e.column), (0, 9));
        assert!(e.message.contains("expected ')'"), "{e}");
        let e = err("MATCH (n) RETURN n ORDER n");
        assert!(e.message.contains("expected BY"), "{e}");
        let e = err("MATCH (n)");
        assert!(e.message.contains("RETURN"), "{e}");
        let e = err("RETURN 'open");
        assert_eq!((e.line, e.column), (0, 7));
        // `<-[]->` is openCypher's other spelling of either direction.
        let both = parse("MATCH (a)<-[]->(b) RETURN a").expect("valid");
        assert!(format!("{both:?}").contains("dir: Both"), "{both:?}");
        let deep = format!("RETURN {}1{}", "(".repeat(1000), ")".repeat(1000));
        assert!(err(&deep).message.contains("nesting"));
    }

    proptest! {
        // Random token soup never panics the lexer or the parser.
        #[test]
        fn never_panics(words in proptest::collection::vec(prop_oneof![
            Just("MATCH"), Just("RETURN"), Just("WITH"), Just("WHERE"), Just("("), Just(")"), Just("["), Just("]"),
            Just("{"), Just("}"), Just("-"), Just("->"), Just("<-"), Just(":"), Just("*"), Just(".."), Just("n"),
            Just("1"), Just("'s'"), Just(","), Just("AND"), Just("CASE"), Just("END"), Just("|"), Just("IN"), Just("$p"),
            Just("."), Just("="), Just("`q`"), Just("\""), Just("/*"),
        ], 0..40)) {
            let _ = parse_query(&words.join(" "));
        }
    }
}
