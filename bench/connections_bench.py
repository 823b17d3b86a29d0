#!/usr/bin/env python3
"""`quiver serve` under many connections: idle ones must cost kilobytes and no thread,
and throughput must hold as client processes are added.

    cargo build --release
    pip install neo4j
    python3 bench/connections_bench.py --scale 1
    python3 bench/connections_bench.py --scale 1 --baseline /tmp/quiver-old   # A/B

Part 1, idle connections (an empty database): opens `--silent` sockets that connect and
never send a byte, then `--idle` raw Bolt sessions that log in and stay silent, then
times a new driver's `RETURN 1` (driver made, connected, query answered) `--probes`
times. Prints the server's resident memory and threads at each step, what each idle
connection costs, and the probe's median and worst latency.

Part 2, throughput (social at `--scale`, `--id-type integer`): seed 003's find node and
1-hop with 1, 4, 16 and 64 client processes, each with its own driver and session
(threads in one Python process would measure the GIL first). Prints queries/s, median
and p99 per client count (medians of `--rounds` rounds), and the server's CPU time per query: with every client on the
server's own cores, the clients' CPU bounds the rate past a few processes, and the
server's CPU per query shows whether the server itself slows down.

With `--baseline BIN` every step runs with that binary too, interleaved, and the ratio
is printed. The server runs with `--max-connections` and `--max-pending-connections`
above the connection counts, so that both servers admit everything. RESULT lines are
JSON; `--chart` writes the throughput as a PNG.
"""

import argparse
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bolt_bench import QUERIES, connect, free_port, read_summaries, rss_kb, run_clients  # noqa: E402
from import_bench import QUIVER, ROOT  # noqa: E402
from query_bench import prepare  # noqa: E402


def threads(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("Threads:"):
            return int(line.split()[1])
    return 0


def serve(binary, db, limit):
    port = free_port()
    p = subprocess.Popen([binary, "serve", "--db", db, "--no-auth", "--listen", f"127.0.0.1:{port}",
                          "--max-connections", str(limit), "--max-pending-connections", str(limit)],
                         stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        if "serving" in line:
            break
    else:
        sys.exit(f"{binary} serve exited before it listened")
    return p, port


def probe(port):
    """A new driver's RETURN 1: ms from making the driver to the answer."""
    from neo4j import GraphDatabase
    t = time.perf_counter()
    with GraphDatabase.driver(f"bolt://127.0.0.1:{port}", auth=None) as d:
        d.execute_query("RETURN 1 AS x")
    return (time.perf_counter() - t) * 1e3


def settle(pid):
    time.sleep(1.0)
    return rss_kb(pid) / 1024, threads(pid)


def idle(binary, name, args):
    db = Path(tempfile.mkdtemp(dir=ROOT / "data" / "bench" / "work")) / "empty.qdb"
    subprocess.run([binary, "query", "--db", db, "--create", "RETURN 1"], check=True, capture_output=True)
    server, port = serve(binary, db, 2 * (args.silent + args.idle) + 64)
    held = []
    try:
        probe(port)  # the first connection's one-time costs (the session's indexes...)
        rss0, th0 = settle(server.pid)
        for _ in range(args.silent):
            held.append(socket.create_connection(("127.0.0.1", port)))
        rss1, th1 = settle(server.pid)
        pending = []
        for _ in range(args.idle):
            s = connect(port)
            pending.append(s)
            held.append(s)
        for s in pending:
            read_summaries(s, 2)  # HELLO's and LOGON's SUCCESS
        rss2, th2 = settle(server.pid)
        lat = [probe(port) for _ in range(args.probes)]
        alive = server.poll() is None
        row = {
            "server": name, "silent": args.silent, "idle_sessions": args.idle,
            "rss_mib": [round(rss0, 1), round(rss1, 1), round(rss2, 1)],
            "threads": [th0, th1, th2],
            "kib_per_silent": round((rss1 - rss0) * 1024 / max(1, args.silent), 1),
            "kib_per_session": round((rss2 - rss1) * 1024 / max(1, args.idle), 1),
            "probe_median_ms": round(statistics.median(lat), 2), "probe_max_ms": round(max(lat), 2),
            "server_alive": alive,
        }
        print(f"{name:<9} RSS {rss0:7.1f} -> {rss1:7.1f} (+{args.silent} silent) -> {rss2:7.1f} MiB "
              f"(+{args.idle} logged in); threads {th0} -> {th1} -> {th2}; "
              f"{row['kib_per_silent']:.1f} KiB a silent socket, {row['kib_per_session']:.1f} KiB a session; "
              f"new driver's RETURN 1: median {row['probe_median_ms']:.1f} ms, worst {row['probe_max_ms']:.1f} ms")
        print("RESULT " + json.dumps(row))
        sys.stdout.flush()
        return row
    finally:
        for s in held:
            s.close()
        server.kill()
        server.wait()


def cpu_seconds(pid):
    """The process's user and system CPU time, all threads."""
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def throughput(binary, name, db, query, n, ids, n_users):
    """Queries/s, median and p99 of `n` client processes, and the server's CPU per query
    (which shows whether the server, not the clients sharing its cores, slows down)."""
    server, port = serve(binary, db, 256)
    try:
        cpu0 = cpu_seconds(server.pid)
        st = run_clients(port, query, ids[:n], n_users, 20)
        # (The warmup queries are counted in the CPU too.)
        st["server_cpu_us_per_query"] = (cpu_seconds(server.pid) - cpu0) * 1e6 / sum(len(i) + 20 for i in ids)
        return st
    finally:
        server.kill()
        server.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="1")
    ap.add_argument("--quiver", default=str(QUIVER))
    ap.add_argument("--baseline", help="another quiver binary to run every step with, interleaved")
    ap.add_argument("--silent", type=int, default=1000)
    ap.add_argument("--idle", type=int, default=1000)
    ap.add_argument("--probes", type=int, default=20)
    ap.add_argument("--clients", default="1,4,16,64")
    ap.add_argument("--runs", type=int, default=300, help="queries per client")
    ap.add_argument("--rounds", type=int, default=3,
                    help="throughput rounds per step; the servers' order alternates, medians are printed")
    ap.add_argument("--parts", default="idle,throughput")
    ap.add_argument("--chart", default=None, help="PNG of queries/s by clients (default: bench/out/connections.png)")
    args = ap.parse_args()
    servers = [("quiver", args.quiver)] + ([("baseline", args.baseline)] if args.baseline else [])
    (ROOT / "data" / "bench" / "work").mkdir(parents=True, exist_ok=True)
    if "idle" in args.parts:
        print(f"== idle connections: {args.silent} silent sockets, {args.idle} logged-in sessions")
        rows = {name: idle(b, name, args) for name, b in servers}
        if args.baseline:
            q, b = rows["quiver"], rows["baseline"]
            print(f"   baseline / quiver: session memory {b['kib_per_session'] / max(q['kib_per_session'], 0.1):.1f}x, "
                  f"threads {b['threads'][2]} / {q['threads'][2]}")
    if "throughput" in args.parts:
        work = ROOT / "data" / "bench" / "work" / f"query-social-{args.scale}"
        work.mkdir(parents=True, exist_ok=True)
        args.peers = "none"
        db, _, n_users = prepare(args, work)
        rng = random.Random(7)
        series = {}
        print(f"== throughput, social scale {args.scale}: {args.runs} queries per client process")
        print(f"{'query':<10} {'clients':>7} {'server':<9} {'q/s':>8} {'median ms':>10} {'p99 ms':>8} {'server CPU us/q':>16}")
        for qname, query, _ in QUERIES:
            for n in [int(c) for c in args.clients.split(",")]:
                ids = [[rng.randint(1, n_users) for _ in range(args.runs)] for _ in range(n)]
                runs = {name: [] for name, _ in servers}
                for r in range(args.rounds):
                    # Each round the other server goes first (the first run after new
                    # ids meets colder caches).
                    for name, b in (servers if r % 2 == 0 else servers[::-1]):
                        runs[name].append(throughput(b, name, db, query, n, ids, n_users))
                got = {}
                for name, _ in servers:
                    rs = runs[name]
                    st = {k: statistics.median(x[k] for x in rs) for k in rs[0]}
                    got[name] = st
                    series.setdefault(f"{name}, {qname}", []).append((n, st["qps"]))
                    print(f"{qname:<10} {n:>7} {name:<9} {st['qps']:>8.0f} {st['median_ms']:>10.3f} {st['p99_ms']:>8.3f} "
                          f"{st['server_cpu_us_per_query']:>16.0f}   (q/s of each round: "
                          + ", ".join(f"{x['qps']:.0f}" for x in rs) + ")")
                    print("RESULT " + json.dumps({"query": qname, "clients": n, "server": name, **st,
                                                  "qps_rounds": [x["qps"] for x in rs]}))
                if args.baseline:
                    print(f"{'':<10} {'':>7} ratio     {got['quiver']['qps'] / got['baseline']['qps']:>8.2f}x")
                sys.stdout.flush()
        import charts
        charts.throughput_chart(args.chart or ROOT / "bench" / "out" / "connections.png",
                                f"quiver serve, social scale {args.scale}: one driver per client process",
                                series)


if __name__ == "__main__":
    main()
