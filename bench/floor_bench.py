#!/usr/bin/env python3
"""The import against the machine's floor, phase by phase.

    cargo build --release -p quiver-cli
    python3 bench/floor_bench.py --workload dolt --rows 1000000
    python3 bench/floor_bench.py --workload social --scale 1 --budget 256MiB

Runs `quiver import --json` on the workload's files `--runs` times (medians of each
phase's seconds) and `crates/import/examples/floor.rs` on the same files (built here with
cargo), then prints each phase beside what the hardware allows for it on this machine:

| phase | floor (what it must do at least) |
|---|---|
| reading nodes | the nodes file read from the page cache and tokenised (the faster of the csv crate's raw reader and simd-csv, on every core) |
| indexing ids | the ids sorted (a parallel sort of integers) |
| reading relationships | the edges file read and tokenised |
| building adjacency | the edge pairs sorted by source and by target |
| (whole import) | the above plus the database's bytes written and synced (`write`), which the import does during its phases and at publish |

and the import's time as a multiple of the floor, the phase furthest from its floor
first: that is where to profile. A `RESULT` JSON line carries the figures.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUIVER = Path(os.environ.get("QUIVER", ROOT / "target" / "release" / "quiver"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", choices=["dolt", "social"], required=True)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--budget", default=None)
    ap.add_argument("--default-path", action="store_true", help="no --id-type (string ids)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--data", default=str(ROOT / "data" / "bench" / "floor"))
    args = ap.parse_args()
    data = Path(args.data)
    data.mkdir(parents=True, exist_ok=True)
    if args.workload == "dolt":
        d = data / f"dolt-{args.rows}"
        if not list(d.glob("*.csv")):
            subprocess.run([str(QUIVER), "generate", "dolt", "--rows", str(args.rows), "--order", "random",
                            "--out", str(d)], check=True, capture_output=True)
        nodes = next(d.glob("*.csv"))
        edges = None
        flags = ["--nodes", f"Dolt={nodes}"]
    else:
        d = data / f"social-{args.scale}"
        nodes, edges = d / "nodes.csv", d / "edges.csv"
        if not edges.exists():
            subprocess.run([str(QUIVER), "generate", "social", "--scale", str(args.scale), "--out", str(d)],
                           check=True, capture_output=True)
        flags = ["--nodes", f"User={nodes}", "--relationships", f"FOLLOWS={edges}"]
    if not args.default_path:
        flags += ["--id-type", "integer"]
    if args.budget:
        flags += ["--memory-budget", args.budget]
    db = data / "floor.qdb"
    reports = []
    for _ in range(args.runs):
        if db.exists():
            shutil.rmtree(db)
        out = subprocess.run([str(QUIVER), "import", "--db", str(db), "--json", "--quiet"] + flags,
                             check=True, capture_output=True, text=True).stdout
        reports.append(json.loads(out))
    db_bytes = reports[-1]["db_bytes"]
    shutil.rmtree(db)
    fl = ["cargo", "run", "--quiet", "--release", "-p", "quiver-import", "--example", "floor", "--",
          "--nodes", str(nodes), "--write-bytes", str(db_bytes), "--dir", str(data)]
    if edges:
        fl += ["--edges", str(edges)]
    line = [l for l in subprocess.run(fl, cwd=ROOT, check=True, capture_output=True, text=True).stdout.splitlines()
            if l.startswith("FLOOR ")][-1]
    floor = json.loads(line[len("FLOOR "):])
    phases = {}
    for r in reports:
        for p in r["phases"]:
            phases.setdefault(p["phase"], []).append(p["seconds"])
    total = statistics.median(r["seconds"] for r in reports)
    peak = statistics.median(r["peak_rss_bytes"] for r in reports) / 2**20
    want = {
        "reading nodes": floor.get("read_nodes", 0) + floor.get("tokenise_nodes", 0),
        "indexing ids": floor.get("index_ids", 0),
        "reading relationships": floor.get("read_edges", 0) + floor.get("tokenise_edges", 0),
        "building adjacency": floor.get("sort_edges", 0),
    }
    rows = []
    for name, secs in phases.items():
        s = statistics.median(secs)
        f = want.get(name, 0)
        if f == 0 and s < 0.01:
            continue  # a phase this workload does not have (dolt has no relationships)
        rows.append((name, s, f, s / f if f > 0 else float("inf")))
    form = ("string ids" if args.default_path else "integer ids") + (f", budget {args.budget}" if args.budget else "")
    print(f"{args.workload} ({form}): import {total:.2f} s, peak {peak:.0f} MiB, "
          f"memory copy {floor['memcpy_gbps']:.1f} GB/s")
    print(f"{'phase':<24}{'import s':>10}{'floor s':>10}{'multiple':>10}")
    for name, s, f, m in rows:
        print(f"{name:<24}{s:>10.3f}{f:>10.3f}{m:>10.1f}")
    # The database's bytes are written during the phases (row groups as they fill) and
    # synced at publish: their floor counts in the whole import's, beside the phases'.
    print(f"{'writing the database':<24}{'':>10}{floor.get('write', 0):>10.3f}{'':>10}")
    floor_total = sum(want.values()) + floor.get("write", 0)
    print(f"{'whole import':<24}{total:>10.3f}{floor_total:>10.3f}{total / floor_total:>10.1f}")
    worst = max(rows, key=lambda r: r[1] - r[2])
    print(f"furthest from its floor (seconds above it): {worst[0]} ({worst[1] - worst[2]:.3f} s)")
    print("tokenisers: " + ", ".join(f"{k} {v:.3f} s" for k, v in floor.items() if k.startswith("tokenise_") and k.count("_") == 2))
    print("RESULT " + json.dumps({"workload": args.workload, "flags": flags, "import_seconds": total,
                                  "peak_mib": peak, "floor": floor,
                                  "phases": {n: {"import": s, "floor": f} for n, s, f, _ in rows}}))


if __name__ == "__main__":
    main()
