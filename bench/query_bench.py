#!/usr/bin/env python3
"""Seed 003's read workload on the social graph: Quiver against Kùzu and LadybugDB.

    cargo build --release
    pip install kuzu ladybug
    python3 bench/query_bench.py --scale 1 --runs 200

Peers (`--peers`, comma-separated): `kuzu` passes the ids as parameters, as an
application would; `kuzu-lit` and `ladybug-lit` write them into the query text as
literals, which is their best form (their planners use the primary-key index only for
literals; with a parameter they scan). `ladybug` is LadybugDB, Kùzu's maintained fork,
with parameters. Each runs in its own process on its own copy of the graph.

Both systems load the same generated graph (users and FOLLOWS edges). Each query runs
many times with random ids (the same ids for both systems), after a few warm-up runs;
each system's process runs its queries in-process and times each one, including turning
every result row into host values (Python objects for Kùzu, JSON values for Quiver).
Prints median latency, p99 and queries/s per system, the Kùzu/Quiver ratio of medians,
and each process's peak RSS. RESULT lines are JSON for docs/benchmarks.md.
"""

import argparse
import json
import random
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The social graph's Kùzu schema and the paths are the import benchmark's.
from import_bench import QUIVER, ROOT, USERS_KUZU  # noqa: E402

# name, Quiver (seed 003's text), Kùzu (the same query in Kùzu's dialect), params, runs
# factor (heavier queries run fewer times).
QUERIES = [
    ("aggregation", "MATCH (n:User) RETURN n.age, count(*)",
     "MATCH (n:User) RETURN n.age, count(*)", [], 0.1),
    ("1-hop", "MATCH (s:User {id: $id})-->(n:User) RETURN n.id",
     "MATCH (s:User {id: $id})-[:FOLLOWS]->(n:User) RETURN n.id", ["id"], 1),
    ("2-hop", "MATCH (s:User {id: $id})-->()-->(n:User) RETURN DISTINCT n.id",
     "MATCH (s:User {id: $id})-[:FOLLOWS]->()-[:FOLLOWS]->(n:User) RETURN DISTINCT n.id", ["id"], 1),
    ("3-hop", "MATCH (s:User {id: $id})-->()-->()-->(n:User) RETURN DISTINCT n.id",
     "MATCH (s:User {id: $id})-[:FOLLOWS]->()-[:FOLLOWS]->()-[:FOLLOWS]->(n:User) RETURN DISTINCT n.id", ["id"], 0.5),
    ("4-hop", "MATCH (s:User {id: $id})-->()-->()-->()-->(n:User) RETURN DISTINCT n.id",
     "MATCH (s:User {id: $id})-[:FOLLOWS]->()-[:FOLLOWS]->()-[:FOLLOWS]->()-[:FOLLOWS]->(n:User) RETURN DISTINCT n.id", ["id"], 0.1),
    ("var 1..2", "MATCH (s:User {id: $id})-[*1..2]->(n:User) RETURN DISTINCT n.id",
     "MATCH (s:User {id: $id})-[:FOLLOWS*1..2]->(n:User) RETURN DISTINCT n.id", ["id"], 1),
    ("var 1..2 with node", "MATCH (s:User {id: $id})-[*1..2]->(n:User) RETURN DISTINCT n.id, n",
     "MATCH (s:User {id: $id})-[:FOLLOWS*1..2]->(n:User) RETURN DISTINCT n.id, n", ["id"], 0.5),
    ("shortest path", "MATCH p=(n:User {id: $from})-[*bfs..15]->(m:User {id: $to}) RETURN extract(n in nodes(p) | n.id) AS path",
     "MATCH p = (n:User)-[:FOLLOWS* SHORTEST 1..15]->(m:User) WHERE n.id = $from AND m.id = $to RETURN properties(nodes(p), 'id') AS path",
     ["from", "to"], 0.5),
    ("find node", "MATCH (n:User {id: $id}) RETURN n",
     "MATCH (n:User {id: $id}) RETURN n", ["id"], 1),
]

KUZU_RUNNER = textwrap.dedent("""
    import importlib, json, re, resource, sys, time
    db_path, spec_path = sys.argv[1], sys.argv[2]
    spec = json.load(open(spec_path))
    kuzu = importlib.import_module(spec["module"])
    db = kuzu.Database(db_path, read_only=True)
    c = kuzu.Connection(db)
    def once(q, p):
        if spec["literal"]:
            # Ids written into the text (timed: building the text is the client's work).
            t = time.perf_counter()
            for k, v in p.items():
                q = re.sub(r"\\$" + k + r"\\b", str(v), q)
            p = {}
        else:
            t = time.perf_counter()
        r = c.execute(q, p)
        n = 0
        while r.has_next():
            r.get_next()
            n += 1
        return (time.perf_counter() - t) * 1e3, n
    for p in spec["params"][:spec["warmup"]]:
        once(spec["query"], p)
    out = []
    t_all = time.perf_counter()
    for p in spec["params"]:
        ms, n = once(spec["query"], p)
        out.append({"ms": ms, "rows": n})
    total = time.perf_counter() - t_all
    print(json.dumps({"runs": out, "total_s": total,
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
""")


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, cmd))}\n{p.stderr[-3000:]}")
    return p.stdout


def social(scale, db, flags=("--id-type", "integer")):
    """The generated social graph of `scale` (made if missing) imported at `db` (once,
    with `flags`): (nodes file, edges file, number of users)."""
    data = ROOT / "data" / "bench" / f"social-{scale}"
    if not (data / "edges.csv").exists():
        run([QUIVER, "generate", "social", "--scale", str(scale), "--out", data])
    nodes, edges = data / "nodes.csv", data / "edges.csv"
    if not (db / "CURRENT").exists():
        run([QUIVER, "import", "--db", db, *flags, "--overwrite", "--quiet",
             "--nodes", f"User={nodes}", "--relationships", f"FOLLOWS={edges}"])
    return nodes, edges, sum(1 for _ in open(nodes, "rb")) - 1


def prepare(args, work):
    q = work / "social.qdb"
    nodes, edges, n_users = social(args.scale, q)
    peer_dbs = {}
    for module in ("kuzu", "ladybug"):
        if not any(p.split("-")[0] == module for p in args.peers.split(",")):
            continue
        kz = work / ("social.kz" if module == "kuzu" else "social.lb")
        if not kz.exists():
            script = textwrap.dedent(f"""
                import {module} as kuzu
                d = kuzu.Database({str(kz)!r})
                c = kuzu.Connection(d)
                for s in [{USERS_KUZU!r}, "CREATE REL TABLE FOLLOWS(FROM User TO User)",
                          "COPY User FROM '{nodes}' (header=true)", "COPY FOLLOWS FROM '{edges}' (header=true)"]:
                    c.execute(s)
            """)
            run([sys.executable, "-c", script])
        peer_dbs[module] = kz
    return q, peer_dbs, n_users


def stats(lat, total_s):
    lat = sorted(lat)
    p99 = lat[min(len(lat) - 1, round((len(lat) - 1) * 0.99))]
    return {"median_ms": statistics.median(lat), "p99_ms": p99, "qps": len(lat) / total_s}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="1")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--only", help="comma-separated query names")
    ap.add_argument("--peers", default="kuzu,kuzu-lit,ladybug-lit",
                    help="comma-separated: kuzu, kuzu-lit, ladybug, ladybug-lit, or none")
    ap.add_argument("--chart", default=None, help="PNG of median latency per query and system (default: bench/out/query-social.png)")
    args = ap.parse_args()
    work = ROOT / "data" / "bench" / "work" / f"query-social-{args.scale}"
    work.mkdir(parents=True, exist_ok=True)
    peers = [p for p in args.peers.split(",") if p and p != "none"]
    q, peer_dbs, n_users = prepare(args, work)
    rng = random.Random(args.seed)
    print(f"social scale {args.scale}: {n_users} users; {args.runs} runs per query (fewer for heavy ones)")
    medians = {}
    print(f"{'query':<20} {'system':<12} {'median ms':>10} {'p99 ms':>10} {'q/s':>9} {'peak RSS':>9} {'ratio':>8}")
    for name, qq, kq, pnames, factor in QUERIES:
        if args.only and name not in args.only.split(","):
            continue
        runs = max(5, int(args.runs * factor))
        params = [{p: rng.randint(1, n_users) for p in pnames} for _ in range(runs)]
        pfile = work / "params.csv"
        with open(pfile, "w") as f:
            if pnames:
                f.write(",".join(pnames) + "\n")
                for p in params:
                    f.write(",".join(str(p[k]) for k in pnames) + "\n")
            else:
                f.write("_\n" + "\n".join("0" for _ in params) + "\n")
        out = run([QUIVER, "query", "--db", q, "--bench-params", pfile, "--warmup", str(args.warmup), qq])
        lines = [json.loads(l) for l in out.splitlines() if l.strip()]
        summ = lines[-1]
        qlat = [l["ms"] for l in lines[:-1]]
        qrows = [l["rows"] for l in lines[:-1]]
        res = {"quiver": dict(stats(qlat, sum(qlat) / 1e3), peak_rss_bytes=summ["peak_rss_bytes"], rows=sum(qrows))}
        for peer in peers:
            module = peer.split("-")[0]
            spec = work / "spec.json"
            spec.write_text(json.dumps({"query": kq, "params": params, "warmup": args.warmup,
                                        "module": module, "literal": peer.endswith("-lit")}))
            k = json.loads(run([sys.executable, "-c", KUZU_RUNNER, peer_dbs[module], spec]))
            klat = [r["ms"] for r in k["runs"]]
            res[peer] = dict(stats(klat, sum(klat) / 1e3), peak_rss_bytes=k["peak_rss_bytes"],
                             rows=sum(r["rows"] for r in k["runs"]))
        base = res["quiver"]["median_ms"]
        for sysname, r in res.items():
            ratio = "" if sysname == "quiver" else f"{r['median_ms'] / base:.2f}x"
            print(f"{name:<20} {sysname:<12} {r['median_ms']:>10.3f} {r['p99_ms']:>10.3f} {r['qps']:>9.1f} "
                  f"{r['peak_rss_bytes'] / 2**20:>8.0f}M {ratio:>8}")
        for peer in peers:
            if res[peer]["rows"] != res["quiver"]["rows"]:
                print(f"  note: total rows differ: quiver {res['quiver']['rows']}, {peer} {res[peer]['rows']}")
        print("RESULT " + json.dumps({"query": name, "runs": runs, **res}))
        sys.stdout.flush()
        medians[name] = {s: r["median_ms"] for s, r in res.items()}
    if medians:
        import charts
        charts.latency_chart(args.chart or ROOT / "bench" / "out" / "query-social.png",
                             f"seed 003's reads on social scale {args.scale}, in process",
                             list(medians), ["quiver"] + peers, medians)


if __name__ == "__main__":
    main()
