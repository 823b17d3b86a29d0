#!/usr/bin/env python3
"""mgbench's Pokec workload, whole: its 26 reads and 9 writes in Neo4j's dialect, through
the official neo4j Python driver, against `quiver serve` and (given its Bolt URI) Neo4j,
side by side, answers compared.

    cargo build --release
    pip install neo4j matplotlib
    python3 bench/mgbench.py --scale 1 --runs 30
    python3 bench/mgbench.py --scale 1 --runs 30 --neo4j bolt://127.0.0.1:7687

The graph is `quiver generate social` at the given scale (1: 1,632,803 users, 30.6M
follows, as mgbench's "large" Pokec), imported with `--id-type integer`; Quiver serves a
copy (the writes change it). For Neo4j, import the same files with neo4j-admin
(`--nodes=User=nodes.csv --relationships=FOLLOWS=edges.csv --id-type=integer`; its
importer wants `T` between date and time, which `--neo4j-files DIR` writes) and start
it; this script creates the `:User(id)` index and waits for it.

One client, one driver session per system. Each query runs `--warmup` times, then
`--runs` times (fewer when a system passes `--max-seconds` on it), the systems
interleaved run by run with the same parameters (random ids from a seeded generator,
as mgbench draws them). Latency is the driver's round trip with every record
consumed; `cpu` is the server's CPU time per query (every thread of its process, from
/proc; `--neo4j-pid` for Neo4j's), which tells the server's work apart from the
driver's where a large result makes the Python driver the bound. The first `--check` parameter sets of each read are answered by both and
compared: rows as multisets of plain values (nodes by their properties, relationships
by type), shortest paths by length (any shortest path is right), `LIMIT 1` by row count.

`--throughput 1,2,4,8` measures instead mgbench's isolated workload with several
clients: queries/s of that many client processes (each its own driver) running one of
a few queries (`THROUGHPUT`, or those `--only` names) for `--seconds`, each system on
its own, then mgbench's mixed workload (a read with 30% writes), with each server's CPU
per query (from /proc; `--neo4j-pid` for Neo4j's). With `--client rust`
the clients are threads of a light Bolt client in Rust (`load_client`, built on first
use), as mgbench's own client is C++: the Python driver's CPU, on the same cores as
the server, bounded the figures.

After the writes (each query `--runs` times), the reads that scan (`aggregate`,
`aggregate_count`, `min_max_avg`, `vertex_on_property`) and `single_vertex_read` run
again, then once more after a `CHECKPOINT` on Quiver: the issue's "still fast after
writes". Prints a table (median and p99 per system, Neo4j / Quiver), RESULT lines
(JSON) and, with matplotlib, a chart (`--chart`).
"""

import argparse
import json
import os
import random
import shutil
import subprocess
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bolt_bench import gather, serve  # noqa: E402
from import_bench import ROOT  # noqa: E402
from query_bench import prepare  # noqa: E402

ID = "id"
FROM_TO = "from_to"
NONE = "none"

# (name, query, parameters, how answers compare: rows | length | count | none)
READS = [
    ("single_vertex_read", "MATCH (n:User {id : $id}) RETURN n", ID, "rows"),
    ("vertex_on_label_property", "MATCH (n:User) WITH n WHERE n.id = $id RETURN n", ID, "rows"),
    ("vertex_on_property", "MATCH (n {id: $id}) RETURN n", ID, "rows"),
    ("pattern_short", "MATCH (n:User {id: $id})-[e]->(m) RETURN m LIMIT 1", ID, "count"),
    ("expansion_1", "MATCH (s:User {id: $id})-->(n:User) RETURN n.id", ID, "rows"),
    ("expansion_1_with_filter", "MATCH (s:User {id: $id})-->(n:User) WHERE n.age >= 18 RETURN n.id", ID, "rows"),
    ("expansion_2", "MATCH (s:User {id: $id})-->()-->(n:User) RETURN DISTINCT n.id", ID, "rows"),
    ("expansion_2_with_filter",
     "MATCH (s:User {id: $id})-->()-->(n:User) WHERE n.age >= 18 RETURN DISTINCT n.id", ID, "rows"),
    ("expansion_3", "MATCH (s:User {id: $id})-->()-->()-->(n:User) RETURN DISTINCT n.id", ID, "rows"),
    ("expansion_3_with_filter",
     "MATCH (s:User {id: $id})-->()-->()-->(n:User) WHERE n.age >= 18 RETURN DISTINCT n.id", ID, "rows"),
    ("expansion_4", "MATCH (s:User {id: $id})-->()-->()-->()-->(n:User) RETURN DISTINCT n.id", ID, "rows"),
    ("expansion_4_with_filter",
     "MATCH (s:User {id: $id})-->()-->()-->()-->(n:User) WHERE n.age >= 18 RETURN DISTINCT n.id", ID, "rows"),
    ("neighbours_2", "MATCH (s:User {id: $id})-[*1..2]->(n:User) RETURN DISTINCT n.id", ID, "rows"),
    ("neighbours_2_with_filter",
     "MATCH (s:User {id: $id})-[*1..2]->(n:User) WHERE n.age >= 18 RETURN DISTINCT n.id", ID, "rows"),
    ("neighbours_2_with_data", "MATCH (s:User {id: $id})-[*1..2]->(n:User) RETURN DISTINCT n.id, n", ID, "rows"),
    ("neighbours_2_with_data_and_filter",
     "MATCH (s:User {id: $id})-[*1..2]->(n:User) WHERE n.age >= 18 RETURN DISTINCT n.id, n", ID, "rows"),
    ("pattern_cycle", "MATCH (n:User {id: $id})-[e1]->(m)-[e2]->(n) RETURN e1, m, e2", ID, "rows"),
    ("pattern_long", "MATCH (n1:User {id: $id})-[e1]->(n2)-[e2]->(n3)-[e3]->(n4)<-[e4]-(n5) RETURN n5 LIMIT 1",
     ID, "count"),
    ("shortest_path", "MATCH (n:User {id: $from}), (m:User {id: $to}) WITH n, m "
     "MATCH p=shortestPath((n)-[*..15]->(m)) RETURN [n in nodes(p) | n.id] AS path", FROM_TO, "length"),
    ("shortest_path_with_filter", "MATCH (n:User {id: $from}), (m:User {id: $to}) WITH n, m "
     "MATCH p=shortestPath((n)-[*..15]->(m)) WHERE all(node in nodes(p) WHERE node.age >= 18) "
     "RETURN [n in nodes(p) | n.id] AS path", FROM_TO, "length"),
    ("allshortest_paths", "MATCH (n:User {id: $from}), (m:User {id: $to}) WITH n, m "
     "MATCH p = allShortestPaths((n)-[*..2]->(m)) RETURN [node in nodes(p) | node.id] AS path", FROM_TO, "rows"),
    ("aggregate", "MATCH (n:User) RETURN n.age, COUNT(*)", NONE, "rows"),
    ("aggregate_with_distinct", "MATCH (n:User) RETURN COUNT(DISTINCT n.age)", NONE, "rows"),
    ("aggregate_with_filter", "MATCH (n:User) WHERE n.age >= 18 RETURN n.age, COUNT(*)", NONE, "rows"),
    ("aggregate_count", "MATCH (n) RETURN count(n), count(n.age)", NONE, "rows"),
    ("min_max_avg", "MATCH (n) RETURN min(n.age), max(n.age), avg(n.age)", NONE, "rows"),
]

WRITES = [
    ("single_vertex_write", "CREATE (n:UserTemp {id : $id}) RETURN n", "big_id"),
    ("single_edge_write", "MATCH (n:User {id: $from}), (m:User {id: $to}) WITH n, m "
     "CREATE (n)-[e:Temp]->(m) RETURN e", FROM_TO),
    ("unwind_range_vertex_write", "UNWIND range(1, 100) as x CREATE (:L1:L2:L3:L4:L5:L6:L7 {p1: true, p2: 42, "
     "p3: 'Here is some text that is not extremely short', p4: 'Short text', p5: 234.434, p6: 11.11, p7: false})",
     NONE),
    ("create_edge", "MATCH (a:User {id: $from}), (b:User {id: $to}) CREATE (a)-[:TempEdge]->(b)", FROM_TO),
    ("create_pattern", "CREATE ()-[:TempEdge]->()", NONE),
    ("create_vertex", "CREATE ()", NONE),
    ("create_vertex_big", "CREATE (:L1:L2:L3:L4:L5:L6:L7 {p1: true, p2: 42, "
     "p3: 'Here is some text that is not extremely short', p4: 'Short text', p5: 234.434, p6: 11.11, p7: false})",
     NONE),
    ("update_vertex_on_property", "MATCH (n {id: $id}) SET n.property = -1", ID),
    ("single_vertex_property_update", "MATCH (n:User {id: $id}) SET n.property = -1", ID),
]

AFTER = ["single_vertex_read", "vertex_on_property", "aggregate", "aggregate_count", "min_max_avg"]

# mgbench's isolated workload with several clients: these, each on its own.
THROUGHPUT = ["single_vertex_read", "expansion_1", "expansion_2", "single_vertex_write", "single_edge_write"]


def _client(uri, mix, n_users, seed, seconds, out):
    """One client process: its own driver and session, running queries drawn from
    `mix` ([(query, parameter kind, weight)]) for `seconds`."""
    from neo4j import GraphDatabase
    rng = random.Random(seed)
    weights = [w for _, _, w in mix]
    done = 0
    with GraphDatabase.driver(uri, auth=None) as d, d.session() as s:
        for q, kind, _ in mix:
            list(s.run(q, params(kind, rng, n_users)))
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            q, kind, _ = rng.choices(mix, weights)[0]
            list(s.run(q, params(kind, rng, n_users)))
            done += 1
        out.put(done / (time.perf_counter() - t0))


def rust_client():
    """The light Bolt load client (crates/bolt/examples/load_client.rs), built if absent."""
    exe = ROOT / "target" / "release" / "examples" / "load_client"
    if not exe.exists():
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "quiver-bolt", "--example", "load_client"],
                       cwd=ROOT, check=True)
    return exe


def throughput_rust(uri, mix, n_users, clients, seconds, seed):
    """Queries per second of `clients` threads of the Rust client, each its own
    connection, running `mix` together (every record read and decoded)."""
    addr = uri.split("://", 1)[-1]
    specs = [f"{max(1, round(w * 100))}:{kind}:{q}" for q, kind, w in mix]
    out = subprocess.run([str(rust_client()), addr, str(clients), str(seconds), str(n_users), str(seed), *specs],
                         capture_output=True, text=True, check=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    if res["failures"]:
        print(f"  ({res['failures']} failed queries on {uri})", file=sys.stderr)
    return res["qps"]


def throughput(uri, mix, n_users, clients, seconds, seed, client="python"):
    """Queries per second of `clients` client processes running `mix` together."""
    if client == "rust":
        return throughput_rust(uri, mix, n_users, clients, seconds, seed)
    return sum(gather(_client, [(uri, mix, n_users, f"{seed}-{i}", seconds) for i in range(clients)]))


def params(kind, rng, n):
    if kind == ID:
        return {"id": rng.randint(1, n)}
    if kind == "big_id":
        return {"id": rng.randint(1, n * 10)}
    if kind == FROM_TO:
        a = rng.randint(1, n)
        b = a
        while b == a:
            b = rng.randint(1, n)
        return {"from": a, "to": b}
    return {}


def plain(v):
    """A driver value as something comparable and hashable."""
    from neo4j.graph import Node, Path as GPath, Relationship
    if isinstance(v, Node):
        return ("node", tuple(sorted((k, plain(x)) for k, x in v.items())))
    if isinstance(v, Relationship):
        return ("rel", v.type, tuple(sorted((k, plain(x)) for k, x in v.items())))
    if isinstance(v, GPath):
        return ("path", len(v))
    if isinstance(v, list):
        return tuple(plain(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, plain(x)) for k, x in v.items()))
    if isinstance(v, float):
        return round(v, 9)
    if hasattr(v, "iso_format"):
        return v.iso_format()
    return v


def answer(rows, how):
    if how == "length":
        return sorted(len(r[0]) if r[0] is not None else -1 for r in rows)
    if how == "count":
        return len(rows)
    return sorted((tuple(plain(x) for x in r) for r in rows), key=repr)


def cpu_ns(pid):
    """CPU time of every thread of process `pid` so far, in ns (schedstat: finer than
    the clock ticks of /proc/PID/stat); `None` when it cannot be read."""
    if pid is None:
        return None
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total


def proc_cpu_s(pid):
    """User and system CPU seconds of process `pid` so far, threads that ended included;
    `None` when it cannot be read."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


class System:
    def __init__(self, name, uri, pid=None):
        from neo4j import GraphDatabase
        self.name = name
        self.pid = pid
        self.driver = GraphDatabase.driver(uri, auth=None)
        self.session = self.driver.session()
        self.last_cpu_ms = None

    def run(self, q, p):
        """(ms, rows) of one auto-commit run, every record consumed; the server's CPU
        time for it (all its threads, so with one client mostly this query) in
        `last_cpu_ms`."""
        c0 = cpu_ns(self.pid)
        t = time.perf_counter()
        rows = [r.values() for r in self.session.run(q, p)]
        ms = (time.perf_counter() - t) * 1e3
        c1 = cpu_ns(self.pid)
        self.last_cpu_ms = (c1 - c0) / 1e6 if c0 is not None and c1 is not None else None
        return ms, rows

    def close(self):
        self.session.close()
        self.driver.close()


def stats(lat):
    lat = sorted(lat)
    if not lat:
        return None
    return {"median_ms": statistics.median(lat), "p99_ms": lat[min(len(lat) - 1, round((len(lat) - 1) * 0.99))],
            "runs": len(lat)}


def measure(systems, name, q, kind, how, args, n_users, phase, check):
    rng = random.Random(f"{args.seed}-{name}-{phase}")
    lat = {s.name: [] for s in systems}
    cpu = {s.name: [] for s in systems}
    spent = {s.name: 0.0 for s in systems}
    same = None
    for i in range(args.warmup + args.runs):
        p = params(kind, rng, n_users)
        answers = []
        for s in systems:
            if i >= args.warmup and spent[s.name] > args.max_seconds * 1e3 and len(lat[s.name]) >= 3:
                continue
            ms, rows = s.run(q, p)
            if i >= args.warmup:
                lat[s.name].append(ms)
                spent[s.name] += ms
                if s.last_cpu_ms is not None:
                    cpu[s.name].append(s.last_cpu_ms)
            if check and how != "none" and i < args.check:
                answers.append(answer(rows, how))
        if len(answers) == len(systems) > 1:
            ok = all(a == answers[0] for a in answers)
            same = ok if same is None else same and ok
            if not ok and args.verbose:
                print(f"  {name} {p}: answers differ: " + " / ".join(repr(a)[:200] for a in answers))
        if all(spent[s.name] > args.max_seconds * 1e3 and len(lat[s.name]) >= 3 for s in systems):
            break
    out = {s.name: stats(lat[s.name]) for s in systems}
    for s in systems:
        if out[s.name] and cpu[s.name]:
            out[s.name]["server_cpu_ms"] = statistics.median(cpu[s.name])
    return out, same


def line(name, phase, res, same, names):
    cells = []
    for n in names:
        r = res.get(n)
        cpu = r.get("server_cpu_ms") if r else None
        cells.append(f"{r['median_ms']:>9.2f} {r['p99_ms']:>9.2f} {cpu if cpu is not None else float('nan'):>9.2f}"
                     if r else f"{'':>9} {'':>9} {'':>9}")
    q = res.get(names[0])
    ratio = cratio = ""
    if len(names) > 1 and q and res.get(names[1]):
        o = res[names[1]]
        ratio = f"{o['median_ms'] / q['median_ms']:>8.2f}x"
        if q.get("server_cpu_ms") and o.get("server_cpu_ms"):
            cratio = f"{o['server_cpu_ms'] / q['server_cpu_ms']:>8.2f}x"
    ok = {True: "same", False: "DIFFER", None: ""}[same]
    print(f"{name:<34} {phase:<12} " + " ".join(cells) + f" {ratio:>9} {cratio:>9} {ok:>6}")
    print("RESULT " + json.dumps({"query": name, "phase": phase, "same": same,
                                  **{n: res.get(n) for n in names}}))
    sys.stdout.flush()


def neo4j_files(out, scale):
    """The social files with `T` between date and time (Neo4j's importer reads ISO only)."""
    import csv
    src = ROOT / "data" / "bench" / f"social-{scale}"
    out.mkdir(parents=True, exist_ok=True)
    with open(src / "nodes.csv", newline="") as f, open(out / "nodes.csv", "w", newline="") as o:
        r, w = csv.reader(f), csv.writer(o)
        h = next(r)
        w.writerow(h)
        ix = [i for i, c in enumerate(h) if c.endswith(":localdatetime")]
        for row in r:
            for i in ix:
                row[i] = row[i].replace(" ", "T")
            w.writerow(row)
    print(f"{out / 'nodes.csv'} written; relationships: {src / 'edges.csv'}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="1")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--check", type=int, default=5, help="parameter sets whose answers are compared")
    ap.add_argument("--max-seconds", type=float, default=8.0, help="per query and system")
    ap.add_argument("--seed", default="7")
    ap.add_argument("--write-seed", type=int, default=None,
                    help="seed of the throughput measurements that write (default: from the clock, printed). "
                         "A fresh one each run: a database that ran the same ids before (Neo4j's, warmed by "
                         "earlier runs) would find `SET n.property = -1` set already, and both systems "
                         "commit an unchanged value without a log write")
    ap.add_argument("--neo4j", default=None, help="Bolt URI of a Neo4j holding the same graph")
    ap.add_argument("--neo4j-pid", type=int, default=None,
                    help="the Neo4j server's process id (on this machine): its CPU time per query is reported")
    ap.add_argument("--neo4j-files", default=None, help="write Neo4j-ready import files into this folder and stop")
    ap.add_argument("--only", default=None, help="comma-separated query names")
    ap.add_argument("--no-writes", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--chart", default=None, help="PNG of median latency per read query (default: bench/out/mgbench.png)")
    ap.add_argument("--peers", default="none")
    ap.add_argument("--throughput", default=None,
                    help="client process counts (e.g. 1,2,4,8): queries/s of a few queries run by that many clients")
    ap.add_argument("--seconds", type=float, default=5.0, help="per throughput measurement")
    ap.add_argument("--client", choices=["python", "rust"], default="python",
                    help="throughput clients: processes of the Python driver, or threads of the light Rust "
                         "client (crates/bolt/examples/load_client.rs), which leaves the cores to the servers")
    args = ap.parse_args()
    if args.neo4j_files:
        neo4j_files(Path(args.neo4j_files), args.scale)
        return
    work = ROOT / "data" / "bench" / "work" / f"query-social-{args.scale}"
    work.mkdir(parents=True, exist_ok=True)
    base, _, n_users = prepare(args, work)
    db = work / "mgbench.qdb"
    if db.exists():
        shutil.rmtree(db)
    shutil.copytree(base, db)
    server, port = serve(db)
    systems = [System("quiver", f"bolt://127.0.0.1:{port}", server.pid)]
    if args.neo4j:
        neo = System("neo4j", args.neo4j, args.neo4j_pid)
        neo.run("CREATE INDEX user_id IF NOT EXISTS FOR (n:User) ON (n.id)", {})
        neo.run("CALL db.awaitIndexes(600)", {})
        systems.append(neo)
    names = [s.name for s in systems]
    only = set(args.only.split(",")) if args.only else None
    print(f"mgbench Pokec on social scale {args.scale} ({n_users:,} users); {args.runs} runs, one client; "
          f"median / p99 ms")
    print(f"{'query':<34} {'phase':<12} "
          + " ".join(f"{n + ' med':>9} {n + ' p99':>9} {n + ' cpu':>9}" for n in names)
          + f" {'ratio':>9} {'cpu ratio':>9} {'answer':>6}")
    medians = {}
    uris = {"quiver": f"bolt://127.0.0.1:{port}"}
    if args.neo4j:
        uris["neo4j"] = args.neo4j
    try:
        if args.throughput:
            counts = [int(c) for c in args.throughput.split(",")]
            every = {n: (q, k) for n, q, k, _ in READS} | {n: (q, k) for n, q, k in WRITES}
            pids = {s.name: s.pid for s in systems}
            print(f"{'throughput, queries/s':<34} {'clients':>7} " + " ".join(f"{n:>10}" for n in names)
                  + f" {'ratio':>9} " + " ".join(f"{n + ' cpu us':>13}" for n in names))
            # (--only picks any of the queries; the default is mgbench's few.)
            picked = [n for n in every if n in only] if only else THROUGHPUT
            write_seed = args.write_seed if args.write_seed is not None else int(time.time())
            print(f"(measurements that write use seeds from --write-seed {write_seed})")
            writing = {n for n, _, _ in WRITES}
            mixes = [(name, [(*every[name], 1.0)]) for name in picked]
            # mgbench's mixed workload: a read with 30% writes (node and edge creates).
            writes = [(*every["single_vertex_write"], 0.15), (*every["single_edge_write"], 0.15)]
            mixes += [(f"{r} + 30% writes", [(*every[r], 0.7)] + writes)
                      for r in ("single_vertex_read", "expansion_1")]
            for m, (name, mix) in enumerate(mixes):
                if only and name.split(" ")[0] not in only:
                    continue
                for c in counts:
                    qps, cpu = {}, {}
                    # Fresh ids for each measurement that writes, the same for both systems.
                    writes_now = name in writing or "writes" in name
                    seed = write_seed * 1000 + m * 16 + c if writes_now else args.seed
                    for n in names:
                        # The server's CPU per query (all its threads, ended ones too:
                        # /proc/PID/stat), which the clients on the same cores do not count in.
                        c0 = proc_cpu_s(pids[n])
                        qps[n] = throughput(uris[n], mix, n_users, c, args.seconds, seed, args.client)
                        c1 = proc_cpu_s(pids[n])
                        cpu[n] = (c1 - c0) * 1e6 / max(qps[n] * args.seconds, 1) if None not in (c0, c1) else None
                    ratio = f"{qps[names[0]] / qps[names[1]]:>8.2f}x" if len(names) > 1 else ""
                    print(f"{name:<34} {c:>7} " + " ".join(f"{qps[n]:>10.0f}" for n in names) + f" {ratio:>9} "
                          + " ".join(f"{cpu[n]:>13.1f}" if cpu[n] is not None else f"{'-':>13}" for n in names))
                    print("RESULT " + json.dumps({"query": name, "clients": c, "qps": qps, "cpu_us": cpu}))
                    sys.stdout.flush()
            return
        for name, q, kind, how in READS:
            if only and name not in only:
                continue
            res, same = measure(systems, name, q, kind, how, args, n_users, "fresh", True)
            medians[name] = {n: r["median_ms"] for n, r in res.items() if r}
            line(name, "fresh", res, same, names)
        if not args.no_writes:
            for name, q, kind in WRITES:
                if only and name not in only:
                    continue
                res, _ = measure(systems, name, q, kind, "none", args, n_users, "write", False)
                line(name, "write", res, None, names)
            for phase in ("after writes", "checkpoint"):
                if phase == "checkpoint":
                    systems[0].run("CHECKPOINT", {})
                for name, q, kind, how in READS:
                    if name in AFTER and (not only or name in only):
                        res, _ = measure(systems, name, q, kind, how, args, n_users, phase, False)
                        line(name, phase, res, None, names)
    finally:
        for s in systems:
            s.close()
        server.terminate()
        server.wait()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from charts import latency_chart
    chart = args.chart or str(ROOT / "bench" / "out" / "mgbench.png")
    Path(chart).parent.mkdir(parents=True, exist_ok=True)
    latency_chart(chart, f"mgbench Pokec reads, social scale {args.scale}, one client through the driver",
                  list(medians), names, medians)


if __name__ == "__main__":
    main()
