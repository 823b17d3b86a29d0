#!/usr/bin/env python3
"""LOAD CSV beside Neo4j's: the dolt table (1M rows, 10 typed columns) loaded through the
official neo4j driver into `quiver serve` and into a running Neo4j 5, the same
statement text, interleaved runs.

- `IN TRANSACTIONS`: `LOAD CSV WITH HEADERS FROM 'file:///dolt-1m.csv' AS row CALL {
  WITH row CREATE (:Label {...}) } IN TRANSACTIONS OF 10000 ROWS`, Neo4j's documented
  form for large loads (one transaction of a million rows needs a heap to match);
- `one statement` (Quiver only): the same LOAD CSV as one auto-commit statement, which
  takes Quiver's direct path (seed 004).

Neo4j is not started here: give its Bolt URI (`--neo4j`, no auth) and its import folder
(`--neo4j-import-dir`, where the file is linked). Each Neo4j run loads under a label of
its own; each Quiver run gets a fresh server and database.

    python3 bench/neo4j_load_bench.py --neo4j bolt://127.0.0.1:7690 --neo4j-import-dir data/neo4j/import --runs 3
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from beside_bench import Server  # noqa: E402
from import_bench import ROOT  # noqa: E402
from load_bench import DOLT_PROPS, prepare  # noqa: E402

# One text for both: an empty field is null in one system and '' in the other, and
# localdatetime('') is an error in both.
NEO4J_PROPS = DOLT_PROPS.replace(
    "c3: localdatetime(replace(row.c3, ' ', 'T'))",
    "c3: CASE WHEN row.c3 IS NULL OR row.c3 = '' THEN null ELSE localdatetime(replace(row.c3, ' ', 'T')) END")
assert NEO4J_PROPS != DOLT_PROPS


def statement(label, batched):
    load = "LOAD CSV WITH HEADERS FROM 'file:///dolt-1m.csv' AS row "
    if batched:
        return load + f"CALL {{ WITH row CREATE (:{label} {{{NEO4J_PROPS}}}) }} IN TRANSACTIONS OF 10000 ROWS"
    return load + f"CREATE (:{label} {{{NEO4J_PROPS}}})"


def load(driver, q):
    t0 = time.perf_counter()
    with driver.session() as s:
        s.run(q).consume()
    return time.perf_counter() - t0


def main():
    from neo4j import GraphDatabase

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--neo4j", required=True)
    ap.add_argument("--neo4j-import-dir", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--memory-limit", default="2GiB")
    args = ap.parse_args()
    data = ROOT / "data" / "bench"
    files = prepare(argparse.Namespace(workload="dolt"), data)
    imp = Path(files["plain"]).parent
    target = Path(args.neo4j_import_dir) / "dolt-1m.csv"
    if not target.exists():
        shutil.copyfile(files["plain"], target)
    rows = files["rows"]
    neo = GraphDatabase.driver(args.neo4j, auth=None)
    work = data / "work" / "neo4j-load"
    work.mkdir(parents=True, exist_ok=True)
    res = {}
    for r in range(args.runs):
        for batched in (True, False):
            db = work / "load.qdb"
            shutil.rmtree(db, ignore_errors=True)
            srv = Server(db, imp, args.memory_limit)
            try:
                q = GraphDatabase.driver(f"bolt://127.0.0.1:{srv.port}", auth=None)
                secs = load(q, statement("Dolt", batched))
                with q.session() as s:
                    n = s.run("MATCH (d:Dolt) RETURN count(d) AS n").single()["n"]
                q.close()
            finally:
                srv.close()
            assert n == rows, (n, rows)
            name = f"quiver, {'IN TRANSACTIONS' if batched else 'one statement'}"
            res.setdefault(name, []).append((secs, srv.peak))
        label = f"DoltRun{r}{os.getpid()}"
        secs = load(neo, statement(label, True))
        with neo.session() as s:
            n = s.run(f"MATCH (d:{label}) RETURN count(d) AS n").single()["n"]
        assert n == rows, (n, rows)
        res.setdefault("neo4j, IN TRANSACTIONS", []).append((secs, 0))
    base = statistics.median(s for s, _ in res["quiver, IN TRANSACTIONS"])
    print(f"LOAD CSV of dolt 1m ({rows:,} rows) through the neo4j driver; median of {args.runs}")
    print(f"{'system':<32} {'wall s':>8} {'rows/s':>12} {'vs quiver':>10}")
    for name, v in res.items():
        secs = statistics.median(s for s, _ in v)
        print(f"{name:<32} {secs:>8.2f} {rows / secs:>12,.0f} {secs / base:>9.2f}x")
        print("RESULT " + json.dumps({"system": name, "rows": rows, "seconds": round(secs, 3),
                                      "rows_per_s": round(rows / secs),
                                      "runs": [round(s, 3) for s, _ in v]}))
    neo.close()


if __name__ == "__main__":
    main()
