#!/usr/bin/env python3
"""LOAD CSV benchmark: loading into a live database, side by side with `quiver import` and Kùzu.

For the dolt table (1M rows, 10 typed columns) and the wide table (100k rows x 100 string
columns), each system loads the same file `--runs` times in a fresh child process; the
table gives the median wall time, rows/s, peak resident memory (the child's ru_maxrss)
and the ratio to `quiver import` and to the file size.

    pip install kuzu
    python3 bench/load_bench.py --workload dolt --runs 3
    python3 bench/load_bench.py --workload wide --runs 3
    python3 bench/load_bench.py --workload rels --runs 3
    python3 bench/load_bench.py --workload dolt --batch 1000 --only transactional --baseline /tmp/quiver-old
    python3 bench/load_bench.py --workload dolt --only transactional --index c2 --baseline /tmp/quiver-old

The `rels` workload loads 1M relationships (the first million FOLLOWS edges of the
social graph at scale 1) into a database that holds the 1.6M users already, by id
lookups: `LOAD CSV ... MATCH (a:User {id: ..}), (b:User {id: ..}) CREATE (a)-[:FOLLOWS]->(b)`
as one statement (`direct`: seed 004's direct path writes a relationship segment) and in
`CALL { } IN TRANSACTIONS OF 100000 ROWS` (`transactional`: through the delta and the
log), beside `quiver import --append` and Kùzu's `COPY FOLLOWS` into its existing table.
Each run starts from a fresh copy of the database with the users.

Quiver forms:
- `import`: `quiver import` into a new database (the bulk path, for reference);
- `analytical`: `STORAGE MODE IN_MEMORY_ANALYTICAL; LOAD CSV ... CREATE ...; CHECKPOINT;`
  in one shell (durable at the checkpoint, as in Memgraph's analytical mode);
- `transactional`: `LOAD CSV ... CALL { ... } IN TRANSACTIONS OF 100000 ROWS` (each batch
  durable in the write-ahead log as it commits).

Peer: Kùzu `COPY` into an existing, empty node table of the same types (its bulk path; it
has no LOAD CSV that creates nodes row by row). Neo4j and Memgraph do not run here.
Every run prints one row plus a machine-readable JSON line (prefix `RESULT `).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_bench import DOLT_KUZU, QUIVER, ROOT, USERS_KUZU, du, fresh, fresh_copy, kuzu_script, timed  # noqa: E402

DOLT_COLS = ["pk", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"]
# The generator writes timestamps as `2033-06-10 06:45:12`; Cypher's localdatetime() takes
# ISO 8601's `T` (as Neo4j's does).
DOLT_PROPS = ("pk: toInteger(row.pk), c1: toInteger(row.c1), c2: row.c2, "
              "c3: localdatetime(replace(row.c3, ' ', 'T')), "
              "c4: toFloat(row.c4), c5: toInteger(row.c5), c6: toFloat(row.c6), c7: row.c7, c8: row.c8, c9: row.c9")


def prepare_rels(data, imp):
    """The social graph's users, a million of its edges (typed header for --append, plain
    header for LOAD CSV and Kùzu), and the two databases holding the users."""
    social = data / "social-1"
    if not (social / "edges.csv").exists():
        subprocess.run([str(QUIVER), "generate", "social", "--scale", "1", "--out", str(social)], check=True)
    typed, plain = social / "edges-1m.csv", imp / "follows-1m.csv"
    if not plain.exists():
        with open(social / "edges.csv") as f, open(typed, "w") as t, open(plain, "w") as p:
            t.write(f.readline())
            p.write("src,dst\n")
            for _ in range(1_000_000):
                line = f.readline()
                t.write(line)
                p.write(line)
    work = data / "work"
    work.mkdir(exist_ok=True)
    qbase, kbase = work / "rels-base.qdb", work / "rels-base.kz"
    if not (qbase / "CURRENT").exists():
        subprocess.run([str(QUIVER), "import", "--db", str(qbase), "--id-type", "integer", "--overwrite",
                        "--quiet", "--nodes", f"User={social / 'nodes.csv'}"], check=True)
    # The default path: string ids (no import flags), and writes not checkpointed yet.
    dbase = work / "rels-base-default.qdb"
    if not (dbase / "CURRENT").exists():
        subprocess.run([str(QUIVER), "import", "--db", str(dbase), "--overwrite", "--quiet",
                        "--nodes", f"User={social / 'nodes.csv'}"], check=True)
        subprocess.run([str(QUIVER), "query", "--db", str(dbase),
                        "UNWIND range(1, 2000) AS i CREATE (:User {id: 'new' + toString(i)})"], check=True,
                       stdout=subprocess.DEVNULL)
    if not kbase.exists():
        stmts = [USERS_KUZU, "CREATE REL TABLE FOLLOWS(FROM User TO User)",
                 f"COPY User FROM '{social / 'nodes.csv'}' (header=true)"]
        subprocess.run([sys.executable, "-c", kuzu_script(kbase, stmts, os.cpu_count() or 2)], check=True)
    return {"typed": typed, "plain": plain, "rows": 1_000_000, "qbase": qbase, "kbase": kbase, "dbase": dbase}


def rel_systems(args, files, work):
    q, kz = work / "rels.qdb", work / "rels.kz"
    imp = files["plain"].parent
    load = f"LOAD CSV WITH HEADERS FROM 'file:///{files['plain'].name}' AS row"
    match = "MATCH (a:User {id: toInteger(row.src)}), (b:User {id: toInteger(row.dst)}) CREATE (a)-[:FOLLOWS]->(b)"
    query = [str(QUIVER), "query", "--db", str(q), "--import-dir", str(imp)]
    out = [
        ("import-append", q, [str(QUIVER), "import", "--db", str(q), "--append", "--quiet",
                              "--relationships", f"FOLLOWS={files['typed']}"], None, files["qbase"]),
        ("direct", q, query + [f"{load} {match}"], None, files["qbase"]),
        ("transactional", q, query + [f"{load} CALL {{ WITH row {match} }} IN TRANSACTIONS OF {args.batch} ROWS"],
         None, files["qbase"]),
    ]
    if args.default_path:
        dmatch = "MATCH (a:User {id: row.src}), (b:User {id: row.dst}) CREATE (a)-[:FOLLOWS]->(b)"
        out += [
            ("direct-default", q, query + [f"{load} {dmatch}"], None, files["dbase"]),
            ("transactional-default", q,
             query + [f"{load} CALL {{ WITH row {dmatch} }} IN TRANSACTIONS OF {args.batch} ROWS"],
             None, files["dbase"]),
        ]
    if "kuzu" in args.peers:
        stmts = [f"COPY FOLLOWS FROM '{files['plain']}' (header=true)"]
        out.append(("kuzu", kz, [sys.executable, "-c", kuzu_script(kz, stmts, args.threads)], None, files["kbase"]))
    return out


def prepare(args, data):
    """The input files: the generated CSV, and a copy with a plain header in import/."""
    imp = data / "import"
    imp.mkdir(parents=True, exist_ok=True)
    if args.workload == "rels":
        return prepare_rels(data, imp)
    if args.workload == "dolt":
        src = data / "dolt-1m-random.csv"
        if not src.exists():
            subprocess.run([str(QUIVER), "generate", "dolt", "--rows", "1000000", "--order", "random",
                            "--out", str(data)], check=True)
        plain = imp / "dolt-1m.csv"
        if not plain.exists():
            with open(src, "rb") as f, open(plain, "wb") as out:
                f.readline()
                out.write((",".join(DOLT_COLS) + "\n").encode())
                while chunk := f.read(1 << 24):
                    out.write(chunk)
        return {"typed": src, "plain": plain, "rows": 1_000_000}
    d = data / "wide"
    src = d / "wide-100k.csv"
    if not src.exists():
        subprocess.run([str(QUIVER), "generate", "wide", "--rows", "100000", "--cols", "100",
                        "--out", str(d)], check=True)
    h = d / "wide-import-header.csv"
    h.write_text(",".join(f"c{i}" for i in range(100)) + "\n")
    plain = imp / "wide-100k.csv"
    if not plain.exists():
        os.link(src, plain)
    return {"typed": src, "header": h, "plain": plain, "rows": 100_000}


def statements(args, files):
    name = files["plain"].name
    if args.workload == "dolt":
        load = f"LOAD CSV FROM '{name}' WITH HEADER NULLIF '' AS row"
        create = f"CREATE (:Dolt {{{DOLT_PROPS}}})"
    else:
        load = f"LOAD CSV FROM '{name}' NO HEADER AS row"
        a = ", ".join(f"p{i}: row[{i}]" for i in range(50))
        b = ", ".join(f"p{i}: row[{i}]" for i in range(50, 100))
        create = f"CREATE (:A {{{a}}}), (:B {{{b}}})"
    analytical = f"STORAGE MODE IN_MEMORY_ANALYTICAL;\n{load} {create};\nCHECKPOINT;\n"
    transactional = f"{load} CALL {{ WITH row {create} }} IN TRANSACTIONS OF {args.batch} ROWS;\n"
    if args.index:
        # A declared index on the loaded label: every direct batch's checkpoint brings it
        # up to date.
        label = "Dolt" if args.workload == "dolt" else "A"
        transactional = f"CREATE INDEX FOR (n:{label}) ON (n.{args.index});\n" + transactional
    return analytical, transactional


def systems(args, files, work):
    q = work / "load.qdb"
    imp = files["plain"].parent
    analytical, transactional = statements(args, files)
    # A fresh, empty database each run (`--create`: the shell refuses a missing one).
    shell = [str(QUIVER), "shell", "--db", str(q), "--create", "--import-dir", str(imp)]
    out = []
    icmd = [str(QUIVER), "import", "--db", str(q), "--threads", str(args.threads), "--quiet"]
    if args.workload == "dolt":
        icmd += ["--id-type", "integer", "--nodes", f"Dolt={files['typed']}"]
    else:
        icmd += ["--nodes", f"A={files['header']},{files['typed']}"]
    out.append(("import", q, icmd, None))
    out.append(("analytical", q, shell, analytical))
    out.append(("transactional", q, shell, transactional))
    if "kuzu" in args.peers:
        kz = work / "load.kz"
        if args.workload == "dolt":
            stmts = [DOLT_KUZU, f"COPY Dolt FROM '{files['typed']}' (header=true)"]
        else:
            kcols = ", ".join(f"c{i} STRING" for i in range(100))
            stmts = [f"CREATE NODE TABLE Wide(id SERIAL, {kcols}, PRIMARY KEY(id))",
                     f"COPY Wide FROM '{files['typed']}' (header=false)"]
        out.append(("kuzu", kz, [sys.executable, "-c", kuzu_script(kz, stmts, args.threads)], None))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", choices=["dolt", "wide", "rels"], required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--peers", default="kuzu")
    ap.add_argument("--only", default=None, help="comma-separated subset of systems")
    ap.add_argument("--data", default=str(ROOT / "data" / "bench"))
    ap.add_argument("--default-path", action="store_true",
                    help="rels: also load into a database imported with no flags (string ids) that has seen writes")
    ap.add_argument("--index", default=None,
                    help="declare an index on this property of the loaded label before the transactional load")
    ap.add_argument("--baseline", default=None,
                    help="an older quiver binary: its forms run beside ours in every run, as <form>@base")
    args = ap.parse_args()
    if not QUIVER.exists():
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "quiver-cli"], cwd=ROOT, check=True)
    data = Path(args.data).resolve()
    files = prepare(args, data)
    work = data / "work"
    work.mkdir(exist_ok=True)
    rows = files["rows"]
    size = files["plain"].stat().st_size
    print(f"# {args.workload}: {rows} rows, {size / 2**20:.1f} MiB of CSV, {args.runs} runs (median)")
    results = {}
    for _ in range(args.runs):
        runs = rel_systems(args, files, work) if args.workload == "rels" else \
            [s + (None,) for s in systems(args, files, work)]
        if args.baseline:
            runs = [r for s in runs for r in ([s] if s[2][0] != str(QUIVER) else
                    [s, (s[0] + "@base", s[1], [args.baseline] + s[2][1:], s[3], s[4])])]
        for name, path, cmd, stdin, base in runs:
            if args.only and name.split("@")[0] not in args.only.split(","):
                continue
            if base is not None:
                fresh_copy(base, path)
            else:
                fresh(path)
            if stdin is not None:
                # The shell reads its statements from standard input.
                secs, rss, out = timed_stdin(cmd, stdin)
            else:
                secs, rss, out = timed(cmd)
            results.setdefault(name, []).append((secs, rss, du(path)))
    print(f"{'system':<19} {'wall s':>8} {'rows/s':>12} {'peak RSS MiB':>13} {'RSS/file':>9} {'vs import':>10}")
    med = {n: (statistics.median(r[0] for r in rs), max(r[1] for r in rs), rs[-1][2]) for n, rs in results.items()}
    base = med.get("import", med.get("import-append", next(iter(med.values()))))[0]
    for name, (secs, rss, disk) in med.items():
        print(f"{name:<19} {secs:>8.2f} {rows / secs:>12.0f} {rss / 2**20:>13.1f} {rss / size:>8.2f}x {base / secs:>9.2f}x")
    for name, (secs, rss, disk) in med.items():
        print("RESULT " + json.dumps({"workload": args.workload, "system": name, "rows": rows, "seconds": round(secs, 3),
                                      "rows_per_s": round(rows / secs), "peak_rss_bytes": rss, "file_bytes": size,
                                      "disk_bytes": disk, "runs": [round(r[0], 3) for r in results[name]]}))


def timed_stdin(cmd, text):
    """Like import_bench.timed, with `text` on standard input; fails on an error line."""
    import tempfile
    import time
    with tempfile.TemporaryFile() as i, tempfile.TemporaryFile() as o:
        i.write(text.encode())
        i.seek(0)
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdin=i, stdout=o, stderr=subprocess.STDOUT)
        _, status, ru = os.wait4(p.pid, 0)
        secs = time.perf_counter() - t
        o.seek(0)
        out = o.read().decode(errors="replace")
    if status != 0 or "error" in out.lower():
        sys.exit(f"failed: {' '.join(cmd)}\n{out[-3000:]}")
    return secs, ru.ru_maxrss * 1024, out


if __name__ == "__main__":
    main()
