#!/usr/bin/env python3
"""A live database stays fast: changes, CHECKPOINT, then seed 003's reads against a fresh
import of the same resulting graph.

    cargo build --release
    python3 bench/live_bench.py --scale 1 --runs 200

Each scenario starts from a copy of the imported social graph (`--id-type integer`) and
runs, each as its own `quiver query` process (wall time and peak RSS of the process):
- the change: `set5`, `set25`, `set100` (one statement that SETs `age` on 5%, 25%, 100% of
  the users), `rels1m` (a LOAD CSV of 1M FOLLOWS relationships between existing users),
  `delete10` (DETACH DELETE of 10% of the users);
- `CHECKPOINT`;
- an open: the whole process of a one-row seek (`MATCH (n:User {id: 1}) RETURN n.id`),
  median of 5;
- seed 003's aggregation, find node, 1-hop and 2-hop (`quiver query --bench-params`,
  random ids, medians).
The same reads and open run on a fresh import of the graph the scenario produced (the
generated CSV files changed the same way, by this script), and the table gives each
after-checkpoint figure as a ratio of the fresh one (targets: reads within 1.2x, open
within 2x). `--form default` runs what a new user runs instead: the import without
flags (string ids, the default memory budget), ids matched as strings. RESULT lines are
JSON for docs/benchmarks.md.
"""

import argparse
import json
import random
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_bench import QUIVER, ROOT, fresh, fresh_copy, timed  # noqa: E402
from query_bench import run, social  # noqa: E402

# `{ID}` is the user id as an integer, `{KEY}` a parameter as the id's type, `{R}` an
# id read from LOAD CSV (integer ids with `--id-type integer`, strings by default).
CHANGES = {
    "set5": "MATCH (n:User) WHERE {ID} % 20 = 0 SET n.age = coalesce(n.age, 0) + 1",
    "set25": "MATCH (n:User) WHERE {ID} % 4 = 0 SET n.age = coalesce(n.age, 0) + 1",
    "set100": "MATCH (n:User) SET n.age = coalesce(n.age, 0) + 1",
    "rels1m": "LOAD CSV WITH HEADERS FROM 'file:///pairs.csv' AS r "
              "MATCH (a:User {{id: {R}(r.a)}}), (b:User {{id: {R}(r.b)}}) CREATE (a)-[:FOLLOWS]->(b)",
    "delete10": "MATCH (n:User) WHERE {ID} % 10 = 0 DETACH DELETE n",
}

READS = [
    ("aggregation", "MATCH (n:User) RETURN n.gender, count(*), avg(n.age)", [], 0.2),
    ("find node", "MATCH (n:User {{id: {KEY}}}) RETURN n", ["id"], 1),
    ("1-hop", "MATCH (s:User {{id: {KEY}}})-->(n:User) RETURN n.id", ["id"], 1),
    ("2-hop", "MATCH (s:User {{id: {KEY}}})-->()-->(n:User) RETURN DISTINCT n.id", ["id"], 0.5),
]

SEEK = "MATCH (n:User {{id: {KEY}}}) RETURN n.id"

# The two forms: tuned (integer ids) and what a new user runs (no flags: string ids,
# the default memory budget).
FORMS = {
    "integer": (["--id-type", "integer"], {"ID": "n.id", "KEY": "$id", "R": "toInteger"}),
    "default": ([], {"ID": "toInteger(n.id)", "KEY": "toString($id)", "R": "toString"}),
}


def open_time(db, subst, n=5):
    seek = SEEK.format(**subst).replace("$id", "1")
    return statistics.median(timed([QUIVER, "query", "--db", db, seek])[0] for _ in range(n))


def reads(db, work, n_users, runs, seed, subst):
    out = {}
    rng = random.Random(seed)
    for name, q, pnames, factor in READS:
        q = q.format(**subst)
        k = max(5, int(runs * factor))
        pfile = work / "params.csv"
        with open(pfile, "w") as f:
            if pnames:
                f.write(",".join(pnames) + "\n")
                for _ in range(k):
                    f.write(",".join(str(rng.randint(1, n_users)) for _ in pnames) + "\n")
            else:
                f.write("_\n" + "\n".join("0" for _ in range(k)) + "\n")
        lines = [json.loads(l) for l in run([QUIVER, "query", "--db", db, "--bench-params", pfile,
                                             "--warmup", "3", q]).splitlines() if l.strip()]
        out[name] = statistics.median(l["ms"] for l in lines[:-1])
    return out


def to_file(cmd, path):
    with open(path, "w") as f:
        if subprocess.run(list(map(str, cmd)), stdout=f).returncode != 0:
            sys.exit(f"failed: {' '.join(map(str, cmd))}")


def transformed(name, nodes, edges, pairs, out):
    """The generated CSV files changed as scenario `name` changes the graph."""
    out.mkdir(parents=True, exist_ok=True)
    n_out, e_out = out / "nodes.csv", out / "edges.csv"
    files = [e_out]
    if name.startswith("set"):
        k = {"set5": 20, "set25": 4, "set100": 1}[name]
        # age is the second field; an empty age becomes 1 (coalesce(null, 0) + 1).
        to_file(["awk", "-F,", "-v", "OFS=,",
                 f"NR>1 && $1 % {k} == 0 {{ $2 = ($2 == \"\" ? 1 : $2 + 1) }} {{ print }}", nodes], n_out)
        fresh(e_out)
        e_out.symlink_to(edges)
    elif name == "rels1m":
        fresh(n_out)
        n_out.symlink_to(nodes)
        fresh(e_out)
        e_out.symlink_to(edges)
        tail = out / "pairs-noheader.csv"
        to_file(["tail", "-n", "+2", pairs], tail)
        files.append(tail)
    elif name == "delete10":
        to_file(["awk", "-F,", "NR==1 || $1 % 10 != 0", nodes], n_out)
        to_file(["awk", "-F,", "NR==1 || ($1 % 10 != 0 && $2 % 10 != 0)", edges], e_out)
    return n_out, files


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", default="1")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--scenarios", default="set5,set25,set100,rels1m,delete10")
    ap.add_argument("--form", choices=list(FORMS), default="integer",
                    help="integer: --id-type integer; default: no import flags (string ids)")
    args = ap.parse_args()
    flags, subst = FORMS[args.form]
    work = ROOT / "data" / "bench" / "work" / f"live-{args.scale}-{args.form}"
    work.mkdir(parents=True, exist_ok=True)
    base = work / "base.qdb"
    nodes, edges, n_users = social(args.scale, base, flags)
    imports = work / "import"
    imports.mkdir(exist_ok=True)
    pairs = imports / "pairs.csv"
    if not pairs.exists():
        rng = random.Random(args.seed)
        with open(pairs, "w") as f:
            f.write("a,b\n")
            for _ in range(1_000_000):
                f.write(f"{rng.randint(1, n_users)},{rng.randint(1, n_users)}\n")
    print(f"social scale {args.scale}: {n_users} users, import flags: {' '.join(flags) or 'none'}")
    print(f"{'scenario':<9} {'change s':>9} {'change MiB':>10} {'ckpt s':>7} {'ckpt MiB':>8} "
          f"{'open s':>7} {'fresh':>6} " + " ".join(f"{n:>17}" for n, *_ in READS))
    for name in args.scenarios.split(","):
        db = work / f"{name}.qdb"
        fresh_copy(base, db)
        q = CHANGES[name].format(**subst)
        cmd = [QUIVER, "query", "--db", db, "--import-dir", imports, "--timing", q]
        change_s, change_rss, _ = timed(cmd)
        ckpt_s, ckpt_rss, ckpt_out = timed([QUIVER, "query", "--db", db, "CHECKPOINT"])
        after_open = open_time(db, subst)
        after = reads(db, work, n_users, args.runs, args.seed, subst)
        # The same graph, imported fresh.
        n_csv, e_csvs = transformed(name, nodes, edges, pairs, work / f"{name}-csv")
        fdb = work / f"{name}-fresh.qdb"
        run([QUIVER, "import", "--db", fdb, *flags, "--overwrite", "--quiet",
             "--nodes", f"User={n_csv}", "--relationships", "FOLLOWS=" + ",".join(map(str, e_csvs))])
        fresh_open = open_time(fdb, subst)
        fresh_reads = reads(fdb, work, n_users, args.runs, args.seed, subst)
        cells = " ".join(f"{after[n]:>7.2f}/{fresh_reads[n]:<6.2f}{after[n] / fresh_reads[n]:>3.1f}x"
                         for n, *_ in READS)
        print(f"{name:<9} {change_s:>9.2f} {change_rss / 2**20:>10.0f} {ckpt_s:>7.2f} {ckpt_rss / 2**20:>8.0f} "
              f"{after_open:>7.3f} {fresh_open:>6.3f} {cells}")
        print("  " + ckpt_out.strip().splitlines()[-1] if ckpt_out.strip() else "")
        print("RESULT " + json.dumps({
            "scenario": name, "form": args.form, "change_s": change_s, "change_peak_rss_bytes": change_rss,
            "checkpoint_s": ckpt_s, "checkpoint_peak_rss_bytes": ckpt_rss,
            "open_s": after_open, "fresh_open_s": fresh_open,
            "reads_ms": after, "fresh_reads_ms": fresh_reads}))
        sys.stdout.flush()
        fresh(db)
        fresh(fdb)


if __name__ == "__main__":
    main()
