//! The syntax tree of a read query: what the text says, before names are bound.

#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    pub explain: Option<Explain>,
    pub query: Query,
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
    pub kind: PathKind,
    pub start: NodePattern,
    pub steps: Vec<(RelPattern, NodePattern)>,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct NodePattern {
    pub var: Option<String>,
    pub labels: Vec<String>,
    pub props: Option<Expr>,
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
    /// `:A|B`: any of these types (empty: any type).
    pub types: Vec<String>,
    pub props: Option<Expr>,
    pub dir: Dir,
    /// `*min..max` (either bound may be absent); `None` for a single hop.
    pub range: Option<(Option<u64>, Option<u64>)>,
    /// Memgraph's `*BFS` spelling.
    pub bfs: bool,
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
