//! Differential test against `open-cypher`, a parser generated from the openCypher EBNF
//! (a pest grammar): every query our parser accepts, outside Quiver's documented
//! extensions (`*BFS`, `extract(...)`, EXPLAIN / PROFILE), must be openCypher too, and
//! the read queries of the test corpus must parse with both.

use proptest::prelude::*;
use quiver_cypher::parse_query;

const CORPUS: &[&str] = &[
    "MATCH (n:User) RETURN n.age, count(*) ORDER BY n.age",
    "MATCH (s:User {id: $id})-->()-->(n:User) RETURN DISTINCT n.id",
    "MATCH (s:User {id: $id})-[*1..2]->(n:User) RETURN DISTINCT n.id, n",
    "MATCH p = shortestPath((a:User {id: $a})-[*..15]->(b:User {id: $b})) RETURN length(p)",
    "MATCH (a)-[r:FOLLOWS|KNOWS]-(b) WHERE a.age > 20 AND NOT b.name STARTS WITH 'x' RETURN a, r, b LIMIT 10",
    "OPTIONAL MATCH (n)<-[:R]-(m) WITH n, collect(m) AS ms WHERE size(ms) > 1 RETURN n SKIP 2 LIMIT 3",
    "UNWIND [1, 2, 3] AS x RETURN x * 2 AS y UNION ALL RETURN 7 AS y",
    "RETURN CASE WHEN 1 < 2 THEN 'a' ELSE 'b' END",
    "MATCH (n) WHERE n.x IN [1, 2] AND n.s ENDS WITH 'z' RETURN n.x, count(DISTINCT n.y)",
    "MATCH (a), (b) WHERE (a)-->(b) RETURN a.x IS NULL, {k: [1, 2.5, null, true]}",
];

fn oracle(q: &str) -> bool {
    open_cypher::parse(q).is_ok()
}

#[test]
fn corpus_parses_with_both() {
    for q in CORPUS {
        parse_query(q).unwrap_or_else(|e| panic!("quiver rejects {q}: {e}"));
        assert!(oracle(q), "the openCypher grammar rejects {q}");
    }
    // The oracle does reject what is not Cypher.
    for bad in [
        "MATCH RETURN n",
        "MATCH (n RETURN n",
        "RETURN 1 +",
        "MATCH (a)-[->(b) RETURN a",
    ] {
        assert!(!oracle(bad), "the oracle accepts {bad}");
        assert!(parse_query(bad).is_err(), "quiver accepts {bad}");
    }
}

const TOKENS: &[&str] = &[
    "MATCH", "(", ")", "n", "m", ":A", "-", "->", "<-", "[", "]", "*", "..", "2", "{", "}", "id:",
    "1", "RETURN", "WITH", "WHERE", "=", "<", "AND", "OR", "NOT", ",", ".", "v", "count(*)",
    "DISTINCT", "ORDER BY", "LIMIT", "UNWIND", "AS", "x", "null", "'s'", "+", "OPTIONAL", "[x IN",
    "|", "CASE", "WHEN", "THEN", "END", "IS NULL", "SKIP",
];

/// Generated read queries: patterns of 1-4 nodes with labels, property maps, typed and
/// variable-length relationships in every direction, WHERE with boolean logic, and
/// projections with aliases, DISTINCT, aggregates, ORDER BY, SKIP and LIMIT.
fn query() -> impl Strategy<Value = String> {
    let var = prop_oneof![Just("a"), Just("b"), Just("c")];
    let label = prop_oneof![Just(""), Just(":User"), Just(":Post"), Just(":User:Admin")];
    let lit = prop_oneof![
        Just("1".to_string()),
        Just("'x'".to_string()),
        Just("$p".to_string()),
        Just("2.5".to_string()),
        Just("[1, 2]".to_string()),
        Just("null".to_string()),
    ];
    let props = prop_oneof![
        Just(String::new()),
        lit.clone().prop_map(|l| format!(" {{k: {l}}}"))
    ];
    let node = (var.clone(), label, props).prop_map(|(v, l, p)| format!("({v}{l}{p})"));
    let range = prop_oneof![Just(""), Just("*"), Just("*2"), Just("*1..3"), Just("*..2")];
    let rel = (
        prop_oneof![Just(""), Just("r"), Just("r:F"), Just(":F|G")],
        range,
        prop_oneof![0..3usize],
    )
        .prop_map(|(t, r, d)| {
            let body = format!("{t}{r}");
            match d {
                0 => format!("-[{body}]->"),
                1 => format!("<-[{body}]-"),
                _ => format!("-[{body}]-"),
            }
        });
    let pattern =
        (node.clone(), proptest::collection::vec((rel, node), 0..3)).prop_map(|(n, steps)| {
            let mut s = n;
            for (r, m) in steps {
                s.push_str(&r);
                s.push_str(&m);
            }
            s
        });
    let cmp = (
        var.clone(),
        prop_oneof![
            Just("="),
            Just("<>"),
            Just("<"),
            Just(">="),
            Just("STARTS WITH"),
            Just("IN")
        ],
        lit,
    )
        .prop_map(|(v, op, l)| format!("{v}.x {op} {l}"));
    let pred = proptest::collection::vec(
        (
            cmp,
            prop_oneof![Just(" AND "), Just(" OR "), Just(" XOR ")],
            any::<bool>(),
        ),
        1..4,
    )
    .prop_map(|parts| {
        let mut s = String::new();
        for (i, (c, op, not)) in parts.iter().enumerate() {
            if i > 0 {
                s.push_str(op);
            }
            if *not {
                s.push_str("NOT ");
            }
            s.push_str(c);
        }
        s
    });
    let item = prop_oneof![
        var.clone().prop_map(|v| v.to_string()),
        var.clone().prop_map(|v| format!("{v}.x AS x_{v}")),
        Just("count(*)".to_string()),
        var.clone().prop_map(|v| format!("collect(DISTINCT {v}.y)")),
        var.prop_map(|v| format!("size([z IN range(1, 3) WHERE z > 1 | z * 2]) + {v}.n")),
    ];
    (
        any::<bool>(),
        pattern,
        proptest::option::of(pred),
        any::<bool>(),
        proptest::collection::vec(item, 1..4),
        proptest::option::of(0..3u8),
    )
        .prop_map(|(opt, pat, wh, distinct, items, tail)| {
            let mut q = format!("{}MATCH {pat}", if opt { "OPTIONAL " } else { "" });
            if let Some(w) = wh {
                q.push_str(&format!(" WHERE {w}"));
            }
            q.push_str(&format!(
                " RETURN {}{}",
                if distinct { "DISTINCT " } else { "" },
                items.join(", ")
            ));
            match tail {
                Some(0) => q.push_str(" ORDER BY a DESC"),
                Some(1) => q.push_str(" SKIP 1 LIMIT 5"),
                Some(_) => q.push_str(" LIMIT $n"),
                None => {}
            }
            q
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]
    /// Both parsers accept every generated query (names in them need not be bound:
    /// this is syntax only).
    #[test]
    fn generated_queries_parse_with_both(q in query()) {
        if std::env::var_os("ORACLE_SHOW").is_some() {
            eprintln!("{q}");
        }
        prop_assert!(parse_query(&q).is_ok(), "quiver rejects {}: {:?}", q, parse_query(&q).err());
        prop_assert!(oracle(&q), "the openCypher grammar rejects {}", q);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
    #[test]
    fn what_we_accept_is_open_cypher(toks in proptest::collection::vec(0..TOKENS.len(), 1..16)) {
        let q = toks.iter().map(|&i| TOKENS[i]).collect::<Vec<_>>().join(" ");
        if parse_query(&q).is_ok() {
            prop_assert!(oracle(&q), "quiver accepts what openCypher does not: {}", q);
        }
    }
}
