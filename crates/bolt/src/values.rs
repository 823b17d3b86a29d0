//! Quiver values as Bolt 5 structures and back: nodes, relationships and paths with
//! element ids, and the temporal types (datetimes as UTC seconds, Bolt 5's form).

use crate::packstream::{
    encode, encode_int, encode_str, list_header, map_header, struct_header, Pack,
};
use quiver_engine::value::{zone_id, zone_name, Dur, Stamp};
use quiver_query::value::RelRef;
use quiver_query::{Graph, QueryError, Value};
use std::sync::Arc;

pub const NODE: u8 = 0x4E;
pub const REL: u8 = 0x52;
pub const UNBOUND_REL: u8 = 0x72;
pub const PATH: u8 = 0x50;
pub const DATE: u8 = 0x44;
pub const TIME: u8 = 0x54;
pub const LOCAL_TIME: u8 = 0x74;
pub const DATETIME: u8 = 0x49;
pub const DATETIME_ZONE: u8 = 0x69;
pub const LOCAL_DATETIME: u8 = 0x64;
pub const DURATION: u8 = 0x45;

/// A relationship's integer id: its type in the top 24 bits, its edge id below (ids
/// are per type in Quiver).
pub fn rel_id(r: &RelRef) -> i64 {
    ((r.ty as i64) << 40) | (r.eid as i64 & ((1 << 40) - 1))
}

fn props(g: &Graph, p: Vec<(Arc<str>, Value)>) -> Result<Pack, QueryError> {
    let mut m = Vec::with_capacity(p.len());
    for (k, v) in p {
        m.push((k.to_string(), to_pack(g, &v)?));
    }
    Ok(Pack::Map(m))
}

/// Appends `v` as PackStream, as `encode(&to_pack(g, v)?)` would, but writing the
/// common values (scalars, strings, lists, maps, nodes, relationships) straight into
/// `out`: a node's labels, keys and strings are not copied into a `Pack` first (a
/// result of whole nodes spent more on those copies than on reading the nodes).
pub fn write_value(g: &Graph, v: &Value, out: &mut Vec<u8>) -> Result<(), QueryError> {
    write_value_with(g, v, out, &ReadAhead::default())
}

/// Node properties read ahead for a batch of records ([`ReadAhead::nodes`]).
#[derive(Default)]
pub struct ReadAhead {
    /// Node ids, ascending, and their properties.
    ids: Vec<u64>,
    props: Vec<Vec<(Arc<str>, Value)>>,
}

impl ReadAhead {
    /// The properties of the nodes that `cols` hold at their top level, read together
    /// ([`Graph::nodes_props`]: a row group's column chunks opened once, not once a
    /// node and column), when there are enough of them for that to pay.
    pub fn nodes(g: &Graph, cols: &[Vec<Value>]) -> Result<ReadAhead, QueryError> {
        let mut ids: Vec<u64> = cols
            .iter()
            .flatten()
            .filter_map(|v| match v {
                Value::Node(n) => Some(*n),
                _ => None,
            })
            .collect();
        if ids.len() < READ_AHEAD_MIN {
            return Ok(ReadAhead::default());
        }
        ids.sort_unstable();
        ids.dedup();
        let props = g.nodes_props(&ids)?;
        Ok(ReadAhead { ids, props })
    }

    fn get(&self, n: u64) -> Option<&[(Arc<str>, Value)]> {
        self.ids.binary_search(&n).ok().map(|i| &self.props[i][..])
    }
}

/// Nodes in a batch below which they are read one at a time.
const READ_AHEAD_MIN: usize = 8;

/// [`write_value`], taking nodes' properties from `read` where it has them.
pub fn write_value_with(
    g: &Graph,
    v: &Value,
    out: &mut Vec<u8>,
    read: &ReadAhead,
) -> Result<(), QueryError> {
    match v {
        Value::Null => encode(&Pack::Null, out),
        Value::Bool(b) => encode(&Pack::Bool(*b), out),
        Value::Int(i) => encode_int(*i, out),
        Value::Float(f) => encode(&Pack::Float(*f), out),
        Value::Str(s) => encode_str(s, out),
        Value::List(l) => {
            list_header(l.len(), out);
            for x in l.iter() {
                write_value(g, x, out)?;
            }
        }
        Value::Map(m) => write_props(g, m.iter().map(|(k, v)| (&**k, v)), m.len(), out)?,
        Value::Node(n) => {
            struct_header(4, NODE, out);
            encode_int(*n as i64, out);
            let labels = g.labels(*n)?;
            list_header(labels.len(), out);
            for l in labels.iter() {
                encode_str(l, out);
            }
            let owned;
            let p = match read.get(*n) {
                Some(p) => p,
                None => {
                    owned = g.node_props(*n)?;
                    &owned[..]
                }
            };
            write_props(g, p.iter().map(|(k, v)| (&**k, v)), p.len(), out)?;
            encode_str(&n.to_string(), out);
        }
        Value::Rel(r) => {
            struct_header(8, REL, out);
            encode_int(rel_id(r), out);
            encode_int(r.src as i64, out);
            encode_int(r.dst as i64, out);
            encode_str(&g.rel_type_name(r.ty), out);
            let p = g.rel_props(r)?;
            write_props(g, p.iter().map(|(k, v)| (&**k, v)), p.len(), out)?;
            encode_str(&format!("{}:{}", r.ty, r.eid), out);
            encode_str(&r.src.to_string(), out);
            encode_str(&r.dst.to_string(), out);
        }
        other => encode(&to_pack(g, other)?, out),
    }
    Ok(())
}

fn write_props<'a>(
    g: &Graph,
    p: impl Iterator<Item = (&'a str, &'a Value)>,
    n: usize,
    out: &mut Vec<u8>,
) -> Result<(), QueryError> {
    map_header(n, out);
    for (k, v) in p {
        encode_str(k, out);
        write_value(g, v, out)?;
    }
    Ok(())
}

fn node(g: &Graph, n: u64) -> Result<Pack, QueryError> {
    let labels = g
        .labels(n)?
        .iter()
        .map(|l| Pack::str(l.to_string()))
        .collect();
    Ok(Pack::Struct(
        NODE,
        vec![
            Pack::Int(n as i64),
            Pack::List(labels),
            props(g, g.node_props(n)?)?,
            // The element id: what Cypher's elementId(n) gives (`quiver_query::expr`).
            Pack::Str(n.to_string()),
        ],
    ))
}

fn rel(g: &Graph, r: &RelRef) -> Result<Pack, QueryError> {
    let id = rel_id(r);
    Ok(Pack::Struct(
        REL,
        vec![
            Pack::Int(id),
            Pack::Int(r.src as i64),
            Pack::Int(r.dst as i64),
            Pack::Str(g.rel_type_name(r.ty).to_string()),
            props(g, g.rel_props(r)?)?,
            Pack::Str(format!("{}:{}", r.ty, r.eid)),
            Pack::Str(r.src.to_string()),
            Pack::Str(r.dst.to_string()),
        ],
    ))
}

/// A query value as PackStream (reading labels and properties from `g`).
pub fn to_pack(g: &Graph, v: &Value) -> Result<Pack, QueryError> {
    Ok(match v {
        Value::Null => Pack::Null,
        Value::Bool(b) => Pack::Bool(*b),
        Value::Int(i) => Pack::Int(*i),
        Value::Float(f) => Pack::Float(*f),
        Value::Str(s) => Pack::Str(s.to_string()),
        Value::Bytes(b) => Pack::Bytes(b.to_vec()),
        Value::List(l) => Pack::List(l.iter().map(|x| to_pack(g, x)).collect::<Result<_, _>>()?),
        Value::Map(m) => props(g, m.to_vec())?,
        Value::Node(n) => node(g, *n)?,
        Value::Rel(r) => rel(g, r)?,
        Value::Path(p) => {
            let nodes: Vec<Pack> = p
                .nodes
                .iter()
                .map(|&n| node(g, n))
                .collect::<Result<_, _>>()?;
            let mut rels = Vec::new();
            let mut indices = Vec::new();
            for (i, r) in p.rels.iter().enumerate() {
                rels.push(Pack::Struct(
                    UNBOUND_REL,
                    vec![
                        Pack::Int(rel_id(r)),
                        Pack::Str(g.rel_type_name(r.ty).to_string()),
                        props(g, g.rel_props(r)?)?,
                        Pack::Str(format!("{}:{}", r.ty, r.eid)),
                    ],
                ));
                // 1-based; negative when the path walks the relationship backwards.
                let forward = r.src as u64 == p.nodes[i];
                let k = i as i64 + 1;
                indices.push(Pack::Int(if forward { k } else { -k }));
                indices.push(Pack::Int(i as i64 + 1));
            }
            Pack::Struct(
                PATH,
                vec![Pack::List(nodes), Pack::List(rels), Pack::List(indices)],
            )
        }
        Value::Date(d) => Pack::Struct(DATE, vec![Pack::Int(*d)]),
        Value::LocalTime(t) => Pack::Struct(LOCAL_TIME, vec![Pack::Int(*t)]),
        Value::Time(t, o) => Pack::Struct(TIME, vec![Pack::Int(*t), Pack::Int(*o as i64)]),
        Value::LocalDateTime(s) => Pack::Struct(
            LOCAL_DATETIME,
            vec![Pack::Int(s.secs), Pack::Int(s.nanos as i64)],
        ),
        Value::DateTime(s, o, z) => match zone_name(*z) {
            Some(name) => Pack::Struct(
                DATETIME_ZONE,
                vec![
                    Pack::Int(s.secs),
                    Pack::Int(s.nanos as i64),
                    Pack::Str(name.to_string()),
                ],
            ),
            None => Pack::Struct(
                DATETIME,
                vec![
                    Pack::Int(s.secs),
                    Pack::Int(s.nanos as i64),
                    Pack::Int(*o as i64),
                ],
            ),
        },
        Value::Duration(d) => Pack::Struct(
            DURATION,
            vec![
                Pack::Int(d.months),
                Pack::Int(d.days),
                Pack::Int(d.secs),
                Pack::Int(d.nanos as i64),
            ],
        ),
    })
}

/// A parameter from PackStream. Nodes, relationships and paths cannot be parameters.
pub fn from_pack(p: &Pack) -> Result<Value, String> {
    let ints = |f: &[Pack], n: usize, what: &str| -> Result<Vec<i64>, String> {
        let v: Vec<i64> = f.iter().take(n).filter_map(Pack::as_int).collect();
        if v.len() == n && f.len() >= n {
            Ok(v)
        } else {
            Err(format!("a {what} parameter needs {n} integer fields"))
        }
    };
    Ok(match p {
        Pack::Null => Value::Null,
        Pack::Bool(b) => Value::Bool(*b),
        Pack::Int(i) => Value::Int(*i),
        Pack::Float(f) => Value::Float(*f),
        Pack::Str(s) => Value::str(s),
        Pack::Bytes(b) => Value::Bytes(Arc::from(b.as_slice())),
        Pack::List(l) => Value::list(l.iter().map(from_pack).collect::<Result<_, _>>()?),
        Pack::Map(m) => Value::Map(Arc::new(
            m.iter()
                .map(|(k, v)| Ok((Arc::from(k.as_str()), from_pack(v)?)))
                .collect::<Result<_, String>>()?,
        )),
        Pack::Struct(tag, f) => match *tag {
            DATE => Value::Date(ints(f, 1, "date")?[0]),
            LOCAL_TIME => {
                let ns = ints(f, 1, "local time")?[0];
                if !(0..86_400_000_000_000).contains(&ns) {
                    return Err("a local time is 0 to 86399999999999 nanoseconds".into());
                }
                Value::LocalTime(ns)
            }
            TIME => {
                let v = ints(f, 2, "time")?;
                Value::Time(v[0].rem_euclid(86_400_000_000_000), offset(v[1])?)
            }
            LOCAL_DATETIME => {
                let v = ints(f, 2, "local datetime")?;
                Value::LocalDateTime(stamp(v[0], v[1])?)
            }
            DATETIME => {
                let v = ints(f, 3, "datetime")?;
                Value::DateTime(stamp(v[0], v[1])?, offset(v[2])?, 0)
            }
            DATETIME_ZONE => {
                let v = ints(f, 2, "datetime")?;
                let Some(Pack::Str(name)) = f.get(2) else {
                    return Err("a zoned datetime parameter needs a zone name".into());
                };
                jiff_zone(name)?;
                let s = stamp(v[0], v[1])?;
                let o = quiver_query::expr::temporal::offset_at_instant(name, s)
                    .map_err(|e| e.to_string())?;
                Value::DateTime(s, o, zone_id(name))
            }
            DURATION => {
                let v = ints(f, 4, "duration")?;
                let total = v[2] as i128 * 1_000_000_000 + v[3] as i128;
                Value::Duration(Arc::new(Dur {
                    months: v[0],
                    days: v[1],
                    secs: total.div_euclid(1_000_000_000) as i64,
                    nanos: total.rem_euclid(1_000_000_000) as i32,
                }))
            }
            NODE | REL | UNBOUND_REL | PATH => {
                return Err("nodes, relationships and paths cannot be parameters".into())
            }
            t => return Err(format!("unknown structure 0x{t:02X} in a parameter")),
        },
    })
}

fn stamp(secs: i64, nanos: i64) -> Result<Stamp, String> {
    if !(0..1_000_000_000).contains(&nanos) {
        return Err("nanoseconds must be 0 to 999999999".into());
    }
    Ok(Stamp {
        secs,
        nanos: nanos as u32,
    })
}

fn offset(o: i64) -> Result<i32, String> {
    if o.abs() > 18 * 3600 {
        return Err(format!("offset {o} s is beyond 18 hours"));
    }
    Ok(o as i32)
}

fn jiff_zone(name: &str) -> Result<jiff::tz::TimeZone, String> {
    quiver_query::expr::temporal::time_zone(name).map_err(|_| format!("unknown time zone '{name}'"))
}

#[cfg(test)]
mod write_tests {
    use super::*;
    use quiver_query::{Params, Session};
    use quiver_storage::OpenMode;

    /// Every value of these results written straight (`write_value`) is byte for byte
    /// what encoding its `Pack` gives: nodes and relationships of the delta and of the
    /// segments, paths, maps, lists, temporals, nulls.
    #[test]
    fn written_values_encode_as_their_packs() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("g.qdb");
        let mut s = Session::open_with(&db, OpenMode::Mapped, true).unwrap();
        let none = Params::new();
        let run = |s: &mut Session, q: &str| {
            let mut n = 0;
            s.run(q, &none, &mut |g, b| {
                for r in 0..b.len {
                    for c in &b.cols {
                        let mut direct = Vec::new();
                        write_value(g, &c[r], &mut direct)?;
                        let mut packed = Vec::new();
                        encode(&to_pack(g, &c[r])?, &mut packed);
                        assert_eq!(direct, packed, "{q}: {:?}", c[r]);
                        n += 1;
                    }
                }
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{q}: {e}"));
            n
        };
        run(
            &mut s,
            "CREATE (:A:B {name: 'ä', n: 1, f: 2.5, ok: true, xs: [1, 2], d: date('2024-01-02'), long: 'x' + reduce(a = '', i IN range(1, 40) | a + 'yz')})-[:R {w: 70000, t: localdatetime('2024-01-02T03:04:05')}]->(:C {big: 9223372036854775807})",
        );
        let q = "MATCH p = (a)-[r]->(b) RETURN a, r, b, p, [a, 1, 'x', null], {k: r, m: {n: -17}}, a.xs, a.d, r.t";
        assert!(run(&mut s, q) > 0);
        run(&mut s, "CHECKPOINT");
        run(
            &mut s,
            "MATCH (a:A) SET a.n = 128, a.extra = 'e' REMOVE a.f",
        );
        assert!(run(&mut s, q) > 0);
    }
}
