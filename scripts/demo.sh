#!/usr/bin/env bash
# The main job end to end on a small built-in example: generate a social graph and a
# dolt table, import them within a memory budget, show what the database holds, and
# export it back to CSV. Everything goes under ./data (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p quiver-cli
Q=target/release/quiver
rm -rf data/demo
$Q generate social --scale 0.01 --out data/demo/social
$Q generate dolt --rows 100000 --order random --out data/demo/dolt
$Q import --db data/demo/demo.qdb --id-type integer --memory-budget 256MiB \
  --nodes User=data/demo/social/nodes.csv \
  --nodes Dolt=data/demo/dolt/dolt-100k-random.csv \
  --relationships FOLLOWS=data/demo/social/edges.csv
$Q info --db data/demo/demo.qdb --open mapped
$Q export --db data/demo/demo.qdb --out data/demo/export
head -3 data/demo/export/nodes-0000-User.csv data/demo/export/rels-0000-FOLLOWS.csv
# Query it: an aggregation, a 2-hop expansion from one user, and a shortest path.
$Q query --db data/demo/demo.qdb 'MATCH (n:User) RETURN n.gender AS gender, count(*) AS users, avg(n.age) AS age ORDER BY gender'
$Q query --db data/demo/demo.qdb --param id=1 --timing \
  'MATCH (s:User {id: $id})-->()-->(n:User) RETURN count(DISTINCT n) AS two_hop'
$Q query --db data/demo/demo.qdb --param a=1 --param b=2 \
  'MATCH p = shortestPath((a:User {id: $a})-[*..15]->(b:User {id: $b})) RETURN [n IN nodes(p) | n.id] AS path'
# Write: a transaction-backed CREATE and SET, a MERGE, then a checkpoint.
$Q query --db data/demo/demo.qdb "MATCH (b:User {id: 1}) CREATE (a:User {id: 9000001, name: 'Ada'})-[:FOLLOWS {since: 2020}]->(b)"
$Q query --db data/demo/demo.qdb "MATCH (u:User {id: 9000001}) SET u.age = 36 RETURN u.name, u.age"
$Q query --db data/demo/demo.qdb "UNWIND [1, 1, 2] AS v MERGE (t:Tag {v: v}) RETURN count(*) AS rows"
$Q query --db data/demo/demo.qdb "CHECKPOINT"
# Graph algorithms in Neo4j GDS's shape: a projection (a view of the stored graph), then PageRank.
$Q query --db data/demo/demo.qdb "CALL gds.graph.project('g', 'User', 'FOLLOWS') YIELD graphName CALL gds.pageRank.stream(graphName) YIELD nodeId, score RETURN gds.util.asNode(nodeId).id AS user, score ORDER BY score DESC LIMIT 5"
$Q query --db data/demo/demo.qdb "MATCH (u:User {id: 9000001})-[:FOLLOWS]->(f) RETURN u.name, f.id"
# LOAD CSV from the import folder beside the database, in batches of committed rows,
# and a transaction in the shell that is rolled back.
mkdir -p data/demo/import
printf 'id,name,follows\n9000002,Grace,1\n9000003,Alan,NA\n9000004,Edsger,2\n' > data/demo/import/people.csv
$Q query --db data/demo/demo.qdb "CREATE CONSTRAINT FOR (p:Person) REQUIRE p.id IS UNIQUE"
$Q query --db data/demo/demo.qdb "LOAD CSV FROM 'people.csv' WITH HEADER NULLIF 'NA' AS row CALL { WITH row MERGE (p:Person {id: toInteger(row.id)}) SET p.name = row.name WITH p, row MATCH (u:User {id: toInteger(row.follows)}) CREATE (p)-[:FOLLOWS]->(u) } IN TRANSACTIONS OF 2 ROWS"
$Q query --db data/demo/demo.qdb "MATCH (p:Person)-[:FOLLOWS]->(u:User) RETURN p.name, u.id ORDER BY p.name"
printf "BEGIN;\nCREATE (:Person {id: 1});\nROLLBACK;\nMATCH (p:Person) RETURN count(p) AS people;\n" | $Q shell --db data/demo/demo.qdb
$Q query --db data/demo/demo.qdb "SHOW STORAGE INFO"
