//! A table or relationship type spread over several segments (as later imports and
//! checkpoints will write them) reads as one: row groups in order, neighbours from every
//! segment with edge ids offset by the segments before.

use quiver_common::types::{DataType, ScalarType};
use quiver_format::column::ColumnBuilder;
use quiver_storage::manifest::{
    Manifest, NodeTableMeta, PropertyMeta, RelSegmentMeta, RelTypeMeta,
};
use quiver_storage::write::{CsrWriter, Staging, TableWriter};
use quiver_storage::{Database, Direction, OpenMode};

fn ints(v: &[i64]) -> ColumnBuilder {
    let mut b = ColumnBuilder::new(DataType::Scalar(ScalarType::Long));
    for x in v {
        b.push_i64(*x);
    }
    b
}

/// One CSR direction from (key, value) pairs over `n` nodes.
fn csr(
    st: &Staging,
    name: &str,
    n: usize,
    pairs: &[(u32, u32)],
) -> quiver_storage::manifest::SegmentMeta {
    let mut deg = vec![0u32; n];
    let mut sorted = pairs.to_vec();
    sorted.sort();
    for (k, _) in &sorted {
        deg[*k as usize] += 1;
    }
    let mut w = CsrWriter::create(st, name, &deg, sorted.len() as u64, false).unwrap();
    for (i, (_, v)) in sorted.iter().enumerate() {
        w.push(*v, i as u64).unwrap();
    }
    w.finish().unwrap()
}

#[test]
fn segments_read_as_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("seg.qdb");
    let st = Staging::begin(&db, false).unwrap();
    let cols = vec![PropertyMeta {
        name: "v".into(),
        dtype: DataType::Scalar(ScalarType::Long),
    }];
    let mut segs = Vec::new();
    for (k, rows) in [[10i64, 11, 12], [13, 14, 15]].iter().enumerate() {
        let mut w = TableWriter::create(&st, &format!("nodes-0000-{k}.seg"), cols.clone()).unwrap();
        w.write_row_group(&[ints(&rows[..2])]).unwrap();
        w.write_row_group(&[ints(&rows[2..])]).unwrap();
        segs.push(w.finish().unwrap());
    }
    // Segment 0 holds edges 0->1, 0->2; segment 1 holds 0->5, 3->0.
    let e0 = [(0u32, 1u32), (0, 2)];
    let e1 = [(0u32, 5u32), (3, 0)];
    let rev = |e: &[(u32, u32)]| e.iter().map(|&(a, b)| (b, a)).collect::<Vec<_>>();
    let rel_segs = vec![
        RelSegmentMeta::new(
            2,
            csr(&st, "r0.out.seg", 6, &e0),
            csr(&st, "r0.in.seg", 6, &rev(&e0)),
            None,
            None,
        ),
        RelSegmentMeta::new(
            2,
            csr(&st, "r1.out.seg", 6, &e1),
            csr(&st, "r1.in.seg", 6, &rev(&e1)),
            None,
            None,
        ),
    ];
    let manifest = Manifest {
        format_version: quiver_format::FORMAT_VERSION,
        generation: st.generation(),
        written_by: "test".into(),
        n_nodes: 6,
        labels: vec!["N".into()],
        id_spaces: vec![],
        node_tables: vec![NodeTableMeta {
            name: "N".into(),
            first_node: 0,
            n_rows: 6,
            labels: vec![0],
            label_column: None,
            id_column: None,
            id_space: None,
            columns: cols,
            segments: segs,
            patches: Vec::new(),
            deleted: None,
        }],
        rel_types: vec![RelTypeMeta {
            name: "R".into(),
            n_edges: 4,
            columns: vec![],
            segments: rel_segs,
            start_space: None,
            end_space: None,
            patches: Vec::new(),
        }],
        indexes: vec![],
        base_ops: None,
        log: None,
        constraints: Vec::new(),
        vector_indexes: Vec::new(),
        fulltext_indexes: Vec::new(),
    };
    st.publish(&manifest).unwrap();
    for mode in [OpenMode::Mapped, OpenMode::Loaded] {
        let d = Database::open(&db, mode).unwrap();
        d.verify().unwrap();
        let t = &d.node_tables()[0];
        assert_eq!(t.footer.n_rows, 6);
        assert_eq!(
            t.footer
                .row_groups
                .iter()
                .map(|g| g.first_row)
                .collect::<Vec<_>>(),
            vec![0, 2, 3, 5]
        );
        let mut all = Vec::new();
        for rg in 0..4 {
            d.with_node_chunk(0, rg, 0, |c| {
                all.extend((0..c.len()).map(|i| c.get_i64(i).unwrap()))
            })
            .unwrap();
        }
        assert_eq!(all, vec![10, 11, 12, 13, 14, 15]);
        let out: Vec<(u32, u64)> = d.neighbours(0, 0, Direction::Out).unwrap().collect();
        assert_eq!(out, vec![(1, 0), (2, 1), (5, 2)]);
        assert_eq!(d.neighbours(0, 0, Direction::Out).unwrap().count(), 3);
        assert_eq!(d.degree(0, 0, Direction::In).unwrap(), 1);
        // Without stored edge ids (a type without properties) an in-entry's id is its
        // position in the in-CSR, offset by the segment: 2 + 0 here (see docs/format.md).
        let inc: Vec<(u32, u64)> = d.neighbours(0, 0, Direction::In).unwrap().collect();
        assert_eq!(inc, vec![(3, 2)]);
        let mut scanned = Vec::new();
        d.scan_edges(0, Direction::Out, |a, b, e| scanned.push((a, b, e)))
            .unwrap();
        assert_eq!(scanned, vec![(0, 1, 0), (0, 2, 1), (0, 5, 2), (3, 0, 3)]);
    }
}

fn empty_manifest(generation: u64) -> Manifest {
    Manifest::empty(generation, "test".into())
}

/// Several writers in one process (a server): a second writer's stale-staging cleanup
/// must not take the first one's staging for a leftover of its own pid (issue
/// "Hardening"). Leftovers of dead writers still go.
#[test]
fn staging_cleanup_spares_live_writers_of_this_process() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x.qdb");
    let a = Staging::begin(&db, false).unwrap();
    let (file, _) = a.file("marker");
    std::fs::write(&file, b"a").unwrap();
    // A second writer for the same path, in this process.
    let b = Staging::begin(&db, false).unwrap();
    assert!(
        file.exists(),
        "the second writer removed the first one's staging"
    );
    a.publish(&empty_manifest(1)).unwrap();
    assert!(Database::open(&db, OpenMode::Mapped).is_ok());
    // The second cannot move onto the published database; its staging goes with it.
    assert!(b.publish(&empty_manifest(1)).is_err());

    // Leftovers: a dead process's staging without a LOCK, and one whose LOCK nobody
    // holds (a killed writer; even one whose pid is ours now).
    let dead = dir.path().join(".y.qdb.staging-999999999-0");
    let unlocked = dir
        .path()
        .join(format!(".y.qdb.staging-{}-77", std::process::id()));
    std::fs::create_dir(&dead).unwrap();
    std::fs::create_dir(&unlocked).unwrap();
    std::fs::write(unlocked.join("LOCK"), b"").unwrap();
    // Not ours at all: another database's staging, and a folder that merely starts
    // with the same letters.
    let other = dir.path().join(".z.qdb.staging-999999999-0");
    std::fs::create_dir(&other).unwrap();
    let y = Staging::begin(&dir.path().join("y.qdb"), false).unwrap();
    assert!(!dead.exists() && !unlocked.exists());
    assert!(other.exists());
    drop(y);

    // A user's folder is not a killed import's leftover just because its entries
    // start with `g`: the database goes elsewhere, the folder is left alone.
    let users = dir.path().join("mine");
    std::fs::create_dir_all(users.join("graphs")).unwrap();
    std::fs::write(users.join("genes.csv"), b"x").unwrap();
    assert!(Staging::begin(&users, false).is_err());
    assert!(users.join("genes.csv").exists() && users.join("graphs").exists());
}
