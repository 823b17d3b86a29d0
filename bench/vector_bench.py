#!/usr/bin/env python3
"""Vector search against Neo4j's vector index, on the same vectors, in one run.

The vectors are clustered as embeddings are (`--clusters` centres in `--dims`
dimensions, points scattered around them; queries drawn the same way), generated
with a fixed seed into `data/bench/vectors-N-D/` (CSV for both importers, `.npy` for
the exact answers, computed by brute force with numpy).

Per system:
- the bulk import of the nodes (`quiver import`, `neo4j-admin database import full`),
  wall time and peak RSS;
- `CREATE VECTOR INDEX ... {vector.dimensions: D, vector.similarity_function: 'cosine'}`
  until the index answers (Quiver: the statement; Neo4j: until SHOW INDEXES says
  ONLINE), wall time and the server's or process's peak RSS;
- `CALL db.index.vector.queryNodes('docs', k, $q)` through the official Python driver,
  one client: median and p99 latency, queries/s, and recall@k against the exact answer.

    python3 bench/vector_bench.py --n 1000000 --dims 128 --neo4j-home data/neo4j

Neo4j is not part of the repository: `--neo4j-home` is a folder whose `lib/` holds
Neo4j 5's jars (see ../shared/neo4j or the tarball). Without it only Quiver runs.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bolt_bench import serve  # noqa: E402
from import_bench import QUIVER, ROOT, fresh, timed  # noqa: E402


def generate(n, dims, clusters, queries, seed):
    out = ROOT / "data" / "bench" / f"vectors-{n}-{dims}"
    csv = out / "docs.csv"
    if csv.exists() and (out / "queries.npy").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-1, 1, (clusters, dims)).astype(np.float32)

    def draw(m):
        c = centres[rng.integers(0, clusters, m)]
        return (c + rng.normal(0, 0.25, (m, dims))).astype(np.float32)

    print(f"generating {n:,} vectors of {dims} ...", flush=True)
    tmp = out / "docs.csv.tmp"
    vecs = np.empty((n, dims), dtype=np.float32)
    with open(tmp, "w") as f:
        f.write("id:ID,emb:float[]\n")
        step = 50_000
        for lo in range(0, n, step):
            v = draw(min(step, n - lo))
            vecs[lo:lo + len(v)] = v
            lines = [f"{lo + i}," + ";".join(f"{x:.5f}" for x in row) for i, row in enumerate(v.tolist())]
            f.write("\n".join(lines) + "\n")
    # The vectors as the CSV gives them (5 decimals), for the exact answers.
    vecs = np.round(vecs.astype(np.float64), 5).astype(np.float32)
    np.save(out / "vectors.npy", vecs)
    np.save(out / "queries.npy", draw(queries))
    tmp.rename(csv)
    return out


def exact(folder, k):
    """The k nearest by cosine of each query (ids), by brute force."""
    vecs = np.load(folder / "vectors.npy")
    qs = np.load(folder / "queries.npy")
    vn = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    qn = qs / np.linalg.norm(qs, axis=1, keepdims=True)
    out = []
    for q in qn:
        s = vn @ q
        top = np.argpartition(-s, k)[:k]
        out.append(set(top[np.argsort(-s[top])].tolist()))
    return qs, out


def rss_of(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Peak:
    """Samples a process's RSS every 50 ms."""

    def __init__(self, pid):
        self.pid, self.peak, self.stop = pid, 0, threading.Event()
        self.t = threading.Thread(target=self.run)
        self.t.start()

    def run(self):
        while not self.stop.is_set():
            self.peak = max(self.peak, rss_of(self.pid))
            time.sleep(0.05)

    def done(self):
        self.stop.set()
        self.t.join()
        return self.peak


def search(uri, qs, truth, k, warmup):
    from neo4j import GraphDatabase
    d = GraphDatabase.driver(uri, auth=None)
    lat, found = [], 0
    with d.session() as s:
        q = "CALL db.index.vector.queryNodes('docs', $k, $q) YIELD node, score RETURN node.id AS id, score"
        for i in range(warmup):
            s.run(q, k=k, q=qs[i % len(qs)].tolist()).consume()
        t0 = time.perf_counter()
        for qv, want in zip(qs, truth):
            t = time.perf_counter()
            ids = [r["id"] for r in s.run(q, k=k, q=qv.tolist())]
            lat.append((time.perf_counter() - t) * 1e3)
            found += len(want & set(ids))
        total = time.perf_counter() - t0
    d.close()
    lat.sort()
    return {"median_ms": statistics.median(lat), "p99_ms": lat[int(len(lat) * 0.99) - 1],
            "qps": len(qs) / total, "recall": found / (k * len(qs))}


CREATE = ("CREATE VECTOR INDEX docs IF NOT EXISTS FOR (n:Doc) ON n.emb OPTIONS {indexConfig: "
          "{`vector.dimensions`: %d, `vector.similarity_function`: 'cosine'}}")


def run_quiver(folder, dims, qs, truth, k, warmup):
    db = ROOT / "data" / "bench" / "work" / "vectors.qdb"
    fresh(db)
    secs, rss, _ = timed([str(QUIVER), "import", "--db", str(db), "--quiet", "--id-type", "integer",
                          "--nodes", f"Doc={folder / 'docs.csv'}"])
    res = {"import_s": secs, "import_rss": rss}
    secs, rss, _ = timed([str(QUIVER), "query", "--db", str(db), CREATE % dims])
    res |= {"index_s": secs, "index_rss": rss}
    server, port = serve(str(db))
    try:
        res |= search(f"bolt://127.0.0.1:{port}", qs, truth, k, warmup)
        res["serve_rss"] = rss_of(server.pid)
    finally:
        server.terminate()
        server.wait()
    return res


CONF = """server.default_listen_address=127.0.0.1
server.bolt.listen_address=127.0.0.1:{port}
server.bolt.tls_level=DISABLED
server.http.enabled=false
server.https.enabled=false
dbms.security.auth_enabled=false
server.directories.data={home}/data
server.directories.logs={home}/logs
server.directories.import={home}/import
server.directories.run={home}/run
server.directories.plugins={home}/plugins
server.directories.lib={home}/lib
server.memory.heap.initial_size={heap}
server.memory.heap.max_size={heap}
server.memory.pagecache.size={pagecache}
dbms.memory.transaction.total.max=0
dbms.usage_report.enabled=false
server.jvm.additional=-XX:+UseG1GC
server.jvm.additional=--add-opens=java.base/java.nio=ALL-UNNAMED
server.jvm.additional=--add-opens=java.base/java.io=ALL-UNNAMED
server.jvm.additional=--add-opens=java.base/sun.nio.ch=ALL-UNNAMED
server.jvm.additional=--enable-native-access=ALL-UNNAMED
"""


def run_neo4j(args, folder, dims, qs, truth, k, warmup):
    home = Path(args.neo4j_home).resolve()
    nh = ROOT / "data" / "bench" / "work" / "vector-neo4j"
    for d in ("conf", "logs", "import", "run", "plugins"):
        (nh / d).mkdir(parents=True, exist_ok=True)
    if not (nh / "lib").exists():
        (nh / "lib").symlink_to(home / "lib")
    port = 7695
    (nh / "conf" / "neo4j.conf").write_text(CONF.format(home=nh, port=port, heap=args.heap,
                                                        pagecache=args.pagecache))
    env = dict(os.environ, NEO4J_HOME=str(nh), NEO4J_CONF=str(nh / "conf"), HEAP_SIZE=args.heap)
    shutil.rmtree(nh / "data", ignore_errors=True)
    (nh / "data").mkdir()
    cp = ["java", "-cp", f"{nh}/lib/*"]
    old = os.environ.copy()
    os.environ.update(env)
    try:
        secs, rss, _ = timed(cp + ["org.neo4j.server.startup.Neo4jAdminCommand", "database", "import", "full",
                                   "neo4j", "--overwrite-destination=true", f"--report-file={nh}/logs/import.report",
                                   f"--nodes=Doc={folder / 'docs.csv'}", "--id-type=integer"])
    finally:
        os.environ.clear()
        os.environ.update(old)
    res = {"import_s": secs, "import_rss": rss}
    p = subprocess.run(cp + ["org.neo4j.server.startup.Neo4jCommand", "start"], env=env,
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"neo4j start failed: {p.stdout}{p.stderr}")
    pid = int((nh / "run" / "neo4j.pid").read_text())
    from neo4j import GraphDatabase
    uri = f"bolt://127.0.0.1:{port}"
    try:
        for _ in range(180):
            try:
                d = GraphDatabase.driver(uri, auth=None)
                d.verify_connectivity()
                break
            except Exception:
                time.sleep(1)
        peak = Peak(pid)
        t = time.perf_counter()
        with d.session() as s:
            s.run(CREATE % dims).consume()
            while True:
                st = s.run("SHOW INDEXES YIELD name, state WHERE name = 'docs' RETURN state").single()[0]
                if st == "ONLINE":
                    break
                if st == "FAILED":
                    sys.exit("neo4j: the vector index failed to build")
                time.sleep(0.2)
        res |= {"index_s": time.perf_counter() - t, "index_rss": peak.done()}
        d.close()
        res |= search(uri, qs, truth, k, warmup)
        res["serve_rss"] = rss_of(pid)
    finally:
        subprocess.run(cp + ["org.neo4j.server.startup.Neo4jCommand", "stop"], env=env, capture_output=True)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dims", type=int, default=128)
    ap.add_argument("--clusters", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--neo4j-home", default=None)
    ap.add_argument("--heap", default="4g")
    ap.add_argument("--pagecache", default="4g")
    args = ap.parse_args()
    folder = generate(args.n, args.dims, args.clusters, args.queries, args.seed)
    qs, truth = exact(folder, args.k)
    results = {"quiver": run_quiver(folder, args.dims, qs, truth, args.k, args.warmup)}
    if args.neo4j_home:
        results["neo4j"] = run_neo4j(args, folder, args.dims, qs, truth, args.k, args.warmup)
    print(f"{args.n:,} vectors of {args.dims} ({args.clusters} clusters), {args.queries} queries, k {args.k}, "
          f"one client through the Python driver")
    print(f"{'system':<8} {'import s':>9} {'index s':>8} {'index MiB':>10} {'median ms':>10} {'p99 ms':>8} "
          f"{'q/s':>7} {'recall':>7} {'serve MiB':>10}")
    for name, r in results.items():
        print(f"{name:<8} {r['import_s']:>9.2f} {r['index_s']:>8.2f} {r['index_rss'] / 2**20:>10.0f} "
              f"{r['median_ms']:>10.3f} {r['p99_ms']:>8.3f} {r['qps']:>7.0f} {r['recall']:>7.3f} "
              f"{r['serve_rss'] / 2**20:>10.0f}")
        print("RESULT " + json.dumps({"system": name, "n": args.n, "dims": args.dims, **r}))
    if "neo4j" in results:
        q, n = results["quiver"], results["neo4j"]
        print(f"neo4j / quiver: import {n['import_s'] / q['import_s']:.2f}x, index build "
              f"{n['index_s'] / q['index_s']:.2f}x, query median {n['median_ms'] / q['median_ms']:.2f}x")


if __name__ == "__main__":
    main()
