//! `quiver import --append`: adding files to an existing database gives the graph one
//! import of all the files gives; ids the database has are duplicates; endpoints may be
//! old nodes; a failed append leaves the database as it was.

mod common;
use common::*;
use std::path::Path;

/// A graph with string ids, cut in two: (nodes, rels) of part 1 and of part 2. Part 2's
/// relationships join old and new nodes both ways.
fn parts(n: usize) -> [(String, String); 2] {
    let mut out = [
        (String::new(), String::new()),
        (String::new(), String::new()),
    ];
    for (k, (nodes, rels)) in out.iter_mut().enumerate() {
        nodes.push_str("id:ID(U),name,n:int\n");
        rels.push_str(":START_ID(U),:END_ID(U),w:int\n");
        let (lo, hi) = if k == 0 { (0, n / 2) } else { (n / 2, n) };
        for i in lo..hi {
            nodes.push_str(&format!("u-{i:05},name {i},{}\n", i * 7 % 13));
        }
        for i in lo..hi {
            // Edges from each new node to an older one and to a neighbour, and from an
            // older node to it.
            let j = (i * 31 + 7) % (i + 1);
            rels.push_str(&format!("u-{i:05},u-{j:05},{}\n", i * 3));
            if i + 1 < hi {
                rels.push_str(&format!("u-{i:05},u-{:05},{}\n", i + 1, i * 3 + 1));
            }
            if i > 0 {
                rels.push_str(&format!("u-{:05},u-{i:05},{}\n", i / 2, i * 3 + 2));
            }
        }
    }
    out
}

/// `quiver import` (with `extra` flags) of nodes `U=n` and relationships `R=r` into `db`.
fn import(db: &Path, extra: &[&str], n: &Path, r: &Path) {
    let (n, r) = (format!("U={}", s(n)), format!("R={}", s(r)));
    let mut args = vec![
        "import",
        "--db",
        s(db),
        "--quiet",
        "--nodes",
        &n,
        "--relationships",
        &r,
    ];
    args.extend_from_slice(extra);
    ok(&args);
}

fn answers(db: &Path) -> Vec<String> {
    [
        "MATCH (u:U) RETURN u.id, u.name, u.n ORDER BY u.id",
        "MATCH (a:U)-[r:R]->(b:U) RETURN a.id, r.w, b.id ORDER BY r.w, a.id, b.id",
        "MATCH (u:U {id: 'u-00077'})-->(v) RETURN v.id ORDER BY v.id",
        "MATCH (u:U {name: 'name 70'}) RETURN u.id",
        "MATCH (u:U) WHERE u.n = 3 RETURN count(u)",
    ]
    .iter()
    .map(|q| ok(&["query", "--db", s(db), "--format", "csv", q]))
    .collect()
}

#[test]
fn an_append_reads_like_one_import_of_everything() {
    let d = tempfile::tempdir().unwrap();
    let [(n1, r1), (n2, r2)] = parts(120);
    let n1 = write(d.path(), "n1.csv", &n1);
    let r1 = write(d.path(), "r1.csv", &r1);
    let n2 = write(d.path(), "n2.csv", &n2);
    let r2 = write(d.path(), "r2.csv", &r2);
    // One import of everything (a group's later files have no header line).
    let tail = |p: &Path| {
        let t = std::fs::read_to_string(p).unwrap();
        t.split_once('\n').unwrap().1.to_string()
    };
    let n2b = write(d.path(), "n2b.csv", &tail(&n2));
    let r2b = write(d.path(), "r2b.csv", &tail(&r2));
    let whole = d.path().join("whole.qdb");
    ok(&[
        "import",
        "--db",
        s(&whole),
        "--quiet",
        "--nodes",
        &format!("U={},{}", s(&n1), s(&n2b)),
        "--relationships",
        &format!("R={},{}", s(&r1), s(&r2b)),
    ]);
    let db = d.path().join("g.qdb");
    import(&db, &[], &n1, &r1);
    // A declared index must come to cover the appended table.
    ok(&["query", "--db", s(&db), "CREATE INDEX ON :U(name)"]);
    import(&db, &["--append"], &n2, &r2);
    assert_eq!(answers(&db), answers(&whole));
    let plan = ok(&[
        "query",
        "--db",
        s(&db),
        "EXPLAIN MATCH (u:U {name: 'name 70'}) RETURN u.id",
    ]);
    assert!(
        plan.contains("Index"),
        "the declared index is used after the append:\n{plan}"
    );
    ok(&["check", "--db", s(&db)]);
    // A second append on top of the first finds both earlier parts' ids.
    let n3 = write(d.path(), "n3.csv", "id:ID(U),name,n:int\nu-90000,late,1\n");
    let r3 = write(
        d.path(),
        "r3.csv",
        ":START_ID(U),:END_ID(U),w:int\nu-90000,u-00001,-1\nu-00100,u-90000,-2\n",
    );
    import(&db, &["--append"], &n3, &r3);
    let got = ok(&[
        "query",
        "--db",
        s(&db),
        "--format",
        "csv",
        "MATCH (a)-[r:R]->(b) WHERE r.w < 0 RETURN a.id, r.w, b.id ORDER BY r.w",
    ]);
    assert_eq!(
        got,
        "a.id,r.w,b.id\nu-00100,-2,u-90000\nu-90000,-1,u-00001\n"
    );
    // Relationships alone, between nodes the database has.
    let r4 = write(
        d.path(),
        "r4.csv",
        ":START_ID(U),:END_ID(U),w:int\nu-00002,u-90000,-3\n",
    );
    let r4 = format!("R={}", s(&r4));
    ok(&[
        "import",
        "--db",
        s(&db),
        "--quiet",
        "--append",
        "--relationships",
        &r4,
    ]);
    let got = ok(&[
        "query",
        "--db",
        s(&db),
        "--format",
        "csv",
        "MATCH (a)-[r:R]->(b) WHERE r.w = -3 RETURN a.id, b.id",
    ]);
    assert_eq!(got, "a.id,b.id\nu-00002,u-90000\n");
}

#[test]
fn ids_the_database_has_are_duplicates_and_failures_change_nothing() {
    let d = tempfile::tempdir().unwrap();
    let n1 = write(d.path(), "n1.csv", "id:ID,name\n1,a\n2,b\n");
    let db = d.path().join("g.qdb");
    ok(&[
        "import",
        "--db",
        s(&db),
        "--quiet",
        "--id-type",
        "integer",
        "--nodes",
        &format!("P={}", s(&n1)),
    ]);
    // Writes since the import are checkpointed into the database before the append.
    ok(&[
        "query",
        "--db",
        s(&db),
        "MATCH (p:P {id: 1}) SET p.name = 'A'",
    ]);
    let n2 = write(d.path(), "n2.csv", "id:ID,name\n3,c\n2,dup\n");
    let before = answers_p(&db);
    // Without --skip-bad-rows the duplicate stops the append: nothing changes.
    let err = fails(&[
        "import",
        "--db",
        s(&db),
        "--append",
        "--nodes",
        &format!("P={}", s(&n2)),
    ]);
    assert!(
        err.contains("n2.csv") && err.contains("duplicate node id '2'"),
        "{err}"
    );
    assert!(err.contains("a node in the database has it"), "{err}");
    assert_eq!(answers_p(&db), before);
    ok(&["check", "--db", s(&db)]);
    // With it, the row is rejected and the rest lands (the id type comes from the
    // database: no --id-type needed).
    let rej = d.path().join("rej.csv");
    ok(&[
        "import",
        "--db",
        s(&db),
        "--append",
        "--quiet",
        "--skip-bad-rows",
        "--rejects",
        s(&rej),
        "--nodes",
        &format!("P={}", s(&n2)),
    ]);
    let rejects = std::fs::read_to_string(&rej).unwrap();
    assert!(
        rejects.contains("n2.csv,3,") && rejects.contains("2,dup"),
        "{rejects}"
    );
    assert_eq!(
        answers_p(&db),
        "p.id,p.name\n1,A\n2,b\n3,c\n",
        "the SET before the append survives it"
    );
    // Appending to a directory that is not a database says what to do.
    let err = fails(&[
        "import",
        "--db",
        s(&d.path().join("nope")),
        "--append",
        "--nodes",
        s(&n2),
    ]);
    assert!(
        err.contains("not a database") && err.contains("--append"),
        "{err}"
    );
}

fn answers_p(db: &Path) -> String {
    ok(&[
        "query",
        "--db",
        s(db),
        "--format",
        "csv",
        "MATCH (p:P) RETURN p.id, p.name ORDER BY p.id",
    ])
}

/// A node created by Cypher with an id of the space joins its index at the checkpoint:
/// relationships appended afterwards find it as an endpoint, both ways.
#[test]
fn appended_relationships_reach_nodes_cypher_created() {
    let dir = tempfile::tempdir().unwrap();
    let [(n1, r1), _] = parts(40);
    let (np, rp) = (dir.path().join("n.csv"), dir.path().join("r.csv"));
    std::fs::write(&np, n1).unwrap();
    std::fs::write(&rp, r1).unwrap();
    let db = dir.path().join("g.qdb");
    import(&db, &[], &np, &rp);
    let q = |text: &str| ok(&["query", "--db", s(&db), "--format", "csv", text]);
    q("CREATE (:U {id: 'made-1', name: 'made', n: 1})");
    q("CHECKPOINT");
    let more = dir.path().join("more.csv");
    std::fs::write(
        &more,
        ":START_ID(U),:END_ID(U),w:int\nmade-1,u-00003,900\nu-00004,made-1,901\n",
    )
    .unwrap();
    let r = format!("R={}", s(&more));
    ok(&[
        "import",
        "--db",
        s(&db),
        "--append",
        "--quiet",
        "--relationships",
        &r,
    ]);
    let got = q("MATCH (a)-[r:R]->(b) WHERE r.w >= 900 RETURN a.id, r.w, b.id ORDER BY r.w");
    assert_eq!(
        got,
        "a.id,r.w,b.id\nmade-1,900,u-00003\nu-00004,901,made-1\n"
    );
}

/// `quiver serve --no-auth` on `db` (an ephemeral port), once it listens.
fn serve(db: &Path) -> Served {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args([
            "serve",
            "--db",
            s(db),
            "--no-auth",
            "--listen",
            "127.0.0.1:0",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting quiver serve");
    let err = child.stderr.take().unwrap();
    let mut lines = std::io::BufReader::new(err).lines();
    for l in lines.by_ref() {
        if l.unwrap().contains("serving") {
            break;
        }
    }
    // Keep draining so the server never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Served(child)
}

#[test]
fn an_append_to_a_served_database_goes_through_the_server() {
    let d = tempfile::tempdir().unwrap();
    let [(n1, r1), (n2, r2)] = parts(120);
    let n1 = write(d.path(), "n1.csv", &n1);
    let r1 = write(d.path(), "r1.csv", &r1);
    write(d.path(), "n2.csv", &n2);
    write(d.path(), "r2.csv", &r2);
    let db = d.path().join("g.qdb");
    import(&db, &[], &n1, &r1);
    let offline = d.path().join("offline.qdb");
    import(&offline, &[], &n1, &r1);
    import(
        &offline,
        &["--append"],
        &d.path().join("n2.csv"),
        &d.path().join("r2.csv"),
    );
    let mut server = serve(&db);
    // Relative paths are the client's: run from the files' folder.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_quiver"))
        .current_dir(d.path())
        .args([
            "import",
            "--db",
            "g.qdb",
            "--append",
            "--nodes",
            "U=n2.csv",
            "--relationships",
            "R=r2.csv",
        ])
        .output()
        .unwrap();
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{out}\n{err}");
    assert!(err.contains("is served"), "{err}");
    assert!(out.contains("60 nodes"), "{out}");
    // Read while served (a read-only open), then after the server stops.
    assert_eq!(answers(&db), answers(&offline));
    // A bad file: the server's error, with file and line, and nothing changes.
    let bad = write(
        d.path(),
        "bad.csv",
        "id:ID(U),name,n:int\nu-99999,x,notanint\n",
    );
    let err = fails(&[
        "import",
        "--db",
        s(&db),
        "--append",
        "--nodes",
        &format!("U={}", s(&bad)),
    ]);
    assert!(err.contains("bad.csv") && err.contains(":2"), "{err}");
    // A copy of the folder, control file and all, is not the served database: the
    // append goes into the copy, by itself.
    let copy = d.path().join("copy.qdb");
    let o = std::process::Command::new("cp")
        .args(["-r", s(&db), s(&copy)])
        .output()
        .unwrap();
    assert!(o.status.success());
    let late = write(
        d.path(),
        "late.csv",
        "id:ID(U),name,n:int\nu-77777,late,1\n",
    );
    let out = ok(&[
        "import",
        "--db",
        s(&copy),
        "--append",
        "--nodes",
        &format!("U={}", s(&late)),
    ]);
    assert!(out.contains("1 nodes"), "{out}");
    let q = "MATCH (u:U {id: 'u-77777'}) RETURN count(u)";
    let n = |db: &Path| ok(&["query", "--db", s(db), "--format", "csv", q]);
    assert_eq!(n(&copy), "count(u)\n1\n");
    assert_eq!(n(&db), "count(u)\n0\n");
    server.0.kill().unwrap();
    server.0.wait().unwrap();
    assert_eq!(answers(&db), answers(&offline));
    ok(&["check", "--db", s(&db)]);
}

/// Two appends at once into a served database, the server killed (SIGKILL) at a moment
/// that moves across rounds: after a restart each append is there whole or not at all,
/// and one whose command said it finished is there.
#[test]
fn a_kill_during_two_appends_keeps_each_whole_or_not_at_all() {
    let d = tempfile::tempdir().unwrap();
    let mut base = String::from("id:ID(U),name,n:int\n");
    for i in 0..2000 {
        base += &format!("u{i},b,{i}\n");
    }
    let n0 = write(d.path(), "n0.csv", &base);
    let r0 = write(
        d.path(),
        "r0.csv",
        ":START_ID(U),:END_ID(U),w:int\nu0,u1,0\n",
    );
    // Append k: 20,000 nodes `a<k>-<i>` with n = k, and an edge from each to a base node.
    for k in 0..2 {
        let mut n = String::from("id:ID(U),name,n:int\n");
        let mut r = String::from(":START_ID(U),:END_ID(U),w:int\n");
        for i in 0..20_000 {
            n += &format!("a{k}-{i},a,{}\n", 100_000 + k);
            r += &format!("a{k}-{i},u{},{}\n", i % 2000, 100 + k);
        }
        write(d.path(), &format!("n{}.csv", k + 1), &n);
        write(d.path(), &format!("r{}.csv", k + 1), &r);
    }
    for (round, delay_ms) in [5u64, 20, 40, 60, 120, 400].into_iter().enumerate() {
        let db = d.path().join(format!("g{round}.qdb"));
        import(&db, &[], &n0, &r0);
        let mut server = serve(&db);
        let clients: Vec<_> = (1..=2)
            .map(|k| {
                std::process::Command::new(env!("CARGO_BIN_EXE_quiver"))
                    .current_dir(d.path())
                    .args([
                        "import",
                        "--db",
                        s(&db),
                        "--append",
                        "--quiet",
                        "--nodes",
                        &format!("U=n{k}.csv"),
                        "--relationships",
                        &format!("R=r{k}.csv"),
                    ])
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        server.0.kill().unwrap();
        server.0.wait().unwrap();
        let finished: Vec<bool> = clients
            .into_iter()
            .map(|mut c| c.wait().unwrap().success())
            .collect();
        eprintln!("round {round} ({delay_ms} ms): finished {finished:?}");
        for k in 0..2 {
            let q = format!("MATCH (u:U) WHERE u.n = {} RETURN count(u)", 100_000 + k);
            let nodes = ok(&["query", "--db", s(&db), "--format", "csv", &q]);
            let q = format!(
                "MATCH (:U)-[r:R]->(:U) WHERE r.w = {} RETURN count(r)",
                100 + k
            );
            let rels = ok(&["query", "--db", s(&db), "--format", "csv", &q]);
            let (nodes, rels) = (
                nodes.trim().lines().last().unwrap().to_string(),
                rels.trim().lines().last().unwrap().to_string(),
            );
            assert!(
                (nodes == "20000" && rels == "20000") || (nodes == "0" && rels == "0"),
                "round {round}: append {k} half there: {nodes} nodes, {rels} relationships"
            );
            if finished[k] {
                assert_eq!(
                    nodes, "20000",
                    "round {round}: append {k} finished but is gone"
                );
            }
        }
        ok(&["check", "--db", s(&db)]);
        // What a killed append left behind is removed at the next open for writing.
        ok(&["query", "--db", s(&db), "CREATE (:Z)"]);
        let bulk = db.join("bulk");
        assert!(!bulk.exists() || std::fs::read_dir(&bulk).unwrap().next().is_none());
    }
}
