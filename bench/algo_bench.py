#!/usr/bin/env python3
"""Graph algorithms on the social workload: Quiver (from Cypher, projection included)
against networkit (C++/OpenMP) and igraph, side by side in one run.

For each algorithm: wall time and peak resident memory of Quiver's whole command
(open, project, run, answer), and the algorithm's own time in each peer after its
graph is built (the build is reported on its own line, once). Results are checked
equal where they are numbers both sides give (component count, triangles,
degeneracy, the largest PageRank score, modularity within a few percent).

    python3 bench/algo_bench.py [--scale 1] [--runs 3] [--threads 2] [--peers networkit,igraph]

Data and the database go under data/algo/ (git-ignored). Quiver runs its GDS calls:
    CALL gds.graph.project('g', 'User', {FOLLOWS: {orientation: O}}) YIELD graphName
    CALL gds.<algo>.stats(graphName, {concurrency: T, ...}) YIELD ...
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "quiver")

# name, orientation, GDS call, the stats column checked, its key among the peers' answers
ALGOS = [
    ("pagerank", "NATURAL", "gds.pageRank.stats", "{maxIterations: 20, tolerance: 0.0}",
     "centralityDistribution.max", "pr_max"),
    ("wcc", "NATURAL", "gds.wcc.stats", "{}", "componentCount", "components"),
    ("triangles", "UNDIRECTED", "gds.triangleCount.stats", "{}", "globalTriangleCount", "triangles"),
    ("kcore", "UNDIRECTED", "gds.kcore.stats", "{}", "degeneracy", "degeneracy"),
    ("lpa", "UNDIRECTED", "gds.labelPropagation.stats", "{}", "communityCount", "communities"),
    ("louvain", "UNDIRECTED", "gds.louvain.stats", "{}", "modularity", "modularity"),
    ("degree", "NATURAL", "gds.degree.stats", "{}", "centralityDistribution.max", "degree_max"),
]


def quiver(db, algo, threads):
    name, orient, call, cfg, col, _ = algo
    cfg = cfg.rstrip("}")
    cfg = (cfg + (", " if cfg != "{" else "") + f"concurrency: {threads}}}")
    top = col.split(".")[0]
    q = (f"CALL gds.graph.project('g', 'User', {{FOLLOWS: {{orientation: '{orient}'}}}}) "
         f"YIELD graphName CALL {call}(graphName, {cfg}) YIELD computeMillis, {top} "
         f"RETURN computeMillis, {top}")
    cmd = [BIN, "query", "--db", db, "--format", "json", q]
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    out = p.stdout.read().decode()
    if status != 0:
        raise RuntimeError(f"quiver {name} failed: {p.stderr.read().decode()[-2000:]}")
    row = json.loads(out.strip().splitlines()[0])
    v = row[top]
    if "." in col:
        v = v[col.split(".")[1]]
    return wall, ru.ru_maxrss * 1024, row["computeMillis"] / 1000, v


PEER = r'''
import json, os, resource, sys, time
which, path, n, threads, algos = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split(",")
out = {}
if which == "networkit":
    import networkit as nk
    nk.setNumberOfThreads(threads)
    t = time.perf_counter()
    r = nk.graphio.EdgeListReader(",", 1, commentPrefix=":", continuous=True, directed=True)
    g = r.read(path)
    out["build"] = time.perf_counter() - t
    t = time.perf_counter()
    u = nk.graphtools.toUndirected(g)
    u.removeMultiEdges(); u.removeSelfLoops(); u.indexEdges()
    out["build_undirected"] = time.perf_counter() - t
    for a in algos:
        t = time.perf_counter()
        if a == "pagerank":
            pr = nk.centrality.PageRank(g, 0.85, 1e-30)
            pr.maxIterations = 20
            pr.run()
            out["t_" + a] = time.perf_counter() - t
            # The check, at convergence (networkit starts from 1/n, GDS and Quiver from
            # 1 - d: after 20 passes they differ, their fixed point does not).
            pr = nk.centrality.PageRank(g, 0.85, 1e-12)
            pr.maxIterations = 1000
            pr.run()
            out["pr_max"] = max(pr.scores()) * g.numberOfNodes()
            continue
        elif a == "wcc":
            c = nk.components.WeaklyConnectedComponents(g); c.run()
            out["components"] = c.numberOfComponents()
        elif a == "triangles":
            s = nk.sparsification.TriangleEdgeScore(u); s.run()
            out["triangles"] = int(round(sum(s.scores()) / 3))
        elif a == "kcore":
            c = nk.centrality.CoreDecomposition(u); c.run()
            out["degeneracy"] = int(c.maxCoreNumber())
        elif a == "lpa":
            c = nk.community.PLP(u); c.run()
            out["communities"] = c.getPartition().numberOfSubsets()
        elif a == "louvain":
            c = nk.community.PLM(u, refine=False); c.run()
            out["modularity"] = nk.community.Modularity().getQuality(c.getPartition(), u)
        elif a == "degree":
            c = nk.centrality.DegreeCentrality(g); c.run()
        out["t_" + a] = time.perf_counter() - t
elif which == "igraph":
    import igraph as ig
    t = time.perf_counter()
    src, dst = [], []
    with open(path) as f:
        next(f)
        for line in f:
            a, b = line.split(",", 1)
            src.append(int(a) - 1); dst.append(int(b) - 1)
    g = ig.Graph(n=n, edges=list(zip(src, dst)), directed=True)
    del src, dst
    out["build"] = time.perf_counter() - t
    for a in algos:
        t = time.perf_counter()
        if a == "pagerank":
            pr = g.pagerank(damping=0.85)
        elif a == "wcc":
            out["components"] = len(g.connected_components(mode="weak"))
        elif a == "kcore":
            u = g.as_undirected(); u.simplify()
            out["degeneracy"] = max(u.coreness())
        else:
            continue
        out["t_" + a] = time.perf_counter() - t
out["peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps(out), flush=True)
# (networkit 11.3 crashes in its destructors at exit on this graph: skip them.)
os._exit(0)
'''


def peer(which, edges, n, threads, algos):
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", PEER, which, edges, str(n), str(threads), ",".join(algos)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        print(f"  {which} failed: {p.stderr[-1500:]}", file=sys.stderr)
        return None
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["wall"] = time.perf_counter() - t0
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", default="1")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--peers", default="networkit,igraph")
    ap.add_argument("--algos", default=",".join(a[0] for a in ALGOS))
    a = ap.parse_args()
    want = a.algos.split(",")
    algos = [x for x in ALGOS if x[0] in want]
    base = os.path.join(ROOT, "data", "algo", f"social{a.scale}")
    db = base + ".qdb"
    if not os.path.exists(os.path.join(base, "edges.csv")):
        subprocess.run([BIN, "generate", "social", "--scale", a.scale, "--out", base], check=True)
    if not os.path.exists(db):
        subprocess.run([BIN, "import", "--db", db, "--nodes", f"User={base}/nodes.csv",
                        "--relationships", f"FOLLOWS={base}/edges.csv"], check=True,
                       stdout=subprocess.DEVNULL)
    with open(os.path.join(base, "nodes.csv")) as f:
        n = sum(1 for _ in f) - 1
    print(f"social scale {a.scale}: {n:,} users; {a.threads} threads; median of {a.runs} runs")
    q = {}
    if any(x[0] == "pagerank" for x in algos):
        # The check's run: PageRank to convergence (see the peer's).
        conv = ("pagerank", "NATURAL", "gds.pageRank.stats", "{maxIterations: 1000, tolerance: 1e-12}",
                "centralityDistribution.max", "pr_max")
        pr_converged = quiver(db, conv, a.threads)[3]
    for algo in algos:
        runs = [quiver(db, algo, a.threads) for _ in range(a.runs)]
        wall = statistics.median(r[0] for r in runs)
        q[algo[0]] = (wall, max(r[1] for r in runs), statistics.median(r[2] for r in runs), runs[0][3])
    peers = {}
    for p in [x for x in a.peers.split(",") if x]:
        rs = [peer(p, os.path.join(base, "edges.csv"), n, a.threads, [x[0] for x in algos])
              for _ in range(a.runs)]
        rs = [r for r in rs if r]
        if rs:
            med = {}
            for k in rs[0]:
                vals = [r[k] for r in rs if k in r]
                med[k] = statistics.median(vals) if k.startswith("t_") or k in ("build", "wall", "build_undirected") else vals[0]
            med["peak"] = max(r["peak"] for r in rs)
            peers[p] = med
    for p, r in peers.items():
        extra = f", undirected simple copy {r['build_undirected']:.2f} s" if "build_undirected" in r else ""
        print(f"{p}: graph built from the CSV in {r['build']:.2f} s{extra}; peak RSS {r['peak'] / 2**20:.0f} MiB")
    hdr = f"{'algorithm':<11}{'quiver wall':>12}{'compute':>9}{'peak':>9}"
    for p in peers:
        hdr += f"{p + ' (algo)':>18}{'ratio':>8}"
    print(hdr)
    for algo in algos:
        name = algo[0]
        wall, peak, comp, v = q[name]
        line = f"{name:<11}{wall:>11.2f}s{comp:>8.2f}s{peak / 2**20:>7.0f}Mi"
        for p, r in peers.items():
            t = r.get("t_" + name)
            if t is None:
                line += f"{'-':>18}{'':>8}"
            else:
                line += f"{t:>17.2f}s{t / wall:>7.1f}x"
        checks = []
        for p, r in peers.items():
            key = algo[5]
            if key and key in r:
                checks.append(f"{p} {r[key]:.9g}")
        if name == "pagerank":
            v = pr_converged
        line += f"   quiver {v:.9g}" + ("; " + ", ".join(checks) if checks else "")
        print(line)
    print("ratio: the peer's time for the algorithm alone (graph already built) over Quiver's whole command")


if __name__ == "__main__":
    main()
