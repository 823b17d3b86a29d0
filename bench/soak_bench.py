#!/usr/bin/env python3
"""Soak of a live database through `quiver serve` (loopback, bounded in time): clients
run seed 003's reads and writes for `--minutes` while a LOAD CSV batch lands every
`--load-every` seconds and automatic checkpoints fold the changes; then the server is
killed with SIGKILL and every acknowledged write must be there when it comes back.

    cargo build --release
    pip install neo4j            # matplotlib too, for the PNG
    python3 bench/soak_bench.py --scale 1 --minutes 20 --clients 4

Each client (its own process, the official neo4j driver) picks, per operation:
find node, 1-hop, 2-hop (reads, random ids), the aggregation (rarely), a SET of `age`
on a user of its own share of the ids (client c owns ids = c mod clients, so the last
acknowledged value of each is known), a CREATE of a user with a fresh id, or a
relationship between two users. Per minute the table gives reads/s and writes/s,
their p99, the server's peak RSS in the minute and its generation (checkpoints so
far). Targets (issue "A live database stays fast"): no downward trend in throughput,
RSS bounded by `--memory-limit`, every acknowledged write present after the kill.
RESULT lines are JSON; `--png` writes a plot.
"""

import argparse
import json
import multiprocessing as mp
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bolt_bench import free_port, rss_kb, wait_serving  # noqa: E402
from import_bench import QUIVER, ROOT, fresh, fresh_copy  # noqa: E402
from query_bench import run, social, stats  # noqa: E402

READS = {
    "find node": "MATCH (n:User {id: $id}) RETURN n",
    "1-hop": "MATCH (s:User {id: $id})-->(n:User) RETURN n.id",
    "2-hop": "MATCH (s:User {id: $id})-->()-->(n:User) RETURN DISTINCT n.id",
    "aggregation": "MATCH (n:User) RETURN n.gender, count(*), avg(n.age)",
}
SET = "MATCH (n:User {id: $id}) SET n.age = $v"
CREATE = "CREATE (:User {id: $id, age: $v})"
REL = "MATCH (a:User {id: $a}), (b:User {id: $b}) CREATE (a)-[:FOLLOWS]->(b)"
LOAD = ("LOAD CSV WITH HEADERS FROM 'file:///{f}' AS r "
        "CREATE (:Event {{batch: toInteger(r.batch), k: toInteger(r.k)}})")


def client(c, clients, port, n_users, deadline, seed, out):
    from neo4j import GraphDatabase
    rng = random.Random(seed)
    drv = GraphDatabase.driver(f"bolt://127.0.0.1:{port}", auth=None)
    minutes = {}  # minute -> {"reads": [ms], "writes": [ms], "errors": n}
    ages = {}  # id -> last acknowledged age (None: a failed write, unknown)
    created = []
    next_new = 10_000_000 + c
    t0 = time.time()
    with drv.session() as s:
        while time.time() < deadline:
            x = rng.random()
            if x < 0.60:
                name = rng.choice(["find node", "1-hop", "2-hop"])
                q, p, kind = READS[name], {"id": rng.randint(1, n_users)}, "reads"
            elif x < 0.605:
                q, p, kind = READS["aggregation"], {}, "reads"
            elif x < 0.85:
                i = rng.randrange(c + clients, n_users + 1, clients)
                q, p, kind = SET, {"id": i, "v": rng.randint(1, 99)}, "writes"
            elif x < 0.93:
                q, p, kind = CREATE, {"id": next_new, "v": 1}, "writes"
                next_new += clients
            else:
                q, p, kind = REL, {"a": rng.randint(1, n_users), "b": rng.randint(1, n_users)}, "writes"
            m = minutes.setdefault(int((time.time() - t0) // 60), {"reads": [], "writes": [], "errors": 0})
            t = time.perf_counter()
            try:
                s.run(q, p).consume()
                m[kind].append((time.perf_counter() - t) * 1e3)
                if q is SET:
                    ages[p["id"]] = p["v"]
                elif q is CREATE:
                    created.append(p["id"])
            except Exception:
                m["errors"] += 1
                if q is SET:
                    ages[p["id"]] = None
    drv.close()
    out.put({"minutes": minutes, "ages": ages, "created": created})


def loader(port, imports, every, rows, deadline, acked, stop):
    from neo4j import GraphDatabase
    drv = GraphDatabase.driver(f"bolt://127.0.0.1:{port}", auth=None)
    k = 0
    while time.time() + every < deadline and not stop.is_set():
        if stop.wait(every):
            break
        f = imports / f"batch-{k}.csv"
        with open(f, "w") as w:
            w.write("batch,k\n")
            for i in range(rows):
                w.write(f"{k},{i}\n")
        try:
            with drv.session() as s:
                s.run(LOAD.format(f=f.name)).consume()
            acked.append(k)
        except Exception as e:
            print(f"  load {k} failed: {e}", file=sys.stderr)
        k += 1
    drv.close()


def sampler(pid, rss, stop, t0):
    while not stop.is_set():
        m = int((time.time() - t0) // 60)
        rss[m] = max(rss.get(m, 0), rss_kb(pid) / 1024)
        stop.wait(1)


def generation(port):
    from neo4j import GraphDatabase
    with GraphDatabase.driver(f"bolt://127.0.0.1:{port}", auth=None) as d, d.session() as s:
        return {r["key"]: r["value"] for r in s.run("SHOW STORAGE INFO")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="1")
    ap.add_argument("--minutes", type=float, default=20)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--memory-limit", default="2GiB")
    ap.add_argument("--load-every", type=float, default=60)
    ap.add_argument("--load-rows", type=int, default=50_000)
    ap.add_argument("--checkpoint-log-size", default="32MiB",
                    help="the server's automatic checkpoint threshold (small, so that several run)")
    ap.add_argument("--png", help="write a plot of the table here (needs matplotlib)")
    args = ap.parse_args()
    work = ROOT / "data" / "bench" / "work" / f"soak-{args.scale}"
    work.mkdir(parents=True, exist_ok=True)
    base = work / "base.qdb"
    _, _, n_users = social(args.scale, base)
    db = work / "live.qdb"
    fresh_copy(base, db)
    imports = work / "import"
    imports.mkdir(exist_ok=True)
    port = free_port()
    server = subprocess.Popen([QUIVER, "serve", "--db", db, "--no-auth", "--listen", f"127.0.0.1:{port}",
                               "--memory-limit", args.memory_limit, "--import-dir", imports,
                               "--checkpoint-log-size", args.checkpoint_log_size],
                              stderr=subprocess.PIPE, text=True)
    wait_serving(server)
    t0 = time.time()
    deadline = t0 + args.minutes * 60
    out = mp.Queue()
    ps = [mp.Process(target=client, args=(c, args.clients, port, n_users, deadline, 100 + c, out))
          for c in range(args.clients)]
    for p in ps:
        p.start()
    stop = threading.Event()
    rss, acked, gens = {}, [], {}
    threads = [threading.Thread(target=sampler, args=(server.pid, rss, stop, t0)),
               threading.Thread(target=loader, args=(port, imports, args.load_every, args.load_rows,
                                                     deadline, acked, stop))]
    for t in threads:
        t.start()
    while time.time() < deadline:
        time.sleep(min(60, max(0.1, deadline - time.time())))
        try:
            gens[int((time.time() - t0 - 1) // 60)] = generation(port)
        except Exception:
            pass
    res = [out.get() for _ in ps]
    for p in ps:
        p.join()
    stop.set()
    for t in threads:
        t.join()
    # The end: SIGKILL, then everything acknowledged must be there.
    server.send_signal(signal.SIGKILL)
    server.wait()
    print(f"soak: social scale {args.scale}, {args.clients} clients, {args.minutes:g} min, "
          f"LOAD CSV of {args.load_rows} rows every {args.load_every:g} s, --memory-limit {args.memory_limit}")
    print(f"{'minute':>6} {'reads/s':>8} {'writes/s':>9} {'read p99':>9} {'write p99':>10} {'errors':>7} "
          f"{'RSS MiB':>8} {'gen':>4} {'delta MiB':>9}")
    rows = []
    for m in range(int(args.minutes)):
        reads = [x for r in res for x in r["minutes"].get(m, {}).get("reads", [])]
        writes = [x for r in res for x in r["minutes"].get(m, {}).get("writes", [])]
        errors = sum(r["minutes"].get(m, {}).get("errors", 0) for r in res)
        g = gens.get(m, {})
        row = {"minute": m + 1, "reads_per_s": len(reads) / 60, "writes_per_s": len(writes) / 60,
               "read_p99_ms": stats(reads, 60)["p99_ms"] if reads else 0.0,
               "write_p99_ms": stats(writes, 60)["p99_ms"] if writes else 0.0, "errors": errors,
               "server_rss_mib": rss.get(m, 0), "generation": g.get("generation"),
               "delta_mib": (g.get("delta_bytes") or 0) / 2**20}
        rows.append(row)
        print(f"{m + 1:>6} {row['reads_per_s']:>8.0f} {row['writes_per_s']:>9.0f} {row['read_p99_ms']:>9.2f} "
              f"{row['write_p99_ms']:>10.2f} {errors:>7} {row['server_rss_mib']:>8.0f} "
              f"{row['generation'] or '':>4} {row['delta_mib']:>9.1f}")
        print("RESULT " + json.dumps(row))
    # Verify after the kill (a fresh process replays the log): every user's id and age
    # in one scan, then the loaded batches.
    ages = {}
    for r in res:
        ages.update(r["ages"])
    known = {i: v for i, v in ages.items() if v is not None}
    created = [i for r in res for i in r["created"]]
    dump = run([QUIVER, "query", "--db", db, "--format", "csv", "MATCH (n:User) RETURN n.id, n.age"])
    stored = {}
    for line in dump.splitlines()[1:]:
        i, _, a = line.partition(",")
        stored[int(i)] = int(a) if a else None
    totals = {
        "SET values": [len(known), sum(1 for i, v in known.items() if stored.get(i) == v)],
        "created users": [len(created), sum(1 for i in created if i in stored)],
    }
    if acked:
        got = run([QUIVER, "query", "--db", db, "--format", "csv",
                   f"MATCH (e:Event) WHERE e.batch IN {json.dumps(acked)} RETURN count(*)"])
        totals["LOAD CSV rows"] = [len(acked) * args.load_rows, int(got.split()[1])]
    lost = sum(want - got for want, got in totals.values())
    for what, (want, got) in totals.items():
        print(f"after SIGKILL: {what}: {got} of {want} acknowledged present")
    print("RESULT " + json.dumps({"after_kill": totals, "lost": lost}))
    if args.png:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("matplotlib is not installed: no plot")
        else:
            fig, ax = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
            xs = [r["minute"] for r in rows]
            ax[0].plot(xs, [r["reads_per_s"] for r in rows], label="reads/s")
            ax[0].plot(xs, [r["writes_per_s"] for r in rows], label="writes/s")
            ax[0].legend()
            ax[0].set_ylabel("per second")
            ax[1].plot(xs, [r["read_p99_ms"] for r in rows], label="read p99")
            ax[1].plot(xs, [r["write_p99_ms"] for r in rows], label="write p99")
            ax[1].legend()
            ax[1].set_ylabel("ms")
            ax[2].plot(xs, [r["server_rss_mib"] for r in rows], label="server RSS")
            ax[2].set_ylabel("MiB")
            ax[2].set_xlabel("minute")
            fig.suptitle(f"soak: social {args.scale}, {args.clients} clients")
            fig.savefig(args.png, dpi=100)
            print(f"plot: {args.png}")
    fresh(db)
    sys.exit(1 if lost else 0)


if __name__ == "__main__":
    main()
