//! A relationship segment written in parts (a Spark build writes a CSR part a task, over
//! consecutive node ranges, and a property file a task) answers every read as the same
//! segment written whole: neighbours, degrees, binary searches, scans, entry positions
//! for deletion bitmaps, canonical edge ids, a merge's read-back and property rows.

use quiver_common::types::{DataType, ScalarType};
use quiver_format::column::ColumnBuilder;
use quiver_storage::manifest::{
    Manifest, NodeTableMeta, PropertyMeta, RelSegmentMeta, RelTypeMeta, SegmentMeta,
};
use quiver_storage::write::{CsrPartOf, CsrWriter, Staging, TableWriter};
use quiver_storage::{Database, Direction, OpenMode};

const N: u64 = 60;

/// A small graph with hubs, parallel edges, self-loops and nodes without edges.
fn edges() -> Vec<(u32, u32)> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut e = Vec::new();
    for _ in 0..500 {
        let a = (next() % N) as u32;
        let b = if next() % 4 == 0 {
            (next() % 5) as u32
        } else {
            (next() % N) as u32
        };
        // Nodes 40..45 have no edges at all.
        if (40..45).contains(&a) || (40..45).contains(&b) {
            continue;
        }
        e.push((a, b));
    }
    e.push((7, 7));
    e.push((7, 7));
    // Sorted by source then target: edge ids are out-CSR positions (a Spark build's order).
    e.sort();
    e
}

/// One direction over nodes `lo..hi`: `entries` are (node, neighbour, edge id), sorted.
fn part(
    st: &Staging,
    name: &str,
    lo: u64,
    hi: u64,
    entries: &[(u32, u32, u64)],
    n_edges: u64,
    with_ids: bool,
) -> SegmentMeta {
    let mut deg = vec![0u32; (hi - lo) as usize];
    let mine: Vec<_> = entries
        .iter()
        .filter(|e| (lo..hi).contains(&(e.0 as u64)))
        .collect();
    for e in &mine {
        deg[(e.0 as u64 - lo) as usize] += 1;
    }
    let whole = CsrPartOf {
        first_node: lo,
        n_nodes: N,
        n_edges,
    };
    let mut w = CsrWriter::create_part(st, name, &deg, mine.len() as u64, whole, with_ids).unwrap();
    for e in mine {
        w.push(e.1, e.2).unwrap();
    }
    w.finish().unwrap()
}

fn props(st: &Staging, name: &str, eids: std::ops::Range<u64>) -> SegmentMeta {
    let mut w = TableWriter::create(st, name, cols()).unwrap();
    let mut b = ColumnBuilder::new(DataType::Scalar(ScalarType::Long));
    for e in eids {
        b.push_i64(1000 + e as i64);
    }
    if !b.is_empty() {
        w.write_row_group(&[b]).unwrap();
    }
    w.finish().unwrap()
}

fn cols() -> Vec<PropertyMeta> {
    vec![PropertyMeta {
        name: "w".into(),
        dtype: DataType::Scalar(ScalarType::Long),
    }]
}

/// The segment whole, and the same in parts over the node ranges `cuts`.
fn segment(st: &Staging, tag: &str, out_cuts: &[u64], in_cuts: &[u64]) -> RelSegmentMeta {
    segment_ids(st, tag, out_cuts, in_cuts, true)
}

/// With `in_ids` false the in side stores no edge ids (a type without properties: its
/// k-th parallel entry is the out side's k-th).
fn segment_ids(
    st: &Staging,
    tag: &str,
    out_cuts: &[u64],
    in_cuts: &[u64],
    in_ids: bool,
) -> RelSegmentMeta {
    let e = edges();
    let n = e.len() as u64;
    let out: Vec<(u32, u32, u64)> = e
        .iter()
        .enumerate()
        .map(|(i, &(a, b))| (a, b, i as u64))
        .collect();
    let mut inc: Vec<(u32, u32, u64)> = out.iter().map(|&(a, b, i)| (b, a, i)).collect();
    inc.sort();
    let ranges = |cuts: &[u64]| {
        let mut b = vec![0];
        b.extend_from_slice(cuts);
        b.push(N);
        b.windows(2).map(|w| (w[0], w[1])).collect::<Vec<_>>()
    };
    let outs: Vec<SegmentMeta> = ranges(out_cuts)
        .iter()
        .enumerate()
        .map(|(k, &(lo, hi))| part(st, &format!("{tag}-out-{k}.seg"), lo, hi, &out, n, false))
        .collect();
    let ins: Vec<SegmentMeta> = ranges(in_cuts)
        .iter()
        .enumerate()
        .map(|(k, &(lo, hi))| part(st, &format!("{tag}-in-{k}.seg"), lo, hi, &inc, n, in_ids))
        .collect();
    // Property files follow the out parts: edge ids are their positions.
    let mut first = 0;
    let mut prop_files = Vec::new();
    for (k, &(lo, hi)) in ranges(out_cuts).iter().enumerate() {
        let count = out
            .iter()
            .filter(|x| (lo..hi).contains(&(x.0 as u64)))
            .count() as u64;
        prop_files.push(props(
            st,
            &format!("{tag}-props-{k}.seg"),
            first..first + count,
        ));
        first += count;
    }
    let mut seg = RelSegmentMeta::new(
        n,
        outs[0].clone(),
        ins[0].clone(),
        Some(prop_files[0].clone()),
        None,
    );
    seg.out_parts = outs[1..].to_vec();
    seg.in_parts = ins[1..].to_vec();
    seg.props_parts = prop_files[1..].to_vec();
    seg
}

fn rel_type(name: &str, seg: RelSegmentMeta) -> RelTypeMeta {
    RelTypeMeta {
        name: name.into(),
        n_edges: seg.n_edges,
        columns: cols(),
        segments: vec![seg],
        start_space: None,
        end_space: None,
        patches: Vec::new(),
    }
}

#[test]
fn a_segment_in_parts_reads_as_the_segment_whole() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("parts.qdb");
    let st = Staging::begin(&db, false).unwrap();
    let whole = segment(&st, "whole", &[], &[]);
    // Parts of uneven sizes, one over nodes without edges (40..45), one of a single node.
    let parted = segment(&st, "parted", &[10, 11, 40, 45], &[3, 30, 59]);
    assert!(parted.is_parted() && !whole.is_parted());
    let mut node_col = ColumnBuilder::new(DataType::Scalar(ScalarType::Long));
    for i in 0..N as i64 {
        node_col.push_i64(i);
    }
    let mut w = TableWriter::create(&st, "nodes.seg", cols()).unwrap();
    w.write_row_group(&[node_col]).unwrap();
    let nodes = w.finish().unwrap();
    let mut manifest = Manifest::empty(st.generation(), "test".into());
    manifest.n_nodes = N;
    manifest.labels = vec!["N".into()];
    manifest.node_tables = vec![NodeTableMeta {
        name: "N".into(),
        first_node: 0,
        n_rows: N,
        labels: vec![0],
        label_column: None,
        id_column: None,
        id_space: None,
        columns: cols(),
        segments: vec![nodes],
        patches: Vec::new(),
        deleted: None,
    }];
    let bare = segment_ids(&st, "bare", &[10, 11, 40, 45], &[3, 30, 59], false);
    manifest.rel_types = vec![
        rel_type("WHOLE", whole),
        rel_type("PARTED", parted),
        rel_type("BARE", bare),
    ];
    // Every part is a file the generation keeps.
    assert!(manifest
        .files()
        .iter()
        .any(|f| f.ends_with("parted-in-3.seg")));
    assert!(manifest
        .files()
        .iter()
        .any(|f| f.ends_with("parted-props-4.seg")));
    st.publish(&manifest).unwrap();

    for mode in [OpenMode::Mapped, OpenMode::Loaded, OpenMode::Offline] {
        let d = Database::open(&db, mode).unwrap();
        d.verify().unwrap();
        let (w, p) = (0usize, 1usize);
        for dir in [Direction::Out, Direction::In] {
            let (mut sw, mut sp) = (Vec::new(), Vec::new());
            d.scan_edges(w, dir, |a, b, e| sw.push((a, b, e))).unwrap();
            d.scan_edges(p, dir, |a, b, e| sp.push((a, b, e))).unwrap();
            assert_eq!(sw, sp, "{mode:?} {dir:?} scan");
            assert_eq!(sw.len(), edges().len());
            let dead = {
                let mut b = quiver_storage::read::Bits::new(N);
                b.set(7);
                b.set(33);
                b
            };
            let (mut ew, mut ep) = (Vec::new(), Vec::new());
            d.entries_of_nodes(w, 0, dir, &dead, |x| ew.push(x))
                .unwrap();
            d.entries_of_nodes(p, 0, dir, &dead, |x| ep.push(x))
                .unwrap();
            assert_eq!(ew, ep, "{mode:?} {dir:?} entries of dead nodes");
            assert!(!ew.is_empty());
        }
        if mode == OpenMode::Offline {
            continue;
        }
        for node in 0..N as u32 {
            for dir in [Direction::Out, Direction::In] {
                let nw: Vec<_> = d.neighbours(w, node, dir).unwrap().collect();
                let np: Vec<_> = d.neighbours(p, node, dir).unwrap().collect();
                assert_eq!(nw, np, "{mode:?} node {node} {dir:?}");
                assert_eq!(
                    d.degree(w, node, dir).unwrap(),
                    d.degree(p, node, dir).unwrap()
                );
                for nb in [0u32, 3, 7, 41, 59] {
                    assert_eq!(
                        d.has_neighbour(w, node, nb, dir).unwrap(),
                        d.has_neighbour(p, node, nb, dir).unwrap(),
                        "{mode:?} {node} -> {nb} {dir:?}"
                    );
                }
            }
            let (mut pw, mut pp) = (Vec::new(), Vec::new());
            d.node_edge_positions(w, node, |s, a, b| pw.push((s, a, b)))
                .unwrap();
            d.node_edge_positions(p, node, |s, a, b| pp.push((s, a, b)))
                .unwrap();
            assert_eq!(pw, pp, "{mode:?} positions at {node}");
        }
        // Without in-side ids, an in entry's id is its position, which the k-th-parallel
        // rule maps to the out side's id across parts.
        for node in 0..N as u32 {
            let mut want: Vec<_> = d.neighbours(w, node, Direction::In).unwrap().collect();
            let mut got: Vec<_> = d
                .neighbours(2, node, Direction::In)
                .unwrap()
                .map(|(nb, raw)| (nb, d.canonical_edge_id(2, node, nb, raw).unwrap()))
                .collect();
            want.sort();
            got.sort();
            assert_eq!(want, got, "{mode:?} in-neighbours of {node} without ids");
        }
        for (eid, &(a, b)) in edges().iter().enumerate() {
            let eid = eid as u64;
            let at_w = d.edge_positions(w, a as u64, b as u64, eid).unwrap();
            let at_p = d.edge_positions(p, a as u64, b as u64, eid).unwrap();
            assert!(at_w.is_some());
            assert_eq!(at_w, at_p, "{mode:?} edge {eid}");
            assert_eq!(d.canonical_edge_id(p, b, a, eid).unwrap(), eid);
        }
        assert_eq!(
            d.rel_segment_ends(w, 0).unwrap().0,
            d.rel_segment_ends(p, 0).unwrap().0
        );
        let groups = d.rel_segment_prop_chunks(p, 0).unwrap().unwrap();
        assert_eq!(
            groups.iter().map(|g| g.0).sum::<u64>(),
            edges().len() as u64
        );
        let t = d.rel_types()[p].props_footer().unwrap();
        let mut values = Vec::new();
        for rg in 0..t.row_groups.len() {
            d.with_rel_chunk(p, rg, 0, |c| {
                values.extend((0..c.len()).map(|i| c.get_i64(i).unwrap()))
            })
            .unwrap();
        }
        let want: Vec<i64> = (0..edges().len() as i64).map(|e| 1000 + e).collect();
        assert_eq!(values, want);
    }
}

#[test]
fn parts_that_leave_a_gap_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gap.qdb");
    let st = Staging::begin(&db, false).unwrap();
    let mut seg = segment(&st, "g", &[20], &[20]);
    // Drop the out part over nodes 0..20: the next starts at node 20, not 0.
    seg.out = seg.out_parts.remove(0);
    let mut manifest = Manifest::empty(st.generation(), "test".into());
    manifest.n_nodes = N;
    manifest.rel_types = vec![rel_type("R", seg)];
    st.publish(&manifest).unwrap();
    let err = Database::open(&db, OpenMode::Mapped)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("must start at node 0"), "{err}");
}
