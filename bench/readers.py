#!/usr/bin/env python3
"""Read throughput through one, two and three `quiver serve --read-only` readers of one
database, with the official driver's routing (`neo4j://`).

    python3 bench/readers.py --db data/bench/work/query-social-1/social.qdb --readers 1,2,3

For each count: a writer and that many readers on loopback ports, every one given the
same routing table; `--clients` client processes (each one driver, `neo4j://` to the
writer's address) run seed 003's seek (`MATCH (n:User {id: $id}) RETURN n`) in read
transactions for `--seconds`. Prints queries/s, how the reads spread over the readers,
and the servers' peak RSS. On a machine with fewer cores than servers plus clients the
figure is bound by the CPU, not by the servers.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bolt_bench import free_port, gather, merged, rss_kb, wait_serving  # noqa: E402
from import_bench import QUIVER, ROOT  # noqa: E402


def serve(db, port, extra):
    p = subprocess.Popen(
        [str(QUIVER), "serve", "--no-auth", "--db", db, "--listen", f"127.0.0.1:{port}", *extra],
        stderr=subprocess.PIPE, text=True,
    )
    wait_serving(p)
    return p


def client(addr, seconds, n_ids, seed, out):
    from neo4j import GraphDatabase
    import neo4j

    rnd = random.Random(seed)
    done, where = 0, {}
    with GraphDatabase.driver(f"neo4j://{addr}", auth=None) as d:
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            with d.session(default_access_mode=neo4j.READ_ACCESS) as s:
                for _ in range(50):
                    r = s.run("MATCH (n:User {id: $id}) RETURN n", id=rnd.randrange(1, n_ids + 1))
                    r.single()
                    a = str(r.consume().server.address)
                    where[a] = where.get(a, 0) + 1
                    done += 1
    out.put((done, where))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", required=True)
    ap.add_argument("--readers", default="1,2,3")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--ids", type=int, default=1_632_803)
    a = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "quiver-cli"], cwd=ROOT, check=True)
    rows = []
    for n in [int(x) for x in a.readers.split(",")]:
        ports = [free_port() for _ in range(n + 1)]
        addrs = [f"127.0.0.1:{p}" for p in ports]
        route = ["--route-writers", addrs[0], "--route-readers", ",".join(addrs[1:])]
        procs = [serve(a.db, ports[0], route)]
        procs += [serve(a.db, p, ["--read-only", *route]) for p in ports[1:]]
        t = time.perf_counter()
        results = gather(client, [(addrs[0], a.seconds, a.ids, i) for i in range(a.clients)])
        wall = time.perf_counter() - t
        total = sum(r[0] for r in results)
        where = merged(w for _, w in results)
        rss = [rss_kb(p.pid, "VmHWM:") * 1024 for p in procs]
        for p in procs:
            p.terminate()
            p.wait()
        rows.append({
            "readers": n, "clients": a.clients, "queries": total, "qps": total / a.seconds,
            "spread": [where.get(x, 0) for x in addrs[1:]], "on_writer": where.get(addrs[0], 0),
            "peak_rss_mib": [round(r / 2**20) for r in rss], "wall_s": wall,
        })
        print(json.dumps(rows[-1]), file=sys.stderr)
    print(f"{os.cpu_count()} cores, {a.clients} client processes, {a.seconds:g} s each")
    print("| readers | queries/s | reads per reader | on the writer | servers' peak RSS MiB (writer, readers) |")
    print("|---:|---:|---|---:|---|")
    for r in rows:
        print(f"| {r['readers']} | {r['qps']:.0f} | {', '.join(map(str, r['spread']))} | {r['on_writer']} | "
              f"{', '.join(map(str, r['peak_rss_mib']))} |")


if __name__ == "__main__":
    main()
