"""The quiver Python package: values both ways, frames and Arrow in and out, Parquet,
transactions, errors, cancellation, and the import's memory budget on a Parquet file
larger than it."""

import datetime as dt
import os
import signal
import threading
import time
import zoneinfo

import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import quiver


@pytest.fixture
def con(tmp_path):
    c = quiver.connect(tmp_path / "g.qdb")
    yield c
    c.close()


def users_frame(n=1000):
    return pd.DataFrame(
        {
            "id": list(range(1, n + 1)),
            "name": [None if i % 10 == 0 else f"user {i}, \"q\"" for i in range(n)],
            "age": pd.array([None if i % 7 == 0 else 20 + i % 50 for i in range(n)], dtype="Int64"),
            "score": [i / 4 for i in range(n)],
            "active": [i % 2 == 0 for i in range(n)],
            "joined": [dt.date(2020, 1, 1) + dt.timedelta(days=i) for i in range(n)],
            "tags": [["a", "b"] if i % 3 == 0 else [] for i in range(n)],
        }
    )


def follows_frame(n=1000):
    return pd.DataFrame({"src": [i % n + 1 for i in range(3 * n)], "dst": [(i * 7) % n + 1 for i in range(3 * n)], "w": [i % 5 for i in range(3 * n)]})


# ---------------------------------------------------------------- values


VALUES = [
    None,
    True,
    False,
    0,
    -(2**63),
    2**63 - 1,
    1.5,
    float("inf"),
    "",
    "héllo, \"world\"\n",
    b"\x00\x01\xff",
    [1, 2, 3],
    ["a", None, 1.5],
    {"k": 1, "nested": {"x": [True]}},
    dt.date(1969, 7, 20),
    dt.date(2024, 2, 29),
    dt.datetime(2020, 1, 2, 3, 4, 5, 123456),
    dt.datetime(2020, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=-5))),
    dt.datetime(2021, 6, 1, 12, 0, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
    dt.time(13, 14, 15, 500000),
    dt.time(1, 2, 3, tzinfo=dt.timezone(dt.timedelta(hours=2))),
]


@pytest.mark.parametrize("v", VALUES, ids=[repr(v)[:40] for v in VALUES])
def test_every_value_type_both_ways(con, v):
    got = con.execute("RETURN $v AS v", {"v": v}).scalar()
    assert got == v
    assert type(got) is type(v)
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        assert got.utcoffset() == v.utcoffset()


def test_durations_and_big_ints(con):
    d = con.execute("RETURN duration('P1M2DT3.5S') AS d").scalar()
    assert (d.months, d.days, d.seconds, d.nanoseconds) == (1, 2, 3, 500_000_000)
    td = con.execute("RETURN $t AS t", {"t": dt.timedelta(days=2, seconds=5)}).scalar()
    assert td.to_timedelta() == dt.timedelta(days=2, seconds=5)
    with pytest.raises(ValueError, match="64-bit"):
        con.execute("RETURN $v", {"v": 2**64})
    with pytest.raises(TypeError, match="no Cypher value"):
        con.execute("RETURN $v", {"v": object()})


def test_nodes_relationships_paths(con):
    con.execute("CREATE (:Person {name: 'Ann', age: 30})-[:KNOWS {since: 2020}]->(:Person:Admin {name: 'Bo'})")
    n, r, m = con.execute("MATCH (n)-[r]->(m) RETURN n, r, m").fetchone()
    assert isinstance(n, quiver.Node) and n.labels == ["Person"] and n["name"] == "Ann" and n.properties == {"name": "Ann", "age": 30}
    assert set(m.labels) == {"Person", "Admin"}
    assert r.type == "KNOWS" and r.start == n.id and r.end == m.id and r["since"] == 2020
    p = con.execute("MATCH p = ()-[:KNOWS]->() RETURN p").scalar()
    assert isinstance(p, quiver.Path) and len(p) == 1 and p.nodes[0] == n and p.relationships[0] == r
    # A node passed back as a parameter is the node.
    assert con.execute("MATCH (x) WHERE x = $n RETURN x.name", {"n": n}).scalar() == "Ann"
    g = con.execute("MATCH p = (:Person {name: 'Ann'})-[*1..2]->() RETURN p").networkx()
    assert g.number_of_nodes() == 2 and g.number_of_edges() == 1
    (a, b, data), = g.edges(data=True)
    assert data["type"] == "KNOWS" and data["since"] == 2020 and g.nodes[a]["name"] == "Ann"


def test_cursor_methods(con):
    r = con.execute("UNWIND range(1, 10) AS x RETURN x, x * 2 AS y")
    assert r.columns == ["x", "y"] and len(r) == 10
    assert r.fetchone() == (1, 2)
    assert r.fetchmany(2) == [(2, 4), (3, 6)]
    assert [row for row in r][:2] == [(4, 8), (5, 10)]
    assert r.fetchall() == []
    assert r.fetchone() is None


# ---------------------------------------------------------------- Arrow out


def test_arrow_and_frames_out_with_nulls(con):
    con.import_graph(nodes={"User": users_frame()}, relationships={"FOLLOWS": follows_frame()})
    q = "MATCH (u:User) RETURN u.id AS id, u.name AS name, u.age AS age, u.score AS score, u.active AS active, u.joined AS joined, u.tags AS tags ORDER BY id"
    t = con.execute(q).arrow()
    assert t.num_rows == 1000
    assert t.schema.field("id").type == pa.int64()
    assert t.schema.field("joined").type == pa.date32()
    assert t.schema.field("tags").type == pa.list_(pa.string())
    assert t.column("name").null_count == 100
    assert t.column("age").null_count == 143
    df = con.execute(q).df()
    assert df["name"].isna().sum() == 100 and df["age"].isna().sum() == 143
    assert df["joined"].iloc[1] == dt.date(2020, 1, 2)
    p = con.execute(q).pl()
    assert p.height == 1000 and p["age"].null_count() == 143 and p.schema["score"] == pl.Float64
    # pyarrow reads the result directly through the capsule.
    assert pa.table(con.execute("RETURN 1 AS one")).to_pydict() == {"one": [1]}
    # Graph values in a frame are objects; in Arrow, JSON text.
    g = con.execute("MATCH (u:User {id: 2}) RETURN u").df()
    assert isinstance(g["u"][0], quiver.Node) and g["u"][0]["id"] == 2
    a = con.execute("MATCH (u:User {id: 2}) RETURN u").arrow()
    assert a.schema.field("u").metadata == {b"quiver.json": b"1"}
    assert '"_labels":["User"]' in a.column("u")[0].as_py()


def test_dates_past_arrow_columns_are_text(con):
    # Cypher's dates run to years +-999,999,999; Arrow's date32 and microsecond
    # timestamps stop at about 5.8 million and 292,000 years: such a column is text,
    # never a null in place of a value.
    t = con.execute("UNWIND [date('2020-01-02'), date('+999999999-12-31'), null] AS d RETURN d").arrow()
    assert t.schema.field("d").type == pa.string()
    assert t.column("d").to_pylist() == ["2020-01-02", "+999999999-12-31", None]
    t = con.execute("RETURN localdatetime('-999999999-01-01T00:00') AS l, date('2020-01-02') AS d").arrow()
    assert t.column("l").to_pylist() == ["-999999999-01-01T00:00:00"]
    assert t.schema.field("d").type == pa.date32()


def test_record_batches_stream(con):
    r = con.execute("UNWIND range(1, 200000) AS x RETURN x")
    batches = list(r.record_batches())
    assert len(batches) == 4 and sum(b.num_rows for b in batches) == 200000


def test_label_projection_reads_the_columns_as_the_query_would(tmp_path):
    """`MATCH (n:L) RETURN n.a, ...` is read straight from the column chunks into Arrow;
    what it gives must be what the query gives (an unused parameter makes the query
    run as a query), through deletions, per-row labels and pending writes."""
    con = quiver.connect(tmp_path / "g.qdb")
    people = tmp_path / "people.csv"
    people.write_text(
        "id:ID,name,age:int,score:double,ok:boolean,born:date,seen:localdatetime,:LABEL\n"
        + "".join(
            f"{i},{'' if i % 5 == 0 else f'n{i}'},{'' if i % 7 == 0 else i},{i / 4},{'true' if i % 2 else 'false'},"
            f"2000-01-{1 + i % 28:02d},2020-01-01T00:00:{i % 60:02d},{'Admin' if i % 3 == 0 else 'Guest'}\n"
            for i in range(1, 3001)
        )
    )
    con.import_graph(nodes={"Person": str(people)})
    con.import_graph(nodes={"Admin": users_frame(50).assign(id=lambda d: d["id"] + 100_000)})

    def both(q, columnar=True):
        fast = con.execute(q)
        slow = con.execute(q, {"unused": 1})
        assert fast.summary["columnar"] == columnar and not slow.summary["columnar"]
        assert fast.columns == slow.columns
        got = fast.fetchall()
        assert sorted(got, key=repr) == sorted(slow.fetchall(), key=repr)
        assert len(con.execute(q).arrow()) == len(got)
        return got

    rows = both("MATCH (p:Person) RETURN p.id, p.name AS name, p.age, p.score, p.ok, p.born, p.seen")
    assert len(rows) == 3000
    t = con.execute("MATCH (p:Person) RETURN p.id, p.age, p.seen").arrow()
    assert t.schema.field("p.id").type == pa.string()  # id:ID is a string id
    assert t.schema.field("p.age").type == pa.int64() and t.schema.field("p.seen").type == pa.timestamp("us")
    # A label some rows carry by their :LABEL column, beside a table that has it whole.
    assert len(both("MATCH (a:Admin) RETURN a.id, a.name, a.nope")) == 1000 + 50
    # Nodes deleted and checkpointed are not read.
    con.execute("MATCH (p:Person) WHERE p.age IS NULL OR p.age % 10 = 0 DETACH DELETE p")
    con.execute("CHECKPOINT")
    assert len(both("MATCH (p:Person) RETURN p.id, p.name")) == 2314
    # Pending writes: the query runs as a query and sees them.
    con.execute("MATCH (p:Person {id: '1'}) SET p.name = 'changed'")
    got = both("MATCH (p:Person) RETURN p.id, p.name", columnar=False)
    assert ("1", "changed") in got
    df = con.execute("MATCH (p:Person) RETURN p.id, p.name").df()
    assert len(df) == 2314
    con.close()


def test_stream_hands_rows_over_in_parts(con):
    con.execute("UNWIND range(1, 1000) AS i CREATE (:User {id: i, name: 'u' + i})")
    # Iterated as tuples, with graph values as objects.
    s = con.stream("MATCH (u:User) WHERE u.id <= 3 RETURN u.id AS id, u ORDER BY id", batch_rows=2)
    assert s.columns == ["id", "u"]
    rows = list(s)
    assert [r[0] for r in rows] == [1, 2, 3] and rows[2][1]["name"] == "u3"
    # As record batches of about the asked size (whole batches of the engine's).
    with con.stream("UNWIND range(1, 250000) AS x RETURN x, toString(x) AS s", batch_rows=50000) as s:
        batches = list(s.record_batches())
    assert len(batches) == 5 and sum(b.num_rows for b in batches) == 250000
    assert all(50000 <= b.num_rows <= 51200 for b in batches[:-1])
    assert batches[-1].column(1)[-1].as_py() == "250000"
    assert batches[0].schema.field("x").type == pa.int64()
    # Rows read as tuples first, the rest as Arrow: nothing twice, nothing lost.
    s = con.stream("UNWIND range(1, 10) AS x RETURN x", batch_rows=4)
    it = iter(s)
    assert next(it) == (1,)
    t = pa.RecordBatchReader.from_stream(s).read_all()
    assert t.column("x").to_pylist() == list(range(2, 11))
    # A first part read to its end does not type the Arrow stream (the next part does).
    s = con.stream("UNWIND range(1, 5000) AS x RETURN x", batch_rows=1000)
    first = [next(iter(s)) for _ in range(1024)]
    t = s.record_batches().read_all()
    assert len(first) + t.num_rows == 5000 and t.schema.field("x").type == pa.int64()
    # Memory holds parts, not the result: 20M rows stream through a small footprint.
    n = 0
    for b in con.stream("UNWIND range(1, 20000000) AS x RETURN x").record_batches():
        n += b.num_rows
    assert n == 20_000_000


def test_stream_errors_and_the_connection(con):
    with pytest.raises(quiver.CypherSyntaxError):
        con.stream("MATCH (n RETURN n")
    # The connection is the stream's until it ends or is closed.
    s = con.stream("UNWIND range(1, 1000000) AS x RETURN x", batch_rows=1000)
    with pytest.raises(quiver.DatabaseError, match="result stream is open"):
        con.execute("RETURN 1")
    s.close()
    assert con.execute("RETURN 1").scalar() == 1
    # An error of the statement after its first parts arrives while reading.
    s = con.stream("UNWIND range(1, 200000) AS x RETURN 10 / (x - 150000) AS y", batch_rows=1000)
    with pytest.raises(quiver.QuiverError, match="division by zero"):
        list(s)
    assert con.execute("RETURN 2").scalar() == 2
    # A later value that does not fit the first batch's type raises, never drops.
    s = con.stream(
        "UNWIND range(1, 5000) AS x RETURN CASE WHEN x > 3000 THEN 'big' ELSE x END AS v",
        batch_rows=1000,
    )
    with pytest.raises(pa.ArrowInvalid, match="first batch"):
        s.record_batches().read_all()
    # A stream dropped unread frees the connection too.
    s = con.stream("UNWIND range(1, 100000000) AS x RETURN x")
    del s
    assert con.execute("RETURN 3").scalar() == 3
    # Writes stream too, and commit.
    list(con.stream("UNWIND range(1, 5) AS i CREATE (:T {i: i}) RETURN i"))
    assert con.execute("MATCH (t:T) RETURN count(*)").scalar() == 5


# ---------------------------------------------------------------- frames and files in


def csv_of(df, path, sep=","):
    out = df.copy()
    if "tags" in out:
        out["tags"] = out["tags"].map(lambda l: ";".join(l))
    out.to_csv(path, index=False, sep=sep)


def snapshot(con):
    return con.execute(
        "MATCH (u:User) OPTIONAL MATCH (u)-[f:FOLLOWS]->(v) RETURN u.id, u.name, u.age, u.score, u.active, toString(u.joined), f.w, v.id ORDER BY u.id, v.id, f.w"
    ).fetchall()


def test_import_from_frames_equals_import_from_csv(tmp_path):
    users, follows = users_frame(), follows_frame()
    a = quiver.connect(tmp_path / "a.qdb")
    sa = a.import_graph(nodes={"User": users}, relationships={"FOLLOWS": follows})
    assert sa["nodes"] == 1000 and sa["relationships"] == 3000
    csv_of(users.drop(columns=["tags"]), tmp_path / "users.csv")
    csv_of(follows, tmp_path / "follows.csv")
    b = quiver.connect(tmp_path / "b.qdb")
    b.import_graph(nodes={"User": str(tmp_path / "users.csv")}, relationships={"FOLLOWS": str(tmp_path / "follows.csv")}, id_type="integer")
    c = quiver.connect(tmp_path / "c.qdb")
    c.import_graph(nodes={"User": pl.from_pandas(users)}, relationships={"FOLLOWS": pa.Table.from_pandas(follows)})
    ra, rb, rc = snapshot(a), snapshot(b), snapshot(c)
    # The CSV sniffs `score` 0.0, 0.25... as floats and `age` as integers: the same values.
    assert ra == rb == rc
    assert len(ra) == 3000


NEWCOMER = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "cli", "tests", "newcomer")


def test_files_read_as_quiver_import_reads_them(tmp_path):
    # How a file is read (delimiter, quote, ids) is decided in quiver-import for every
    # front end: a `;`-separated pair imports here as it does from the CLI.
    (tmp_path / "people.csv").write_text("id;name;tags\n1;Ann;a|b\n2;Bob;c\n")
    (tmp_path / "knows.csv").write_text("src;dst;since\n1;2;2020\n")
    c = quiver.connect(tmp_path / "semi.qdb")
    c.import_graph(nodes={"Person": str(tmp_path / "people.csv")},
                   relationships={"KNOWS": str(tmp_path / "knows.csv")})
    rows = c.execute("MATCH (a:Person {id: 1})-[k:KNOWS]->(b) RETURN a.name, a.tags, k.since, b.name").fetchall()
    assert rows == [("Ann", "a|b", 2020, "Bob")]
    c.close()
    # The CLI's newcomer corpus: tab, pipe and single-quoted files read the same way.
    for i, (name, q, want) in enumerate([
        ("cities.tsv", "MATCH (t:T {id: 1}) RETURN t.city, t.founded.year", [("Boston", 1630)]),
        ("products.psv", "MATCH (t:T {sku: 'A-1'}) RETURN t.label, t.price", [("Widget", 9.5)]),
        ("single_quoted.csv", "MATCH (t:T {id: 1}) RETURN t.name, t.city", [("Smith, Alice", "New York")]),
    ]):
        c = quiver.connect(tmp_path / f"n{i}.qdb")
        c.import_graph(nodes={"T": os.path.join(NEWCOMER, name)})
        assert c.execute(q).fetchall() == want, name
        c.close()


def test_import_from_a_record_batch_reader_and_column_names(tmp_path):
    t = pa.table({"a": [1, 2, 3], "b": ["x", "y", "z"]})
    reader = pa.RecordBatchReader.from_batches(t.schema, t.to_batches(max_chunksize=1))
    con = quiver.connect(tmp_path / "g.qdb")
    s = con.import_graph(nodes={"Thing": reader}, column_names={"Thing": ["key:ID(Thing)", "label"]})
    assert s["nodes"] == 3
    assert con.execute("MATCH (t:Thing {key: 2}) RETURN t.label").scalar() == "y"


def test_parquet_round_trip_every_column_type(tmp_path):
    users = users_frame(5000)
    users["seen"] = [dt.datetime(2020, 1, 1, 12, 30) + dt.timedelta(seconds=i) for i in range(5000)]
    users["at"] = pd.to_datetime(users["seen"]).dt.tz_localize("UTC")
    users["small"] = pd.array([i % 100 for i in range(5000)], dtype="int8")
    users["cat"] = pd.Categorical(["red" if i % 2 else "blue" for i in range(5000)])
    users["ratio"] = pd.array([i / 8 for i in range(5000)], dtype="float32")
    path = tmp_path / "users.parquet"
    users.to_parquet(path, row_group_size=1000)
    con = quiver.connect(tmp_path / "g.qdb")
    con.import_graph(nodes={"User": str(path)})
    back = con.execute(
        "MATCH (u:User) RETURN u.id AS id, u.name AS name, u.age AS age, u.score AS score, u.active AS active, u.joined AS joined, u.tags AS tags, u.seen AS seen, u.at AS at, u.small AS small, u.cat AS cat, u.ratio AS ratio ORDER BY id"
    ).df()
    assert list(back["id"]) == list(users["id"])
    assert back["name"].equals(users["name"])
    assert list(back["age"].astype("Int64")) == list(users["age"])
    assert list(back["score"]) == list(users["score"])
    assert list(back["active"]) == list(users["active"])
    assert list(back["joined"]) == list(users["joined"])
    assert [list(x) if x is not None else [] for x in back["tags"]] == [x if x else [] for x in users["tags"]]
    assert list(back["seen"]) == list(pd.to_datetime(users["seen"]))
    assert list(back["at"]) == list(users["at"])
    assert list(back["small"]) == list(users["small"].astype(int))
    assert list(back["cat"]) == list(users["cat"].astype(str))
    assert list(back["ratio"]) == list(users["ratio"].astype(float))


def test_append_into_a_database_with_data(con):
    con.import_graph(nodes={"User": users_frame(10)})
    con.execute("CREATE (:User {id: 100})")
    s = con.import_graph(nodes={"User": pd.DataFrame({"id": [11, 12]})}, relationships={"FOLLOWS": pd.DataFrame({"src": [11], "dst": [1]})})
    assert s["nodes"] == 2 and s["relationships"] == 1
    assert con.execute("MATCH (u:User) RETURN count(*)").scalar() == 13
    assert con.execute("MATCH (:User {id: 11})-->(v) RETURN v.id").scalar() == 1


# ---------------------------------------------------------------- transactions and errors


def test_transactions(con):
    with con.transaction() as tx:
        tx.execute("CREATE (:T {v: 1})")
        assert con.in_transaction
    assert not con.in_transaction
    assert con.execute("MATCH (t:T) RETURN count(*)").scalar() == 1
    with pytest.raises(RuntimeError):
        with con.transaction() as tx:
            tx.execute("CREATE (:T {v: 2})")
            raise RuntimeError("boom")
    assert con.execute("MATCH (t:T) RETURN count(*)").scalar() == 1
    assert not con.in_transaction


def test_errors_by_kind(con):
    with pytest.raises(quiver.CypherSyntaxError) as e:
        con.execute("MATCH (n RETURN n")
    assert (e.value.line, e.value.column) == (1, 10)
    with pytest.raises(quiver.CypherTypeError):
        con.execute("RETURN 1 + 'a' - 2")
    with pytest.raises(quiver.CypherSyntaxError, match=r"\$missing"):
        con.execute("RETURN $missing")
    con.execute("CREATE CONSTRAINT FOR (p:P) REQUIRE p.k IS UNIQUE")
    con.execute("CREATE (:P {k: 1})")
    with pytest.raises(quiver.ConstraintError):
        con.execute("CREATE (:P {k: 1})")
    assert issubclass(quiver.ConstraintError, quiver.QuiverError)
    with pytest.raises(quiver.ImportFailed, match="no such file"):
        con.import_graph(nodes={"X": "/nonexistent/file.csv"})
    # The failed import left the database as it was.
    assert con.execute("MATCH (p:P) RETURN count(*)").scalar() == 1


def test_missing_database_without_create(tmp_path):
    with pytest.raises(quiver.DatabaseError, match="no quiver database"):
        quiver.connect(tmp_path / "typo.qdb", create=False)


def test_query_memory_limit(tmp_path):
    con = quiver.connect(tmp_path / "g.qdb", query_memory_limit="4MiB")
    with pytest.raises(quiver.MemoryLimitExceeded):
        con.execute("UNWIND range(1, 2000000) AS x RETURN collect(x)")


def test_ctrl_c_cancels_a_running_query(con):
    main = threading.main_thread().ident
    # As in an interactive Python (a runner started in the background inherits SIGINT
    # ignored).
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)

    def interrupt():
        time.sleep(0.5)
        signal.pthread_kill(main, signal.SIGINT)

    threading.Thread(target=interrupt).start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        con.execute("UNWIND range(1, 4000000000) AS x WITH x WHERE x < 0 RETURN count(*)")
    assert time.monotonic() - t0 < 10
    # The connection still works, and Python's own handler is back.
    assert con.execute("RETURN 1").scalar() == 1
    try:
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, outer)


def test_import_budget_holds_on_a_parquet_file_larger_than_it(tmp_path):
    n = 1_500_000
    import numpy as np

    rng = np.random.default_rng(7)
    t = pa.table(
        {
            # Not an id column (rows of a table): the budget bounds what reading holds.
            "key": np.arange(n, dtype=np.int64),
            "a": rng.integers(0, 1 << 40, n),
            "b": rng.random(n),
            "s": pa.array([f"value number {i} with some text" for i in range(n)]),
        }
    )
    path = tmp_path / "big.parquet"
    pq.write_table(t, path, row_group_size=100_000, compression="none")
    budget = 32 << 20
    assert t.nbytes > 2 * budget
    con = quiver.connect(tmp_path / "g.qdb")
    s = con.import_graph(nodes={"Row": str(path)}, memory_budget=budget)
    assert s["nodes"] == n
    assert s["budget_peak_bytes"] <= budget
    assert con.execute("MATCH (r:Row {key: 1234567}) RETURN r.s").scalar() == "value number 1234567 with some text"
