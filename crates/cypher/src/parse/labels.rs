//! Label expressions (Neo4j 5 / GQL): `:A:B`, `|`, `&`, `!`, `%`, parentheses, `IS`,
//! `$(expr)`; in node patterns, relationship types and `WHERE n:...`, with Neo4j's
//! rule that one clause does not mix `:A:B` with the symbols.

use super::*;

/// A name in a label expression as parsed: a name, or `$(expr)` (names per row).
pub(super) enum Leaf {
    Name(String),
    Dyn(Expr),
}

/// A label expression as parsed, before it is sorted into the pattern's forms.
pub(super) type LTerm = LabelExpr<Leaf>;

/// The expression over names alone, `None` if a dynamic name is in it.
pub(super) fn static_names(t: &LTerm) -> Option<LabelExpr> {
    t.try_map(&mut |l| match l {
        Leaf::Name(n) => Ok(n.clone()),
        Leaf::Dyn(_) => Err(()),
    })
    .ok()
}

/// A flat term's names and dynamic names, in order.
pub(super) fn flatten(t: LTerm, names: &mut Vec<String>, dyns: &mut Vec<Expr>) {
    let mut leaves = Vec::new();
    t.into_names(&mut leaves);
    for l in leaves {
        match l {
            Leaf::Name(n) => names.push(n),
            Leaf::Dyn(e) => dyns.push(e),
        }
    }
}

impl<'t> Parser<'t> {
    /// A label expression after `:` or `IS` (Neo4j 5, ISO GQL): `|` binds loosest,
    /// then `&`, then `!`; `%` is any label; parentheses group; `$(expr)` names labels
    /// per row. With `colon`, `:A:B` is `A&B`, openCypher's form, which does not mix
    /// with the symbols (as in Neo4j). `|:B` is the older spelling of `|B`.
    pub(super) fn label_term(&mut self, colon: bool) -> R<LTerm> {
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

    pub(super) fn label_or(&mut self) -> R<LTerm> {
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

    pub(super) fn label_and(&mut self) -> R<LTerm> {
        let mut e = self.label_not()?;
        while self.is_p("&") {
            self.symbol();
            self.bump();
            e = LabelExpr::And(Box::new(e), Box::new(self.label_not()?));
        }
        Ok(e)
    }

    /// Notes a label expression symbol at the current token.
    pub(super) fn symbol(&mut self) {
        self.symbol_at.get_or_insert(self.toks[self.pos].offset);
    }

    /// Neo4j's rule: `:A:B` does not mix with the label expression symbols, nor with
    /// `IS`, in one statement.
    pub(super) fn label_syntax(&self) -> R<()> {
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

    pub(super) fn label_not(&mut self) -> R<LTerm> {
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
    pub(super) fn node_labels(&mut self, n: &mut NodePattern, colon: bool) -> R<()> {
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
    pub(super) fn labels_item(&mut self) -> R<Option<(String, Vec<String>, Vec<Expr>)>> {
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

    /// `x:expr` in an expression: a conjunction of names as `HasLabels`, anything
    /// else as `LabelTest` (no dynamic names: `labels(n)` tests those).
    pub(super) fn label_test(&self, x: Expr, t: LTerm, at: usize) -> R<Expr> {
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

    /// In a comprehension's WHERE, whether another `|` follows the current one at the
    /// comprehension's level: then the current one joins labels, as Neo4j reads
    /// `[x IN l WHERE x:A|B | x.id]`, and the last one is the projection's.
    pub(super) fn later_bar(&self) -> bool {
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
    pub(super) fn bar_ends(&mut self, f: fn(&mut Self) -> R<Expr>) -> R<Expr> {
        let bar = std::mem::replace(&mut self.no_bar, true);
        let e = f(self);
        self.no_bar = bar;
        e
    }
}
