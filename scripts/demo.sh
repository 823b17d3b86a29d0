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
$Q query --db data/demo/demo.qdb "MATCH (u:User {id: 9000001})-[:FOLLOWS]->(f) RETURN u.name, f.id"
$Q query --db data/demo/demo.qdb "SHOW STORAGE INFO"
