#!/usr/bin/env bash
# The standard set of import comparisons recorded in docs/benchmarks.md. Takes ~30 min
# on 2 cores and ~10 GB of disk under data/bench (git-ignored). PostgreSQL and MariaDB
# need the system packages (Debian: apt-get install postgresql mariadb-server) and
# `pip install psutil`; without them those peers are skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p quiver-cli
B="python3 bench/import_bench.py --data data/bench"
$B --workload dolt --rows 1000000 --order sorted --runs 3 --peers duckdb,kuzu,postgres,mariadb
$B --workload dolt --rows 1000000 --order random --runs 3 --peers duckdb,kuzu,postgres,mariadb
$B --workload social --scale 1 --budget 512MiB --runs 3
# The server databases once on social (MariaDB takes minutes per run).
$B --workload social --scale 1 --budget 512MiB --runs 1 --peers postgres,mariadb
$B --workload wide --rows 100000 --runs 3
$B --workload dolt --rows 10000000 --order sorted --runs 2
$B --workload dolt --rows 10000000 --order random --runs 2
# The memory bound at 512 MiB on the largest inputs (Quiver only).
$B --workload dolt --rows 10000000 --order random --runs 1 --budget 512MiB --peers none
# Seed 003's read queries on the social graph, against Kùzu.
python3 bench/query_bench.py --scale 1 --runs 200
