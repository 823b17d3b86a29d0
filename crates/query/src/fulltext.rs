//! Full-text indexes over string properties of nodes, in Neo4j's terms: `CREATE FULLTEXT
//! INDEX`, `db.index.fulltext.queryNodes(name, query, {skip, limit})`, the Lucene query
//! syntax that clients send (terms, `"phrases"`, `+required`, `-excluded`, `AND`, `OR`,
//! `NOT`, `prefix*`, `field:term`; fuzziness and boosts are read and ignored), scored as
//! Lucene scores them (BM25, k1 1.2, b 0.75, each property its own field).
//!
//! A search scans the indexed properties of the label's nodes, the delta's as the
//! segments', tokenizing as Lucene's standard analyzer does (lowercase, split at what is
//! not a letter or a digit; English stop words dropped for the `standard` and `english`
//! analyzers). No inverted index yet: that suits the thousands to hundreds of thousands
//! of text chunks of a retrieval application, at a scan's cost a query.

use crate::error::QueryError;
use crate::graph::Graph;
use crate::value::Value;
use quiver_storage::manifest::FulltextIndexMeta;

/// Lucene's English stop words (`EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`).
const STOP: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// The analyzers accepted, Neo4j's names; whether each drops stop words.
pub fn analyzer_drops_stop_words(name: &str) -> Option<bool> {
    match name {
        "standard-no-stop-words" | "simple" | "whitespace" | "keyword" => Some(false),
        "standard" | "english" | "stop" | "classic" => Some(true),
        _ => None,
    }
}

/// The tokens of `text`, lowercased, split at every character that is not a letter or
/// a digit (an apostrophe inside a word is kept, as the standard tokenizer keeps it).
pub fn tokens(text: &str, stop: bool, out: &mut Vec<String>) {
    let mut cur = String::new();
    let mut chars = text.chars().peekable();
    let flush = |cur: &mut String, out: &mut Vec<String>| {
        if !cur.is_empty() {
            if !(stop && STOP.contains(&cur.as_str())) {
                out.push(std::mem::take(cur));
            } else {
                cur.clear();
            }
        }
    };
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() {
            cur.extend(c.to_lowercase());
        } else if c == '\'' && !cur.is_empty() && chars.peek().is_some_and(|n| n.is_alphanumeric())
        {
            cur.push('\'');
        } else {
            flush(&mut cur, out);
        }
    }
    flush(&mut cur, out);
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Occur {
    Should,
    Must,
    MustNot,
}

/// One clause of a query: a phrase of analyzed tokens (one token: a term), or a prefix.
#[derive(Debug, Clone)]
struct Clause {
    field: Option<String>,
    tokens: Vec<String>,
    prefix: bool,
    occur: Occur,
}

/// Lucene's query syntax, as far as clients use it (see the module's note). An empty
/// query, or one of stop words only, matches nothing.
fn parse_query(q: &str, stop: bool) -> Result<Vec<Clause>, QueryError> {
    let mut out: Vec<Clause> = Vec::new();
    let chars: Vec<char> = q.chars().collect();
    let mut i = 0;
    let mut next_occur: Option<Occur> = None;
    let mut and_pending = false;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() || c == '(' || c == ')' {
            i += 1;
            continue;
        }
        let mut occur = next_occur.take();
        if c == '+' || c == '-' || c == '!' {
            occur = Some(if c == '+' {
                Occur::Must
            } else {
                Occur::MustNot
            });
            i += 1;
            continue_if_space(&chars, &mut i);
            next_occur = occur;
            continue;
        }
        // A word, or a quoted phrase; `field:` before either.
        let mut field = None;
        let mut word = String::new();
        let mut quoted = false;
        let mut prefix = false;
        loop {
            if i < chars.len() && chars[i] == '"' {
                quoted = true;
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' && i + 1 < chars.len() {
                        i += 1;
                    }
                    word.push(chars[i]);
                    i += 1;
                }
                i += 1; // the closing quote (or the end)
                break;
            }
            while i < chars.len()
                && !chars[i].is_whitespace()
                && !matches!(chars[i], '(' | ')' | '"')
            {
                match chars[i] {
                    '\\' if i + 1 < chars.len() => {
                        word.push(chars[i + 1]);
                        i += 2;
                        continue;
                    }
                    ':' if field.is_none() && !word.is_empty() => {
                        field = Some(std::mem::take(&mut word));
                        i += 1;
                        // `field:"phrase"` or `field:term`
                        if i < chars.len() && chars[i] == '"' {
                            break;
                        }
                        continue;
                    }
                    _ => word.push(chars[i]),
                }
                i += 1;
            }
            if field.is_some() && word.is_empty() && i < chars.len() && chars[i] == '"' {
                continue;
            }
            break;
        }
        if !quoted {
            match word.as_str() {
                "AND" | "&&" => {
                    if let Some(last) = out.last_mut() {
                        if last.occur == Occur::Should {
                            last.occur = Occur::Must;
                        }
                    }
                    and_pending = true;
                    continue;
                }
                "OR" | "||" => continue,
                "NOT" => {
                    next_occur = Some(Occur::MustNot);
                    continue;
                }
                _ => {}
            }
            // `~` (fuzzy or proximity) and `^` (boost) suffixes: read, ignored.
            if let Some(p) = word.find(['~', '^']) {
                word.truncate(p);
            }
            if word.ends_with('*') {
                prefix = true;
                word = word.trim_end_matches('*').to_string();
            }
        } else if i < chars.len() && matches!(chars.get(i), Some('~') | Some('^')) {
            while i < chars.len() && !chars[i].is_whitespace() && chars[i] != ')' {
                i += 1;
            }
        }
        let mut toks = Vec::new();
        tokens(&word, stop && !prefix, &mut toks);
        let occur = occur.unwrap_or(if and_pending {
            Occur::Must
        } else {
            Occur::Should
        });
        and_pending = false;
        if toks.is_empty() {
            continue;
        }
        if prefix {
            // A prefix stays one token (its last if the analyzer split it).
            let t = toks.pop().unwrap_or_default();
            out.push(Clause {
                field,
                tokens: vec![t],
                prefix: true,
                occur,
            });
        } else {
            out.push(Clause {
                field,
                tokens: toks,
                prefix: false,
                occur,
            });
        }
    }
    Ok(out)
}

fn continue_if_space(chars: &[char], i: &mut usize) {
    while *i < chars.len() && chars[*i].is_whitespace() {
        *i += 1;
    }
}

/// Occurrences of `phrase` (consecutive tokens) in `field`, or of tokens starting with
/// it for a prefix.
fn freq<S: AsRef<str>>(field: &[S], c: &Clause) -> usize {
    if c.prefix {
        let p = c.tokens[0].as_str();
        return field.iter().filter(|t| t.as_ref().starts_with(p)).count();
    }
    let p = &c.tokens;
    if p.len() == 1 {
        return field.iter().filter(|t| t.as_ref() == p[0]).count();
    }
    if field.len() < p.len() {
        return 0;
    }
    field
        .windows(p.len())
        .filter(|w| w.iter().zip(p).all(|(a, b)| a.as_ref() == b))
        .count()
}

/// [`tokens`] without a string per token: `text` lowercased into `lower` (reused), the
/// tokens as spans of it. ASCII text (most) is split byte by byte.
fn token_spans(text: &str, stop: bool, lower: &mut String, spans: &mut Vec<(u32, u32)>) {
    lower.clear();
    spans.clear();
    if !text.is_ascii() {
        let mut owned = Vec::new();
        tokens(text, stop, &mut owned);
        for t in owned {
            let a = lower.len() as u32;
            lower.push_str(&t);
            spans.push((a, lower.len() as u32));
        }
        return;
    }
    lower.push_str(text);
    lower.make_ascii_lowercase();
    let b = lower.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && !b[i].is_ascii_alphanumeric() {
            i += 1;
        }
        let start = i;
        while i < b.len()
            && (b[i].is_ascii_alphanumeric()
                || (b[i] == b'\''
                    && i > start
                    && b.get(i + 1).is_some_and(|c| c.is_ascii_alphanumeric())))
        {
            i += 1;
        }
        if i > start && !(stop && STOP.contains(&&lower[start..i])) {
            spans.push((start as u32, i as u32));
        }
    }
}

/// The nodes of `meta`'s labels that match `query`, best first with Lucene's scores,
/// after `skip`, at most `limit`.
pub fn query_nodes(
    g: &Graph,
    meta: &FulltextIndexMeta,
    query: &str,
    skip: usize,
    limit: usize,
) -> Result<Vec<(f64, u64)>, QueryError> {
    let stop = analyzer_drops_stop_words(&meta.analyzer).unwrap_or(false);
    let clauses = parse_query(query, stop)?;
    if clauses.is_empty() || clauses.iter().all(|c| c.occur == Occur::MustNot) {
        return Ok(Vec::new());
    }
    for c in &clauses {
        if let Some(f) = &c.field {
            if !meta.properties.iter().any(|p| p == f) {
                // Lucene finds nothing in a field it has not indexed.
                if c.occur == Occur::Must {
                    return Ok(Vec::new());
                }
            }
        }
    }
    // The candidates: every node of any of the labels, once.
    let mut nodes: Vec<u64> = Vec::new();
    for l in &meta.labels {
        if let Some(id) = g.label_id(l) {
            nodes.extend(g.label_nodes(id, usize::MAX)?);
        }
    }
    nodes.sort_unstable();
    nodes.dedup();
    let nf = meta.properties.len();
    // In morsels of nodes on every core: per field, the documents with it and their
    // total length (for the average); the matching documents with, per field a clause
    // matched, its tokens.
    type Part = (Vec<u64>, Vec<u64>, Vec<(u64, Vec<Vec<String>>)>);
    use rayon::prelude::*;
    let parts: Vec<Part> = nodes
        .par_chunks(2048)
        .map(|chunk| -> Result<Part, QueryError> {
            let mut docs = vec![0u64; nf];
            let mut total_len = vec![0u64; nf];
            let mut matched = Vec::new();
            let (mut lower, mut spans) = (String::new(), Vec::new());
            for &n in chunk {
                let mut fields: Vec<Vec<String>> = vec![Vec::new(); nf];
                let mut any = false;
                for (f, p) in meta.properties.iter().enumerate() {
                    let text = match g.node_prop(n, p)? {
                        Value::Str(s) => s,
                        _ => continue,
                    };
                    token_spans(&text, stop, &mut lower, &mut spans);
                    docs[f] += 1;
                    total_len[f] += spans.len() as u64;
                    let toks: Vec<&str> = spans
                        .iter()
                        .map(|&(a, b)| &lower[a as usize..b as usize])
                        .collect();
                    // Kept when any clause matches it (an excluded one too: it rules
                    // the node out); the node is a candidate when a clause that is not
                    // excluded does.
                    let mut keep = false;
                    for c in &clauses {
                        if c.field.as_deref().is_none_or(|x| x == p.as_str()) && freq(&toks, c) > 0
                        {
                            keep = true;
                            any |= c.occur != Occur::MustNot;
                        }
                    }
                    if keep {
                        fields[f] = toks.iter().map(|t| t.to_string()).collect();
                    }
                }
                if any {
                    matched.push((n, fields));
                }
            }
            Ok((docs, total_len, matched))
        })
        .collect::<Result<_, _>>()?;
    let mut docs = vec![0u64; nf];
    let mut total_len = vec![0u64; nf];
    let mut matched: Vec<(u64, Vec<Vec<String>>)> = Vec::new();
    for (d, t, m) in parts {
        for f in 0..nf {
            docs[f] += d[f];
            total_len[f] += t[f];
        }
        matched.extend(m);
    }
    // Document frequencies of each clause per field, over the matching documents.
    let applies = |c: &Clause, f: usize| c.field.as_deref().is_none_or(|x| x == meta.properties[f]);
    let mut df = vec![vec![0u64; nf]; clauses.len()];
    for (_, fields) in &matched {
        for (ci, c) in clauses.iter().enumerate() {
            for (f, toks) in fields.iter().enumerate() {
                if applies(c, f) && !c.prefix && freq(toks, c) > 0 {
                    df[ci][f] += 1;
                }
            }
        }
    }
    // A phrase's idf is the sum of its terms' (as Lucene's PhraseQuery); its terms'
    // document frequencies are taken as the phrase's own (a slight underestimate of
    // each term's: only documents that matched some clause were kept).
    let (k1, b) = (1.2f64, 0.75f64);
    let mut scored: Vec<(f64, u64)> = Vec::new();
    'doc: for (n, fields) in &matched {
        let mut score = 0.0;
        let mut should_hit = false;
        let mut has_should = false;
        for (ci, c) in clauses.iter().enumerate() {
            let mut hit = false;
            for (f, toks) in fields.iter().enumerate() {
                if !applies(c, f) {
                    continue;
                }
                let tf = freq(toks, c);
                if tf == 0 {
                    continue;
                }
                hit = true;
                if c.occur == Occur::MustNot {
                    continue;
                }
                if c.prefix {
                    score += 1.0; // constant score, as Lucene's prefix queries
                    continue;
                }
                let nd = docs[f] as f64;
                let d = df[ci][f] as f64;
                let idf = (1.0 + (nd - d + 0.5) / (d + 0.5)).ln() * c.tokens.len() as f64;
                let avg = total_len[f] as f64 / nd.max(1.0);
                let dl = toks.len() as f64;
                let tf = tf as f64;
                score += idf * tf / (tf + k1 * (1.0 - b + b * dl / avg.max(1.0)));
            }
            match c.occur {
                Occur::Must if !hit => continue 'doc,
                Occur::MustNot if hit => continue 'doc,
                Occur::Should => {
                    has_should = true;
                    should_hit |= hit;
                }
                _ => {}
            }
        }
        let must = clauses.iter().any(|c| c.occur == Occur::Must);
        if has_should && !should_hit && !must {
            continue;
        }
        scored.push((score, *n));
    }
    // Documents matched only by an excluded clause are not in `matched`; documents
    // with no matching clause at all match nothing (there is no match-all clause).
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    Ok(scored.into_iter().skip(skip).take(limit).collect())
}

/// Index options: `{indexConfig: {`fulltext.analyzer`: ..., `fulltext.eventually_consistent`: ...}}`;
/// the analyzer (Neo4j's default `standard-no-stop-words`).
pub fn options(options: &Value) -> Result<String, QueryError> {
    let get = |m: &Value, k: &str| match m {
        Value::Map(m) => m.iter().find(|(x, _)| &**x == k).map(|(_, v)| v.clone()),
        _ => None,
    };
    let config = get(options, "indexConfig").unwrap_or(Value::Null);
    match get(&config, "fulltext.analyzer") {
        None | Some(Value::Null) => Ok("standard-no-stop-words".into()),
        Some(Value::Str(s)) if analyzer_drops_stop_words(&s).is_some() => Ok(s.to_string()),
        Some(v) => Err(QueryError::Index(format!(
            "`fulltext.analyzer` must be one of standard-no-stop-words, standard, english, simple, whitespace, keyword, stop, classic; got {}",
            crate::expr::to_string(&v)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_as_the_standard_analyzer() {
        let mut t = Vec::new();
        tokens("The Quick-brown fox's 2 DOGS, naïve!", false, &mut t);
        assert_eq!(t, ["the", "quick", "brown", "fox's", "2", "dogs", "naïve"]);
        t.clear();
        tokens("the fox and THE dog", true, &mut t);
        assert_eq!(t, ["fox", "dog"]);
    }

    /// The span tokenizer (ASCII fast path, and the rest) gives [`tokens`]' tokens.
    #[test]
    fn spans_are_the_tokens() {
        for text in [
            "The Quick-brown fox's 2 DOGS, naïve!",
            "it's 'quoted' x'y' don't' a''b THE end",
            "",
            "   ,,, ",
            "Graph-Databases and_the SQL",
        ] {
            for stop in [false, true] {
                let mut want = Vec::new();
                tokens(text, stop, &mut want);
                let (mut lower, mut spans) = (String::new(), Vec::new());
                token_spans(text, stop, &mut lower, &mut spans);
                let got: Vec<&str> = spans
                    .iter()
                    .map(|&(a, b)| &lower[a as usize..b as usize])
                    .collect();
                assert_eq!(got, want, "{text:?} stop {stop}");
            }
        }
    }

    #[test]
    fn the_query_syntax_clients_send() {
        let c = parse_query(
            r#"+graph -sql "vector index" data* title:neo4j~2 x^3"#,
            false,
        )
        .unwrap();
        let got: Vec<(Option<&str>, Vec<&str>, bool, Occur)> = c
            .iter()
            .map(|c| {
                (
                    c.field.as_deref(),
                    c.tokens.iter().map(|s| s.as_str()).collect(),
                    c.prefix,
                    c.occur,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (None, vec!["graph"], false, Occur::Must),
                (None, vec!["sql"], false, Occur::MustNot),
                (None, vec!["vector", "index"], false, Occur::Should),
                (None, vec!["data"], true, Occur::Should),
                (Some("title"), vec!["neo4j"], false, Occur::Should),
                (None, vec!["x"], false, Occur::Should),
            ]
        );
        let c = parse_query("graph AND database NOT relational OR (a)", false).unwrap();
        let occ: Vec<Occur> = c.iter().map(|c| c.occur).collect();
        assert_eq!(
            occ,
            vec![Occur::Must, Occur::Must, Occur::MustNot, Occur::Should]
        );
        assert!(parse_query("   ", false).unwrap().is_empty());
        assert!(parse_query("the and", true).unwrap().is_empty());
    }
}
