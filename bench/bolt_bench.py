#!/usr/bin/env python3
"""Seed 003's seek queries through `quiver serve` and the official neo4j Python driver,
with 1, 2, 4 and 8 concurrent clients, beside Quiver in-process and Kùzu in-process.

    cargo build --release
    pip install neo4j kuzu
    python3 bench/bolt_bench.py --scale 1 --runs 2000

Each client is a process with its own driver and session, running the query with
random ids (auto-commit, one `session.run(...).consume()`-style round trip per query,
rows turned into Python values). Prints per client count: queries/s (all clients),
median and p99 latency, and the server's peak RSS; then the in-process medians (Quiver:
`quiver query --bench-params`, Kùzu: its Python API with literal ids, the form its
planner uses the primary-key index for) and the Bolt median minus Quiver's in-process
median, the overhead the issue bounds at 0.2 ms. A raw Bolt client (plain sockets, no
driver) measures the server's own round trip, so the driver's share can be told apart.
RESULT lines are JSON.
"""

import argparse
import json
import multiprocessing as mp
import random
import socket
import struct
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_bench import QUIVER, ROOT  # noqa: E402
from query_bench import prepare, run, stats  # noqa: E402

QUERIES = [
    ("find node", "MATCH (n:User {id: $id}) RETURN n", "MATCH (n:User) WHERE n.id = {id} RETURN n"),
    ("1-hop", "MATCH (s:User {id: $id})-->(n:User) RETURN n.id",
     "MATCH (s:User)-[:FOLLOWS]->(n:User) WHERE s.id = {id} RETURN n.id"),
]

# Seed 003's writes, each an auto-commit transaction through the driver (durable in the
# write-ahead log before SUCCESS). They run on a copy of the database.
WRITES = [
    ("insert node", "CREATE (n:UserTemp {id: $id}) RETURN n"),
    ("insert edge", "MATCH (n:User {id: $id}), (m:User {id: $to}) WITH n, m CREATE (n)-[e:Temp]->(m) RETURN e"),
]


def client(uri, query, ids, n_users, warmup, out):
    """One driver and session running `query` once per id (`$to` a random user too,
    for the edge insert), after `warmup` untimed runs."""
    from neo4j import GraphDatabase
    rng = random.Random(ids[0])
    lat = []
    with GraphDatabase.driver(uri, auth=None) as d, d.session() as s:
        for i in ids[:warmup]:
            list(s.run(query, id=i, to=rng.randint(1, n_users)))
        t0 = time.perf_counter()
        for i in ids:
            t = time.perf_counter()
            list(s.run(query, id=i, to=rng.randint(1, n_users)))
            lat.append((time.perf_counter() - t) * 1e3)
        out.put((lat, time.perf_counter() - t0))


def _pstr(x):
    b = x.encode()
    if len(b) < 16:
        return bytes([0x80 | len(b)]) + b
    if len(b) < 256:
        return bytes([0xD0, len(b)]) + b
    return b"\xD1" + struct.pack(">H", len(b)) + b


def _msg(body):
    return struct.pack(">H", len(body)) + body + b"\x00\x00"


def connect(port):
    """A raw Bolt 5.4 connection (no driver): handshake, then HELLO and LOGON sent; their
    two SUCCESS replies are left for the caller's first `read_summaries`."""
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(bytes([0x60, 0x60, 0xB0, 0x17, 0, 4, 4, 5] + [0] * 12))
    assert s.recv(4) == b"\x00\x00\x04\x05"
    s.sendall(_msg(b"\xB1\x01\xA1" + _pstr("user_agent") + _pstr("raw/1")))
    s.sendall(_msg(b"\xB1\x6A\xA1" + _pstr("scheme") + _pstr("none")))
    return s


def read_summaries(s, k, buf=b""):
    """Reads messages until `k` summaries (SUCCESS, IGNORED, FAILURE) have come; returns
    their tags and the bytes read past them."""
    tags, i, first = [], 0, None
    while True:
        while len(buf) - i >= 2:
            n = struct.unpack(">H", buf[i:i + 2])[0]
            if len(buf) - i - 2 < n:
                break
            if n == 0:
                i += 2
                if first in (0x70, 0x7E, 0x7F):
                    tags.append(first)
                    if len(tags) == k:
                        return tags, buf[i:]
                first = None
                continue
            if first is None:
                first = buf[i + 3]  # struct marker, then the tag
            i += 2 + n
        chunk = s.recv(1 << 16)
        if not chunk:
            raise ConnectionError("closed")
        buf = buf[i:] + chunk
        i = 0


def raw_client(port, query, ids):
    """The server's own latency: RUN and PULL pipelined over a raw connection, as
    drivers send them, the reply read to its last message."""
    s = connect(port)
    _, buf = read_summaries(s, 2)
    lat = []
    # PULL everything (n = -1): a PULL of 1000 would leave the larger results open.
    pull = _msg(b"\xB1\x3F\xA1" + _pstr("n") + b"\xFF")
    for i in ids:
        run = _msg(b"\xB3\x10" + _pstr(query) + b"\xA1" + _pstr("id") + b"\xCB"
                   + struct.pack(">q", i) + b"\xA0")
        t = time.perf_counter()
        s.sendall(run + pull)
        _, buf = read_summaries(s, 2, buf)
        lat.append((time.perf_counter() - t) * 1e3)
    s.close()
    return lat


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kb(pid, key="VmRSS:"):
    """A process's resident memory (`VmHWM:` for its peak), in KiB."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(key):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def wait_serving(proc):
    """Reads the server's stderr up to the line that says it listens (a warning may
    come first)."""
    for line in proc.stderr:
        if "serving" in line:
            return
    sys.exit("quiver serve exited before it listened")


def serve(db):
    """`quiver serve --no-auth` on a free loopback port: the process and its port."""
    port = free_port()
    server = subprocess.Popen([QUIVER, "serve", "--db", db, "--no-auth", "--listen", f"127.0.0.1:{port}",
                               "--max-connections", "64"], stderr=subprocess.PIPE, text=True)
    wait_serving(server)
    return server, port


def gather(target, argss):
    """One process per tuple of `argss`, all at once, each running `target(*args, out)`;
    what each put on `out` (one value each), once all are done."""
    out = mp.Queue()
    ps = [mp.Process(target=target, args=(*a, out)) for a in argss]
    for p in ps:
        p.start()
    res = [out.get() for _ in ps]
    for p in ps:
        p.join()
    return res


def merged(counts):
    """Dicts of counts added key by key."""
    total = {}
    for c in counts:
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    return total


def run_clients(port, query, ids, n_users, warmup):
    """One client process per id list (`client`), all at once; their stats together."""
    uri = f"bolt://127.0.0.1:{port}"
    res = gather(client, [(uri, query, i, n_users, warmup) for i in ids])
    return stats([x for r, _ in res for x in r], max(t for _, t in res))


def clients(server, port, name, query, n, ids, n_users, warmup):
    """`n` client processes, one id list each; prints and returns the stats."""
    st = run_clients(port, query, ids[:n], n_users, warmup)
    rss = rss_kb(server.pid, "VmHWM:") / 1024
    print(f"{name:<10} {n:>7} {st['qps']:>9.0f} {st['median_ms']:>10.3f} {st['p99_ms']:>8.3f} {rss:>10.0f}M")
    print("RESULT " + json.dumps({"query": name, "clients": n, **st, "server_peak_rss_mib": rss}))
    sys.stdout.flush()
    return st


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", default="1")
    ap.add_argument("--runs", type=int, default=2000, help="queries per client")
    ap.add_argument("--clients", default="1,2,4,8")
    ap.add_argument("--peers", default="kuzu")
    ap.add_argument("--chart", default=None, help="PNG of queries/s by clients (default: bench/out/bolt-throughput.png)")
    args = ap.parse_args()
    series = {}
    work = ROOT / "data" / "bench" / "work" / f"query-social-{args.scale}"
    work.mkdir(parents=True, exist_ok=True)
    q, peer_dbs, n_users = prepare(args, work)
    kz = peer_dbs.get("kuzu")
    server, port = serve(q)
    rng = random.Random(7)
    print(f"social scale {args.scale}: {n_users} users; {args.runs} queries per client; server pid {server.pid}")
    print(f"{'query':<10} {'clients':>7} {'q/s':>9} {'median ms':>10} {'p99 ms':>8} {'server RSS':>11}")
    try:
        for name, qq, kq in QUERIES:
            bolt_median_1 = None
            for n in [int(c) for c in args.clients.split(",")]:
                ids = [[rng.randint(1, n_users) for _ in range(args.runs)] for _ in range(n)]
                st = clients(server, port, name, qq, n, ids, n_users, 20)
                series.setdefault(name, []).append((n, st["qps"]))
                if n == 1:
                    bolt_median_1 = st["median_ms"]
            # In-process, one client: Quiver's loop and Kùzu's Python API.
            pfile = work / "bolt-params.csv"
            ids = [rng.randint(1, n_users) for _ in range(args.runs)]
            pfile.write_text("id\n" + "\n".join(map(str, ids)) + "\n")
            lines = [json.loads(l) for l in run([QUIVER, "query", "--db", q, "--bench-params", pfile,
                                                  "--warmup", "20", qq]).splitlines() if l.strip()]
            inproc = statistics.median([l["ms"] for l in lines[:-1]])
            raw = statistics.median(raw_client(port, qq, ids)[20:])
            line = (f"{name:<10} in-process quiver median {inproc:.3f} ms; raw Bolt client {raw:.3f} ms "
                    f"(server overhead {raw - inproc:+.3f} ms); Python driver {bolt_median_1:.3f} ms "
                    f"({bolt_median_1 - inproc:+.3f} ms)")
            if "kuzu" in args.peers:
                spec = work / "bolt-spec.json"
                # One process, literal ids inline: build a runner over a list of queries.
                kscript = (
                    "import json, sys, time, kuzu\n"
                    "db = kuzu.Database(sys.argv[1], read_only=True); c = kuzu.Connection(db)\n"
                    "qs = json.load(open(sys.argv[2]))\n"
                    "for q in qs[:20]: r = c.execute(q)\n"
                    "lat = []\n"
                    "for q in qs:\n"
                    "    t = time.perf_counter(); r = c.execute(q)\n"
                    "    while r.has_next(): r.get_next()\n"
                    "    lat.append((time.perf_counter() - t) * 1e3)\n"
                    "print(json.dumps(lat))\n"
                )
                spec.write_text(json.dumps([kq.format(id=i) for i in ids]))
                k_lat = json.loads(run([sys.executable, "-c", kscript, kz, spec]))
                kmed = statistics.median(k_lat)
                line += f"; kuzu in-process (literal ids) median {kmed:.3f} ms"
            print(line)
            print("RESULT " + json.dumps({"query": name, "in_process_quiver_ms": inproc,
                                          "raw_bolt_ms": raw, "bolt_1_client_ms": bolt_median_1}))
    finally:
        server.kill()
        server.wait()
    # Writes, on a copy (the read benchmarks reuse the database).
    import shutil
    wdb = work / "bolt-writes.qdb"
    shutil.rmtree(wdb, ignore_errors=True)
    shutil.copytree(q, wdb)
    server, port = serve(wdb)
    try:
        for name, qq in WRITES:
            for n in [int(c) for c in args.clients.split(",")]:
                ids = [[rng.randint(1, n_users) for _ in range(args.runs // 4)] for _ in range(n)]
                st = clients(server, port, name, qq, n, ids, n_users, 0)
                series.setdefault(name, []).append((n, st["qps"]))
    finally:
        server.kill()
        server.wait()
        shutil.rmtree(wdb, ignore_errors=True)
    import charts
    charts.throughput_chart(args.chart or ROOT / "bench" / "out" / "bolt-throughput.png",
                            f"quiver serve, social scale {args.scale}: the Python driver, one process per client",
                            {f"quiver, {q}": pts for q, pts in series.items()})


if __name__ == "__main__":
    main()
