#!/usr/bin/env python3
"""Bulk import against Neo4j's: `quiver import` beside `neo4j-admin database import full`
(Neo4j 5's offline bulk importer) on the same generated social graph files, in one run,
interleaved. Both read the files as they are: the generator writes Neo4j's header
convention (`id:ID(User)`, `:START_ID(User)`).

- `quiver` (default path): `quiver import` with no tuning flags (integer ids inferred);
- `quiver --id-type integer`: the tuned form;
- `neo4j-admin`: its best form, `--id-type=integer`, 2 GiB heap (`HEAP_SIZE`), its
  default threads (all cores).

Neo4j is not part of the repository: give `--neo4j-home`, a folder whose `lib/` holds
Neo4j 5's jars (the tarball's, or `mvn dependency:copy-dependencies` of `org.neo4j:neo4j`,
`neo4j-command-line` and `neo4j-import-tool`). Java 17 must be on the PATH.

    python3 bench/neo4j_import_bench.py --scale 1 --runs 3 --neo4j-home data/neo4j

Per system: wall time (median of `--runs`), rows/s (nodes plus relationships), the peak
RSS of the process tree (`wait4`), and the ratio to Quiver's default path.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_bench import QUIVER, ROOT, fresh, timed  # noqa: E402
from query_bench import social  # noqa: E402

CONF = """server.directories.data={home}/data
server.directories.logs={home}/logs
server.directories.import={home}/import
server.directories.run={home}/run
server.directories.plugins={home}/plugins
server.directories.lib={home}/lib
dbms.usage_report.enabled=false
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="1")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--neo4j-home", required=True)
    ap.add_argument("--heap", default="2g")
    args = ap.parse_args()
    home = Path(args.neo4j_home).resolve()
    if not any(home.glob("lib/neo4j-import-tool-*.jar")):
        sys.exit(f"{home}/lib has no neo4j-import-tool jar: give the home of a Neo4j 5 installation")
    work = ROOT / "data" / "bench" / "work" / f"neo4j-import-{args.scale}"
    work.mkdir(parents=True, exist_ok=True)
    data = ROOT / "data" / "bench" / f"social-{args.scale}"
    # (social() makes the files if missing; its database is not used here.)
    nodes, edges, n_users = social(args.scale, work / "unused.qdb", flags=("--id-type", "integer"))
    fresh(work / "unused.qdb")
    # neo4j-admin reads a localdatetime only in ISO 8601's form (`2011-04-15T15:20:54`):
    # both systems import a copy of the nodes written so.
    iso = work / "nodes-iso.csv"
    if not iso.exists():
        pat = re.compile(rb"(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)")
        with open(nodes, "rb") as src, open(iso, "wb") as dst:
            for line in src:
                dst.write(pat.sub(rb"\1T\2", line))
    nodes = iso
    n_edges = sum(1 for _ in open(edges, "rb")) - 1
    rows = n_users + n_edges
    # A home of its own for the imported store, sharing the jars.
    nh = work / "neo4j"
    for d in ("conf", "data", "logs", "import", "run", "plugins"):
        (nh / d).mkdir(parents=True, exist_ok=True)
    if not (nh / "lib").exists():
        (nh / "lib").symlink_to(home / "lib")
    (nh / "conf" / "neo4j.conf").write_text(CONF.format(home=nh))
    env = dict(os.environ, NEO4J_HOME=str(nh), NEO4J_CONF=str(nh / "conf"), HEAP_SIZE=args.heap)
    neo4j_cmd = ["java", "-cp", f"{nh}/lib/*", "org.neo4j.server.startup.Neo4jAdminCommand",
                 "database", "import", "full", "neo4j", "--overwrite-destination=true",
                 f"--report-file={nh}/logs/import.report", f"--nodes=User={nodes}",
                 f"--relationships=FOLLOWS={edges}", "--id-type=integer"]
    qdb = work / "social.qdb"
    systems = {
        "quiver": [str(QUIVER), "import", "--db", str(qdb), "--quiet", "--overwrite",
                   "--nodes", f"User={nodes}", "--relationships", f"FOLLOWS={edges}"],
        "quiver --id-type integer": [str(QUIVER), "import", "--db", str(qdb), "--quiet", "--overwrite",
                                     "--id-type", "integer", "--nodes", f"User={nodes}",
                                     "--relationships", f"FOLLOWS={edges}"],
        "neo4j-admin": neo4j_cmd,
    }
    print(f"social scale {args.scale}: {n_users} users + {n_edges} follows = {rows} rows; "
          f"median of {args.runs} runs, interleaved")
    res = {k: [] for k in systems}
    for _ in range(args.runs):
        for name, cmd in systems.items():
            fresh(qdb)
            shutil.rmtree(nh / "data", ignore_errors=True)
            (nh / "data").mkdir()
            old = os.environ.copy()
            os.environ.update(env)
            try:
                secs, rss, _ = timed(cmd)
            finally:
                os.environ.clear()
                os.environ.update(old)
            res[name].append((secs, rss))
    base = statistics.median(s for s, _ in res["quiver"])
    print(f"{'system':<26} {'wall s':>8} {'rows/s':>12} {'peak RSS MiB':>13} {'vs quiver':>10}")
    for name, v in res.items():
        secs = statistics.median(s for s, _ in v)
        rss = max(r for _, r in v)
        print(f"{name:<26} {secs:>8.2f} {rows / secs:>12.0f} {rss / 2**20:>13.1f} {secs / base:>9.2f}x")
        print("RESULT " + json.dumps({"system": name, "rows": rows, "seconds": round(secs, 3),
                                      "rows_per_s": round(rows / secs), "peak_rss_bytes": rss,
                                      "runs": [round(s, 3) for s, _ in v]}))
    fresh(qdb)
    shutil.rmtree(nh / "data", ignore_errors=True)


if __name__ == "__main__":
    main()
