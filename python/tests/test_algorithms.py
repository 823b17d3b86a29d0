"""Graph algorithms from Cypher (gds.*) against networkit and igraph (C++ libraries from
PyPI) on random graphs with self-loops, parallel relationships and isolated nodes, and on
the social workload's generator at a small scale: PageRank per node, components,
triangles and clustering per node, core numbers, Louvain's modularity.

networkit and igraph come with the package's test extras; set QUIVER_REQUIRE_ALGO_PEERS
to fail rather than skip when they are missing."""

import os
import random

import pandas as pd
import pytest

import quiver

try:
    import networkit as nk
    import igraph as ig
except ImportError:  # pragma: no cover - the CI installs both
    if os.environ.get("QUIVER_REQUIRE_ALGO_PEERS"):
        raise
    pytest.skip("networkit or igraph is not installed", allow_module_level=True)


def random_graph(n, m, seed):
    rng = random.Random(seed)
    edges = []
    for _ in range(m):
        a = rng.randrange(n - 3)  # the last three nodes are isolated
        b = a if rng.random() < 0.03 else rng.randrange(n - 3)
        edges.append((a, b))
    edges += edges[: m // 20]  # parallel relationships
    return edges


@pytest.fixture(params=[(60, 300, 1), (400, 2400, 2), (2000, 9000, 3)], ids=["small", "medium", "large"])
def graph(request, tmp_path):
    n, m, seed = request.param
    edges = random_graph(n, m, seed)
    con = quiver.connect(tmp_path / "g.qdb")
    con.import_graph(
        nodes={"N": pd.DataFrame({"id": list(range(n))})},
        relationships={"E": pd.DataFrame({"src": [a for a, _ in edges], "dst": [b for _, b in edges]})},
    )
    ids = {r[0]: r[1] for r in con.execute("MATCH (x:N) RETURN x.id, id(x)").fetchall()}
    yield con, n, edges, ids
    con.close()


def stream(con, q):
    return {r[0]: r[1] for r in con.execute(q).fetchall()}


def nk_graph(n, edges, directed):
    g = nk.Graph(n, directed=directed)
    for a, b in edges:
        g.addEdge(a, b, addMissing=False)
    return g


def simple(n, edges):
    g = nk_graph(n, edges, False)
    g.removeMultiEdges()
    g.removeSelfLoops()
    g.indexEdges()
    return g


def test_pagerank_is_networkits_times_the_node_count(graph):
    con, n, edges, ids = graph
    con.execute("CALL gds.graph.project('g', 'N', 'E') YIELD graphName RETURN graphName")
    got = stream(con, "CALL gds.pageRank.stream('g', {maxIterations: 1000, tolerance: 1e-13}) YIELD nodeId, score RETURN nodeId, score")
    pr = nk.centrality.PageRank(nk_graph(n, edges, True), 0.85, 1e-15)
    pr.maxIterations = 10000
    pr.run()
    want = pr.scores()
    assert len(got) == n
    # networkit scales its scores to sum 1 (with sinks, mass leaks from GDS's, which
    # sum to the node count only without them): the same vector up to that factor.
    total, theirs = sum(got.values()), sum(want)
    for i in range(n):
        assert abs(got[ids[i]] / total - want[i] / theirs) < 1e-9, i


def test_components_match(graph):
    con, n, edges, ids = graph
    con.execute("CALL gds.graph.project('g', 'N', 'E') YIELD graphName RETURN graphName")
    wcc = stream(con, "CALL gds.wcc.stream('g') YIELD nodeId, componentId RETURN nodeId, componentId")
    scc = stream(con, "CALL gds.scc.stream('g') YIELD nodeId, componentId RETURN nodeId, componentId")
    g = ig.Graph(n=n, edges=edges, directed=True)
    for mode, got in (("weak", wcc), ("strong", scc)):
        theirs = g.connected_components(mode=mode).membership
        # The same partition: equal labels on one side exactly where on the other.
        pairs = {(got[ids[i]], theirs[i]) for i in range(n)}
        assert len(pairs) == len({p[0] for p in pairs}) == len({p[1] for p in pairs}), mode


def test_triangles_clustering_and_cores_match(graph):
    con, n, edges, ids = graph
    con.execute("CALL gds.graph.project('u', 'N', {E: {orientation: 'UNDIRECTED'}}) YIELD graphName RETURN graphName")
    tri = stream(con, "CALL gds.triangleCount.stream('u') YIELD nodeId, triangleCount RETURN nodeId, triangleCount")
    lcc = stream(con, "CALL gds.localClusteringCoefficient.stream('u') YIELD nodeId, localClusteringCoefficient AS c RETURN nodeId, c")
    core = stream(con, "CALL gds.kcore.stream('u') YIELD nodeId, coreValue RETURN nodeId, coreValue")
    u = simple(n, edges)
    c = nk.centrality.LocalClusteringCoefficient(u)
    c.run()
    k = nk.centrality.CoreDecomposition(u)
    k.run()
    iu = ig.Graph(n=n, edges=edges).simplify()
    cliques = iu.list_triangles()
    per = [0] * n
    for t in cliques:
        for x in t:
            per[x] += 1
    for i in range(n):
        assert tri[ids[i]] == per[i], i
        assert abs(lcc[ids[i]] - c.scores()[i]) < 1e-12, i
        assert core[ids[i]] == int(k.scores()[i]), i
    total = con.execute("CALL gds.triangleCount.stats('u') YIELD globalTriangleCount RETURN globalTriangleCount").fetchall()[0][0]
    assert total == len(cliques)


def test_louvain_is_as_modular_as_networkits(graph):
    con, n, edges, ids = graph
    con.execute("CALL gds.graph.project('u', 'N', {E: {orientation: 'UNDIRECTED'}}) YIELD graphName RETURN graphName")
    q = con.execute("CALL gds.louvain.stats('u') YIELD modularity RETURN modularity").fetchall()[0][0]
    got = stream(con, "CALL gds.louvain.stream('u') YIELD nodeId, communityId RETURN nodeId, communityId")
    # The modularity reported is the partition's, as igraph measures it on the same
    # multigraph (self-loops and parallel relationships counted).
    g = ig.Graph(n=n, edges=edges)
    assert abs(g.modularity([got[ids[i]] for i in range(n)]) - q) < 1e-9
    plm = nk.community.PLM(nk_graph(n, edges, False), refine=False)
    plm.run()
    theirs = nk.community.Modularity().getQuality(plm.getPartition(), nk_graph(n, edges, False))
    assert q >= theirs * 0.97, (q, theirs)


def test_the_social_generator_at_a_small_scale(tmp_path):
    import subprocess

    con = quiver.connect(tmp_path / "s.qdb")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    binary = os.environ.get("QUIVER_BIN") or os.path.join(root, "target", "release", "quiver")
    if not os.path.exists(binary):
        pytest.skip("the quiver binary (to generate the data) is not built: cargo build --release")
    subprocess.run([binary, "generate", "social", "--scale", "0.01", "--out", str(tmp_path / "s")], check=True, capture_output=True)
    con.import_graph(nodes={"User": str(tmp_path / "s" / "nodes.csv")}, relationships={"FOLLOWS": str(tmp_path / "s" / "edges.csv")})
    ids = {int(r[0]): r[1] for r in con.execute("MATCH (u:User) RETURN u.id, id(u)").fetchall()}
    edges = [(int(a), int(b)) for a, b in (line.split(",") for line in open(tmp_path / "s" / "edges.csv").read().splitlines()[1:])]
    index = {k: i for i, k in enumerate(sorted(ids))}
    n = len(index)
    e = [(index[a], index[b]) for a, b in edges]
    con.execute("CALL gds.graph.project('g', 'User', 'FOLLOWS') YIELD graphName RETURN graphName")
    got = stream(con, "CALL gds.pageRank.stream('g', {maxIterations: 1000, tolerance: 1e-13}) YIELD nodeId, score RETURN nodeId, score")
    pr = nk.centrality.PageRank(nk_graph(n, e, True), 0.85, 1e-15)
    pr.maxIterations = 10000
    pr.run()
    total, theirs = sum(got.values()), sum(pr.scores())
    for k, i in index.items():
        assert abs(got[ids[k]] / total - pr.scores()[i] / theirs) < 1e-9
    con.execute("CALL gds.graph.project('u', 'User', {FOLLOWS: {orientation: 'UNDIRECTED'}}) YIELD graphName RETURN graphName")
    total = con.execute("CALL gds.triangleCount.stats('u') YIELD globalTriangleCount RETURN globalTriangleCount").fetchall()[0][0]
    assert total == len(ig.Graph(n=n, edges=e).simplify().list_triangles())
