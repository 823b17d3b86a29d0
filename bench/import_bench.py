#!/usr/bin/env python3
"""Import benchmark: Quiver side by side with DuckDB and Kùzu on the same files.

For a workload and scale it generates the files once (with `quiver generate`), then runs
each system's import `--runs` times in a fresh child process and reports the median wall
time, rows/s, peak resident memory (the child's ru_maxrss, so the Python interpreter of
DuckDB/Kùzu counts, as it would for their users), on-disk size, and the ratio to Quiver.

    pip install duckdb kuzu
    python3 bench/import_bench.py --workload dolt --rows 1000000 --order random
    python3 bench/import_bench.py --workload social --scale 1 --budget 512MiB

Peers: DuckDB (typed table with PRIMARY KEY, COPY FROM), Kùzu (node/rel tables, COPY FROM),
and, with `--peers ...,postgres,mariadb`, PostgreSQL `COPY` and MariaDB `LOAD DATA INFILE`
(servers started by bench/servers.py from the system packages; dolt and social only).
On social, `quiver-default` is the same import with no `--id-type` (string ids, the
default a new user gets) beside the `--id-type integer` one. `--plain` adds
`quiver-plain` (dolt, social): copies of the files whose headers have no annotations,
read by the import's rules for a newcomer's files (ids, endpoints, sniffed types).
Every run prints one row plus a machine-readable JSON line (prefix `RESULT `).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parent.parent
# `QUIVER=path` runs another build (an older one, side by side).
QUIVER = Path(os.environ.get("QUIVER", ROOT / "target" / "release" / "quiver"))


def timed(cmd):
    """Runs cmd under /usr/bin/time-like accounting via wait4."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out = p.stdout.read()
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    secs = time.perf_counter() - t
    if status != 0:
        sys.exit(f"failed ({status}): {' '.join(map(str, cmd))}\n{err.decode()[-3000:]}")
    return secs, ru.ru_maxrss * 1024, out.decode()


def du(path):
    p = Path(path)
    if p.is_file():
        return p.stat().st_size
    return sum(f.stat().st_size for f in p.rglob("*") if f.is_file())


def fresh(path):
    p = Path(path)
    if p.is_dir():
        shutil.rmtree(p)
    elif p.exists():
        p.unlink()
    for extra in [Path(str(p) + ".wal")]:
        if extra.exists():
            extra.unlink()


def fresh_copy(src, dst):
    """A fresh copy of a database (a directory, or Kùzu's single file) at dst."""
    fresh(dst)
    (shutil.copytree if Path(src).is_dir() else shutil.copyfile)(src, dst)


DOLT_DUCK = "CREATE TABLE dolt(pk INTEGER PRIMARY KEY, c1 BIGINT, c2 VARCHAR, c3 TIMESTAMP, c4 DOUBLE, c5 TINYINT, c6 FLOAT, c7 VARCHAR, c8 VARCHAR, c9 VARCHAR)"
DOLT_KUZU = "CREATE NODE TABLE Dolt(pk INT64, c1 INT64, c2 STRING, c3 TIMESTAMP, c4 DOUBLE, c5 INT8, c6 FLOAT, c7 STRING, c8 STRING, c9 STRING, PRIMARY KEY(pk))"
USERS_COLS = "id INTEGER PRIMARY KEY, age INTEGER, gender INTEGER, region VARCHAR, completion_percentage INTEGER, public INTEGER, last_login TIMESTAMP, registration TIMESTAMP"
USERS_KUZU = "CREATE NODE TABLE User(id INT64, age INT64, gender INT64, region STRING, completion_percentage INT64, public INT64, last_login TIMESTAMP, registration TIMESTAMP, PRIMARY KEY(id))"


def duck_script(db, statements, threads):
    return textwrap.dedent(f"""
        import duckdb
        con = duckdb.connect({str(db)!r})
        con.execute("SET threads={threads}")
        for s in {statements!r}:
            con.execute(s)
        con.close()
    """)


def kuzu_script(db, statements, threads, module="kuzu"):
    return textwrap.dedent(f"""
        import {module} as kuzu
        d = kuzu.Database({str(db)!r})
        c = kuzu.Connection(d, num_threads={threads})
        for s in {statements!r}:
            c.execute(s)
    """)


def systems(args, files, work):
    """(name, path, command) per system for this workload."""
    q = work / "quiver.qdb"
    duck = work / "duck.duckdb"
    kz = work / "kuzu.kz"
    lb = work / "ladybug.lb"
    qcmd = [str(QUIVER), "import", "--db", str(q), "--id-type", "integer", "--threads", str(args.threads), "--json", "--quiet"]
    if args.budget:
        qcmd += ["--memory-budget", args.budget]
    if args.workload == "dolt":
        f = files["dolt"]
        qcmd += ["--nodes", f"Dolt={f}"]
        duck_stmts = [DOLT_DUCK, f"COPY dolt FROM '{f}' (HEADER true)"]
        kuzu_stmts = [DOLT_KUZU, f"COPY Dolt FROM '{f}' (header=true)"]
    elif args.workload == "ids":
        n, e = files["nodes"], files["edges"]
        qcmd = [c for c in qcmd if c != "integer"]
        qcmd[qcmd.index("--id-type") + 1:qcmd.index("--id-type") + 1] = ["string"]
        qcmd += ["--nodes", f"Node={n}", "--relationships", f"LINKS={e}"]
        duck_stmts = ["CREATE TABLE nodes(hash VARCHAR PRIMARY KEY, n BIGINT)", "CREATE TABLE links(src VARCHAR, dst VARCHAR)",
                      f"COPY nodes FROM '{n}' (HEADER true)", f"COPY links FROM '{e}' (HEADER true)"]
        kuzu_stmts = ["CREATE NODE TABLE Node(hash STRING, n INT64, PRIMARY KEY(hash))", "CREATE REL TABLE LINKS(FROM Node TO Node)",
                      f"COPY Node FROM '{n}' (header=true)", f"COPY LINKS FROM '{e}' (header=true)"]
    elif args.workload == "social":
        n, e = files["nodes"], files["edges"]
        qcmd += ["--nodes", f"User={n}", "--relationships", f"FOLLOWS={e}"]
        duck_stmts = [f"CREATE TABLE users({USERS_COLS})", "CREATE TABLE follows(src INTEGER, dst INTEGER)",
                      f"COPY users FROM '{n}' (HEADER true)", f"COPY follows FROM '{e}' (HEADER true)"]
        kuzu_stmts = [USERS_KUZU, "CREATE REL TABLE FOLLOWS(FROM User TO User)",
                      f"COPY User FROM '{n}' (header=true)", f"COPY FOLLOWS FROM '{e}' (header=true)"]
    else:  # wide
        f, h = files["wide"], files["header"]
        cols = args.cols
        qcmd = [c for c in qcmd if c != "integer"]
        qcmd[qcmd.index("--id-type") + 1:qcmd.index("--id-type") + 1] = ["string"]
        qcmd += ["--nodes", f"Wide={h},{f}"]
        colspec = ", ".join(f"c{i} VARCHAR" for i in range(cols))
        duck_stmts = [f"CREATE TABLE wide({colspec})", f"COPY wide FROM '{f}' (HEADER false)"]
        kcols = ", ".join(f"c{i} STRING" for i in range(cols))
        kuzu_stmts = [f"CREATE NODE TABLE Wide(id SERIAL, {kcols}, PRIMARY KEY(id))", f"COPY Wide FROM '{f}' (header=false)"]
    out = [("quiver", q, qcmd)]
    if args.plain and args.workload in ("social", "dolt"):
        # The same files with headers stripped of annotations: ids, endpoints and types
        # found by the import's rules and sniffing.
        plain = Path(args.data).resolve() / "plain"
        qp = work / "quiver-plain.qdb"
        i = qcmd.index("--id-type")
        pcmd = [str(qp) if c == str(q) else c for c in qcmd[:i] + qcmd[i + 2:]]
        for k in ("dolt", "nodes", "edges"):
            if k in files:
                orig = str(files[k])
                pcmd = [c.replace(orig, str(plain_copy(Path(orig), plain))) for c in pcmd]
        out.append(("quiver-plain", qp, pcmd))
    if args.workload == "social":
        # The default path beside it: what a new user runs, string ids (no --id-type).
        qd = work / "quiver-default.qdb"
        i = qcmd.index("--id-type")
        dcmd = [str(qd) if c == str(q) else c for c in qcmd[:i] + qcmd[i + 2:]]
        out.append(("quiver-default", qd, dcmd))
    if "duckdb" in args.peers:
        out.append(("duckdb", duck, [sys.executable, "-c", duck_script(duck, duck_stmts, args.threads)]))
    if "kuzu" in args.peers.split(","):
        out.append(("kuzu", kz, [sys.executable, "-c", kuzu_script(kz, kuzu_stmts, args.threads)]))
    if "ladybug" in args.peers.split(","):
        out.append(("ladybug", lb, [sys.executable, "-c", kuzu_script(lb, kuzu_stmts, args.threads, "ladybug")]))
    return out


DOLT_PG = "CREATE TABLE dolt(pk int PRIMARY KEY, c1 bigint, c2 char(1), c3 timestamp, c4 double precision, c5 smallint, c6 real, c7 varchar(255), c8 text, c9 text)"
DOLT_MARIA = "CREATE TABLE dolt(pk INT PRIMARY KEY, c1 BIGINT, c2 CHAR(1), c3 DATETIME, c4 DOUBLE, c5 TINYINT, c6 FLOAT, c7 VARCHAR(255), c8 VARBINARY(255), c9 TEXT) ENGINE=InnoDB"
USERS_SQL = "id INT PRIMARY KEY, age INT, gender INT, region VARCHAR(64), completion_percentage INT, public INT, last_login {ts}, registration {ts}"


def maria_load(table, path, cols):
    """LOAD DATA with empty fields as NULL (MariaDB reads them as '' or 0 otherwise)."""
    vars_ = ",".join(f"@{c}" for c in cols)
    sets = ",".join(f"{c}=NULLIF(@{c},'')" for c in cols)
    return (f"LOAD DATA INFILE '{path}' INTO TABLE {table} FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' "
            f"ESCAPED BY '' LINES TERMINATED BY '\\n' IGNORE 1 LINES ({vars_}) SET {sets}")


def server_statements(args, files, peer):
    if args.workload == "dolt":
        f = files["dolt"]
        cols = ["pk"] + [f"c{i}" for i in range(1, 10)]
        if peer == "postgres":
            return [DOLT_PG, f"COPY dolt FROM '{f}' WITH (FORMAT csv, HEADER true)"]
        return [DOLT_MARIA, maria_load("dolt", f, cols)]
    if args.workload == "social":
        n, e = files["nodes"], files["edges"]
        ucols = ["id", "age", "gender", "region", "completion_percentage", "public", "last_login", "registration"]
        if peer == "postgres":
            return [f"CREATE TABLE users({USERS_SQL.format(ts='timestamp')})", "CREATE TABLE follows(src int, dst int)",
                    f"COPY users FROM '{n}' WITH (FORMAT csv, HEADER true)", f"COPY follows FROM '{e}' WITH (FORMAT csv, HEADER true)"]
        return [f"CREATE TABLE users({USERS_SQL.format(ts='DATETIME')}) ENGINE=InnoDB", "CREATE TABLE follows(src INT, dst INT) ENGINE=InnoDB",
                maria_load("users", n, ucols), maria_load("follows", e, ["src", "dst"])]
    return None


def short(n):
    """The file-name form of a row count that `quiver generate` uses (1m, 100k, 12345)."""
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}m"
    if n >= 1_000 and n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


def plain_copy(path, out_dir):
    """A copy of a CSV file whose header has no annotations (a newcomer's file): `id:ID(User)`
    becomes `id`, `age:int` `age`, `:START_ID(User)` `src`, `:END_ID(User)` `dst`."""
    out = out_dir / path.name
    if out.exists():
        return out
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(path, "rb") as src, open(out, "wb") as dst:
        header = src.readline().rstrip(b"\r\n").split(b",")
        names = []
        for h in header:
            name = h.split(b":")[0]
            if not name:
                name = b"src" if b"START_ID" in h else b"dst" if b"END_ID" in h else b"c%d" % len(names)
            names.append(name)
        dst.write(b",".join(names) + b"\n")
        shutil.copyfileobj(src, dst, 1 << 20)
    return out


def generate(args, data):
    files = {}
    if args.workload == "dolt":
        name = short(args.rows)
        f = data / f"dolt-{name}-{args.order}.csv"
        if not f.exists():
            subprocess.run([str(QUIVER), "generate", "dolt", "--rows", str(args.rows), "--order", args.order, "--out", str(data)], check=True)
        files["dolt"] = f
        files["rows"] = args.rows
    elif args.workload == "ids":
        d = data / f"ids-{args.rows}"
        if not (d / "edges.csv").exists():
            cmd = [str(QUIVER), "generate", "ids", "--rows", str(args.rows), "--out", str(d)]
            if args.rels:
                cmd += ["--rels", str(args.rels)]
            subprocess.run(cmd, check=True)
        files["nodes"], files["edges"] = d / "nodes.csv", d / "edges.csv"
        files["rows"] = args.rows + (args.rels or args.rows * 5)
    elif args.workload == "social":
        d = data / f"social-{args.scale}"
        if not (d / "edges.csv").exists():
            subprocess.run([str(QUIVER), "generate", "social", "--scale", str(args.scale), "--out", str(d)], check=True)
        files["nodes"], files["edges"] = d / "nodes.csv", d / "edges.csv"
        files["rows"] = sum(1 for _ in open(files["nodes"], "rb")) - 1 + sum(1 for _ in open(files["edges"], "rb")) - 1
    else:
        d = data / "wide"
        f = d / f"wide-{short(args.rows)}.csv"
        if not f.exists():
            subprocess.run([str(QUIVER), "generate", "wide", "--rows", str(args.rows), "--cols", str(args.cols), "--out", str(d)], check=True)
        # Quiver's header-only first file gives a row id column plus c0..c99.
        h = d / "wide-import-header.csv"
        h.write_text(",".join(f"c{i}" for i in range(args.cols)) + "\n")
        files["wide"], files["header"], files["rows"] = f, h, args.rows
    files["bytes"] = sum(Path(files[k]).stat().st_size for k in ("dolt", "nodes", "edges", "wide") if k in files)
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", choices=["dolt", "social", "wide", "ids"], required=True)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--order", choices=["sorted", "random"], default="sorted")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--cols", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--budget", default=None, help="Quiver --memory-budget (default: Quiver's default)")
    ap.add_argument("--rels", type=int, default=None, help="ids: relationships (default 5 per node)")
    ap.add_argument("--peers", default="duckdb,kuzu", help="comma-separated: duckdb, kuzu, ladybug, postgres, mariadb")
    ap.add_argument("--data", default=str(ROOT / "data" / "bench"))
    ap.add_argument("--plain", action="store_true", help="also import copies of the files whose headers have no annotations (quiver-plain)")
    ap.add_argument("--chart", default=None, help="PNG of rows/s and peak RSS per system (default: bench/out/import-<workload>.png)")
    args = ap.parse_args()
    if not QUIVER.exists():
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "quiver-cli"], cwd=ROOT, check=True)
    data = Path(args.data).resolve()
    data.mkdir(parents=True, exist_ok=True)
    files = generate(args, data)
    work = data / "work"
    work.mkdir(exist_ok=True)
    rows = files["rows"]
    label = {"dolt": f"dolt {args.rows} {args.order}", "social": f"social scale {args.scale}", "wide": f"wide {args.rows}x{args.cols}",
             "ids": f"ids {args.rows}"}[args.workload]
    print(f"# {label}: {rows} rows, {files['bytes'] / 2**20:.1f} MiB of CSV, {args.threads} threads, {args.runs} runs (median)")
    servers = []
    for peer in ("postgres", "mariadb"):
        if peer in args.peers and server_statements(args, files, peer) is not None:
            import servers as srv
            try:
                server = (srv.Postgres if peer == "postgres" else srv.MariaDB)(work)
                server.start()
                servers.append(server)
            except (FileNotFoundError, RuntimeError, subprocess.CalledProcessError) as e:
                print(f"# skipping {peer}: {e}")
    results = {}
    try:
        for run in range(args.runs):
            # Interleave systems within each round so that machine noise hits all alike.
            for name, path, cmd in systems(args, files, work):
                fresh(path)
                secs, rss, out = timed(cmd)
                results.setdefault(name, []).append((secs, rss, du(path)))
            for server in servers:
                secs, rss, size = server.run(server_statements(args, files, server.name))
                results.setdefault(server.name, []).append((secs, rss, size))
    finally:
        for server in servers:
            server.stop()
    print(f"{'system':<14} {'wall s':>8} {'rows/s':>12} {'peak RSS MiB':>13} {'disk MiB':>9} {'time ratio':>11} {'RSS ratio':>10}")
    med = {n: (statistics.median(r[0] for r in rs), max(r[1] for r in rs), rs[-1][2]) for n, rs in results.items()}
    qs, qr, _ = med["quiver"]
    for name, (secs, rss, disk) in med.items():
        print(f"{name:<14} {secs:>8.2f} {rows / secs:>12.0f} {rss / 2**20:>13.1f} {disk / 2**20:>9.1f} {secs / qs:>10.2f}x {rss / qr:>9.2f}x")
    for name, (secs, rss, disk) in med.items():
        print("RESULT " + json.dumps({"workload": label, "system": name, "rows": rows, "seconds": round(secs, 3),
                                      "rows_per_s": round(rows / secs), "peak_rss_bytes": rss, "disk_bytes": disk,
                                      "budget": args.budget, "runs": [round(r[0], 3) for r in results[name]]}))
    import charts
    names = list(med)
    charts.import_chart(args.chart or ROOT / "bench" / "out" / f"import-{args.workload}.png",
                        f"import, {label}: {rows:,} rows, {files['bytes'] / 2**20:.0f} MiB of CSV, {args.threads} threads"
                        + (f", Quiver budget {args.budget}" if args.budget else ""),
                        names, [rows / med[n][0] for n in names], [med[n][1] / 2**20 for n in names])


if __name__ == "__main__":
    main()
