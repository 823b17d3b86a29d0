"""The official neo4j Python driver against `quiver serve` (run by bolt_driver.rs).

argv: bolt URI, user, password. Exits non-zero with a message on the first failure.
"""
import datetime
import sys

import neo4j
import pytz  # the driver depends on pytz
from neo4j import GraphDatabase, exceptions
from neo4j.time import Date, DateTime, Duration, Time

uri, user, password = sys.argv[1:4]


def check(cond, what):
    if not cond:
        sys.exit(f"FAILED: {what}")


# Authentication: a wrong password is the driver's AuthError.
bad = GraphDatabase.driver(uri, auth=(user, password + "x"))
try:
    bad.verify_connectivity()
    sys.exit("FAILED: a wrong password was accepted")
except exceptions.AuthError:
    pass
finally:
    bad.close()

d = GraphDatabase.driver(uri, auth=(user, password))
d.verify_connectivity()

# execute_query (a managed transaction) and the write counters.
r = d.execute_query("CREATE (a:P {name: 'a'})-[:K {w: 1.5}]->(b:P {name: 'b'}) RETURN a, b")
check(r.summary.counters.nodes_created == 2, f"nodes_created {r.summary.counters}")
check(r.summary.counters.relationships_created == 1, "relationships_created")
recs, _, keys = d.execute_query("MATCH (n:P) RETURN n.name AS name ORDER BY name")
check(keys == ["name"] and [x["name"] for x in recs] == ["a", "b"], f"names {recs}")

# Graph values: nodes, relationships, paths with element ids.
rec = d.execute_query("MATCH p = (a:P)-[r:K]->(b:P) RETURN a, r, b, p").records[0]
check(isinstance(rec["a"], neo4j.graph.Node) and set(rec["a"].labels) == {"P"}, "node")
check(rec["r"].type == "K" and rec["r"]["w"] == 1.5, "relationship")
check(rec["r"].start_node.element_id == rec["a"].element_id, "relationship start")
check(len(rec["p"]) == 1 and rec["p"].end_node.element_id == rec["b"].element_id, "path")

# One element id: what the driver sees on a node or relationship is what elementId()
# gives, so the libraries that send it back (neomodel, the Browser) find the entity.
ids = d.execute_query(
    "MATCH (a:P {name: 'a'})-[r:K]->(b) RETURN a, r, elementId(a) AS ea, elementId(r) AS er"
).records[0]
check(ids["a"].element_id == ids["ea"], f"node element id {ids['a'].element_id} vs {ids['ea']}")
check(ids["r"].element_id == ids["er"], f"relationship element id {ids['r'].element_id} vs {ids['er']}")
found = d.execute_query(
    "MATCH (n) WHERE elementId(n) = $id RETURN n.name AS name", id=ids["a"].element_id
).records
check([x["name"] for x in found] == ["a"], f"a node by the driver's element id: {found}")
found = d.execute_query(
    "MATCH ()-[r]->() WHERE elementId(r) = $id RETURN r.w AS w", id=ids["r"].element_id
).records
check([x["w"] for x in found] == [1.5], f"a relationship by the driver's element id: {found}")

# Every value type round-trips as a parameter and as a result.
values = {
    "null": None,
    "bool": True,
    "int": -(2 ** 40),
    "float": 2.5,
    "str": "héllo",
    "bytes": bytearray(b"\x00\x01\xfe\xff"),
    "list": [1, "two", [3.0]],
    "map": {"k": [1, {"x": None}]},
    "date": Date(2024, 2, 29),
    "localtime": Time(12, 31, 14, 645876123),
    "time": Time(12, 31, 14, 5, tzinfo=pytz.FixedOffset(5 * 60 + 45)),
    "localdatetime": DateTime(1984, 10, 11, 12, 31, 14, 645876123),
    "datetime_offset": DateTime(2015, 7, 21, 21, 40, 32, 142000000,
                                tzinfo=pytz.FixedOffset(-4 * 60)),
    "duration": Duration(years=1, months=2, days=3, hours=4, minutes=5, seconds=6, nanoseconds=7),
}
for name, v in values.items():
    got = d.execute_query("RETURN $v AS v", v=v).records[0]["v"]
    check(got == v, f"{name}: sent {v!r}, got {got!r}")
# Bytes are stored as a property and read back.
d.execute_query("CREATE (:B {b: $b})", b=bytearray(b"\x07" * 1000))
got = d.execute_query("MATCH (x:B) RETURN x.b AS b").records[0]["b"]
check(got == bytearray(b"\x07" * 1000), "a bytes property")
# A zoned datetime keeps its zone.
berlin = pytz.timezone("Europe/Berlin").localize(datetime.datetime(2024, 7, 1, 12, 0))
got = d.execute_query("RETURN $v AS v", v=berlin).records[0]["v"]
check(got.to_native() == berlin and str(got.tzinfo) == "Europe/Berlin", f"zoned datetime {got!r}")
got = d.execute_query("RETURN datetime('2015-07-21T21:40:32.142+01:00[Europe/London]') AS v").records[0]["v"]
check(got.tzinfo.zone == "Europe/London" and got.hour == 21, f"zoned datetime result {got!r}")

# Errors arrive as the driver's exception classes.
try:
    d.execute_query("MATCH (n RETURN n")
    sys.exit("FAILED: a syntax error was accepted")
except exceptions.CypherSyntaxError as e:
    check("line 1" in e.message, f"syntax error message: {e.message}")
try:
    d.execute_query("RETURN 1 + 'a' * 2")
    sys.exit("FAILED: a type error was accepted")
except exceptions.CypherTypeError:
    pass

# Explicit transactions: commit and rollback.
with d.session() as s:
    tx = s.begin_transaction()
    tx.run("CREATE (:T {v: 1})")
    check(tx.run("MATCH (t:T) RETURN count(t) AS c").single()["c"] == 1, "read own write")
    tx.rollback()
    check(s.run("MATCH (t:T) RETURN count(t) AS c").single()["c"] == 0, "rolled back")
    tx = s.begin_transaction()
    tx.run("CREATE (:T {v: 2})")
    tx.commit()
    check(s.run("MATCH (t:T) RETURN count(t) AS c").single()["c"] == 1, "committed")
    # A failed statement fails the transaction; the session stays usable.
    tx = s.begin_transaction()
    try:
        tx.run("RETURN 1/0").consume()
        sys.exit("FAILED: division by zero was accepted")
    except exceptions.ClientError:
        pass
    tx.close()
    check(s.run("RETURN 7 AS x").single()["x"] == 7, "usable after a failure")

# Managed transactions.
def work(tx):
    return tx.run("MATCH (t:T) SET t.v = t.v + 1 RETURN t.v AS v").single()["v"]


with d.session() as s:
    check(s.execute_write(work) == 3, "execute_write")

# A large result streams in pulls (the driver fetches 1000 records at a time).
with d.session(fetch_size=1000) as s:
    res = s.run("UNWIND range(1, 200000) AS x RETURN x")
    total = 0
    n = 0
    for row in res:
        total += row["x"]
        n += 1
    check(n == 200000 and total == 200000 * 200001 // 2, f"streamed {n} rows")
    # A result left half-read is discarded by the next statement.
    res = s.run("UNWIND range(1, 100000) AS x RETURN x")
    next(iter(res))
    check(s.run("RETURN 1 AS one").single()["one"] == 1, "after a half-read result")

# The calls tools make on connect.
labels = [r["label"] for r in d.execute_query("CALL db.labels()").records]
check(labels == ["B", "P", "T"], f"db.labels() {labels}")
types = [r["relationshipType"] for r in d.execute_query("CALL db.relationshipTypes() YIELD relationshipType RETURN relationshipType").records]
check(types == ["K"], f"db.relationshipTypes() {types}")
keys = [r["propertyKey"] for r in d.execute_query("CALL db.propertyKeys()").records]
check({"name", "w", "v"} <= set(keys), f"db.propertyKeys() {keys}")
comp = d.execute_query("CALL dbms.components() YIELD name, versions, edition RETURN *").records[0]
check(comp["name"] == "Neo4j Kernel" and comp["versions"] == ["5.26.0"], f"dbms.components() {comp}")
dbs = d.execute_query("SHOW DATABASES").records
check(len(dbs) == 1 and dbs[0]["name"] == "neo4j" and dbs[0]["home"] is True, f"SHOW DATABASES {dbs}")
try:
    d.execute_query("CALL db.nothing()")
    sys.exit("FAILED: an unknown procedure was accepted")
except exceptions.ClientError as e:
    check("no procedure" in e.message, f"unknown procedure: {e.message}")

d.close()

# neo4j:// URIs route through the single-server routing table.
host = uri.split("://", 1)[1]
r = GraphDatabase.driver(f"neo4j://{host}", auth=(user, password))
check(r.execute_query("RETURN 42 AS x").records[0]["x"] == 42, "neo4j:// routing")
r.close()
print("ok")
