//! Recursive descent over the tokens of [`lex`](crate::lex); expressions by precedence
//! climbing. The first error stops the parse and says where (line and column, 1-based
//! when shown, with the line and a caret) and what was expected.
//!
//! One `Parser`, its rules split by syntax area (as rust-analyzer's grammar is): this
//! module has the errors, the parser's state and its token primitives (`peek`, `eat_kw`,
//! `expect_p`, the depth and chain guards) and the entry points; `clauses`, `patterns`,
//! `labels` (label expressions), `exprs` and `commands` each add the rules of their
//! area to `Parser` in an `impl` of their own, calling each other's rules freely
//! (they are one grammar).

use crate::ast::*;
use crate::detail::Detail;
use crate::lex::{lex, Tok, Token};

pub mod apoc;
mod clauses;
mod commands;
mod exprs;
mod labels;
mod patterns;

use labels::{flatten, static_names};

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
}

impl Parser<'_> {
    /// The end of a statement: an optional `;`, then nothing.
    fn end(&mut self) -> R<()> {
        self.eat_p(";");
        if matches!(self.peek(), Tok::Eof) {
            Ok(())
        } else {
            self.err("the end of the statement")
        }
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
