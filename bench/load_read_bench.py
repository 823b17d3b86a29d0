#!/usr/bin/env python3
"""Loading while reading: LOAD CSV of the dolt table into the social graph while other
sessions run seed 003's read queries on it.

    cargo build --release
    python3 bench/load_read_bench.py --runs 3

One process opens a copy of the imported social graph (scale 1). For each read query:
- before: `--readers` client sessions run the query with random ids, nothing else running;
- during: the same clients run it again and again while one more session runs
  `LOAD CSV ... CALL { CREATE (:Dolt {...}) } IN TRANSACTIONS OF 100000 ROWS` of dolt 1m.
  Around every read each client opens a transaction and counts `:Dolt` nodes before
  and after the read. A consistent snapshot means: both counts agree, counts never go
  down, and every count is a whole number of committed batches (a multiple of 100,000).
The table gives read latency (median, p99) before and during, the load's time alone
and under the readers, and the consistency check (violations, distinct counts seen).
Medians over `--runs` runs, each on a fresh copy. RESULT lines are JSON.
"""

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_bench import QUIVER, ROOT, fresh, fresh_copy  # noqa: E402
from load_bench import DOLT_PROPS  # noqa: E402
from load_bench import prepare as prepare_dolt  # noqa: E402
from query_bench import QUERIES, prepare, run  # noqa: E402

READS = ["1-hop", "2-hop", "find node"]


def bench(db, imp, query, pfile, readers, during=None, check=None):
    cmd = [QUIVER, "query", "--db", db, "--import-dir", imp, "--bench-params", pfile,
           "--warmup", "20", "--bench-threads", str(readers)]
    if during:
        cmd += ["--bench-during", during]
    if check:
        cmd += ["--bench-check", check]
    out = run(cmd + [query])
    return json.loads(out.splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="1")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reads", type=int, default=2000, help="reads per client and pass")
    ap.add_argument("--readers", type=int, default=1)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--only", help="comma-separated query names")
    args = ap.parse_args()
    args.workload = "dolt"
    data = ROOT / "data" / "bench"
    files = prepare_dolt(args, data)
    imp = files["plain"].parent
    work = data / "work" / f"query-social-{args.scale}"
    work.mkdir(parents=True, exist_ok=True)
    src, _, n_users = prepare(argparse.Namespace(scale=args.scale), work)
    load = (f"LOAD CSV FROM '{files['plain'].name}' WITH HEADER NULLIF '' AS row "
            f"CALL {{ WITH row CREATE (:Dolt {{{DOLT_PROPS}}}) }} IN TRANSACTIONS OF {args.batch} ROWS")
    check = "MATCH (d:Dolt) RETURN count(d)"
    rng = random.Random(5)
    db = work / "lr.qdb"
    print(f"social scale {args.scale} ({n_users} users), LOAD CSV of dolt 1m in batches of {args.batch}; "
          f"{args.readers} reader(s); median of {args.runs} runs")
    print(f"{'query':<10} {'before ms':>10} {'p99':>8} {'during ms':>10} {'p99':>8} {'reads':>7} "
          f"{'load alone s':>13} {'load during s':>14} {'violations':>11} {'counts seen':>12}")
    alone = []
    for _ in range(args.runs):
        fresh_copy(src, db)
        one = work / "one.csv"
        one.write_text("_\n0\n")
        s = bench(db, imp, "RETURN 1", one, 1, during=load)
        alone.append(s["during_s"])
    for name, qq, _, pnames, _ in QUERIES:
        if name not in (args.only.split(",") if args.only else READS):
            continue
        rows = []
        for _ in range(args.runs):
            fresh_copy(src, db)
            pfile = work / "lrparams.csv"
            with open(pfile, "w") as f:
                f.write(",".join(pnames) + "\n")
                for _ in range(args.reads * args.readers):
                    f.write(",".join(str(rng.randint(1, n_users)) for _ in pnames) + "\n")
            before = bench(db, imp, qq, pfile, args.readers)
            during = bench(db, imp, qq, pfile, args.readers, during=load, check=check)
            bad = [c for c in during["checks_seen"] if c % args.batch and c != files["rows"]]
            viol = during["violations"] + [f"count {c} is not a whole number of batches" for c in bad]
            rows.append((before, during, viol))
        med = lambda f: statistics.median(f(r) for r in rows)  # noqa: E731
        viol = [v for r in rows for v in r[2]]
        seen = sorted({c for r in rows for c in r[1]["checks_seen"]})
        print(f"{name:<10} {med(lambda r: r[0]['median_ms']):>10.3f} {med(lambda r: r[0]['p99_ms']):>8.3f} "
              f"{med(lambda r: r[1]['median_ms']):>10.3f} {med(lambda r: r[1]['p99_ms']):>8.3f} "
              f"{int(med(lambda r: r[1]['runs'])):>7} {statistics.median(alone):>13.2f} "
              f"{med(lambda r: r[1]['during_s']):>14.2f} {len(viol):>11} {len(seen):>12}")
        for v in viol[:5]:
            print(f"  violation: {v}")
        print("RESULT " + json.dumps({
            "query": name, "readers": args.readers,
            "before": {k: med(lambda r: r[0][k]) for k in ["median_ms", "p99_ms", "qps"]},
            "during": {k: med(lambda r: r[1][k]) for k in ["median_ms", "p99_ms", "qps", "during_s", "runs"]},
            "load_alone_s": statistics.median(alone), "violations": viol, "counts_seen": seen}))
        sys.stdout.flush()
    fresh(db)


if __name__ == "__main__":
    main()
