#!/usr/bin/env python3
"""Bulk loads into a live database (issue "Bulk loads into a live database"): a LOAD CSV
of the dolt table (1M rows, 10 typed columns) through the official neo4j driver against
`quiver serve` (loopback, default transactional mode, `--memory-limit 1GiB`):

- `alone`: the load by itself;
- `beside a transaction`: another client opens a transaction, creates a node and keeps
  the transaction open while the load runs, then commits;
- `two loads`: two clients load at once (different labels);
- `beside small writes`: four clients commit single-node CREATEs (auto-commit) while the
  load runs; their commit latency (median and p99, over the load's duration) is the
  figure (target: p99 under 10 ms).

Per scenario: the load's wall time (the client's, median of `--runs`), rows/s, its
ratio to `alone`, what happened to the other client, and the server's peak RSS.
Each run starts a fresh server on a fresh database. RESULT lines are JSON.

    cargo build --release
    pip install neo4j
    python3 bench/beside_bench.py --runs 3
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bolt_bench import free_port, rss_kb, wait_serving  # noqa: E402
from import_bench import QUIVER, ROOT  # noqa: E402
from load_bench import DOLT_PROPS, prepare  # noqa: E402


def load_query(name, label):
    return f"LOAD CSV FROM '{name}' WITH HEADER NULLIF '' AS row CREATE (:{label} {{{DOLT_PROPS}}})"


class Server:
    def __init__(self, db, imp, memory_limit):
        self.port = free_port()
        self.proc = subprocess.Popen(
            [str(QUIVER), "serve", "--db", str(db), "--create", "--no-auth", "--listen", f"127.0.0.1:{self.port}",
             "--memory-limit", memory_limit, "--import-dir", str(imp)],
            stderr=subprocess.PIPE, text=True)
        wait_serving(self.proc)
        self.peak = 0
        self.stop = False
        self.watch = threading.Thread(target=self._watch, daemon=True)
        self.watch.start()

    def _watch(self):
        while not self.stop:
            self.peak = max(self.peak, rss_kb(self.proc.pid))
            time.sleep(0.05)

    def close(self):
        self.stop = True
        self.proc.terminate()
        self.proc.wait()


def timed_load(drv, query, out, key):
    t0 = time.perf_counter()
    try:
        with drv.session() as s:
            n = s.run(query).consume().counters.nodes_created
        out[key] = {"s": time.perf_counter() - t0, "rows": n}
    except Exception as e:  # the failure is the figure
        out[key] = {"s": time.perf_counter() - t0, "error": f"{type(e).__name__}: {e}"[:200]}


def scenario(kind, work, imp, name, rows, memory_limit):
    from neo4j import GraphDatabase
    db = work / "beside.qdb"
    shutil.rmtree(db, ignore_errors=True)
    srv = Server(db, imp, memory_limit)
    drv = GraphDatabase.driver(f"bolt://127.0.0.1:{srv.port}", auth=None)
    out = {}
    try:
        if kind == "alone":
            timed_load(drv, load_query(name, "DoltA"), out, "load")
            other = "-"
        elif kind == "beside a transaction":
            s = drv.session()
            tx = s.begin_transaction()
            tx.run("CREATE (:Small {t: 1})").consume()
            timed_load(drv, load_query(name, "DoltB"), out, "load")
            try:
                tx.commit()
                with drv.session() as c:
                    n = c.run("MATCH (n:Small) RETURN count(n) AS n").single()["n"]
                other = "committed" if n == 1 else f"committed, {n} Small nodes"
            except Exception as e:
                other = f"failed: {type(e).__name__}"
            s.close()
        elif kind == "beside small writes":
            stop = threading.Event()
            lat = [[] for _ in range(4)]
            errs = [0]

            def writer(c):
                with drv.session() as s:
                    i = 0
                    while not stop.is_set():
                        t0 = time.perf_counter()
                        try:
                            s.run("CREATE (:Tiny {c: $c, i: $i})", c=c, i=i).consume()
                            lat[c].append((time.perf_counter() - t0) * 1e3)
                        except Exception:
                            errs[0] += 1
                        i += 1

            ws = [threading.Thread(target=writer, args=(c,)) for c in range(4)]
            for w in ws:
                w.start()
            time.sleep(0.5)
            timed_load(drv, load_query(name, "DoltE"), out, "load")
            stop.set()
            for w in ws:
                w.join()
            all_ms = sorted(x for l in lat for x in l)
            p99 = all_ms[int(len(all_ms) * 0.99)] if all_ms else float("nan")
            med = all_ms[len(all_ms) // 2] if all_ms else float("nan")
            other = f"{len(all_ms)} writes, median {med:.2f} ms, p99 {p99:.2f} ms, {errs[0]} failed"
            out["writes"] = {"n": len(all_ms), "median_ms": med, "p99_ms": p99, "failed": errs[0]}
        else:
            ts = [threading.Thread(target=timed_load, args=(drv, load_query(name, label), out, key))
                  for key, label in (("load", "DoltC"), ("other", "DoltD"))]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            o = out["other"]
            other = f"error: {o['error']}" if "error" in o else f"loaded in {o['s']:.2f} s"
        with drv.session() as c:
            total = c.run("MATCH (n) RETURN count(n) AS n").single()["n"]
    finally:
        drv.close()
        srv.close()
    r = out["load"]
    return {"scenario": kind, "load_s": r["s"], "rows": r.get("rows", 0), "error": r.get("error"),
            "other": other, "nodes_after": total, "server_peak_rss_mib": srv.peak / 1024,
            "expected_rows": rows, "writes": out.get("writes")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--memory-limit", default="1GiB")
    ap.add_argument("--data", default=str(ROOT / "data" / "bench"))
    args = ap.parse_args()
    data = Path(args.data)
    files = prepare(argparse.Namespace(workload="dolt"), data)
    imp, name, rows = files["plain"].parent, files["plain"].name, files["rows"]
    work = data / "work"
    work.mkdir(parents=True, exist_ok=True)
    kinds = ["alone", "beside a transaction", "two loads", "beside small writes"]
    results = {k: [] for k in kinds}
    for _ in range(args.runs):
        for k in kinds:  # interleaved rounds
            r = scenario(k, work, imp, name, rows, args.memory_limit)
            print("RESULT " + json.dumps(r), flush=True)
            results[k].append(r)
    alone = statistics.median(r["load_s"] for r in results["alone"])
    print(f"\nLOAD CSV of dolt 1m ({rows:,} rows) through the neo4j driver, quiver serve "
          f"--memory-limit {args.memory_limit}, median of {args.runs}")
    print(f"{'scenario':<22} {'load s':>7} {'rows/s':>10} {'vs alone':>8} {'failed':>6} "
          f"{'peak RSS MiB':>12}  other client")
    for k in kinds:
        rs = results[k]
        s = statistics.median(r["load_s"] for r in rs)
        failed = sum(1 for r in rs if r["error"] or r["rows"] != rows)
        peak = max(r["server_peak_rss_mib"] for r in rs)
        others = sorted({r["other"].split(" in ")[0] for r in rs})
        if k == "beside small writes":
            w = [r["writes"] for r in rs if r.get("writes")]
            others = [f"small writes: p99 {statistics.median(x['p99_ms'] for x in w):.2f} ms, "
                      f"median {statistics.median(x['median_ms'] for x in w):.2f} ms, "
                      f"{sum(x['failed'] for x in w)} failed of {sum(x['n'] + x['failed'] for x in w)}"]
        print(f"{k:<22} {s:>7.2f} {rows / s:>10,.0f} {s / alone:>7.2f}x {failed:>6} {peak:>12.0f}  "
              f"{', '.join(others)}")


if __name__ == "__main__":
    main()
