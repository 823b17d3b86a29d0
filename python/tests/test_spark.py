"""A database built by Spark (local[2]) is query-for-query equal to a local import of
the same files: counts, every node's properties, adjacency both ways, seed 003's
queries, rejects. Skipped without pyspark and Java unless QUIVER_REQUIRE_SPARK is set
(.ci/run sets it after installing both)."""

import datetime as dt
import os
import random
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import quiver

REQUIRED = os.environ.get("QUIVER_REQUIRE_SPARK") == "1"


def _spark_or_skip():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        if REQUIRED:
            raise
        pytest.skip("pyspark is not installed")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        if REQUIRED:
            raise RuntimeError("QUIVER_REQUIRE_SPARK is set but Java is not installed")
        pytest.skip("Java is not installed")
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .appName("quiver-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )


@pytest.fixture(scope="module")
def spark():
    s = _spark_or_skip()
    s.sparkContext.setLogLevel("ERROR")
    yield s
    s.stop()


def write_inputs(d, string_ids):
    rnd = random.Random(11)
    n_users, n_groups = 1500, 40

    def uid(i):
        return f"u{i * 3 + 1}" if string_ids else i * 3 + 1

    def gid(i):
        return f"g{i}" if string_ids else 100_000 + i

    id_type = pa.string() if string_ids else pa.int64()
    ids = [uid(i) for i in range(n_users)]
    # A repeated id (the second is rejected) and a null id (rejected).
    ids += [uid(5), None]
    n = len(ids)
    users = pa.table(
        {
            "id": pa.array(ids, id_type),
            "name": [None if i % 10 == 0 else f"user {i}, \"q\"" for i in range(n)],
            "age": pa.array([None if i % 7 == 0 else 18 + i % 60 for i in range(n)], pa.int64()),
            "score": [i / 8 for i in range(n)],
            "active": [i % 3 == 0 for i in range(n)],
            "joined": [dt.date(2019, 1, 1) + dt.timedelta(days=i % 1000) for i in range(n)],
            "seen": [dt.datetime(2024, 5, 1, 12, 0) + dt.timedelta(minutes=i) for i in range(n)],
            "tags": [["a", "b"] if i % 3 == 0 else ([] if i % 3 == 1 else None) for i in range(n)],
        }
    )
    pq.write_table(users, f"{d}/users.parquet", row_group_size=400)
    groups = pa.table({"id": pa.array([gid(i) for i in range(n_groups)], id_type), "title": [f"group {i}" for i in range(n_groups)]})
    pq.write_table(groups, f"{d}/groups.parquet")
    src, dst = [], []
    for _ in range(12_000):
        a = rnd.randrange(n_users)
        # Hubs, parallel edges and self-loops.
        b = rnd.choice([0, 1, 2]) if rnd.random() < 0.15 else rnd.randrange(n_users)
        if rnd.random() < 0.01:
            b = a
        src.append(uid(a))
        dst.append(uid(b))
    src += [uid(3), "nobody" if string_ids else 999_999_999]
    dst += [uid(3), uid(4)]
    follows = pa.table(
        {
            "src": pa.array(src, id_type),
            "dst": pa.array(dst, id_type),
            "since": pa.array([2000 + i % 25 for i in range(len(src))], pa.int64()),
            "weight": [None if i % 5 == 0 else i / 3 for i in range(len(src))],
        }
    )
    pq.write_table(follows, f"{d}/follows.parquet", row_group_size=2500)
    member = pa.table(
        {
            "from": pa.array([uid(i) for i in range(0, n_users, 2)], id_type),
            "to": pa.array([gid(i % n_groups) for i in range(0, n_users, 2)], id_type),
        }
    )
    pq.write_table(member, f"{d}/member.parquet")
    return (
        {"User": f"{d}/users.parquet", "Group": f"{d}/groups.parquet"},
        {"FOLLOWS": f"{d}/follows.parquet", "MEMBER_OF": f"{d}/member.parquet"},
    )


QUERIES = [
    "MATCH (n) RETURN count(n)",
    "MATCH ()-[r]->() RETURN type(r), count(r) ORDER BY type(r)",
    "MATCH (n:User) RETURN n.id, n.name, n.age, n.score, n.active, n.joined, n.seen, n.tags ORDER BY n.id",
    "MATCH (n:Group) RETURN n.id, n.title ORDER BY n.id",
    "MATCH (a)-[r:FOLLOWS]->(b) RETURN a.id, b.id, r.since, r.weight ORDER BY a.id, b.id, r.since, r.weight",
    "MATCH (a:User)-[:MEMBER_OF]->(g:Group) RETURN g.id, count(a), min(a.id) ORDER BY g.id",
    # Adjacency from each side, every node.
    "MATCH (n:User) OPTIONAL MATCH (n)-[:FOLLOWS]->(m) WITH n, m ORDER BY m.id RETURN n.id, collect(m.id) ORDER BY n.id",
    "MATCH (n:User) OPTIONAL MATCH (n)<-[:FOLLOWS]-(m) WITH n, m ORDER BY m.id RETURN n.id, collect(m.id) ORDER BY n.id",
    "MATCH (n:User) RETURN n.id, size([(n)-[:FOLLOWS]-() | 1]) AS d ORDER BY n.id",
    # Seed 003's queries: an aggregation, a node by id, one hop, two hops.
    "MATCH (n:User) RETURN n.age, count(*) ORDER BY n.age",
    "MATCH (n:User {id: $id}) RETURN n.name, n.age",
    "MATCH (n:User {id: $id})-[:FOLLOWS]->(m) RETURN m.id ORDER BY m.id",
    "MATCH (n:User {id: $id})-[:FOLLOWS]->()-[:FOLLOWS]->(m) RETURN count(m), count(DISTINCT m)",
    "MATCH (n:User {id: $id})<-[:FOLLOWS]-(m) RETURN m.id ORDER BY m.id",
]


def rows(con, q, params):
    return con.execute(q, params if "$id" in q else None).fetchall()


@pytest.mark.parametrize("string_ids,partitions", [(False, 1), (False, 5), (True, 3)])
def test_a_spark_build_answers_as_a_local_import(spark, tmp_path, string_ids, partitions):
    import quiver.spark

    nodes, rels = write_inputs(tmp_path, string_ids)
    local = quiver.connect(tmp_path / "local.qdb")
    summary = local.import_graph(nodes, rels, skip_bad_rows=True)
    built = quiver.spark.build(spark, nodes, rels, out=str(tmp_path / "spark.qdb"), partitions=partitions)
    assert (built.nodes, built.relationships) == (summary["nodes"], summary["relationships"])
    assert built.rejected == summary["rows_rejected"] == 3
    reasons = sorted(r["reason"] for r in built.rejects.collect())
    assert reasons == ["duplicate id", "missing id", "missing start node"]
    assert os.path.isdir(built.rejects_path)
    # The parts folder is gone; the database holds a part a range both ways.
    assert not [p for p in os.listdir(tmp_path) if ".parts-" in p]
    spark_db = quiver.connect(tmp_path / "spark.qdb")
    ids = ([5 * 3 + 1, 1, 4, 7, 3001], ["u16", "u1", "u4", "u7", "u3001"])[string_ids]
    for one in ids:
        for q in QUERIES:
            a, b = rows(spark_db, q, {"id": one}), rows(local, q, {"id": one})
            assert a == b, f"{q} (id {one}): spark {a[:3]} local {b[:3]}"
    assert rows(spark_db, "MATCH (n) RETURN count(n)", None) == [(1540,)]
    # Writes on the parts: deletions (bitmaps over positions that run across parts),
    # a property set, new relationships, a checkpoint that folds them; then the same
    # answers again.
    some = ids[1]
    for con in (spark_db, local):
        con.execute("MATCH (a:User {id: $id})-[r:FOLLOWS]->() DELETE r", {"id": some})
        con.execute("MATCH (a:User {id: $id})-[r:MEMBER_OF]->() DELETE r", {"id": ids[2]})
        con.execute("MATCH (a:User {id: $id}) DETACH DELETE a", {"id": ids[3]})
        con.execute("MATCH (a:User {id: $id}) SET a.age = 99", {"id": ids[0]})
        con.execute("MATCH (a:User {id: $a}), (b:User {id: $b}) CREATE (a)-[:FOLLOWS {since: 1}]->(b)", {"a": ids[0], "b": some})
        con.execute("CHECKPOINT")
    for q in QUERIES:
        a, b = rows(spark_db, q, {"id": ids[0]}), rows(local, q, {"id": ids[0]})
        assert a == b, f"after writes: {q}: spark {a[:3]} local {b[:3]}"


def test_a_failed_build_leaves_the_database_as_it_was(spark, tmp_path):
    import quiver.spark

    nodes, rels = write_inputs(tmp_path, False)
    out = tmp_path / "g.qdb"
    first = quiver.spark.build(spark, {"User": nodes["User"]}, {}, out=str(out), partitions=2)
    assert first.nodes == 1500
    # Without overwrite, an existing database is refused.
    with pytest.raises(quiver.ImportFailed, match="already a database"):
        quiver.spark.build(spark, nodes, rels, out=str(out), partitions=2)
    # Ids that are given to two labels: the id index refuses them, nothing is published.
    dup = pa.table({"id": pa.array([1, 2], pa.int64())})
    pq.write_table(dup, tmp_path / "dup.parquet")
    with pytest.raises(Exception, match="given to two nodes"):
        quiver.spark.build(
            spark, {"User": nodes["User"], "Other": str(tmp_path / "dup.parquet")}, {}, out=str(out), partitions=2, overwrite=True
        )
    con = quiver.connect(out)
    assert con.execute("MATCH (n) RETURN count(n)").fetchall() == [(1500,)]
    assert not [p for p in os.listdir(tmp_path) if ".parts-" in p or ".staging-" in p]


def test_csv_inputs_read_as_quiver_import_reads_them(spark, tmp_path):
    # The delimiter and quote come from quiver-import's decision, as for the CLI and
    # import_graph: a `;`-separated pair builds the same graph.
    import quiver.spark

    (tmp_path / "people.csv").write_text("id;name\n1;Ann\n2;Bob\n")
    (tmp_path / "knows.csv").write_text("src;dst;since\n1;2;2020\n")
    out = tmp_path / "g.qdb"
    quiver.spark.build(spark, {"Person": str(tmp_path / "people.csv")},
                       {"KNOWS": str(tmp_path / "knows.csv")}, out=str(out), partitions=2)
    con = quiver.connect(out)
    rows = con.execute("MATCH (a:Person)-[k:KNOWS]->(b) RETURN a.name, k.since, b.name").fetchall()
    assert rows == [("Ann", 2020, "Bob")]
