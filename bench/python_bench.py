#!/usr/bin/env python3
"""The Python package against Kùzu and DuckDB from Python: imports from a pandas frame,
an Arrow table and a Parquet file; a 1M-row result to pandas and to Arrow; the cost of a
seek query through each API.

    pip install ./python kuzu duckdb
    python3 bench/python_bench.py --workload dolt --rows 1000000 --runs 3
    python3 bench/python_bench.py --workload social --scale 1 --runs 3

Every measurement runs in a fresh child process (so its peak resident memory, ru_maxrss,
is its own and includes the frame it started from); the time is the call's own (the frame
or table is built before the clock starts, the Parquet file is on disk). Medians of
`--runs`. Forms:
- import: Quiver `con.import_graph(nodes=..., relationships=...)` from the CSV file
  (the baseline), the Parquet file, a pyarrow Table and a pandas DataFrame; Kùzu
  `COPY T FROM df` / `COPY T FROM 'file.parquet'` into tables with a primary key (its
  bulk path); DuckDB `CREATE TABLE t AS SELECT * FROM df` / `... FROM read_parquet(...)`
  (social: two tables, no adjacency).
- results (dolt): `MATCH (r:Row) RETURN` five columns of every row (1M) `.df()` and
  `.arrow()`; Kùzu `get_as_df()` / `get_as_arrow()` of the same; DuckDB `.df()` /
  `.arrow()` of `SELECT` the same columns.
- seeks (social): `MATCH (n:User {id: $id}) RETURN n.id` per call, median µs over 5,000
  ids, beside the same query in process (`quiver query --bench-params`) and Kùzu's
  Python API (literal ids, which its planner seeks by index).
Prints one row per measurement and a JSON line each (prefix `RESULT `).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUIVER = ROOT / "target" / "release" / "quiver"
OUT = ROOT / "data" / "bench" / "python"


def child(code):
    """Runs `code` in a fresh interpreter; it prints one float (seconds) last."""
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, cwd="/")
    out, err = p.stdout, p.stderr
    if p.returncode != 0:
        sys.exit(f"child failed:\n{code}\n{err.decode()[-3000:]}")
    lines = out.decode().strip().splitlines()
    return float(lines[-1]), int(lines[-2]) if len(lines) > 1 else 0


# The child's own peak: VmHWM belongs to its address space, made new at exec
# (getrusage's ru_maxrss keeps the parent's peak at fork across the exec).
PRELUDE = """
import time, sys
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM:'):
            return int(line.split()[1]) * 1024
    return 0
"""


def measure(code, runs):
    times, rss = [], []
    for _ in range(runs):
        t, r = child(PRELUDE + textwrap.dedent(code) + "\nprint(rss())\nprint(T)\n")
        times.append(t)
        rss.append(r)
    return statistics.median(times), max(rss)


def files(args):
    """Plain-named CSV and Parquet copies of the workload's files (generated once)."""
    OUT.mkdir(parents=True, exist_ok=True)
    import pyarrow as pa
    import pyarrow.csv as pc
    import pyarrow.parquet as pq

    if args.workload == "dolt":
        d = OUT / f"dolt-{args.rows}"
        if not (d / "rows.parquet").exists():
            d.mkdir(exist_ok=True)
            gen = d / "gen"
            subprocess.run([QUIVER, "generate", "dolt", "--rows", str(args.rows), "--order", "random", "--out", gen], check=True, capture_output=True)
            src = next(gen.glob("*.csv"))
            t = pc.read_csv(src)
            t = t.rename_columns([c.split(":")[0] for c in t.column_names])
            pc.write_csv(t, d / "rows.csv")
            pq.write_table(t, d / "rows.parquet")
            shutil.rmtree(gen)
        return {"nodes": {"Row": d / "rows"}, "rels": {}}
    d = OUT / f"social-{args.scale}"
    if not (d / "users.parquet").exists():
        d.mkdir(exist_ok=True)
        gen = d / "gen"
        subprocess.run([QUIVER, "generate", "social", "--scale", str(args.scale), "--out", gen], check=True, capture_output=True)
        for name, out, cols in [("nodes", "users", None), ("edges", "follows", ["src", "dst"])]:
            src = next(p for p in gen.glob("*.csv") if name in p.name)
            t = pc.read_csv(src)
            t = t.rename_columns(cols or [c.split(":")[0] or "id" for c in t.column_names])
            pc.write_csv(t, d / f"{out}.csv")
            pq.write_table(t, d / f"{out}.parquet")
        shutil.rmtree(gen)
    return {"nodes": {"User": d / "users"}, "rels": {"FOLLOWS": d / "follows"}}


def load_expr(kind, stem):
    if kind == "csv":
        return f"{str(stem) + '.csv'!r}"
    if kind == "parquet":
        return f"{str(stem) + '.parquet'!r}"
    if kind == "arrow":
        return f"pq.read_table({str(stem) + '.parquet'!r})"
    return f"pq.read_table({str(stem) + '.parquet'!r}).to_pandas()"


def quiver_import(f, kind, db, budget):
    """Quiver's import of the workload from `kind`; `budget` None: no options at all
    (the default a new user gets: half of memory, ids typed by the frame)."""
    nodes = ", ".join(f"{k!r}: {load_expr(kind, v)}" for k, v in f["nodes"].items())
    rels = ", ".join(f"{k!r}: {load_expr(kind, v)}" for k, v in f["rels"].items())
    return f"""
import quiver, shutil, pyarrow.parquet as pq
shutil.rmtree({str(db)!r}, ignore_errors=True)
nodes = {{{nodes}}}
rels = {{{rels}}}
con = quiver.connect({str(db)!r})
t = time.perf_counter()
con.import_graph(nodes=nodes, relationships=rels{"" if budget is None else f", memory_budget={budget!r}"})
T = time.perf_counter() - t
"""


KUZU_SCHEMA = {
    "dolt": ["CREATE NODE TABLE Row(pk INT64, c1 INT64, c2 STRING, c3 TIMESTAMP, c4 DOUBLE, c5 INT64, c6 DOUBLE, c7 STRING, c8 STRING, c9 STRING, PRIMARY KEY(pk))"],
    "social": [
        "CREATE NODE TABLE User(id INT64, age INT64, gender INT64, region STRING, completion_percentage INT64, public INT64, last_login TIMESTAMP, registration TIMESTAMP, PRIMARY KEY(id))",
        "CREATE REL TABLE FOLLOWS(FROM User TO User)",
    ],
}


def kuzu_import(f, kind, db, workload):
    tables = list(f["nodes"].items()) + list(f["rels"].items())
    # Kùzu scans a frame through numpy and fails on pandas 3's string dtype
    # (KU_UNREACHABLE in numpy_type.cpp): it gets the Arrow table, which it scans directly.
    loads = "\n".join(f"d_{k} = {load_expr('arrow', v)}" if kind == "arrow" else f"d_{k} = None" for k, v in tables)
    copies = "\n".join(
        f"c.execute('COPY {k} FROM d_{k}')" if kind == "arrow" else f"c.execute(\"COPY {k} FROM '{v}.parquet'\")" for k, v in tables
    )
    schema = "\n".join(f"c.execute({s!r})" for s in KUZU_SCHEMA[workload])
    return f"""
import kuzu, shutil, os, pyarrow.parquet as pq
p = {str(db)!r}
shutil.rmtree(p, ignore_errors=True)
if os.path.exists(p): os.remove(p)
{loads}
d = kuzu.Database(p)
c = kuzu.Connection(d)
{schema}
t = time.perf_counter()
{copies}
T = time.perf_counter() - t
"""


def duckdb_import(f, kind, db):
    tables = list(f["nodes"].items()) + list(f["rels"].items())
    loads = "\n".join(f"d_{k} = {load_expr('pandas', v)}" if kind == "pandas" else "" for k, v in tables)
    creates = "\n".join(
        f"c.execute('CREATE TABLE {k} AS SELECT * FROM d_{k}')" if kind == "pandas" else f"c.execute(\"CREATE TABLE {k} AS SELECT * FROM read_parquet('{v}.parquet')\")"
        for k, v in tables
    )
    return f"""
import duckdb, os, pyarrow.parquet as pq
p = {str(db)!r}
if os.path.exists(p): os.remove(p)
{loads}
c = duckdb.connect(p)
t = time.perf_counter()
{creates}
c.close()
T = time.perf_counter() - t
"""


def report(rows, name, secs, rss, n, base, unit="rows/s"):
    rate = n / secs if secs else 0
    r = {"name": name, "seconds": round(secs, 4), "rate": round(rate), "unit": unit, "peak_rss_mib": round(rss / 2**20, 1), "vs_quiver_csv": round(secs / base, 2) if base else None}
    rows.append(r)
    print(f"  {name:28} {secs:8.3f} s  {rate:>14,.0f} {unit}  peak {rss / 2**20:8.1f} MiB" + (f"  {secs / base:5.2f}x" if base else ""), flush=True)
    print("RESULT " + json.dumps(r))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", choices=["dolt", "social"], default="dolt")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--budget", default="512MiB")
    ap.add_argument("--peers", default="kuzu,duckdb")
    ap.add_argument("--skip", default="", help="comma-separated parts to skip: import,results,seeks")
    args = ap.parse_args()
    peers = set(p for p in args.peers.split(",") if p)
    skip = set(args.skip.split(","))
    f = files(args)
    import pyarrow.parquet as pq

    n = sum(pq.ParquetFile(str(v) + ".parquet").metadata.num_rows for v in list(f["nodes"].values()) + list(f["rels"].values()))
    work = OUT / "dbs"
    work.mkdir(exist_ok=True)
    qdb = work / f"{args.workload}.qdb"
    rows = []
    if "import" not in skip:
        print(f"import, {args.workload}, {n:,} rows (median of {args.runs}):")
        base = None
        for kind in ["csv", "parquet", "arrow", "pandas"]:
            secs, rss = measure(quiver_import(f, kind, qdb, args.budget), args.runs)
            base = base or secs
            report(rows, f"quiver-{kind}", secs, rss, n, base)
        # The default path: plain files and frames, no options.
        for kind in ["csv", "pandas"]:
            secs, rss = measure(quiver_import(f, kind, qdb, None), args.runs)
            report(rows, f"quiver-{kind} (no options)", secs, rss, n, base)
        for kind in ["pandas", "parquet"]:
            if "kuzu" in peers:
                kk = "arrow" if kind == "pandas" else kind
                secs, rss = measure(kuzu_import(f, kk, work / f"{args.workload}.kz", args.workload), args.runs)
                report(rows, f"kuzu-{kk}", secs, rss, n, base)
            if "duckdb" in peers:
                secs, rss = measure(duckdb_import(f, kind, work / f"{args.workload}.duckdb"), args.runs)
                report(rows, f"duckdb-{kind}", secs, rss, n, base)
    if args.workload == "dolt" and "results" not in skip:
        # The databases the import part left (or made now).
        if not (qdb / "CURRENT").exists():
            measure(quiver_import(f, "parquet", qdb, args.budget), 1)
        if "kuzu" in peers and not (work / "dolt.kz").exists():
            measure(kuzu_import(f, "parquet", work / "dolt.kz", "dolt"), 1)
        if "duckdb" in peers and not (work / "dolt.duckdb").exists():
            measure(duckdb_import(f, "parquet", work / "dolt.duckdb"), 1)
        cols = "r.pk, r.c1, r.c4, r.c5, r.c7"
        print(f"results: {args.rows:,} rows x 5 columns (median of {args.runs}):")
        for fmt in ["df", "arrow"]:
            secs, rss = measure(f"""
import quiver
con = quiver.connect({str(qdb)!r}, create=False)
t = time.perf_counter()
x = con.execute("MATCH (r:Row) RETURN {cols}").{fmt}()
T = time.perf_counter() - t
assert len(x) == {args.rows}
""", args.runs)
            report(rows, f"quiver-{fmt}", secs, rss, args.rows, None)
            if "kuzu" in peers:
                secs, rss = measure(f"""
import kuzu
c = kuzu.Connection(kuzu.Database({str(work / 'dolt.kz')!r}, read_only=True))
t = time.perf_counter()
x = c.execute("MATCH (r:Row) RETURN {cols}").{'get_as_df' if fmt == 'df' else 'get_as_arrow'}()
T = time.perf_counter() - t
assert len(x) == {args.rows}
""", args.runs)
                report(rows, f"kuzu-{fmt}", secs, rss, args.rows, None)
            if "duckdb" in peers:
                secs, rss = measure(f"""
import duckdb
c = duckdb.connect({str(work / 'dolt.duckdb')!r}, read_only=True)
t = time.perf_counter()
x = c.execute("SELECT pk, c1, c4, c5, c7 FROM Row").{'df' if fmt == 'df' else 'to_arrow_table'}()
T = time.perf_counter() - t
assert len(x) == {args.rows}
""", args.runs)
                report(rows, f"duckdb-{fmt}", secs, rss, args.rows, None)
        # A database that has seen writes: the Parquet file imported with no options, 1%
        # of its rows SET (keeping the column's type), read to Arrow before and after
        # the CHECKPOINT that folds them (the columnar read needs an empty delta; until
        # then the query path answers).
        plain = work / "dolt-plain.qdb"
        measure(quiver_import(f, "parquet", plain, None), 1)
        for checkpoint in [False, True]:
            changed = work / "dolt-changed.qdb"
            secs, rss = measure(f"""
import quiver, shutil
shutil.rmtree({str(changed)!r}, ignore_errors=True)
shutil.copytree({str(plain)!r}, {str(changed)!r})
con = quiver.connect({str(changed)!r}, create=False)
con.execute("MATCH (r:Row) WHERE r.pk % 100 = 0 SET r.c5 = r.c5 + 1")
{"con.execute('CHECKPOINT')" if checkpoint else ""}
t = time.perf_counter()
x = con.execute("MATCH (r:Row) RETURN {cols}").arrow()
T = time.perf_counter() - t
assert len(x) == {args.rows}
""", args.runs)
            report(rows, f"quiver-arrow after 1% SET{', checkpointed' if checkpoint else ''}", secs, rss, args.rows, None)
    if args.workload == "social" and "seeks" not in skip:
        # Imported from Parquet with no options (pandas would have made the columns with
        # nulls floats: its integers have no null).
        qdb = work / "social-seeks.qdb"
        if not (qdb / "CURRENT").exists():
            measure(quiver_import(f, "parquet", qdb, None), 1)
        ids = OUT / "ids.csv"
        with open(ids, "w") as fh:
            fh.write("id\n")
            for i in range(5000):
                fh.write(f"{(i * 7919) % 1_600_000 + 1}\n")
        print("seeks: MATCH (n:User {id: $id}) RETURN n.id, median per query:")
        q = "MATCH (n:User {id: $id}) RETURN n.id"
        out = subprocess.run([QUIVER, "query", "--db", qdb, q, "--bench-params", ids, "--format", "json"], capture_output=True, text=True)
        med = None
        for line in (out.stdout + out.stderr).splitlines():
            if "median_ms" in line:
                try:
                    med = json.loads(line[line.index("{"):])["median_ms"] / 1e3
                except (ValueError, KeyError):
                    pass
        if med:
            report(rows, "quiver in process (Rust)", med, 0, 1, None, unit="queries/s")
        secs, rss = measure(f"""
import quiver, statistics
con = quiver.connect({str(qdb)!r}, create=False)
ids = [int(x) for x in open({str(ids)!r}).read().split()[1:]]
for i in ids[:500]: con.execute({q!r}, {{"id": i}}).fetchall()
lat = []
for i in ids:
    t = time.perf_counter()
    con.execute({q!r}, {{"id": i}}).fetchall()
    lat.append(time.perf_counter() - t)
T = statistics.median(lat)
""", args.runs)
        report(rows, "quiver python", secs, rss, 1, None, unit="queries/s")
        if med:
            print(f"  Python API overhead: {(secs - med) * 1e6:.1f} µs per query")
        # A database that has seen writes: a quarter of the users changed, checkpointed.
        written = work / "social-written.qdb"
        shutil.rmtree(written, ignore_errors=True)
        shutil.copytree(qdb, written)
        measure(f"""
import quiver
con = quiver.connect({str(written)!r}, create=False)
t = time.perf_counter()
con.execute("MATCH (n:User) WHERE n.id % 4 = 0 SET n.age = coalesce(n.age, 0) + 1")
con.execute("CHECKPOINT")
T = time.perf_counter() - t
""", 1)
        agg = "MATCH (n:User) RETURN n.gender, count(*), avg(n.age)"
        for name, db in [("fresh", qdb), ("after writes", written)]:
            for what, query, params in [("seek", q, "{'id': i}"), ("aggregate", agg, "None")]:
                secs, rss = measure(f"""
import quiver, statistics
con = quiver.connect({str(db)!r}, create=False)
ids = [int(x) for x in open({str(ids)!r}).read().split()[1:]][:{5000 if what == 'seek' else 20}]
for i in ids[:5]: con.execute({query!r}, {params}).fetchall()
lat = []
for i in ids:
    t = time.perf_counter()
    con.execute({query!r}, {params}).fetchall()
    lat.append(time.perf_counter() - t)
T = statistics.median(lat)
""", args.runs)
                report(rows, f"quiver python {what}, {name}", secs, rss, 1, None, unit="queries/s")
        if "kuzu" in peers:
            if not (work / "social.kz").exists():
                measure(kuzu_import(f, "parquet", work / "social.kz", "social"), 1)
            secs, rss = measure(f"""
import kuzu, statistics
c = kuzu.Connection(kuzu.Database({str(work / 'social.kz')!r}, read_only=True))
ids = [int(x) for x in open({str(ids)!r}).read().split()[1:]]
for i in ids[:500]: c.execute("MATCH (n:User {{id: " + str(i) + "}}) RETURN n.id").get_all()
lat = []
for i in ids:
    t = time.perf_counter()
    c.execute("MATCH (n:User {{id: " + str(i) + "}}) RETURN n.id").get_all()
    lat.append(time.perf_counter() - t)
T = statistics.median(lat)
""", args.runs)
            report(rows, "kuzu python (literal ids)", secs, rss, 1, None, unit="queries/s")


if __name__ == "__main__":
    main()
