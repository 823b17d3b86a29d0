#!/usr/bin/env python3
"""Churn through `quiver serve`: records created and deleted all day must cost nothing
once gone, and a client's transaction timeout must end its query.

    cargo build --release
    pip install neo4j
    python3 bench/churn_bench.py                      # the table, then a 2-minute queue
    python3 bench/churn_bench.py --queue-minutes 10 --queue-events 1000000

Three parts, each against two servers side by side in one run (the official Python
driver on loopback): one whose database never held the churned records, and one that
went through the churn.

1. The table: `--nodes` (3,000) `:N` nodes, then `--rounds` (100) rounds of a queue's
   life on the churned server (`--nodes` `:E` nodes created, then deleted). Then, on
   both: the 9M-pair cartesian `MATCH (a:N), (b:N) RETURN count(*)` (median of 3), the
   label count `MATCH (a:N) RETURN count(a)` (median of 21), SHOW STORAGE INFO's
   delta_bytes, the server's RSS, and the same reads and the directory's size after
   CHECKPOINT. Target: reads within 1.2x of the never-churned server; delta and disk
   within 2x of what the live data takes.
2. The queue at steady state: `--queue-events` events through CREATE / MATCH ... DELETE
   with about `--queue-live` live at a time, for at most `--queue-minutes`; reads are
   sampled on both servers every `--sample-every` seconds (medians of 35, alternated); a
   CHECKPOINT runs halfway. Printed: events/s, and per sample the two read times, their
   ratio, delta_bytes and the directory's size.
3. The driver's timeout: `session.run(Query(q, timeout=2))` on a cartesian product
   that takes far longer; it must fail with
   Neo.ClientError.Transaction.TransactionTimedOutClientConfiguration within 100 ms of
   the 2 s (the elapsed time is printed).

With `--python`, first the table through Python's embedded `execute` (no server).
RESULT lines are JSON.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bolt_bench import free_port, rss_kb, wait_serving  # noqa: E402
from import_bench import QUIVER, ROOT, fresh  # noqa: E402

PAIRS = "MATCH (a:N), (b:N) RETURN count(*)"
PAIRS_RUNS = 3
COUNT = "MATCH (a:N) RETURN count(a)"


def serve(db):
    port = free_port()
    p = subprocess.Popen([str(QUIVER), "serve", "--db", str(db), "--create", "--no-auth",
                          "--listen", f"127.0.0.1:{port}"], stderr=subprocess.PIPE, text=True)
    wait_serving(p)
    return p, port


def dir_bytes(d):
    return sum(f.stat().st_size for f in Path(d).rglob("*") if f.is_file())


def timed(s, q, n, **params):
    times = []
    for _ in range(n):
        t = time.perf_counter()
        s.run(q, params).consume()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def storage(s):
    return {r["key"]: r["value"] for r in s.run("SHOW STORAGE INFO")}


def reads(s, pid, label):
    info = storage(s)
    return {
        "server": label,
        "pairs_ms": round(timed(s, PAIRS, PAIRS_RUNS), 1),
        "count_ms": round(timed(s, COUNT, 21), 2),
        "delta_bytes": info["delta_bytes"],
        "rss_mib": round(rss_kb(pid) / 1024, 1),
    }


def table(args, work, GraphDatabase):
    rows = []
    servers = {}
    for label in ["never churned", "after the churn"]:
        db = work / ("plain.qdb" if label == "never churned" else "churned.qdb")
        fresh(db)
        p, port = serve(db)
        servers[label] = (p, port, db)
    drivers = {k: GraphDatabase.driver(f"bolt://127.0.0.1:{port}", auth=None)
               for k, (_, port, _) in servers.items()}
    t_churn = 0.0
    for label, drv in drivers.items():
        with drv.session() as s:
            s.run("UNWIND range(1, $n) AS i CREATE (:N {i: i})", n=args.nodes).consume()
            if label == "after the churn":
                t = time.perf_counter()
                for _ in range(args.rounds):
                    s.run("UNWIND range(1, $n) AS i CREATE (:E {i: i})", n=args.nodes).consume()
                    s.run("MATCH (e:E) DELETE e").consume()
                t_churn = time.perf_counter() - t
    for label, drv in drivers.items():
        p, _, db = servers[label]
        with drv.session() as s:
            r = reads(s, p.pid, label)
            s.run("CHECKPOINT").consume()
            r["pairs_after_checkpoint_ms"] = round(timed(s, PAIRS, PAIRS_RUNS), 1)
            r["count_after_checkpoint_ms"] = round(timed(s, COUNT, 21), 2)
            r["dir_mib_after_checkpoint"] = round(dir_bytes(db) / 2**20, 3)
            rows.append(r)
    changes = 2 * args.rounds * args.nodes
    print(f"churn: {changes:,} changes in {t_churn:.1f} s ({changes / t_churn:,.0f} changes/s)")
    keys = ["pairs_ms", "count_ms", "delta_bytes", "rss_mib", "pairs_after_checkpoint_ms",
            "count_after_checkpoint_ms", "dir_mib_after_checkpoint"]
    print(f"{'':28}" + "".join(f"{r['server']:>18}" for r in rows) + f"{'ratio':>10}")
    for k in keys:
        a, b = rows[0][k], rows[1][k]
        ratio = f"{b / a:.2f}" if a else "-"
        print(f"{k:28}" + f"{a:>18,}" + f"{b:>18,}" + f"{ratio:>10}")
    print("RESULT " + json.dumps({"part": "table", "nodes": args.nodes, "rounds": args.rounds,
                                  "churn_changes_per_s": round(changes / t_churn), "rows": rows}))
    return servers, drivers


def queue(args, servers, drivers):
    """The steady-state queue on the churned server, reads sampled on both."""
    plain, churned = drivers["never churned"], drivers["after the churn"]
    db = servers["after the churn"][2]
    deadline = time.time() + args.queue_minutes * 60
    batch = max(1, args.queue_live // 10)
    made = 0
    samples = []
    t0 = time.time()
    next_sample = t0
    checkpointed = False
    with churned.session() as w, churned.session() as rc, plain.session() as rp:
        seq = 0
        while made < args.queue_events and time.time() < deadline:
            w.run("UNWIND range($a, $b) AS i CREATE (:Q {seq: i, body: 'event ' + toString(i)})",
                  a=seq, b=seq + batch - 1).consume()
            seq += batch
            made += batch
            # Consume the oldest so that about `queue_live` stay.
            w.run("MATCH (q:Q) WHERE q.seq < $lo DELETE q", lo=seq - args.queue_live).consume()
            now = time.time()
            if not checkpointed and (now - t0 > (deadline - t0) / 2 or made >= args.queue_events / 2):
                w.run("CHECKPOINT").consume()
                checkpointed = True
            if now >= next_sample:
                # Alternated, so that the machine's moods fall on both alike.
                ta, tb = [], []
                for _ in range(5):
                    ta.append(timed(rp, COUNT, 7))
                    tb.append(timed(rc, COUNT, 7))
                a, b = statistics.median(ta), statistics.median(tb)
                info = storage(rc)
                s = {"t_s": round(now - t0), "events": made, "plain_ms": round(a, 2),
                     "churned_ms": round(b, 2), "ratio": round(b / a, 2),
                     "delta_bytes": info["delta_bytes"], "segment_bytes": info["segment_bytes"],
                     "log_bytes": info["log_bytes"], "dir_mib": round(dir_bytes(db) / 2**20, 2),
                     "checkpointed": checkpointed}
                samples.append(s)
                print(f"  {s['t_s']:>5} s {made:>10,} events  count(:N) {a:7.2f} ms vs {b:7.2f} ms"
                      f" ({s['ratio']:.2f}x)  delta {s['delta_bytes'] / 2**20:6.2f} MiB"
                      f"  segments {s['segment_bytes'] / 2**20:6.2f} MiB  log {s['log_bytes'] / 2**20:6.1f} MiB"
                      f"{'  (after the checkpoint)' if checkpointed else ''}")
                next_sample = now + args.sample_every
    secs = time.time() - t0
    print(f"queue: {made:,} events in {secs:.0f} s ({made / secs:,.0f} events/s created and consumed),"
          f" worst read ratio {max(s['ratio'] for s in samples):.2f}")
    print("RESULT " + json.dumps({"part": "queue", "events": made, "seconds": round(secs),
                                  "events_per_s": round(made / secs), "samples": samples}))


def timeout(drivers):
    from neo4j import Query
    from neo4j.exceptions import ClientError
    with drivers["never churned"].session() as s:
        q = Query("MATCH (a:N), (b:N), (c:N) RETURN count(*)", timeout=2)
        t = time.perf_counter()
        try:
            s.run(q).consume()
            code = "none: it ran to its end"
        except ClientError as e:
            code = e.code
        took = time.perf_counter() - t
    print(f"timeout: the driver's 2 s timeout ended the query after {took:.3f} s with {code}")
    print("RESULT " + json.dumps({"part": "timeout", "seconds": round(took, 3), "code": code}))


def python_door(args, work):
    """The same table through Python's embedded `quiver.connect(...).execute` (`--python`;
    `pip install ./python`): medians, churned / never churned, before and after CHECKPOINT."""
    import quiver

    def t(con, q, n):
        xs = []
        for _ in range(n):
            a = time.perf_counter()
            con.execute(q).fetchall()
            xs.append(time.perf_counter() - a)
        return statistics.median(xs) * 1e3

    cons = {}
    for name in ["never churned", "after the churn"]:
        p = work / ("py-plain.qdb" if name == "never churned" else "py-churned.qdb")
        fresh(p)
        c = quiver.connect(p)
        c.execute(f"UNWIND range(1, {args.nodes}) AS i CREATE (:N {{i: i}})")
        if name == "after the churn":
            a = time.perf_counter()
            for _ in range(args.rounds):
                c.execute(f"UNWIND range(1, {args.nodes}) AS i CREATE (:E {{i: i}})")
                c.execute("MATCH (e:E) DELETE e")
            changes = 2 * args.rounds * args.nodes
            print(f"python: the churn through execute, {changes / (time.perf_counter() - a):,.0f} changes/s")
        cons[name] = c
    rows = []
    for stage in ["", "after CHECKPOINT "]:
        if stage:
            for c in cons.values():
                c.execute("CHECKPOINT")
        for q, n in [(PAIRS, PAIRS_RUNS), (COUNT, 51), ("MATCH (a:N) WHERE a.i = 7 RETURN a.i", 51)]:
            a, b = t(cons["never churned"], q, n), t(cons["after the churn"], q, n)
            print(f"python: {stage}{q}: {a:.3f} / {b:.3f} ms, ratio {b / a:.2f}")
            rows.append({"query": stage + q, "plain_ms": round(a, 3), "churned_ms": round(b, 3)})
    print("RESULT " + json.dumps({"part": "python", "rows": rows}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--queue-events", type=int, default=1_000_000)
    ap.add_argument("--queue-live", type=int, default=1000)
    ap.add_argument("--queue-minutes", type=float, default=2)
    ap.add_argument("--sample-every", type=float, default=3)
    ap.add_argument("--pairs-runs", type=int, default=3,
                    help="runs of the cartesian product (median); 1 for an old build that takes minutes")
    ap.add_argument("--python", action="store_true",
                    help="also the table through Python's embedded execute (needs `pip install ./python`)")
    ap.add_argument("--work", default=str(ROOT / "data" / "churn"))
    args = ap.parse_args()
    global PAIRS_RUNS
    PAIRS_RUNS = args.pairs_runs
    from neo4j import GraphDatabase
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if args.python:
        python_door(args, work)
    servers, drivers = table(args, work, GraphDatabase)
    try:
        if args.queue_minutes > 0:
            queue(args, servers, drivers)
        timeout(drivers)
    finally:
        for d in drivers.values():
            d.close()
        for p, _, _ in servers.values():
            p.terminate()
            p.wait()


if __name__ == "__main__":
    main()
