#!/usr/bin/env python3
"""Ids past the budget: a graph keyed by 40-character hash ids, imported under a budget
its id map needs several times over (the ids are sorted on disk), and with a budget
large enough to map them in memory; both databases must answer the same queries.

    cargo build --release
    python3 bench/ids_bench.py --nodes 20000000 --rels 100000000 --budget 256MiB

Prints, per import: wall time, rows/s, peak RSS (from wait4, so every byte the process
held) against the budget plus the 64 MiB fixed overhead, ids sorted on disk, size on
disk. Then runs `--queries` random one-hop lookups and two counts on both databases and
compares the answers row for row. `--peers kuzu` adds Kùzu's COPY of the same files (it
has no budget; its peak RSS is printed beside ours). RESULT lines are JSON.
"""

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_bench import QUIVER, ROOT, du, fresh, kuzu_script, timed  # noqa: E402

MIB = 2**20


def parse_bytes(s):
    units = {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
    for u, m in units.items():
        if s.endswith(u):
            return int(float(s[: -len(u)]) * m)
    return int(s)


def import_db(db, nodes, edges, budget, threads):
    fresh(db)
    cmd = [str(QUIVER), "import", "--db", str(db), "--id-type", "string", "--json", "--quiet",
           "--threads", str(threads), "--memory-budget", budget,
           "--nodes", f"Node={nodes}", "--relationships", f"LINKS={edges}"]
    secs, rss, out = timed(cmd)
    return secs, rss, json.loads(out)


def query(db, text, params=None):
    cmd = [str(QUIVER), "query", "--db", str(db), "--format", "csv"]
    for k, v in (params or {}).items():
        cmd += ["--param", f"{k}={v}"]
    p = subprocess.run(cmd + [text], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"query failed on {db}: {p.stderr}")
    return p.stdout


def node_id(i):
    # The generator's id of node i (quiver_datagen::hashids::id).
    def mix(x):
        m = 2**64 - 1
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
        return x ^ (x >> 31)
    return f"{mix(i):016x}{mix(~i & (2**64 - 1)):016x}{i & 0xffffffff:08x}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=20_000_000)
    ap.add_argument("--rels", type=int, default=100_000_000)
    ap.add_argument("--budget", default="256MiB")
    ap.add_argument("--large-budget", default="8GiB")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--peers", default="", help="kuzu (its COPY of the same files)")
    args = ap.parse_args()
    data = ROOT / "data" / "bench" / f"ids-{args.nodes}-{args.rels}"
    nodes, edges = data / "nodes.csv", data / "edges.csv"
    if not edges.exists():
        subprocess.run([str(QUIVER), "generate", "ids", "--rows", str(args.nodes), "--rels", str(args.rels),
                        "--out", str(data)], check=True)
    with open(nodes, "rb") as f:  # two lines, not the file: a child inherits our peak RSS
        f.readline()
        first = f.readline().decode().split(",")[0]
    if first != node_id(0):
        sys.exit("the generator's ids changed; update node_id()")
    work = ROOT / "data" / "bench" / "work"
    work.mkdir(parents=True, exist_ok=True)
    rows = args.nodes + args.rels
    size = nodes.stat().st_size + edges.stat().st_size
    print(f"# ids: {args.nodes} nodes, {args.rels} relationships, {size / 2**30:.1f} GiB of CSV, {args.threads} threads")
    print(f"{'import':<22} {'wall s':>8} {'rows/s':>10} {'peak RSS MiB':>13} {'limit MiB':>10} {'sorted ids':>11} {'disk MiB':>9}")
    dbs = {}
    for label, budget in (("small", args.budget), ("large", args.large_budget)):
        db = work / f"ids-{label}.qdb"
        secs, rss, s = import_db(db, nodes, edges, budget, args.threads)
        limit = parse_bytes(budget) + 64 * MIB
        dbs[label] = db
        print(f"quiver {budget:<15} {secs:>8.1f} {rows / secs:>10.0f} {rss / MIB:>13.0f} {limit / MIB:>10.0f} "
              f"{s.get('spilled_ids', 0):>11} {du(db) / MIB:>9.0f}")
        print("RESULT " + json.dumps({"system": "quiver", "budget": budget, "seconds": round(secs, 2),
                                      "rows_per_s": round(rows / secs), "peak_rss_bytes": rss,
                                      "within_limit": rss <= limit, "spilled_ids": s.get("spilled_ids", 0),
                                      "phases": s.get("phases")}))
    if "kuzu" in args.peers:
        kz = work / "ids.kz"
        fresh(kz)
        stmts = ["CREATE NODE TABLE Node(hash STRING, n INT64, PRIMARY KEY(hash))", "CREATE REL TABLE LINKS(FROM Node TO Node)",
                 f"COPY Node FROM '{nodes}' (header=true)", f"COPY LINKS FROM '{edges}' (header=true)"]
        secs, rss, _ = timed([sys.executable, "-c", kuzu_script(kz, stmts, args.threads)])
        print(f"{'kuzu COPY':<22} {secs:>8.1f} {rows / secs:>10.0f} {rss / MIB:>13.0f} {'-':>10} {'-':>11} {du(kz) / MIB:>9.0f}")
        print("RESULT " + json.dumps({"system": "kuzu", "seconds": round(secs, 2), "rows_per_s": round(rows / secs),
                                      "peak_rss_bytes": rss}))
    # Same answers.
    rng = random.Random(3)
    checks = [("count nodes", "MATCH (n:Node) RETURN count(*)", None),
              ("count rels", "MATCH ()-[r:LINKS]->() RETURN count(*)", None)]
    for _ in range(args.queries):
        i = rng.randrange(args.nodes)
        checks.append((f"1-hop {i}", "MATCH (a:Node {hash: $h})-[:LINKS]-(b) RETURN a.n, b.hash, b.n ORDER BY b.hash",
                       {"h": node_id(i)}))
    checks.append(("missing id", "MATCH (a:Node {hash: $h}) RETURN a.n", {"h": "f" * 39 + "z"}))
    same = 0
    for name, text, params in checks:
        a, b = query(dbs["small"], text, params), query(dbs["large"], text, params)
        if a != b:
            sys.exit(f"answers differ for {name}:\n{a[:500]}\n---\n{b[:500]}")
        same += 1
    print(f"# {same} queries, the same answers from both databases")
    print("RESULT " + json.dumps({"same_answers": same}))


if __name__ == "__main__":
    main()
