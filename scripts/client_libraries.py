#!/usr/bin/env python3
"""Neo4j's client libraries against `quiver serve`, through their public APIs, unchanged:

- LangChain's `Neo4jGraph` (langchain-neo4j): graph documents added (with and without a
  base entity label, with their source document), the schema read back
  (`apoc.meta.data`), queries; its `Neo4jVector` store built from texts with a
  deterministic fake embedding, searched, and found again by its index name;
- neo4j-graphrag's knowledge-graph writer (`Neo4jWriter`) and schema reader;
- neomodel, the OGM: constraints installed, save, connect, traverse, filter, order,
  disconnect, delete, and a duplicate on a unique property raising `UniqueProperty`;
- LlamaIndex's `Neo4jPropertyGraphStore`: entities, chunks and relations upserted,
  fetched by id, as triplets and as a relation map, the schema refreshed
  (`apoc.meta.subGraph`, `apoc.schema.nodes`), a vector query over the index it declares
  without dimensions, an entity deleted.

    pip install 'neo4j==6.4.1' 'langchain-neo4j==0.11.0' 'neo4j-graphrag==1.22.0'
    pip install --target data/clients/neomodel 'neomodel==7.0.0'   # it pins neo4j 6.1
    pip install --target data/clients/llamaindex 'llama-index-graph-stores-neo4j==0.8.0'   # neo4j 5
    python3 scripts/client_libraries.py --neomodel-path data/clients/neomodel \
        --llamaindex-path data/clients/llamaindex

Each library runs against a fresh database under data/client-libraries (git-ignored),
served with `--no-auth`. neomodel and LlamaIndex pin older drivers than the others, so
each runs in a child process whose import path is its `--...-path`. Exits non-zero at the first
library whose session fails, naming the step; `--only` picks libraries.
"""

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUIVER = ROOT / "target" / "release" / "quiver"
WORK = ROOT / "data" / "client-libraries"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`quiver serve` on a fresh database named `name`."""

    def __init__(self, name):
        db = WORK / f"{name}.qdb"
        shutil.rmtree(db, ignore_errors=True)
        self.port = free_port()
        self.url = f"bolt://127.0.0.1:{self.port}"
        # neomodel takes the credentials in its URL (the server ignores them).
        self.url_auth = f"bolt://neo4j:unused@127.0.0.1:{self.port}"
        self.p = subprocess.Popen([QUIVER, "serve", "--db", db, "--create", "--no-auth",
                                   "--listen", f"127.0.0.1:{self.port}"],
                                  stderr=subprocess.PIPE, text=True)
        for line in self.p.stderr:
            if "serving" in line:
                break
        else:
            sys.exit(f"quiver serve did not start: {self.p.wait()}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.p.terminate()
        self.p.wait(timeout=30)


def check(ok, what):
    if not ok:
        raise AssertionError(what)
    print(f"  ok: {what}")


def langchain(url):
    from langchain_core.documents import Document
    from langchain_neo4j import Neo4jGraph
    from langchain_neo4j.graphs.graph_document import GraphDocument, Node, Relationship

    g = Neo4jGraph(url=url, username="neo4j", password="unused", refresh_schema=True)
    ann, acme, paris = Node(id="ann", type="Person", properties={"age": 30}), \
        Node(id="acme", type="Company"), Node(id="paris", type="City")
    doc = GraphDocument(
        nodes=[ann, acme, paris],
        relationships=[Relationship(source=ann, target=acme, type="WORKS_AT", properties={"since": 2020}),
                       Relationship(source=acme, target=paris, type="LOCATED_IN")],
        source=Document(page_content="Ann works at Acme, in Paris.", metadata={"src": "t1"}),
    )
    g.add_graph_documents([doc], include_source=True)
    g.add_graph_documents([doc], include_source=True)  # again: merged, nothing doubled
    c = g.query("MATCH (n) RETURN labels(n)[0] AS l, count(*) AS c ORDER BY l")
    check(c == [{"l": "City", "c": 1}, {"l": "Company", "c": 1}, {"l": "Document", "c": 1},
                {"l": "Person", "c": 1}], f"nodes merged by label and id: {c}")
    r = g.query("MATCH (:Person {id: 'ann'})-[r:WORKS_AT]->(:Company) RETURN r.since AS s")
    check(r == [{"s": 2020}], "relationship merged with its properties")
    m = g.query("MATCH (:Document)-[:MENTIONS]->(n) RETURN count(n) AS c")
    check(m == [{"c": 3}], "the source document mentions each node once")
    g.add_graph_documents([doc], baseEntityLabel=True)
    b = g.query("MATCH (n:__Entity__) RETURN count(n) AS c")
    check(b == [{"c": 3}], "base entity label: one __Entity__ node per id, labelled by $(row.type)")
    g.refresh_schema()
    s = g.get_structured_schema
    check({"Person", "Company", "City", "Document"} <= set(s["node_props"]),
          f"schema labels read back: {sorted(s['node_props'])}")
    check({"start": "Person", "type": "WORKS_AT", "end": "Company"} in s["relationships"],
          "schema relationships read back")
    check("age" in {p["property"] for p in s["node_props"]["Person"]}, "schema properties read back")
    check("WORKS_AT" in g.get_schema, "schema text")
    e = Neo4jGraph(url=url, username="neo4j", password="unused", enhanced_schema=True)
    check("Person" in e.get_schema, "enhanced schema")
    langchain_vector(url)


def langchain_vector(url):
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_neo4j import Neo4jVector

    emb = DeterministicFakeEmbedding(size=16)
    texts = [f"chunk number {i} about {topic}" for i, topic in
             enumerate(["graphs", "columns", "vectors", "compression", "queries"] * 4)]
    store = Neo4jVector.from_texts(texts, emb, url=url, username="neo4j", password="unused",
                                   index_name="chunks", metadatas=[{"i": i} for i in range(len(texts))])
    hits = store.similarity_search_with_score(texts[7], k=3)
    check(hits[0][0].page_content == texts[7] and abs(hits[0][1] - 1.0) < 1e-9,
          f"vector search finds the text itself first: {[(h.page_content, s) for h, s in hits]}")
    check(len(hits) == 3 and hits[0][1] >= hits[1][1] >= hits[2][1], "best first")
    check(hits[0][0].metadata.get("i") == 7, "metadata comes back")
    again = Neo4jVector.from_existing_index(emb, url=url, username="neo4j", password="unused",
                                            index_name="chunks")
    check(again.similarity_search(texts[3], k=1)[0].page_content == texts[3],
          "the index is found again by name (SHOW INDEXES ... options)")
    # Hybrid search: the vector index and a full-text index (CREATE FULLTEXT INDEX,
    # db.index.fulltext.queryNodes), their scores normalized and merged by LangChain.
    from langchain_neo4j.vectorstores.neo4j_vector import SearchType
    hybrid = Neo4jVector.from_texts(texts, emb, url=url, username="neo4j", password="unused",
                                    index_name="hybrid_chunks", node_label="HybridChunk",
                                    keyword_index_name="hybrid_keywords", search_type=SearchType.HYBRID)
    found = hybrid.similarity_search(texts[12], k=2)
    check(found and found[0].page_content == texts[12],
          f"hybrid search finds the text itself first: {[d.page_content for d in found]}")
    words = hybrid.similarity_search("compression", k=4)
    check(any("compression" in d.page_content for d in words),
          f"the keyword side finds a word: {[d.page_content for d in words]}")


def graphrag(url):
    import neo4j
    from neo4j_graphrag.components.kg_writer import Neo4jWriter
    from neo4j_graphrag.components.types import (
        Neo4jGraph, Neo4jNode, Neo4jRelationship)
    from neo4j_graphrag.schema import get_structured_schema

    with neo4j.GraphDatabase.driver(url, auth=("neo4j", "unused")) as driver:
        graph = Neo4jGraph(
            nodes=[Neo4jNode(id="1", label="Drug", properties={"name": "aspirin"},
                             embedding_properties={"vec": [0.5, 1, -2.0]}),
                   Neo4jNode(id="2", label="Disease", properties={"name": "pain"})],
            relationships=[Neo4jRelationship(start_node_id="1", end_node_id="2", type="TREATS",
                                             properties={"evidence": "high"})],
        )
        result = asyncio.run(Neo4jWriter(driver).run(graph))
        check(result.status == "SUCCESS", f"writer status {result.status}: {result.metadata}")
        recs, _, _ = driver.execute_query(
            "MATCH (d:Drug)-[r:TREATS]->(x:Disease) RETURN d.name AS d, r.evidence AS e, x.name AS x")
        check([r.data() for r in recs] == [{"d": "aspirin", "e": "high", "x": "pain"}],
              "nodes and relationship written")
        vec, _, _ = driver.execute_query("MATCH (d:Drug) RETURN d.vec AS v")
        check(vec[0]["v"] == [0.5, 1.0, -2.0], "embedding set by db.create.setNodeVectorProperty")
        left, _, _ = driver.execute_query("MATCH (n) WHERE n.__tmp_internal_id IS NOT NULL RETURN count(n) AS c")
        check(left[0]["c"] == 0, "temporary ids cleaned up")
        s = get_structured_schema(driver)
        check({"start": "Drug", "type": "TREATS", "end": "Disease"} in s["relationships"],
              f"schema read back: {s['relationships']}")


NEOMODEL = textwrap.dedent("""
    import sys
    from neomodel import (StructuredNode, StringProperty, IntegerProperty, RelationshipTo,
                          UniqueProperty, db, get_config)
    get_config().database_url = sys.argv[1]

    def check(ok, what):
        if not ok:
            raise AssertionError(what)
        print(f"  ok: {what}")

    class Country(StructuredNode):
        code = StringProperty(unique_index=True, required=True)

    class Person(StructuredNode):
        name = StringProperty(unique_index=True)
        age = IntegerProperty(index=True, default=0)
        country = RelationshipTo(Country, "IS_FROM")

    db.install_all_labels()
    jim = Person(name="Jim", age=3).save()
    ann = Person(name="Ann", age=40).save()
    fr = Country(code="FR").save()
    jim.country.connect(fr)
    check(jim.country.is_connected(fr), "connect")
    check([c.code for c in jim.country.all()] == ["FR"], "traverse")
    check([p.name for p in Person.nodes.filter(age__gt=1).order_by("-age")] == ["Ann", "Jim"],
          "filter and order_by")
    check(Person.nodes.get(name="Jim").element_id == jim.element_id, "element ids agree")
    try:
        Person(name="Jim").save()
        check(False, "a duplicate on a unique property raises UniqueProperty")
    except UniqueProperty:
        check(True, "a duplicate on a unique property raises UniqueProperty")
    jim.country.disconnect(fr)
    check(jim.country.all() == [], "disconnect")
    ann.delete()
    check([p.name for p in Person.nodes.all()] == ["Jim"], "delete")
    with db.transaction:
        Person(name="Tx").save()
    check(Person.nodes.get_or_none(name="Tx") is not None, "transaction committed")
""")


def neomodel(url, path):
    env = dict(os.environ, PYTHONPATH=path)
    # A bound on the child: a library that waited on the network for ever would hold CI.
    p = subprocess.run([sys.executable, "-c", NEOMODEL, url], env=env, timeout=600)
    if p.returncode != 0:
        raise AssertionError("neomodel session failed (see above)")


LLAMAINDEX = r"""
import sys
from llama_index.graph_stores.neo4j import Neo4jPropertyGraphStore
from llama_index.core.graph_stores.types import EntityNode, Relation, ChunkNode
from llama_index.core.vector_stores.types import VectorStoreQuery

def check(ok, what):
    print(("  ok: " if ok else "  FAILED: ") + what, flush=True)
    if not ok:
        sys.exit(1)

st = Neo4jPropertyGraphStore(username="neo4j", password="unused", url=sys.argv[1])
a = EntityNode(name="Alice", label="PERSON", properties={"age": 30}, embedding=[0.1, 0.2, 0.3])
b = EntityNode(name="Acme", label="ORG", embedding=[0.3, 0.2, 0.1])
c = ChunkNode(text="Alice works at Acme.", embedding=[0.2, 0.2, 0.2])
st.upsert_nodes([a, b, c])
st.upsert_relations([Relation(label="WORKS_AT", source_id=a.id, target_id=b.id, properties={"since": 2020})])
check([n.id for n in st.get(ids=[a.id])] == ["Alice"], "upserted entities found by id")
t = st.get_triplets(entity_names=["Alice"])
check(len(t) == 1 and t[0][1].label == "WORKS_AT" and t[0][2].name == "Acme"
      and t[0][1].properties.get("since") == 2020, f"the triplet comes back: {t}")
check(len(st.get_rel_map([a], depth=2)) == 1, "the relation map from an entity")
check(st.structured_query("MATCH (n) RETURN count(n) AS c") == [{"c": 3}], "a Cypher query")
st.refresh_schema()
schema = st.get_schema_str()
check("PERSON" in schema and "(:PERSON)-[:WORKS_AT]->(:ORG)" in schema,
      "the schema read back (apoc.meta.data, apoc.meta.subGraph, apoc.schema.nodes)")
nodes, scores = st.vector_query(VectorStoreQuery(query_embedding=[0.1, 0.2, 0.3], similarity_top_k=2))
check(nodes[0].name == "Alice" and abs(scores[0] - 1.0) < 1e-6,
      f"vector search over its index declared without dimensions: {nodes}, {scores}")
st.delete(entity_names=["Acme"])
check(st.structured_query("MATCH (n) RETURN count(n) AS c") == [{"c": 2}], "an entity deleted")
"""


def llamaindex(url, path):
    env = dict(os.environ, PYTHONPATH=path)
    p = subprocess.run([sys.executable, "-c", LLAMAINDEX, url], env=env, timeout=600)
    if p.returncode != 0:
        raise AssertionError("LlamaIndex session failed (see above)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="langchain,graphrag,neomodel,llamaindex")
    ap.add_argument("--llamaindex-path", default=str(ROOT / "data" / "clients" / "llamaindex"),
                    help="where `pip install --target` put llama-index-graph-stores-neo4j and its driver")
    ap.add_argument("--neomodel-path", default=str(ROOT / "data" / "clients" / "neomodel"),
                    help="where `pip install --target` put neomodel and its driver")
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    failed = []
    for lib in args.only.split(","):
        print(f"{lib}:")
        with Server(lib) as s:
            try:
                if lib == "langchain":
                    langchain(s.url)
                elif lib == "graphrag":
                    graphrag(s.url)
                elif lib == "neomodel":
                    neomodel(s.url_auth, args.neomodel_path)
                elif lib == "llamaindex":
                    llamaindex(s.url, args.llamaindex_path)
                else:
                    sys.exit(f"unknown library {lib}")
            except Exception as e:  # noqa: BLE001 - report and go on to the next library
                print(f"  FAILED: {type(e).__name__}: {e}")
                failed.append(lib)
    if failed:
        sys.exit(f"client libraries failed: {', '.join(failed)}")
    print("client libraries: all sessions passed")


if __name__ == "__main__":
    main()
