#!/usr/bin/env bash
# The Bolt server end to end: build a small database, add a user, start `quiver serve`,
# run a few queries through the official neo4j Python driver, stop the server.
# Needs the driver: python3 -m pip install neo4j. Everything goes under ./data.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p quiver-cli
Q=target/release/quiver
python3 -c 'import neo4j' 2>/dev/null || { echo "install the driver first: python3 -m pip install neo4j" >&2; exit 2; }
rm -rf data/serve-demo
$Q generate social --scale 0.01 --out data/serve-demo/social
$Q import --db data/serve-demo/social.qdb --id-type integer \
  --nodes User=data/serve-demo/social/nodes.csv \
  --relationships FOLLOWS=data/serve-demo/social/edges.csv
echo 'demo-password' | $Q user add alice --db data/serve-demo/social.qdb
# Bolt's usual port, or another with PORT=... (the script stops if the server cannot
# listen, rather than talk to whatever else holds the port).
port=${PORT:-7687}
$Q serve --db data/serve-demo/social.qdb --listen "127.0.0.1:$port" &
server=$!
trap 'kill $server 2>/dev/null' EXIT
sleep 1
kill -0 $server 2>/dev/null || { echo "quiver serve did not start (is port $port taken? PORT=7688 $0)" >&2; exit 1; }
PORT=$port python3 - <<'PY'
import os
from neo4j import GraphDatabase
with GraphDatabase.driver(f"bolt://127.0.0.1:{os.environ['PORT']}", auth=("alice", "demo-password")) as d:
    print(d.execute_query("MATCH (n:User) RETURN count(n) AS users").records)
    recs = d.execute_query(
        "MATCH (s:User {id: $id})-->()-->(n:User) RETURN count(DISTINCT n) AS two_hop", id=1
    ).records
    print(recs)
    summary = d.execute_query(
        "MATCH (b:User {id: 1}) CREATE (a:User {id: 9000001, name: 'Ada', since: date()})-[:FOLLOWS]->(b)"
    ).summary
    print("created:", summary.counters)
    print(d.execute_query("MATCH (u:User {id: 9000001})-[r]->(f) RETURN u, r, f.id").records)
PY
