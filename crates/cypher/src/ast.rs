//! The syntax tree of a query: what the text says, before names are bound.

#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    pub explain: Option<Explain>,
    pub query: Query,
}

impl SingleQuery {
    /// See [`Query::graph_read`].
    pub fn graph_read(&self) -> bool {
        self.clauses.iter().all(|c| match c {
            Clause::Match { .. } | Clause::Unwind { .. } | Clause::With(_) | Clause::Return(_) => {
                true
            }
            Clause::CallSubquery { body, unions, .. } => {
                body.graph_read() && unions.iter().all(|(_, p)| p.graph_read())
            }
            _ => false,
        })
    }

    /// Reads the graph and at most writes it: no procedure, no LOAD CSV and no
    /// `CALL { } IN TRANSACTIONS` (which commits as it goes), in any subquery either.
    pub fn rerunnable(&self) -> bool {
        self.clauses.iter().all(|c| match c {
            Clause::Match { .. }
            | Clause::Unwind { .. }
            | Clause::With(_)
            | Clause::Return(_)
            | Clause::Create(_)
            | Clause::Merge { .. }
            | Clause::Set(_)
            | Clause::Remove(_)
            | Clause::Delete { .. } => true,
            Clause::CallSubquery { body, unions, .. } => {
                body.rerunnable() && unions.iter().all(|(_, p)| p.rerunnable())
            }
            _ => false,
        })
    }

    /// Whether a clause (or a `CALL { }` body) writes.
    pub fn writes(&self) -> bool {
        self.clauses.iter().any(|c| match c {
            Clause::Create(_)
            | Clause::Merge { .. }
            | Clause::Set(_)
            | Clause::Remove(_)
            | Clause::Delete { .. } => true,
            Clause::CallInTx { body, .. } => body.writes(),
            Clause::CallSubquery { body, unions, .. } => {
                body.writes() || unions.iter().any(|(_, p)| p.writes())
            }
            // A graph algorithm's write mode (`gds.pageRank.write`) sets properties.
            Clause::CallProc(pc) => pc.name.starts_with("gds.") && pc.name.ends_with(".write"),
            _ => false,
        })
    }
}

impl Query {
    pub fn writes(&self) -> bool {
        self.parts.iter().any(|p| p.writes())
    }

    /// Reads only the graph: no writes, no procedure (one may wait, or change the
    /// schema) and no LOAD CSV (files), in any subquery either. Such a statement can
    /// be run again, or stopped and run elsewhere, with nothing to undo.
    pub fn graph_read(&self) -> bool {
        self.parts.iter().all(SingleQuery::graph_read)
    }

    /// A graph read, or a write of the graph alone (no procedure, LOAD CSV or `CALL {
    /// } IN TRANSACTIONS`, in any subquery): run as an auto-commit statement, it
    /// commits at its end only, so stopped before that it leaves nothing and can run
    /// again elsewhere.
    pub fn rerunnable(&self) -> bool {
        self.parts.iter().all(SingleQuery::rerunnable)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Explain {
    Explain,
    Profile,
}

/// Single queries joined by UNION (`all[i]` says whether the i-th join is UNION ALL).
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub parts: Vec<SingleQuery>,
    pub union_all: Vec<bool>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SingleQuery {
    pub clauses: Vec<Clause>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Clause {
    Match {
        optional: bool,
        patterns: Vec<Pattern>,
        where_: Option<Expr>,
    },
    Unwind {
        expr: Expr,
        var: String,
    },
    With(Projection),
    Return(Projection),
    /// `CREATE p, ...`
    Create(Vec<Pattern>),
    /// `MERGE p [ON CREATE SET ...] [ON MATCH SET ...]`
    Merge {
        pattern: Pattern,
        on_create: Vec<SetItem>,
        on_match: Vec<SetItem>,
    },
    Set(Vec<SetItem>),
    Remove(Vec<RemoveItem>),
    Delete {
        detach: bool,
        exprs: Vec<Expr>,
    },
    LoadCsv(LoadCsv),
    /// `CALL { ... } IN TRANSACTIONS [OF n ROWS]`: the body commits every `n` input rows.
    CallInTx {
        body: Box<SingleQuery>,
        rows: Option<Expr>,
        on_error: OnError,
        /// See [`Clause::CallSubquery`]'s `sees_all`.
        sees_all: bool,
    },
    /// `CALL { ... }`: the body runs for each input row; the rows it returns extend that
    /// row (none: the row is dropped); a body without RETURN passes the row on.
    /// `OPTIONAL CALL { ... }`: a row the body returns nothing for is kept, with nulls.
    /// `CALL { A UNION [ALL] B ... }`: the parts after the first, with whether each
    /// joins by UNION ALL.
    ///
    /// What of the outer row the body sees: everything with `sees_all` (`CALL (*) { }`,
    /// and the subqueries that EXISTS { }, COUNT { } and COLLECT { } become); otherwise
    /// only the variables its importing WITH names (`CALL { WITH a ... }`, and the
    /// leading WITH that `CALL (a) { }` is read as), see [`imports`](crate::bind::imports).
    CallSubquery {
        body: Box<SingleQuery>,
        optional: bool,
        sees_all: bool,
        unions: Vec<(bool, SingleQuery)>,
    },
    /// `CALL ns.proc(args) [YIELD out [AS name], ... | YIELD *] [WHERE pred]`
    CallProc(ProcCall),
}

/// A procedure call.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcCall {
    pub name: String,
    /// Where the name starts in the text.
    pub at: usize,
    /// `None`: called without parentheses, its arguments taken from the parameters of
    /// the same names (allowed only in a standalone call).
    pub args: Option<Vec<Expr>>,
    /// `None`: no YIELD. Otherwise (output, name it is bound to), in order.
    pub yields: Option<Vec<(String, String)>>,
    /// `YIELD *`.
    pub star: bool,
    pub where_: Option<Expr>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    Fail,
    Continue,
    Break,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SetItem {
    /// `SET x.key = value`
    Prop {
        target: Expr,
        key: String,
        value: Expr,
    },
    /// `SET x[key] = value` (Neo4j 5's dynamic property): the key an expression giving a
    /// string per row.
    DynProp {
        target: Expr,
        key: Expr,
        value: Expr,
    },
    /// `SET n = map` (replace all properties)
    Replace { var: String, value: Expr },
    /// `SET n += map`
    Merge { var: String, value: Expr },
    /// `SET n:A:B`
    Labels { var: String, labels: Vec<String> },
    /// `SET n:$(expr)` (Neo4j 5.26's dynamic labels): each expression a string or a
    /// list of strings, evaluated per row.
    LabelExprs { var: String, exprs: Vec<Expr> },
}

#[derive(Debug, Clone, PartialEq)]
pub enum RemoveItem {
    Prop {
        target: Expr,
        key: String,
    },
    Labels {
        var: String,
        labels: Vec<String>,
    },
    /// `REMOVE n:$(expr)`
    LabelExprs {
        var: String,
        exprs: Vec<Expr>,
    },
}

/// `LOAD CSV` in Neo4j's and Memgraph's spellings.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadCsv {
    pub source: Expr,
    pub header: bool,
    pub var: String,
    pub delimiter: Option<u8>,
    pub quote: Option<u8>,
    pub null_if: Option<String>,
    pub ignore_bad: bool,
    /// Byte offset of the clause (for error messages).
    pub offset: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Projection {
    pub distinct: bool,
    /// `*` (all variables in scope) before the listed items.
    pub star: bool,
    pub items: Vec<(Expr, Option<String>)>,
    pub order: Vec<(Expr, bool)>,
    pub skip: Option<Expr>,
    pub limit: Option<Expr>,
    /// `WITH ... WHERE`.
    pub where_: Option<Expr>,
    /// The source text of each item (the column name when it has no alias).
    pub texts: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    Plain,
    Shortest,
    AllShortest,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Pattern {
    pub var: Option<String>,
    /// Byte offset of `var` in the query (for errors).
    pub var_at: usize,
    pub kind: PathKind,
    pub start: NodePattern,
    pub steps: Vec<(RelPattern, NodePattern)>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodePattern {
    pub var: Option<String>,
    /// Byte offset of `var` in the query (for errors).
    pub var_at: usize,
    pub labels: Vec<String>,
    /// `:$(expr)` (Neo4j 5.26): labels given by an expression per row (a string or a
    /// list of strings); the node has all of them.
    pub dyn_labels: Vec<Expr>,
    /// A label expression that is not a plain conjunction (Neo4j 5 / GQL: `:A|B`,
    /// `:!A`, `:%`, `:(A|B)&!C`); the node must also carry every label of `labels`.
    /// Boxed: rare, and a pattern is cloned for every plan (a 2-hop pattern's steps
    /// stay under glibc's 1 KiB small-bin limit).
    pub label_expr: Option<Box<LabelExpr>>,
    pub props: Option<Expr>,
}

/// A label expression (Neo4j 5, ISO GQL): on a node, a test of its labels; on a
/// relationship, of its one type (`%` is any label, so a node with at least one, and
/// every relationship). Its names are `N`: text in the syntax tree, names or `$(expr)`
/// while the parser reads them, resolved label ids once compiled (`map`).
#[derive(Debug, Clone, PartialEq)]
pub enum LabelExpr<N = String> {
    Name(N),
    /// `%`
    Any,
    /// `!e`
    Not(Box<LabelExpr<N>>),
    /// `a & b` (and `:A:B`)
    And(Box<LabelExpr<N>>, Box<LabelExpr<N>>),
    /// `a | b`
    Or(Box<LabelExpr<N>>, Box<LabelExpr<N>>),
}

impl<N> LabelExpr<N> {
    /// Whether a thing matches: `has` tests a name, `any` whether it has a label at all
    /// (every relationship has its type). Evaluated left to right, short-circuiting as
    /// the operators read; the first error ends it.
    pub fn try_matches<E>(
        &self,
        has: &mut dyn FnMut(&N) -> Result<bool, E>,
        any: &mut dyn FnMut() -> Result<bool, E>,
    ) -> Result<bool, E> {
        Ok(match self {
            LabelExpr::Name(l) => has(l)?,
            LabelExpr::Any => any()?,
            LabelExpr::Not(x) => !x.try_matches(has, any)?,
            LabelExpr::And(a, b) => a.try_matches(has, any)? && b.try_matches(has, any)?,
            LabelExpr::Or(a, b) => a.try_matches(has, any)? || b.try_matches(has, any)?,
        })
    }

    /// [`try_matches`](Self::try_matches) with a test that cannot fail.
    pub fn matches(&self, has: &dyn Fn(&N) -> bool, any: bool) -> bool {
        let r: Result<bool, std::convert::Infallible> =
            self.try_matches(&mut |n| Ok(has(n)), &mut || Ok(any));
        r.unwrap_or_else(|e| match e {})
    }

    /// The same expression over other names; the first error `f` gives ends it.
    pub fn try_map<M, E>(&self, f: &mut dyn FnMut(&N) -> Result<M, E>) -> Result<LabelExpr<M>, E> {
        let mut two = |a: &Self, b: &Self| -> Result<_, E> {
            Ok((Box::new(a.try_map(f)?), Box::new(b.try_map(f)?)))
        };
        Ok(match self {
            LabelExpr::Name(n) => LabelExpr::Name(f(n)?),
            LabelExpr::Any => LabelExpr::Any,
            LabelExpr::Not(x) => LabelExpr::Not(Box::new(x.try_map(f)?)),
            LabelExpr::And(a, b) => {
                let (a, b) = two(a, b)?;
                LabelExpr::And(a, b)
            }
            LabelExpr::Or(a, b) => {
                let (a, b) = two(a, b)?;
                LabelExpr::Or(a, b)
            }
        })
    }

    /// Every name it mentions, in order.
    pub fn for_each_name(&self, f: &mut dyn FnMut(&N)) {
        match self {
            LabelExpr::Name(l) => f(l),
            LabelExpr::Any => {}
            LabelExpr::Not(x) => x.for_each_name(f),
            LabelExpr::And(a, b) | LabelExpr::Or(a, b) => {
                a.for_each_name(f);
                b.for_each_name(f);
            }
        }
    }

    /// Whether it is names joined by `&` alone (by `|` alone with `or`): the form a
    /// node's list of labels (a relationship's list of types) holds.
    pub fn is_flat(&self, or: bool) -> bool {
        match self {
            LabelExpr::Name(_) => true,
            LabelExpr::And(a, b) if !or => a.is_flat(or) && b.is_flat(or),
            LabelExpr::Or(a, b) if or => a.is_flat(or) && b.is_flat(or),
            _ => false,
        }
    }

    /// Its names, in order, moved out (the list a flat expression stands for).
    pub fn into_names(self, out: &mut Vec<N>) {
        match self {
            LabelExpr::Name(n) => out.push(n),
            LabelExpr::Any => {}
            LabelExpr::Not(x) => x.into_names(out),
            LabelExpr::And(a, b) | LabelExpr::Or(a, b) => {
                a.into_names(out);
                b.into_names(out);
            }
        }
    }
}

impl LabelExpr {
    /// Labels one of which every matching node carries (`None`: no such set, as for
    /// `!A` or `%`). `(A|B)&!C` gives A and B: a scan of those labels' nodes, each
    /// tested by the whole expression, finds every match.
    pub fn cover(&self) -> Option<Vec<String>> {
        match self {
            LabelExpr::Name(l) => Some(vec![l.clone()]),
            LabelExpr::Any | LabelExpr::Not(_) => None,
            LabelExpr::Or(a, b) => {
                let mut v = a.cover()?;
                for l in b.cover()? {
                    if !v.contains(&l) {
                        v.push(l);
                    }
                }
                Some(v)
            }
            LabelExpr::And(a, b) => match (a.cover(), b.cover()) {
                (Some(x), Some(y)) => Some(if y.len() < x.len() { y } else { x }),
                (x, y) => x.or(y),
            },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// `-[]->`
    Out,
    /// `<-[]-`
    In,
    /// `-[]-`
    Both,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RelPattern {
    pub var: Option<String>,
    /// Byte offset of `var` in the query (for errors).
    pub var_at: usize,
    /// `:A|B`: any of these types (empty: any type).
    pub types: Vec<String>,
    /// `:$(expr)` (Neo4j 5.26): types given by an expression per row, a string or a
    /// list of strings (any of them matches; CREATE and MERGE take exactly one).
    pub dyn_types: Vec<Expr>,
    /// A type expression that is not a plain disjunction of names (`:!KNOWS`, `:%`,
    /// `:(A|B)&!C`); `types` is then empty.
    pub type_expr: Option<Box<LabelExpr>>,
    pub props: Option<Expr>,
    pub dir: Dir,
    /// `*min..max` (either bound may be absent); `None` for a single hop.
    pub range: Option<(Option<u64>, Option<u64>)>,
    /// Memgraph's `*BFS` spelling.
    pub bfs: bool,
    /// Memgraph's `*ALLSHORTEST` / `*WSHORTEST` (which set `bfs` too): the weight
    /// lambda and the variable bound to a path's total weight.
    pub weighted: Option<Weighted>,
    /// Memgraph's filter lambda `(e, n | predicate)` of those spellings: each step's
    /// relationship and the node it reaches must pass.
    pub filter: Option<Lambda>,
}

/// Memgraph's lambda `(e, n | expr)` over a step of a path: its relationship and the
/// node it reaches.
#[derive(Debug, Clone, PartialEq)]
pub struct Lambda {
    pub rel: String,
    pub node: String,
    pub expr: Box<Expr>,
}

/// `*ALLSHORTEST (e, n | weight) total` / `*WSHORTEST (e, n | weight) total`.
#[derive(Debug, Clone, PartialEq)]
pub struct Weighted {
    /// Every path of the least weight (`ALLSHORTEST`), or one (`WSHORTEST`).
    pub all: bool,
    pub weight: Lambda,
    pub total: String,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Param(String),
    /// A variable and the byte offset where it is written (for error messages).
    Var(String, usize),
    List(Vec<Expr>),
    Map(Vec<(String, Expr)>),
    Prop(Box<Expr>, String),
    Index(Box<Expr>, Box<Expr>),
    Slice(Box<Expr>, Option<Box<Expr>>, Option<Box<Expr>>),
    HasLabels(Box<Expr>, Vec<String>),
    /// `n:A|B`, `n:!A`, `n:%`, `r:KNOWS|LIKES`: a label expression that is not a plain
    /// conjunction (that is `HasLabels`), tested on a node's labels or a relationship's
    /// type.
    LabelTest(Box<Expr>, LabelExpr),
    Unary(UnOp, Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    IsNull(Box<Expr>, bool),
    /// `f(args)`, `count(DISTINCT x)`; `count(*)` is `CountStar`.
    Call {
        name: String,
        distinct: bool,
        args: Vec<Expr>,
    },
    CountStar,
    Case {
        subject: Option<Box<Expr>>,
        arms: Vec<(Expr, Expr)>,
        default: Option<Box<Expr>>,
    },
    /// `[x IN list WHERE pred | map]`
    ListComp {
        var: String,
        list: Box<Expr>,
        pred: Option<Box<Expr>>,
        map: Option<Box<Expr>>,
    },
    /// A pattern used as a predicate: `WHERE (a)-->(b)`.
    PatternPred(Box<Pattern>),
    /// `[p = (a)-->(b) WHERE pred | map]`: `map` for every match of the pattern (its
    /// path variable, if named, in `pattern.var`), as a list.
    PatternComp {
        pattern: Box<Pattern>,
        pred: Option<Box<Expr>>,
        map: Box<Expr>,
    },
    /// `EXISTS { body }`, `COUNT { body }` and `COLLECT { body }` over a whole query
    /// (WITH, aggregation, several clauses): whether the body, run for the row, gives
    /// a row, how many, or the list of its one column. Planned as a CALL subquery.
    Subquery {
        kind: SubqueryKind,
        body: Box<SingleQuery>,
    },
    /// `reduce(acc = init, x IN list | expr)`
    Reduce {
        acc: String,
        init: Box<Expr>,
        var: String,
        list: Box<Expr>,
        expr: Box<Expr>,
    },
}

impl Expr {
    /// Calls `f` on each direct sub-expression, mutably, in the order of
    /// [`children`](Self::children).
    pub fn for_each_child_mut(&mut self, f: &mut dyn FnMut(&mut Expr)) {
        match self {
            Expr::List(xs) => xs.iter_mut().for_each(f),
            Expr::Map(xs) => xs.iter_mut().for_each(|(_, x)| f(x)),
            Expr::Prop(x, _)
            | Expr::HasLabels(x, _)
            | Expr::LabelTest(x, _)
            | Expr::Unary(_, x)
            | Expr::IsNull(x, _) => f(x),
            Expr::Index(a, b) | Expr::Binary(_, a, b) => {
                f(a);
                f(b);
            }
            Expr::Slice(a, b, c) => {
                f(a);
                b.as_deref_mut().into_iter().for_each(&mut *f);
                c.as_deref_mut().into_iter().for_each(f);
            }
            Expr::Call { args, .. } => args.iter_mut().for_each(f),
            Expr::Case {
                subject,
                arms,
                default,
            } => {
                subject.as_deref_mut().into_iter().for_each(&mut *f);
                for (a, b) in arms {
                    f(a);
                    f(b);
                }
                default.as_deref_mut().into_iter().for_each(f);
            }
            Expr::ListComp {
                list, pred, map, ..
            } => {
                f(list);
                pred.as_deref_mut().into_iter().for_each(&mut *f);
                map.as_deref_mut().into_iter().for_each(f);
            }
            Expr::Reduce {
                init, list, expr, ..
            } => {
                f(init);
                f(list);
                f(expr);
            }
            Expr::PatternComp { pred, map, .. } => {
                pred.as_deref_mut().into_iter().for_each(&mut *f);
                f(map);
            }
            Expr::Null
            | Expr::Bool(_)
            | Expr::Int(_)
            | Expr::Float(_)
            | Expr::Str(_)
            | Expr::Param(_)
            | Expr::Var(..)
            | Expr::CountStar
            | Expr::PatternPred(_)
            | Expr::Subquery { .. } => {}
        }
    }

    /// Whether a pattern comprehension (or a whole-query subquery, planned the same
    /// way, before the expression) is somewhere in it.
    pub fn has_pattern_comp(&self) -> bool {
        matches!(self, Expr::PatternComp { .. } | Expr::Subquery { .. })
            || self.children().into_iter().any(Expr::has_pattern_comp)
    }

    /// The direct sub-expressions, in source order (a comprehension's list, predicate and
    /// mapping; none for a pattern predicate).
    pub fn children(&self) -> Vec<&Expr> {
        match self {
            Expr::List(xs) => xs.iter().collect(),
            Expr::Map(xs) => xs.iter().map(|(_, x)| x).collect(),
            Expr::Prop(x, _)
            | Expr::HasLabels(x, _)
            | Expr::LabelTest(x, _)
            | Expr::Unary(_, x)
            | Expr::IsNull(x, _) => {
                vec![x]
            }
            Expr::Index(a, b) | Expr::Binary(_, a, b) => vec![a, b],
            Expr::Slice(a, b, c) => std::iter::once(&**a)
                .chain(b.as_deref())
                .chain(c.as_deref())
                .collect(),
            Expr::Call { args, .. } => args.iter().collect(),
            Expr::Case {
                subject,
                arms,
                default,
            } => subject
                .as_deref()
                .into_iter()
                .chain(arms.iter().flat_map(|(a, b)| [a, b]))
                .chain(default.as_deref())
                .collect(),
            Expr::ListComp {
                list, pred, map, ..
            } => std::iter::once(&**list)
                .chain(pred.as_deref())
                .chain(map.as_deref())
                .collect(),
            Expr::Reduce {
                init, list, expr, ..
            } => vec![init, list, expr],
            Expr::PatternComp { pred, map, .. } => pred
                .as_deref()
                .into_iter()
                .chain(std::iter::once(&**map))
                .collect(),
            Expr::Null
            | Expr::Bool(_)
            | Expr::Int(_)
            | Expr::Float(_)
            | Expr::Str(_)
            | Expr::Param(_)
            | Expr::Var(..)
            | Expr::CountStar
            | Expr::PatternPred(_)
            | Expr::Subquery { .. } => Vec::new(),
        }
    }
}

/// What a whole-query subquery expression gives: whether the body has a row, how
/// many, or the list of its one column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubqueryKind {
    Exists,
    Count,
    Collect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnOp {
    Not,
    Neg,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    Or,
    Xor,
    And,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Regex,
    In,
    StartsWith,
    EndsWith,
    Contains,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
}

impl BinOp {
    /// The comparison with its operands swapped (`a < b` is `b > a`); other operators
    /// as they are.
    pub fn flipped(self) -> BinOp {
        match self {
            BinOp::Lt => BinOp::Gt,
            BinOp::Le => BinOp::Ge,
            BinOp::Gt => BinOp::Lt,
            BinOp::Ge => BinOp::Le,
            o => o,
        }
    }
}

/// Statements that are not queries: transactions, storage and schema commands.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    Begin,
    Commit,
    Rollback,
    Checkpoint,
    /// `CHECKPOINT COMPACT`: a checkpoint that rewrites every node table with a dead
    /// row without their data.
    CheckpointCompact,
    FreeMemory,
    ShowStorageInfo,
    /// `STORAGE MODE IN_MEMORY_TRANSACTIONAL | IN_MEMORY_ANALYTICAL`
    StorageMode(String),
    CreateIndex {
        label: String,
        prop: String,
        /// `IF NOT EXISTS`: an index already there is no error.
        if_not_exists: bool,
    },
    DropIndex {
        label: String,
        prop: String,
    },
    /// `CREATE VECTOR INDEX name [IF NOT EXISTS] FOR (n:L) ON n.p [WITH [...]]
    /// [OPTIONS {indexConfig: {`vector.dimensions`: d, `vector.similarity_function`: f}}]`
    /// (Neo4j 5). The name and the options may hold parameters: they are evaluated
    /// when the command runs.
    CreateVectorIndex {
        name: Expr,
        if_not_exists: bool,
        /// A label, or a relationship type when `relationship`.
        label: String,
        prop: String,
        options: Option<Expr>,
        /// `FOR ()-[r:TYPE]-() ON r.prop`.
        relationship: bool,
    },
    /// `CREATE FULLTEXT INDEX name [IF NOT EXISTS] FOR (n:L1|L2) ON EACH [n.a, n.b]
    /// [OPTIONS {...}]` (Neo4j 5).
    CreateFulltextIndex {
        name: Expr,
        if_not_exists: bool,
        labels: Vec<String>,
        props: Vec<String>,
        options: Option<Expr>,
    },
    /// `DROP INDEX name [IF EXISTS]`.
    DropIndexNamed {
        name: String,
        if_exists: bool,
    },
    ShowIndexes,
    /// `SHOW DATABASES`, `SHOW DATABASE name`, `SHOW DEFAULT|HOME DATABASE`: the one
    /// database a Quiver server serves (what Neo4j's tools ask on connect).
    ShowDatabases,
    /// `CREATE CONSTRAINT ON (n:L) ASSERT n.p IS UNIQUE` (Memgraph, Neo4j 4) or
    /// `CREATE CONSTRAINT [name] [IF NOT EXISTS] FOR (n:L) REQUIRE n.p IS UNIQUE` (Neo4j 5).
    /// Several properties (`REQUIRE (n.a, n.b) IS UNIQUE`): no two nodes share all.
    CreateConstraint {
        name: Option<String>,
        label: String,
        props: Vec<String>,
        if_not_exists: bool,
    },
    /// `DROP CONSTRAINT ON (n:L) ASSERT n.p IS UNIQUE`, or Neo4j 5's
    /// `DROP CONSTRAINT name [IF EXISTS]` (then `label` is empty).
    DropConstraint {
        name: Option<String>,
        label: String,
        props: Vec<String>,
        if_exists: bool,
    },
    /// `SHOW CONSTRAINTS` (or Memgraph's `SHOW CONSTRAINT INFO`)
    ShowConstraints,
    /// `SHOW TRANSACTIONS` (Neo4j 5): the queries running, with their memory.
    ShowTransactions,
    /// `SHOW FUNCTIONS` / `SHOW PROCEDURES` (Neo4j 5): what the server has.
    ShowFunctions,
    ShowProcedures,
    /// A `SHOW` command followed by `YIELD ...` or `WHERE ...`: its rows as the input
    /// of `text` (from `YIELD`'s items, or from `WHERE`), which reads as a `WITH` over
    /// them. `columns`: what `YIELD` names (`None`: every column); `returns`: whether
    /// `text` ends in its own `RETURN`.
    Shown {
        inner: Box<Command>,
        text: String,
        yields: bool,
        columns: Option<Vec<String>>,
        returns: bool,
    },
}

impl Command {
    /// A `SHOW` command: it only reads (running it twice changes nothing).
    pub fn is_show(&self) -> bool {
        matches!(
            self,
            Command::ShowStorageInfo
                | Command::ShowIndexes
                | Command::ShowDatabases
                | Command::ShowConstraints
                | Command::ShowTransactions
                | Command::ShowFunctions
                | Command::ShowProcedures
                | Command::Shown { .. }
        )
    }
}

/// What a statement is.
#[derive(Debug, Clone, PartialEq)]
pub enum Parsed {
    Query(Statement),
    Command(Command),
}
