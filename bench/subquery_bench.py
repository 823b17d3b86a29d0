#!/usr/bin/env python3
"""Subquery and pattern-expression forms against the same answers written by hand.

    cargo build --release
    python3 bench/subquery_bench.py --scale 1 --runs 3

Social graph of `--scale` (generated and imported with `--id-type integer` by the
query benchmark's helper, under data/bench/work/query-social-N). Each pair asks one
question two ways: the form with `EXISTS { }`, `COUNT { }`, a pattern comprehension or a
pattern predicate, and the form written with OPTIONAL MATCH, aggregation or a pattern.
Both must give the same rows. Whole-graph questions run `quiver query` as a whole process
(`--runs` interleaved runs; median seconds and peak RSS); per-user questions run
`quiver query --bench-params` over random ids (median ms, p99 ms, queries/s). Prints
each form's figure and the ratio subquery / hand-written (the bound the Cypher issue
sets is 1.2x). RESULT lines are JSON for docs/benchmarks.md.
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_bench import QUIVER, ROOT  # noqa: E402
from query_bench import run, social  # noqa: E402

# name, subquery form, hand-written form. Whole-graph questions first.
WHOLE = [
    ("follow nobody",
     "MATCH (a:User) WHERE NOT EXISTS { (a)-->() } RETURN count(a)",
     "MATCH (a:User) OPTIONAL MATCH (a)-->(b) WITH a, count(b) AS k WHERE k = 0 RETURN count(a)"),
    ("COUNT per user, summed",
     "MATCH (a:User) RETURN sum(COUNT { (a)-->() })",
     "MATCH (a:User) OPTIONAL MATCH (a)-->(b) WITH a, count(b) AS k RETURN sum(k)"),
    ("comprehension per user, sizes summed",
     "MATCH (a:User) RETURN sum(size([(a)-->(b) | b.id]))",
     "MATCH (a:User) OPTIONAL MATCH (a)-->(b) WITH a, collect(b.id) AS l RETURN sum(size(l))"),
    ("whole-query EXISTS",
     "MATCH (a:User) WHERE EXISTS { MATCH (a)-[:FOLLOWS]->(b) WITH b WHERE b.age > 20 RETURN b } RETURN count(a)",
     "MATCH (a:User) OPTIONAL MATCH (a)-[:FOLLOWS]->(b) WHERE b.age > 20 WITH a, count(b) AS k WHERE k > 0 RETURN count(a)"),
]

PER_USER = [
    ("comprehension of one user",
     "MATCH (a:User {id: $id}) RETURN [(a)-->(b) | b.id] AS l",
     "MATCH (a:User {id: $id}) OPTIONAL MATCH (a)-->(b) RETURN collect(b.id) AS l"),
    ("triadic closure (bound predicate)",
     "MATCH (a:User {id: $id})-[:FOLLOWS]->(b)-[:FOLLOWS]->(c) WHERE (a)-[:FOLLOWS]->(c) RETURN count(*)",
     "MATCH (a:User {id: $id})-[:FOLLOWS]->(b)-[:FOLLOWS]->(c), (a)-[:FOLLOWS]->(c) RETURN count(*)"),
]


def timed(db, q):
    """(seconds, peak RSS MiB, output) of one `quiver query` process (its own rusage,
    through wait4)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen([QUIVER, "query", "--db", db, "--format", "csv", q],
                             stdout=out, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        s = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if p.returncode != 0:
            sys.exit(f"failed: {q}\n{err.read().decode()[-2000:]}")
        return s, usage.ru_maxrss / 1024, out.read().decode()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3, help="interleaved runs of each whole-graph pair")
    ap.add_argument("--ids", type=int, default=300, help="random users per per-user question")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    work = ROOT / "data" / "bench" / "work" / f"query-social-{args.scale}"
    db = work / "social.qdb"
    _, _, n_users = social(args.scale, db)
    print(f"social scale {args.scale}: {n_users} users")
    for name, sub, hand in WHOLE:
        secs = {"sub": [], "hand": []}
        rss = {"sub": 0.0, "hand": 0.0}
        outs = {}
        for _ in range(args.runs):
            for form, q in (("sub", sub), ("hand", hand)):
                s, m, out = timed(db, q)
                secs[form].append(s)
                rss[form] = max(rss[form], m)
                outs[form] = out
        # The rows, not the header (the column names are the forms' own texts).
        if outs["sub"].splitlines()[1:] != outs["hand"].splitlines()[1:]:
            sys.exit(f"{name}: the forms disagree:\n{outs['sub']}\n{outs['hand']}")
        med = {f: statistics.median(v) for f, v in secs.items()}
        ratio = med["sub"] / med["hand"]
        print(f"{name:<40} subquery {med['sub']:.2f} s  hand-written {med['hand']:.2f} s  "
              f"ratio {ratio:.2f}x  (peak {rss['sub']:.0f} / {rss['hand']:.0f} MiB)")
        print("RESULT " + json.dumps({"query": name, "subquery_s": med["sub"], "hand_s": med["hand"],
                                      "ratio": ratio, "answer": outs["sub"].strip().splitlines()[-1]}))
    rng = random.Random(args.seed)
    pfile = work / "subquery-ids.csv"
    pfile.write_text("id\n" + "".join(f"{rng.randrange(1, n_users + 1)}\n" for _ in range(args.ids)))
    for name, sub, hand in PER_USER:
        res = {}
        for form, q in (("sub", sub), ("hand", hand)):
            out = run([QUIVER, "query", "--db", db, "--bench-params", pfile,
                       "--warmup", str(args.warmup), q])
            res[form] = json.loads(out.strip().splitlines()[-1])
        ratio = res["sub"]["median_ms"] / res["hand"]["median_ms"]
        print(f"{name:<40} subquery {res['sub']['median_ms']:.3f} ms (p99 {res['sub']['p99_ms']:.2f}, "
              f"{res['sub']['qps']:.0f}/s)  hand-written {res['hand']['median_ms']:.3f} ms "
              f"(p99 {res['hand']['p99_ms']:.2f}, {res['hand']['qps']:.0f}/s)  ratio {ratio:.2f}x  "
              f"(peak {res['sub']['peak_rss_bytes'] / 2**20:.0f} MiB)")
        print("RESULT " + json.dumps({"query": name, "subquery": res["sub"], "hand": res["hand"],
                                      "ratio": ratio}))


if __name__ == "__main__":
    main()
