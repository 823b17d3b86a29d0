#!/usr/bin/env python3
"""Appending to a live graph: `quiver import --append` against Kùzu `COPY` into the
existing tables, side by side.

    cargo build --release
    pip install kuzu
    python3 bench/append_bench.py --runs 3

The base is the social graph (scale 1, 1.6M users, ~30M FOLLOWS) imported by both
systems. The append adds `--users` new users (rows of the same shape, new ids) and
`--follows` new FOLLOWS edges whose endpoints are drawn from old and new users alike, so
most of them resolve through the existing id index. Each run starts from a fresh copy
of the base; the table gives wall time, rows/s (new nodes plus relationships), the
process's peak RSS and the Kùzu/Quiver time ratio, medians over `--runs`. Kùzu runs
`COPY User` then `COPY FOLLOWS` on the existing tables (its bulk path), all threads.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_bench import QUIVER, ROOT, fresh, fresh_copy, kuzu_script, timed  # noqa: E402
from query_bench import prepare  # noqa: E402


def extra_files(data, n_users, users, follows, seed):
    """New users (copies of the first rows with new ids) and new follows."""
    out = data / f"append-{users}-{follows}"
    nodes, edges = out / "users.csv", out / "follows.csv"
    if edges.exists():
        return nodes, edges
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    with open(data / "nodes.csv") as src, open(nodes, "w") as f:
        f.write(src.readline())
        for i in range(users):
            line = src.readline()
            f.write(f"{n_users + 1 + i}{line[line.index(','):]}")
    total = n_users + users
    with open(edges, "w") as f:
        f.write(":START_ID(User),:END_ID(User)\n")
        f.writelines(f"{rng.randint(1, total)},{rng.randint(1, total)}\n" for _ in range(follows))
    return nodes, edges


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="1")
    ap.add_argument("--users", type=int, default=200_000)
    ap.add_argument("--follows", type=int, default=2_000_000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--peers", default="kuzu")
    args = ap.parse_args()
    work = ROOT / "data" / "bench" / "work" / f"query-social-{args.scale}"
    work.mkdir(parents=True, exist_ok=True)
    q, peer_dbs, n_users = prepare(args, work)
    kz = peer_dbs.get("kuzu")
    data = ROOT / "data" / "bench" / f"social-{args.scale}"
    nodes, edges = extra_files(data, n_users, args.users, args.follows, 3)
    rows = args.users + args.follows
    print(f"social scale {args.scale} ({n_users} users) + {args.users} users and {args.follows} follows; "
          f"median of {args.runs} runs")
    res = {}
    for _ in range(args.runs):
        qd = work / "append.qdb"
        fresh_copy(q, qd)
        secs, rss, _ = timed([str(QUIVER), "import", "--db", str(qd), "--append", "--quiet",
                              "--nodes", f"User={nodes}", "--relationships", f"FOLLOWS={edges}"])
        res.setdefault("quiver --append", []).append((secs, rss))
        if "kuzu" in args.peers:
            kd = work / "append.kz"
            fresh_copy(kz, kd)
            stmts = [f"COPY User FROM '{nodes}' (header=true)", f"COPY FOLLOWS FROM '{edges}' (header=true)"]
            secs, rss, _ = timed([sys.executable, "-c", kuzu_script(kd, stmts, os.cpu_count())])
            res.setdefault("kuzu COPY", []).append((secs, rss))
    check = subprocess.run([str(QUIVER), "query", "--db", str(work / "append.qdb"), "--format", "csv",
                            "MATCH (u:User) RETURN count(u)"], capture_output=True, text=True).stdout
    print(f"  quiver after the append: {check.split()[-1]} users")
    print(f"{'system':<16} {'wall s':>8} {'rows/s':>12} {'peak RSS MiB':>13} {'vs quiver':>10}")
    med = {k: (statistics.median(s for s, _ in v), max(r for _, r in v)) for k, v in res.items()}
    base = med["quiver --append"][0]
    for name, (secs, rss) in med.items():
        print(f"{name:<16} {secs:>8.2f} {rows / secs:>12.0f} {rss / 2**20:>13.1f} {secs / base:>9.2f}x")
        print("RESULT " + json.dumps({"system": name, "rows": rows, "seconds": round(secs, 3),
                                      "rows_per_s": round(rows / secs), "peak_rss_bytes": rss,
                                      "runs": [round(s, 3) for s, _ in res[name]]}))
    for p in [work / "append.qdb", work / "append.kz"]:
        fresh(p)


if __name__ == "__main__":
    main()
