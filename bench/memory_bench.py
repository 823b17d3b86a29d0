#!/usr/bin/env python3
"""One heavy query at a time, Quiver against DuckDB on the same table, unlimited and
under a 64 MiB limit (issue "Queries inside the memory limit"): a sort of every user, a
grouping by a string, DISTINCT over three columns, the in-degree of every user (a
grouping by node; DuckDB groups the edge table by its target column), and a join of
the users with themselves on a property no index covers (Quiver's ValueHashJoin,
DuckDB's hash join).

On social scale 1 (1,632,803 users, 30.6M follows). Quiver runs `quiver query` on the
database `query_bench.py` imports (`--id-type integer`), timed whole process (a mapped
open costs milliseconds), with `--query-memory-limit 64MiB` and `--temp-dir` for the
limited form; DuckDB 1.x runs in a child Python on a database file holding the users and
follows tables (loaded once from the same CSV files), timed around the query alone,
with `SET memory_limit = '64MB'` and a `temp_directory` for the limited form. Each
measurement is its own process: its peak RSS is `ru_maxrss`. Medians of `--runs`,
interleaved; RESULT lines are JSON.

    cargo build --release
    pip install duckdb
    python3 bench/memory_bench.py --runs 3
"""

import argparse
import shutil
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_bench import QUIVER, ROOT  # noqa: E402
from query_bench import social  # noqa: E402

# (name, Cypher, SQL)
QUERIES = [
    ("sort all users",
     "MATCH (n:User) RETURN n.id ORDER BY n.registration DESC, n.id SKIP 1000000 LIMIT 5",
     "SELECT id FROM users ORDER BY registration DESC, id OFFSET 1000000 LIMIT 5"),
    ("group by a string",
     "MATCH (n:User) RETURN n.region AS r, count(*) AS c ORDER BY c DESC, r LIMIT 3",
     "SELECT region AS r, count(*) AS c FROM users GROUP BY region ORDER BY c DESC, r LIMIT 3"),
    ("distinct, three columns",
     "MATCH (n:User) WITH DISTINCT n.region AS r, n.age AS a, n.gender AS g RETURN count(*)",
     "SELECT count(*) FROM (SELECT DISTINCT region, age, gender FROM users)"),
    ("in-degree of every user",
     "MATCH (a:User)-->(b:User) WITH b, count(*) AS c RETURN b.id, c ORDER BY c DESC, b.id LIMIT 5",
     "SELECT dst, count(*) AS c FROM follows GROUP BY dst ORDER BY c DESC, dst LIMIT 5"),
    ("join users on a property",
     "MATCH (a:User), (b:User) WHERE b.registration = a.registration AND a.id < b.id RETURN count(*)",
     "SELECT count(*) FROM users a JOIN users b ON b.registration = a.registration WHERE a.id < b.id"),
]


def child(cmd, env=None):
    """Runs `cmd`; (wall seconds, peak RSS MiB, stdout)."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    out, err = p.stdout.read(), p.stderr.read()
    if status != 0:
        raise RuntimeError(f"{cmd[:3]}... failed: {err[-600:]}")
    return wall, ru.ru_maxrss / 1024, out


def duck_db(path, nodes, edges):
    if path.exists():
        return
    script = textwrap.dedent(f"""
        import duckdb
        con = duckdb.connect({str(path)!r}, config={{"enable_progress_bar": False}})
        con.execute("CREATE TABLE users AS SELECT * FROM read_csv({str(nodes)!r}, header=true, "
                    "names=['id','age','gender','region','completion_percentage','public','last_login','registration'], "
                    "types={{'id':'BIGINT','age':'BIGINT','gender':'BIGINT','region':'VARCHAR','completion_percentage':'BIGINT','public':'BIGINT','last_login':'TIMESTAMP','registration':'TIMESTAMP'}})")
        con.execute("CREATE TABLE follows AS SELECT * FROM read_csv({str(edges)!r}, header=true, names=['src','dst'], types={{'src':'BIGINT','dst':'BIGINT'}})")
        con.close()
    """)
    subprocess.run([sys.executable, "-c", script], check=True)


def duck(path, sql, limit, tmp):
    script = textwrap.dedent(f"""
        import duckdb, time, json
        con = duckdb.connect({str(path)!r}, read_only=True)
        con.execute("SET enable_progress_bar = false")
        if {limit!r}:
            con.execute("SET memory_limit = '{limit}'")
            con.execute("SET temp_directory = '{tmp}'")
        t0 = time.perf_counter()
        rows = con.execute({sql!r}).fetchall()
        print(json.dumps([time.perf_counter() - t0, repr(rows)]))
    """)
    wall, rss, out = child([sys.executable, "-c", script])
    t, rows = json.loads(out.strip().splitlines()[-1])
    return t, rss, rows


def quiver(db, q, limit, tmp):
    cmd = [str(QUIVER), "query", "--db", str(db), "--format", "json", q]
    if limit:
        cmd += ["--query-memory-limit", limit.replace("MB", "MiB"), "--temp-dir", tmp]
    wall, rss, out = child(cmd)
    return wall, rss, out.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--limit", default="64MB")
    ap.add_argument("--only", help="run only queries whose name contains this")
    args = ap.parse_args()
    work = ROOT / "data" / "bench" / "work" / "query-social-1"
    db = work / "social.qdb"
    nodes, edges, _ = social("1", db, ["--id-type", "integer"])
    ddb = ROOT / "data" / "bench" / "work" / "memory" / "social.duckdb"
    ddb.parent.mkdir(parents=True, exist_ok=True)
    duck_db(ddb, nodes, edges)
    tmp = tempfile.mkdtemp(dir=ROOT / "data" / "bench" / "work" / "memory")
    table = []
    for name, cy, sql in QUERIES:
        if args.only and args.only not in name:
            continue
        for limit in (None, args.limit):
            qs, ds = [], []
            answers = set()
            for _ in range(args.runs):
                t, rss, rows = quiver(db, cy, limit, tmp)
                qs.append((t, rss))
                t2, rss2, rows2 = duck(ddb, sql, limit, tmp)
                ds.append((t2, rss2))
                answers.add(rows)
            r = {"query": name, "limit": limit or "none",
                 "quiver_s": statistics.median(x[0] for x in qs), "quiver_mib": statistics.median(x[1] for x in qs),
                 "duckdb_s": statistics.median(x[0] for x in ds), "duckdb_mib": statistics.median(x[1] for x in ds),
                 "quiver_answers_agree": len(answers) == 1}
            print("RESULT " + json.dumps(r), flush=True)
            table.append(r)
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"\none query at a time on social 1, medians of {args.runs} (DuckDB timed around its query; "
          "Quiver the whole process)")
    print(f"{'query':<26} {'limit':>6} {'Quiver s':>9} {'MiB':>6} {'DuckDB s':>9} {'MiB':>6} {'Quiver/DuckDB':>14}")
    for r in table:
        print(f"{r['query']:<26} {r['limit']:>6} {r['quiver_s']:>9.3f} {r['quiver_mib']:>6.0f} "
              f"{r['duckdb_s']:>9.3f} {r['duckdb_mib']:>6.0f} {r['quiver_s'] / r['duckdb_s']:>13.1f}x")


if __name__ == "__main__":
    main()
