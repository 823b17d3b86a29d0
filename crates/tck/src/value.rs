//! The TCK's value syntax (result tables, parameters): parsed into [`TVal`], built from
//! Quiver's results, and compared through a canonical text (maps by key, labels as a
//! set, floats by their exact value; optionally lists as multisets).

use quiver_query::{Graph, QueryError, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// A value as the TCK writes it.
#[derive(Debug, Clone, PartialEq)]
pub enum TVal {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    List(Vec<TVal>),
    Map(BTreeMap<String, TVal>),
    Node {
        labels: BTreeSet<String>,
        props: BTreeMap<String, TVal>,
    },
    Rel {
        ty: String,
        props: BTreeMap<String, TVal>,
    },
    /// A start node, then (forward?, relationship, node) steps.
    Path(Box<TVal>, Vec<(bool, TVal, TVal)>),
}

impl TVal {
    /// A text equal for equal values: what rows are compared by. With `bag`, list
    /// elements are sorted first ("ignoring element order for lists").
    pub fn canon(&self, bag: bool) -> String {
        let mut s = String::new();
        self.write_canon(bag, &mut s);
        s
    }

    fn write_canon(&self, bag: bool, o: &mut String) {
        match self {
            TVal::Null => o.push_str("null"),
            TVal::Bool(b) => o.push_str(&format!("{b}")),
            TVal::Int(i) => o.push_str(&format!("{i}")),
            TVal::Float(f) => {
                if f.is_nan() {
                    o.push_str("f:NaN")
                } else if *f == 0.0 {
                    // -0.0 and 0.0 compare equal in Cypher.
                    o.push_str("f:0.0")
                } else {
                    o.push_str(&format!("f:{f:?}"))
                }
            }
            TVal::Str(s) => o.push_str(&format!("{s:?}")),
            TVal::List(l) => {
                let mut items: Vec<String> = l.iter().map(|x| x.canon(bag)).collect();
                if bag {
                    items.sort();
                }
                o.push_str(&format!("[{}]", items.join(", ")))
            }
            TVal::Map(m) => write_map(m, bag, o),
            TVal::Node { labels, props } => {
                o.push('(');
                for l in labels {
                    o.push_str(&format!(":{l}"));
                }
                write_map(props, bag, o);
                o.push(')');
            }
            TVal::Rel { ty, props } => {
                o.push_str(&format!("[:{ty}"));
                write_map(props, bag, o);
                o.push(']');
            }
            TVal::Path(start, steps) => {
                o.push('<');
                start.write_canon(bag, o);
                for (fwd, r, n) in steps {
                    o.push_str(if *fwd { "-" } else { "<-" });
                    r.write_canon(bag, o);
                    o.push_str(if *fwd { "->" } else { "-" });
                    n.write_canon(bag, o);
                }
                o.push('>');
            }
        }
    }

    /// A parameter value (scalars, lists and maps).
    pub fn to_value(&self) -> Result<Value, String> {
        Ok(match self {
            TVal::Null => Value::Null,
            TVal::Bool(b) => Value::Bool(*b),
            TVal::Int(i) => Value::Int(*i),
            TVal::Float(f) => Value::Float(*f),
            TVal::Str(s) => Value::str(s),
            TVal::List(l) => Value::list(l.iter().map(|x| x.to_value()).collect::<Result<_, _>>()?),
            TVal::Map(m) => Value::Map(Arc::new(
                m.iter()
                    .map(|(k, v)| Ok((Arc::from(k.as_str()), v.to_value()?)))
                    .collect::<Result<_, String>>()?,
            )),
            other => return Err(format!("a graph value as a parameter: {other:?}")),
        })
    }

    /// A result value of Quiver, with its graph entities read from `g`.
    pub fn from_value(g: &Graph, v: &Value) -> Result<TVal, QueryError> {
        Ok(match v {
            Value::Null => TVal::Null,
            Value::Bool(b) => TVal::Bool(*b),
            Value::Int(i) => TVal::Int(*i),
            Value::Float(f) => TVal::Float(*f),
            Value::Str(s) => TVal::Str(s.to_string()),
            Value::List(l) => TVal::List(
                l.iter()
                    .map(|x| TVal::from_value(g, x))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Map(m) => TVal::Map(
                m.iter()
                    .map(|(k, x)| Ok((k.to_string(), TVal::from_value(g, x)?)))
                    .collect::<Result<_, QueryError>>()?,
            ),
            Value::Node(n) => node(g, *n)?,
            Value::Rel(r) => rel(g, r)?,
            Value::Path(p) => {
                let mut steps = Vec::with_capacity(p.rels.len());
                for (i, r) in p.rels.iter().enumerate() {
                    let fwd = r.src as u64 == p.nodes[i];
                    steps.push((fwd, rel(g, r)?, node(g, p.nodes[i + 1])?));
                }
                TVal::Path(Box::new(node(g, p.nodes[0])?), steps)
            }
            // Temporal values: the TCK writes them in Java's ISO forms (`12:31`, where
            // Neo4j 5's `toString` writes `12:31:00`).
            other => {
                use quiver_query::expr::temporal::{format_as, Style};
                let mut s = String::new();
                match format_as(other, Style::Iso, &mut s) {
                    Some(()) => TVal::Str(s),
                    None => TVal::Str(quiver_query::expr::to_string(other)),
                }
            }
        })
    }
}

fn node(g: &Graph, n: u64) -> Result<TVal, QueryError> {
    Ok(TVal::Node {
        labels: g.labels(n)?.iter().map(|l| l.to_string()).collect(),
        props: props(g, &g.node_props(n)?)?,
    })
}

fn rel(g: &Graph, r: &quiver_query::value::RelRef) -> Result<TVal, QueryError> {
    Ok(TVal::Rel {
        ty: g.rel_type_name(r.ty).to_string(),
        props: props(g, &g.rel_props(r)?)?,
    })
}

fn props(g: &Graph, p: &[(Arc<str>, Value)]) -> Result<BTreeMap<String, TVal>, QueryError> {
    p.iter()
        .map(|(k, v)| Ok((k.to_string(), TVal::from_value(g, v)?)))
        .collect()
}

fn write_map(m: &BTreeMap<String, TVal>, bag: bool, o: &mut String) {
    if m.is_empty() {
        return;
    }
    o.push('{');
    for (i, (k, v)) in m.iter().enumerate() {
        if i > 0 {
            o.push_str(", ");
        }
        o.push_str(&format!("{k}: "));
        v.write_canon(bag, o);
    }
    o.push('}');
}

/// Parses a TCK value (a result cell or a parameter).
pub fn parse(text: &str) -> Result<TVal, String> {
    let mut p = P {
        s: text.as_bytes(),
        i: 0,
        text,
    };
    let v = p.value()?;
    p.ws();
    if p.i != p.s.len() {
        return Err(p.err("trailing text"));
    }
    Ok(v)
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
    text: &'a str,
}

impl P<'_> {
    fn err(&self, what: &str) -> String {
        format!("{what} at {} in {:?}", self.i, self.text)
    }

    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, t: &str) -> bool {
        self.ws();
        if self.s[self.i..].starts_with(t.as_bytes()) {
            self.i += t.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, t: &str) -> Result<(), String> {
        if self.eat(t) {
            Ok(())
        } else {
            Err(self.err(&format!("expected {t:?}")))
        }
    }

    fn value(&mut self) -> Result<TVal, String> {
        match self.peek() {
            None => Err(self.err("expected a value")),
            Some(b'\'') | Some(b'"') => Ok(TVal::Str(self.string()?)),
            Some(b'[') => {
                self.i += 1;
                if self.peek() == Some(b':') {
                    return self.rel_rest();
                }
                let mut items = Vec::new();
                if self.eat("]") {
                    return Ok(TVal::List(items));
                }
                loop {
                    items.push(self.value()?);
                    if self.eat("]") {
                        return Ok(TVal::List(items));
                    }
                    self.expect(",")?;
                }
            }
            Some(b'{') => Ok(TVal::Map(self.map()?)),
            Some(b'(') => self.node(),
            Some(b'<') => {
                self.i += 1;
                let start = self.node()?;
                let mut steps = Vec::new();
                loop {
                    if self.eat(">") {
                        return Ok(TVal::Path(Box::new(start), steps));
                    }
                    let fwd = if self.eat("<-") {
                        false
                    } else {
                        self.expect("-")?;
                        true
                    };
                    self.expect("[")?;
                    let r = self.rel_rest()?;
                    self.expect(if fwd { "->" } else { "-" })?;
                    steps.push((fwd, r, self.node()?));
                }
            }
            Some(_) => self.scalar(),
        }
    }

    fn scalar(&mut self) -> Result<TVal, String> {
        let start = self.i;
        while self.i < self.s.len() && !matches!(self.s[self.i], b',' | b']' | b'}' | b')') {
            self.i += 1;
        }
        let w = self.text[start..self.i].trim();
        Ok(match w {
            "null" => TVal::Null,
            "true" => TVal::Bool(true),
            "false" => TVal::Bool(false),
            "NaN" => TVal::Float(f64::NAN),
            "Infinity" | "+Infinity" => TVal::Float(f64::INFINITY),
            "-Infinity" => TVal::Float(f64::NEG_INFINITY),
            _ => {
                if let Ok(i) = w.parse::<i64>() {
                    TVal::Int(i)
                } else if let Ok(f) = w.parse::<f64>() {
                    TVal::Float(f)
                } else {
                    return Err(format!("not a value: {w:?} in {:?}", self.text));
                }
            }
        })
    }

    fn string(&mut self) -> Result<String, String> {
        let q = self.s[self.i];
        self.i += 1;
        let mut out = String::new();
        let rest = &self.text[self.i..];
        let mut chars = rest.char_indices();
        while let Some((k, c)) = chars.next() {
            if c == q as char {
                self.i += k + 1;
                return Ok(out);
            }
            if c == '\\' {
                match chars.next() {
                    Some((_, 'n')) => out.push('\n'),
                    Some((_, 't')) => out.push('\t'),
                    Some((_, 'r')) => out.push('\r'),
                    Some((_, c)) => out.push(c),
                    None => break,
                }
            } else {
                out.push(c);
            }
        }
        Err(self.err("unterminated string"))
    }

    fn name(&mut self) -> Result<String, String> {
        self.ws();
        if self.s.get(self.i) == Some(&b'`') {
            let end = self.text[self.i + 1..]
                .find('`')
                .ok_or_else(|| self.err("unterminated name"))?;
            let n = self.text[self.i + 1..self.i + 1 + end].to_string();
            self.i += end + 2;
            return Ok(n);
        }
        let start = self.i;
        while self.i < self.s.len()
            && (self.s[self.i].is_ascii_alphanumeric()
                || self.s[self.i] == b'_'
                || self.s[self.i] >= 0x80)
        {
            self.i += 1;
        }
        if start == self.i {
            return Err(self.err("expected a name"));
        }
        Ok(self.text[start..self.i].to_string())
    }

    fn map(&mut self) -> Result<BTreeMap<String, TVal>, String> {
        self.expect("{")?;
        let mut m = BTreeMap::new();
        if self.eat("}") {
            return Ok(m);
        }
        loop {
            let k = self.name()?;
            self.expect(":")?;
            let v = self.value()?;
            m.insert(k, v);
            if self.eat("}") {
                return Ok(m);
            }
            self.expect(",")?;
        }
    }

    fn node(&mut self) -> Result<TVal, String> {
        self.expect("(")?;
        let mut labels = BTreeSet::new();
        while self.eat(":") {
            labels.insert(self.name()?);
        }
        let props = if self.peek() == Some(b'{') {
            self.map()?
        } else {
            BTreeMap::new()
        };
        self.expect(")")?;
        Ok(TVal::Node { labels, props })
    }

    /// A relationship after its `[`.
    fn rel_rest(&mut self) -> Result<TVal, String> {
        self.expect(":")?;
        let ty = self.name()?;
        let props = if self.peek() == Some(b'{') {
            self.map()?
        } else {
            BTreeMap::new()
        };
        self.expect("]")?;
        Ok(TVal::Rel { ty, props })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kits_syntax() {
        let cases = [
            ("null", "null"),
            ("-1", "-1"),
            ("1.0", "f:1.0"),
            ("-0.0", "f:0.0"),
            ("'it''s'", "\"it\""),
            ("'a\\'b'", "\"a'b\""),
            ("[1, 'x', [2]]", "[1, \"x\", [2]]"),
            ("{b: 1, a: [true]}", "{a: [true], b: 1}"),
            ("(:B:A {name: 'n'})", "(:A:B{name: \"n\"})"),
            ("()", "()"),
            ("[:T {w: 2}]", "[:T{w: 2}]"),
            ("<(:A)-[:T]->(:B)<-[:S]-()>", "<(:A)-[:T]->(:B)<-[:S]-()>"),
            ("{`a b`: 1}", "{a b: 1}"),
        ];
        for (t, want) in cases {
            match parse(t) {
                Ok(v) => assert_eq!(v.canon(false), want, "{t}"),
                Err(e) if t == "'it''s'" => assert!(e.contains("trailing"), "{e}"),
                Err(e) => panic!("{t}: {e}"),
            }
        }
        assert_eq!(
            parse("[2, 1]").unwrap().canon(true),
            parse("[1, 2]").unwrap().canon(true)
        );
    }
}
