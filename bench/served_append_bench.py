#!/usr/bin/env python3
"""`quiver import --append` into a served database, beside reads (issue "Bulk loads into
a live database"): the append's speed served against the same append offline, and the
reads' latency before and during it.

The base is the social graph (scale 1, `--id-type integer`); the append adds `--users`
new users and `--follows` FOLLOWS edges between old and new users (bench/append_bench.py's
files). Per run, on a fresh copy of the base:

- `offline`: `quiver import --append` with no server (wall time, peak RSS);
- `served`: `quiver serve` on a copy, `--readers` driver clients running seed 003's
  point reads (find node, 1-hop, 2-hop by a random id, in turn) for `--before` seconds,
  then `quiver import --append` of the same files (the server appends them), the
  readers going on; the append's wall time, the server's peak RSS, and the readers'
  median and p99 latency before and during the append, and errors.

    cargo build --release
    pip install neo4j
    python3 bench/served_append_bench.py --runs 3
"""

import argparse
import json
import multiprocessing as mp
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from append_bench import extra_files  # noqa: E402
from bolt_bench import rss_kb, serve  # noqa: E402
from import_bench import QUIVER, ROOT, fresh, fresh_copy, timed  # noqa: E402
from query_bench import prepare  # noqa: E402

READS = [
    "MATCH (n:User {id: $id}) RETURN n",
    "MATCH (s:User {id: $id})-->(n:User) RETURN n.id",
    "MATCH (s:User {id: $id})-->()-->(n:User) RETURN DISTINCT n.id",
]


def reader(uri, n_users, seed, stop, out):
    """Runs the reads until `stop` is set: (start time, latency s, ok) per read."""
    from neo4j import GraphDatabase

    rng = random.Random(seed)
    res = []
    with GraphDatabase.driver(uri) as d, d.session() as s:
        k = 0
        while not stop.is_set():
            q = READS[k % len(READS)]
            k += 1
            t = time.time()
            try:
                s.run(q, id=rng.randint(1, n_users)).consume()
                res.append((t, time.time() - t, True))
            except Exception:  # noqa: BLE001 - an error is a figure here
                res.append((t, time.time() - t, False))
    out.put(res)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round((len(xs) - 1) * p))] if xs else float("nan")


def window(res, a, b):
    lat = [l * 1000 for t, l, ok in res if a <= t < b and ok]
    errors = sum(1 for t, _, ok in res if a <= t < b and not ok)
    return {"reads": len(lat), "median_ms": statistics.median(lat) if lat else float("nan"),
            "p99_ms": pct(lat, 0.99), "errors": errors}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="1")
    ap.add_argument("--users", type=int, default=1_000_000)
    ap.add_argument("--follows", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--readers", type=int, default=1)
    ap.add_argument("--before", type=float, default=3.0, help="seconds of reads before the append")
    ap.add_argument("--writes", type=float, default=0.0,
                    help="percent of users SET before the append, not checkpointed (a database that has seen writes)")
    args = ap.parse_args()
    args.peers = ""
    work = ROOT / "data" / "bench" / "work" / f"query-social-{args.scale}"
    work.mkdir(parents=True, exist_ok=True)
    q, _, n_users = prepare(args, work)
    data = ROOT / "data" / "bench" / f"social-{args.scale}"
    nodes, edges = extra_files(data, n_users, args.users, args.follows, 3)
    rows = args.users + args.follows
    cmd = lambda db: [str(QUIVER), "import", "--db", str(db), "--append", "--quiet",  # noqa: E731
                      "--nodes", f"User={nodes}", "--relationships", f"FOLLOWS={edges}"]
    print(f"social scale {args.scale} ({n_users} users) + {args.users} users and {args.follows} follows; "
          f"{args.readers} reader(s); median of {args.runs} runs")
    offline, served, rss, before, during = [], [], [], [], []
    def seen_writes(db):
        if args.writes > 0:
            every = max(1, round(100 / args.writes))
            subprocess.run([str(QUIVER), "query", "--db", str(db),
                            f"MATCH (u:User) WHERE u.id % {every} = 0 SET u.age = coalesce(u.age, 0) + 1"],
                           check=True, capture_output=True)

    if args.writes > 0:
        print(f"each append into a database with {args.writes}% of users SET, not checkpointed")
    for r in range(args.runs):
        db = work / "served-append.qdb"
        fresh_copy(q, db)
        seen_writes(db)
        secs, _, _ = timed(cmd(db))
        offline.append(secs)
        fresh_copy(q, db)
        seen_writes(db)
        server, port = serve(db)
        stop, out = mp.Event(), mp.Queue()
        ps = [mp.Process(target=reader, args=(f"bolt://127.0.0.1:{port}", n_users, r * 100 + i, stop, out))
              for i in range(args.readers)]
        for p in ps:
            p.start()
        time.sleep(args.before)
        t0 = time.time()
        p = subprocess.run(cmd(db), capture_output=True, text=True)
        t1 = time.time()
        if p.returncode != 0:
            sys.exit(f"the served append failed:\n{p.stderr[-3000:]}")
        time.sleep(0.5)
        stop.set()
        res = [x for _ in ps for x in out.get()]
        for p_ in ps:
            p_.join()
        rss.append(rss_kb(server.pid, "VmHWM:") * 1024)
        server.terminate()
        server.wait()
        served.append(t1 - t0)
        start = min(t for t, _, _ in res)
        before.append(window(res, start + 0.5, t0))
        during.append(window(res, t0, t1))
        check = subprocess.run([str(QUIVER), "query", "--db", str(db), "--format", "csv",
                                "MATCH (u:User) RETURN count(u)"], capture_output=True, text=True).stdout
        print(f"  run {r + 1}: offline {secs:.2f} s, served {t1 - t0:.2f} s; reads before "
              f"{before[-1]['median_ms']:.2f}/{before[-1]['p99_ms']:.2f} ms, during "
              f"{during[-1]['median_ms']:.2f}/{during[-1]['p99_ms']:.2f} ms ({during[-1]['reads']} reads, "
              f"{during[-1]['errors']} errors); {check.split()[-1]} users after")
        fresh(db)
    med = lambda xs: statistics.median(xs)  # noqa: E731
    so, ss = med(offline), med(served)
    print(f"{'append':<10} {'wall s':>8} {'rows/s':>12} {'vs offline':>11}")
    print(f"{'offline':<10} {so:>8.2f} {rows / so:>12.0f} {1:>10.2f}x")
    print(f"{'served':<10} {ss:>8.2f} {rows / ss:>12.0f} {ss / so:>10.2f}x   server peak RSS "
          f"{max(rss) / 2**20:.0f} MiB")
    b = {k: med([w[k] for w in before]) for k in ("median_ms", "p99_ms")}
    d = {k: med([w[k] for w in during]) for k in ("median_ms", "p99_ms")}
    errors = sum(w["errors"] for w in before + during)
    print(f"reads (find node, 1-hop, 2-hop in turn): before median {b['median_ms']:.2f} ms, p99 "
          f"{b['p99_ms']:.2f} ms; during median {d['median_ms']:.2f} ms, p99 {d['p99_ms']:.2f} ms; "
          f"{errors} errors")
    print("RESULT " + json.dumps({"rows": rows, "offline_s": round(so, 3), "served_s": round(ss, 3),
                                  "served_vs_offline": round(ss / so, 3), "server_peak_rss_bytes": max(rss),
                                  "reads_before": b, "reads_during": d, "read_errors": errors,
                                  "runs": {"offline": [round(x, 3) for x in offline],
                                           "served": [round(x, 3) for x in served]}}))


if __name__ == "__main__":
    main()
