#!/usr/bin/env python3
"""Seed 003's write queries on the social graph: Quiver against Kùzu, side by side.

    cargo build --release
    pip install kuzu
    python3 bench/write_bench.py --scale 1 --writes 4000 --runs 3

The two CREATE queries of seed 003, each an auto-commit transaction:
- "create node":  CREATE (n:UserTemp {id: $id}) RETURN n
- "create rel":   MATCH (n:User {id: $from}), (m:User {id: $to}) WITH n, m
                  CREATE (n)-[e:Temp]->(m) RETURN e

Each system runs each query `--writes` times on a fresh copy of the same imported graph,
on 1 client thread and on as many as there are cores (`--threads 1,2,8` for more) sharing
one open database, each thread with its own session (Quiver) or connection (Kùzu). A
Quiver commit returns once its log record is on disk (fdatasync); concurrent commits
share one sync (group commit). Kùzu runs with its defaults (its WAL, auto-checkpoint); it
runs one write transaction at a time and refuses a second, so its clients retry until
theirs is taken, as Quiver's retry a conflict (none happen here).

Forms: Quiver takes parameters. Kùzu runs twice: with parameters (`param`) and with the
ids written into the text (`literal`), since its planner uses the primary-key index only
for literals. The table gives median latency, p99, queries/s over the wall time, the
process's peak RSS and Quiver's throughput as a multiple of each Kùzu form's; medians
over `--runs` runs. RESULT lines are JSON for docs/benchmarks.md.
"""

import argparse
import json
import os
import random
import statistics
import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_bench import QUIVER, ROOT, fresh, fresh_copy  # noqa: E402
from query_bench import prepare, run, stats  # noqa: E402

QUERIES = [
    ("create node", "CREATE (n:UserTemp {id: $id}) RETURN n",
     "CREATE (n:UserTemp {id: $id}) RETURN n", ["id"]),
    ("create rel", "MATCH (n:User {id: $from}), (m:User {id: $to}) WITH n, m CREATE (n)-[e:Temp]->(m) RETURN e",
     "MATCH (n:User {id: $from}), (m:User {id: $to}) WITH n, m CREATE (n)-[e:Temp]->(m) RETURN e",
     ["from", "to"]),
]

KUZU_RUNNER = textwrap.dedent("""
    import json, resource, sys, threading, time
    import kuzu
    db_path, spec_path = sys.argv[1], sys.argv[2]
    spec = json.load(open(spec_path))
    db = kuzu.Database(db_path)
    c = kuzu.Connection(db)
    c.execute("CREATE NODE TABLE IF NOT EXISTS UserTemp(id INT64, PRIMARY KEY(id))")
    c.execute("CREATE REL TABLE IF NOT EXISTS Temp(FROM User TO User)")
    literal = spec["form"] == "literal"
    def text(p):
        q = spec["query"]
        if literal:
            for k, v in p.items():
                q = q.replace("$" + k, str(v))
        return q
    def once(conn, p):
        t = time.perf_counter()
        r = conn.execute(text(p), {} if literal else p)
        n = 0
        while r.has_next():
            r.get_next()
            n += 1
        return (time.perf_counter() - t) * 1e3, n
    warm = spec["warmup"]
    for p in spec["params"][:warm]:
        once(c, p)
    params = spec["params"][warm:]
    threads = spec["threads"]
    lat = [[] for _ in range(threads)]
    errors = []
    retries = [0] * threads
    def client(me):
        conn = kuzu.Connection(db)
        for p in params[me::threads]:
            # Kùzu runs one write transaction at a time and refuses a second: retry it,
            # as Quiver's clients retry a conflict (its latency is the successful try's).
            while True:
                try:
                    ms, n = once(conn, p)
                    lat[me].append(ms)
                    break
                except Exception as e:
                    if "Only one write transaction" in str(e) and retries[me] < 10**6:
                        retries[me] += 1
                        time.sleep(0.00005)
                        continue
                    errors.append(str(e))
                    break
    t_all = time.perf_counter()
    ts = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    for t in ts: t.start()
    for t in ts: t.join()
    total = time.perf_counter() - t_all
    print(json.dumps({"lat": [x for l in lat for x in l], "total_s": total, "errors": errors[:3],
                      "n_errors": len(errors), "retries": sum(retries),
                      "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
""")


def write_params(path, pnames, rows):
    with open(path, "w") as f:
        f.write(",".join(pnames) + "\n")
        f.writelines(",".join(str(p[k]) for k in pnames) + "\n" for p in rows)


def quiver_once(src, work, query, params, pnames, threads, warmup):
    db = work / "w.qdb"
    fresh_copy(src, db)
    # The warm-up rows run first, in a process of their own (`--warmup` would repeat
    # rows of the measured file, and every id is to be created once).
    pfile, wfile = work / "wparams.csv", work / "wwarm.csv"
    write_params(pfile, pnames, params[warmup:])
    write_params(wfile, pnames, params[:warmup])
    if warmup:
        run([QUIVER, "query", "--db", db, "--bench-params", wfile, "--warmup", "0", query])
    out = run([QUIVER, "query", "--db", db, "--bench-params", pfile, "--warmup", "0",
               "--bench-threads", str(threads), query])
    lines = [json.loads(l) for l in out.splitlines() if l.strip()]
    s = lines[-1]
    lat = [l["ms"] for l in lines[:-1]]
    return {"median_ms": s["median_ms"], "p99_ms": s["p99_ms"], "qps": s["qps"],
            "peak_rss_bytes": s["peak_rss_bytes"], "retries": s["retries"], "n": len(lat)}


def kuzu_once(src, work, query, params, form, threads, warmup):
    db = work / "w.kz"
    fresh_copy(src, db)
    spec = work / "wspec.json"
    spec.write_text(json.dumps({"query": query, "params": params, "form": form,
                                "threads": threads, "warmup": warmup}))
    k = json.loads(run([sys.executable, "-c", KUZU_RUNNER, db, spec]))
    if k["n_errors"]:
        print(f"  note: kuzu {form}: {k['n_errors']} errors, e.g. {k['errors'][0]}")
    lat = k["lat"]
    return {**stats(lat, k["total_s"]), "peak_rss_bytes": k["peak_rss_bytes"],
            "retries": k["retries"], "n": len(lat), "errors": k["n_errors"]}


def median_of(rs):
    out = {}
    for key in rs[0]:
        out[key] = statistics.median(r[key] for r in rs)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="1")
    ap.add_argument("--writes", type=int, default=4000)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", default=f"1,{os.cpu_count()}",
                    help="comma-separated client thread counts (default: 1 and the core count)")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--only", help="comma-separated query names")
    ap.add_argument("--peers", default="kuzu")
    args = ap.parse_args()
    work = ROOT / "data" / "bench" / "work" / f"query-social-{args.scale}"
    work.mkdir(parents=True, exist_ok=True)
    q, kz, n_users = prepare(args, work)
    rng = random.Random(args.seed)
    print(f"social scale {args.scale}: {n_users} users; {args.writes} writes per run, "
          f"median of {args.runs} runs on fresh copies")
    print(f"{'query':<12} {'thr':>3} {'system':<13} {'median ms':>10} {'p99 ms':>9} {'q/s':>9} "
          f"{'peak RSS':>9} {'quiver x':>9}")
    for name, qq, kq, pnames in QUERIES:
        if args.only and name not in args.only.split(","):
            continue
        for threads in sorted({int(t) for t in args.threads.split(",")}):
            res = {}
            for r in range(args.runs):
                if name == "create node":
                    base = 10_000_000 + r * 1_000_000
                    params = [{"id": base + i} for i in range(args.warmup + args.writes)]
                else:
                    params = [{"from": rng.randint(1, n_users), "to": rng.randint(1, n_users)}
                              for _ in range(args.warmup + args.writes)]
                res.setdefault("quiver", []).append(
                    quiver_once(q, work, qq, params, pnames, threads, args.warmup))
                if "kuzu" in args.peers:
                    for form in ["param", "literal"]:
                        res.setdefault(f"kuzu {form}", []).append(
                            kuzu_once(kz, work, kq, params, form, threads, args.warmup))
            res = {k: median_of(v) for k, v in res.items()}
            base = res["quiver"]["qps"]
            for sysname, m in res.items():
                ratio = "" if sysname == "quiver" else f"{base / m['qps']:.2f}x"
                print(f"{name:<12} {threads:>3} {sysname:<13} {m['median_ms']:>10.3f} {m['p99_ms']:>9.3f} "
                      f"{m['qps']:>9.0f} {m['peak_rss_bytes'] / 2**20:>8.0f}M {ratio:>9}")
            print("RESULT " + json.dumps({"query": name, "threads": threads, "writes": args.writes, **res}))
            sys.stdout.flush()
    for p in [work / "w.qdb", work / "w.kz"]:
        fresh(p)


if __name__ == "__main__":
    main()
