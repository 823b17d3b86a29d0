#!/usr/bin/env python3
"""Memory of `quiver serve` under eight heavy queries at once, and at rest after them
(issue "Queries inside the memory limit"): on social scale 1, eight client processes
(official neo4j driver), two of each of

- a sort of all users (`ORDER BY n.registration DESC, n.id SKIP 1000000 LIMIT 5`),
- `collect` of ids by region,
- the in-degree top 5,
- `DISTINCT` over three columns;

then the server idles. Prints, per run: queries that finished and failed, the server's
peak RSS while they ran (and of it, anonymous memory: `RssAnon`, what the limit is
about; the rest is mapped segment pages), its RSS at rest (after `--rest` seconds),
the longest query's time, and whether every answer equals the others' (each query's
rows, across runs and binaries). `--quiver` picks the binary (to compare builds side
by side); RESULT lines are JSON.

    cargo build --release
    pip install neo4j
    python3 bench/rest_bench.py --memory-limit 512MiB --runs 3
"""

import argparse
import json
import multiprocessing as mp
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bolt_bench import free_port, rss_kb, wait_serving  # noqa: E402
from import_bench import QUIVER, ROOT  # noqa: E402
from query_bench import social  # noqa: E402

QUERIES = [
    "MATCH (n:User) RETURN n.id ORDER BY n.registration DESC, n.id SKIP 1000000 LIMIT 5",
    "MATCH (n:User) WITH n.region AS r, collect(n.id) AS ids RETURN r, size(ids) ORDER BY r LIMIT 3",
    "MATCH (a:User)-->(b:User) WITH b, count(*) AS c RETURN b.id, c ORDER BY c DESC, b.id LIMIT 5",
    "MATCH (n:User) RETURN DISTINCT n.region, n.age, n.gender ORDER BY n.region, n.age, n.gender LIMIT 3",
]


def client(port, q, out):
    from neo4j import GraphDatabase
    drv = GraphDatabase.driver(f"bolt://127.0.0.1:{port}", auth=None)
    t0 = time.perf_counter()
    try:
        with drv.session() as s:
            rows = [tuple(r.values()) for r in s.run(q)]
        out.put(("ok", time.perf_counter() - t0, "", q, repr(rows)))
    except Exception as e:
        out.put(("failed", time.perf_counter() - t0, f"{type(e).__name__}: {e}"[:240], q, None))
    drv.close()


def one_run(quiver, db, limit, rest):
    port = free_port()
    srv = subprocess.Popen([quiver, "serve", "--db", str(db), "--no-auth", "--listen", f"127.0.0.1:{port}",
                            "--memory-limit", limit], stderr=subprocess.PIPE, text=True)
    wait_serving(srv)
    time.sleep(0.5)
    base = rss_kb(srv.pid)
    peak = [base, rss_kb(srv.pid, "RssAnon:")]
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            peak[0] = max(peak[0], rss_kb(srv.pid))
            peak[1] = max(peak[1], rss_kb(srv.pid, "RssAnon:"))
            time.sleep(0.02)

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    out = mp.Queue()
    procs = [mp.Process(target=client, args=(port, QUERIES[i % 4], out)) for i in range(8)]
    for p in procs:
        p.start()
    results = [out.get() for _ in procs]
    for p in procs:
        p.join()
    time.sleep(rest)
    at_rest = rss_kb(srv.pid)
    anon_rest = rss_kb(srv.pid, "RssAnon:")
    stop.set()
    srv.terminate()
    srv.wait()
    return {"ok": sum(r[0] == "ok" for r in results), "failed": sum(r[0] != "ok" for r in results),
            "errors": sorted({r[2] for r in results if r[2]}), "base_mib": base / 1024,
            "peak_mib": peak[0] / 1024, "anon_peak_mib": peak[1] / 1024, "rest_mib": at_rest / 1024,
            "anon_rest_mib": anon_rest / 1024, "wall_s": max(r[1] for r in results),
            "answers": {r[3]: r[4] for r in results if r[4] is not None}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memory-limit", default="512MiB")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rest", type=float, default=3.0)
    ap.add_argument("--quiver", action="append", help="binary to run (repeat to compare); default the build")
    args = ap.parse_args()
    db = ROOT / "data" / "bench" / "work" / "query-social-1" / "social.qdb"
    social("1", db, ["--id-type", "integer"])
    bins = args.quiver or [str(QUIVER)]
    res = {b: [] for b in bins}
    for _ in range(args.runs):
        for b in bins:  # interleaved
            r = one_run(b, db, args.memory_limit, args.rest)
            r["quiver"] = b
            print("RESULT " + json.dumps(r), flush=True)
            res[b].append(r)
    print(f"\neight heavy queries at once, quiver serve --memory-limit {args.memory_limit}, "
          f"median of {args.runs} (RSS MiB)")
    print(f"{'binary':<28} {'finished':>8} {'failed':>6} {'wall s':>7} {'idle':>6} {'peak':>6} "
          f"{'anon peak':>9} {'at rest':>8} {'anon at rest':>12}")
    for b in bins:
        rs = res[b]
        med = lambda k: statistics.median(r[k] for r in rs)  # noqa: E731
        print(f"{b[-28:]:<28} {med('ok'):>8.0f} {med('failed'):>6.0f} {med('wall_s'):>7.2f} "
              f"{med('base_mib'):>6.0f} {med('peak_mib'):>6.0f} {med('anon_peak_mib'):>9.0f} "
              f"{med('rest_mib'):>8.0f} {med('anon_rest_mib'):>12.0f}")
    seen = {}
    for rs in res.values():
        for r in rs:
            for q, a in r["answers"].items():
                seen.setdefault(q, set()).add(a)
    agree = all(len(v) == 1 for v in seen.values())
    print(f"answers: {'every finished query gave the same rows' if agree else 'DIFFER'} "
          f"({sum(len(v) for v in seen.values())} distinct over {len(seen)} queries)")


if __name__ == "__main__":
    main()
