#!/usr/bin/env python3
"""The Spark build against `quiver import` of the same files, on this machine.

    python3 bench/spark_build.py --scale 4 --partitions 2,8,32

1. Generates social scale N (`quiver generate social`) and writes it as Parquet with
   plain column names (users: id, age, ...; follows: src, dst) under
   data/bench/spark-<N>/ (once).
2. `quiver import` of the Parquet files: wall time, rows/s, peak RSS (median of --runs).
3. `quiver.spark.build` with Spark local[2] (the machine's cores) for each partition
   count: wall time, each stage's time, the time tasks spent inside Quiver's part
   writers (summed over tasks, from the parts' descriptions), and the peak RSS of the
   Spark JVM and its Python workers (sampled).
4. From those: the projected wall time on 8 and 64 executors (see docs/scale-out.md for
   the model and its assumptions).
5. Equal answers: counts and seed 003's queries on both databases.

Prints a table and writes JSON to bench/out/spark_build-<N>.json. Needs pyspark, pyarrow
and psutil (pip).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from import_bench import QUIVER, ROOT  # noqa: E402
from servers import _sample_rss, _tree  # noqa: E402

ROOT = str(ROOT)


def quiver_bin():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "quiver-cli"], cwd=ROOT, check=True)
    return str(QUIVER)


def prepare(scale, out):
    import pyarrow as pa
    import pyarrow.csv as pc
    import pyarrow.parquet as pq

    users, follows = f"{out}/users.parquet", f"{out}/follows.parquet"
    if os.path.exists(users) and os.path.exists(follows):
        return users, follows
    os.makedirs(out, exist_ok=True)
    csv_dir = f"{out}/csv"
    if not os.path.exists(f"{csv_dir}/edges.csv"):
        subprocess.run([quiver_bin(), "generate", "social", "--scale", str(scale), "--out", csv_dir], check=True)
    t = time.perf_counter()
    # Users: Neo4j's header names become plain ones (`age:int` -> `age`).
    opts = pc.ReadOptions(block_size=64 << 20)
    with open(f"{csv_dir}/nodes.csv") as f:
        header = f.readline().strip().split(",")
    names = [h.split(":")[0] for h in header]
    types = {
        "id": pa.int64(), "age": pa.int64(), "gender": pa.int64(), "region": pa.string(),
        "completion_percentage": pa.int64(), "public": pa.int64(),
        "last_login": pa.timestamp("us"), "registration": pa.timestamp("us"),
    }
    conv = pc.ConvertOptions(column_types=types, timestamp_parsers=["%Y-%m-%d %H:%M:%S"])
    r = pc.open_csv(f"{csv_dir}/nodes.csv", read_options=pc.ReadOptions(block_size=64 << 20, column_names=names, skip_rows=1), convert_options=conv)
    with pq.ParquetWriter(users + ".tmp", r.schema) as w:
        for b in r:
            w.write_batch(b, row_group_size=1 << 20)
    os.replace(users + ".tmp", users)
    r = pc.open_csv(
        f"{csv_dir}/edges.csv",
        read_options=pc.ReadOptions(block_size=64 << 20, column_names=["src", "dst"], skip_rows=1),
        convert_options=pc.ConvertOptions(column_types={"src": pa.int64(), "dst": pa.int64()}),
    )
    # Several files (a folder of parts), as a Spark job or a data lake would hold them.
    os.makedirs(follows + ".tmp", exist_ok=True)
    part, rows, w = 0, 0, None
    for b in r:
        if w is None or rows >= 16_000_000:
            if w:
                w.close()
            w = pq.ParquetWriter(f"{follows}.tmp/part-{part:05}.parquet", r.schema)
            part, rows = part + 1, 0
        w.write_batch(b, row_group_size=1 << 20)
        rows += b.num_rows
    w.close()
    os.replace(follows + ".tmp", follows)
    shutil.rmtree(csv_dir)
    print(f"prepared Parquet in {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return users, follows


class Peak:
    """Samples the RSS of this process's tree (the JVM and Python workers Spark starts)."""

    def __init__(self):
        self.stop, self.out = threading.Event(), []
        self.t = threading.Thread(target=_sample_rss, args=(lambda: _tree(os.getpid()), self.stop, self.out))
        self.t.start()

    def done(self):
        self.stop.set()
        self.t.join()
        return self.out[0]


QUERIES = [
    ("count", "MATCH (n) RETURN count(n)", None),
    ("edges", "MATCH ()-[r]->() RETURN count(r)", None),
    ("aggregate", "MATCH (n:User) RETURN n.age, count(*) ORDER BY n.age", None),
    ("find node", "MATCH (n:User {id: $id}) RETURN n.age, n.region", {"id": 1234}),
    ("1-hop", "MATCH (n:User {id: $id})-[:FOLLOWS]->(m) RETURN m.id ORDER BY m.id", {"id": 1234}),
    ("1-hop in", "MATCH (n:User {id: $id})<-[:FOLLOWS]-(m) RETURN m.id ORDER BY m.id", {"id": 1234}),
    ("2-hop", "MATCH (n:User {id: $id})-[:FOLLOWS]->()-[:FOLLOWS]->(m) RETURN count(DISTINCT m)", {"id": 1234}),
]


READS = [
    ("find node", "MATCH (n:User {id: $id}) RETURN n.age, n.region"),
    ("1-hop out", "MATCH (n:User {id: $id})-[:FOLLOWS]->(m) RETURN count(m)"),
    ("1-hop in", "MATCH (n:User {id: $id})<-[:FOLLOWS]-(m) RETURN count(m)"),
    ("2-hop", "MATCH (n:User {id: $id})-[:FOLLOWS]->()-[:FOLLOWS]->(m) RETURN count(m)"),
    ("neighbours' ages", "MATCH (n:User {id: $id})-[:FOLLOWS]-(m) RETURN avg(m.age)"),
]
SCANS = [
    ("aggregate", "MATCH (n:User) RETURN n.age, count(*)"),
    ("edge count", "MATCH (:User)-[r:FOLLOWS]->() RETURN count(r)"),
]


def stage_metrics(spark):
    """Every completed stage's task count and summed task run time (ms), from Spark's
    REST API (the UI must be on)."""
    import urllib.request

    url = spark.sparkContext.uiWebUrl
    if not url:
        return {}
    app = spark.sparkContext.applicationId
    with urllib.request.urlopen(f"{url}/api/v1/applications/{app}/stages?status=complete") as r:
        stages = json.load(r)
    return {(s["stageId"], s["attemptId"]): (s["numTasks"], s["executorRunTime"]) for s in stages}


def projection(before, after, wall, serial):
    """Projected wall time on E executors of one core: each stage's summed task time
    spread over min(E, its tasks), plus what ran on the driver or in one task."""
    new = [v for k, v in after.items() if k not in before]
    out = {"task_seconds": sum(t for _, t in new) / 1000, "stages": len(new)}
    for e in (2, 8, 64):
        out[f"projected_{e}"] = serial + sum(t / 1000 / min(e, max(n, 1)) for n, t in new)
    out["measured"] = wall
    return out


def compare_queries(qb, dbs, n_users, rounds=3):
    """Median over `rounds` alternating rounds of each query on each database (one
    process a query and database, `quiver query --bench-params`)."""
    import random

    rnd = random.Random(5)
    ids = f"{ROOT}/bench/out/spark-ids.csv"
    os.makedirs(os.path.dirname(ids), exist_ok=True)
    with open(ids, "w") as f:
        f.write("id\n" + "".join(f"{rnd.randrange(1, n_users + 1)}\n" for _ in range(2000)))
    one = f"{ROOT}/bench/out/spark-one.csv"
    with open(one, "w") as f:
        f.write("x\n" + "1\n" * 5)
    out = {}
    for name, q in READS + SCANS:
        params = ids if "$id" in q else one
        times = {d: [] for d in dbs}
        for _ in range(rounds):
            for d in dbs:
                warm = "50" if "$id" in q else "2"
                p = subprocess.run([qb, "query", "--db", d, "--bench-params", params, "--warmup", warm, q],
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    sys.exit(p.stderr)
                last = json.loads(p.stdout.strip().split("\n")[-1])
                times[d].append(last["median_ms"])
        out[name] = {d: statistics.median(t) for d, t in times.items()}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=4)
    ap.add_argument("--partitions", default="2,8,32")
    ap.add_argument("--runs", type=int, default=1, help="runs of each build (median)")
    ap.add_argument("--driver-memory", default="6g")
    ap.add_argument("--compare", nargs="+", metavar="DB",
                    help="only compare seed 003's reads and two scans on these databases (medians, ms)")
    ap.add_argument("--users", type=int, default=6531212, help="with --compare: ids are 1..USERS")
    a = ap.parse_args()
    if a.compare:
        res = compare_queries(quiver_bin(), a.compare, a.users)
        print("| query | " + " | ".join(os.path.basename(d) for d in a.compare) + " |")
        print("|---|" + "---:|" * len(a.compare))
        for name, t in res.items():
            print(f"| {name} | " + " | ".join(f"{t[d]:.3f}" for d in a.compare) + " |")
        return
    out = f"{ROOT}/data/bench/spark-{a.scale:g}"
    users, follows = prepare(a.scale, out)
    qb = quiver_bin()
    results = {"scale": a.scale, "cores": os.cpu_count(), "local": {}, "spark": {}}

    # The local import.
    times, rss = [], []
    for _ in range(a.runs):
        shutil.rmtree(f"{out}/local.qdb", ignore_errors=True)
        t = time.perf_counter()
        p = subprocess.run(
            ["/usr/bin/time", "-f", "%M", qb, "import", "--db", f"{out}/local.qdb", "--nodes", f"User={users}",
             "--relationships", f"FOLLOWS={follows}"],
            capture_output=True, text=True,
        )
        if p.returncode != 0:
            sys.exit(p.stderr)
        times.append(time.perf_counter() - t)
        rss.append(int(p.stderr.strip().split("\n")[-1]) * 1024)
    results["local"] = {"seconds": statistics.median(times), "peak_rss": max(rss)}

    from pyspark.sql import SparkSession

    import quiver
    import quiver.spark

    spark = (
        SparkSession.builder.master(f"local[{os.cpu_count()}]")
        .appName("quiver-bench")
        .config("spark.ui.enabled", "true")
        .config("spark.ui.port", "4047")
        .config("spark.driver.memory", a.driver_memory)
        .config("spark.sql.shuffle.partitions", str(max(8, os.cpu_count() * 4)))
        .config("spark.local.dir", f"{out}/spark-tmp")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    for parts in [int(x) for x in a.partitions.split(",")]:
        runs = []
        for _ in range(a.runs):
            peak = Peak()
            before = stage_metrics(spark)
            t = time.perf_counter()
            r = quiver.spark.build(spark, {"User": users}, {"FOLLOWS": follows}, out=f"{out}/spark-{parts}.qdb",
                                   partitions=parts, overwrite=True)
            wall = time.perf_counter() - t
            time.sleep(2)  # (the listener catches up with the last stage)
            proj = projection(before, stage_metrics(spark), wall, r.seconds["publish"])
            runs.append({"projection": proj, "wall": wall, "stages": r.seconds, "writer": r.writer_seconds, "tasks": r.tasks,
                         "peak_rss": peak.done(), "files": r.files, "bytes": r.bytes})
        runs.sort(key=lambda x: x["wall"])
        results["spark"][parts] = runs[len(runs) // 2]

    # Equal answers, and the query times of 1 part against many.
    local = quiver.connect(f"{out}/local.qdb")
    results["answers"] = {}
    for parts in results["spark"]:
        s = quiver.connect(f"{out}/spark-{parts}.qdb")
        same = all(s.execute(q, p).fetchall() == local.execute(q, p).fetchall() for _, q, p in QUERIES)
        results["answers"][parts] = same
        s.close()
    spark.stop()

    loc = results["local"]
    print(f"social scale {a.scale:g}, {os.cpu_count()} cores")
    print(f"quiver import of the Parquet files: {loc['seconds']:.1f} s, peak RSS {loc['peak_rss'] / 2**20:.0f} MiB")
    print("| partitions | wall s | nodes s | id index s | relationships s | publish s | in Quiver's writers (task s) | all tasks (task s) | projected 8 / 64 executors s | peak RSS MiB | equal answers |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for parts, r in results["spark"].items():
        st = r["stages"]
        print(f"| {parts} | {r['wall']:.1f} | {st['nodes']:.1f} | {st['id index']:.1f} | {st['relationships']:.1f} | "
              f"{st['publish']:.2f} | {r['writer']:.1f} in {r['tasks']} parts | {r['projection']['task_seconds']:.0f} | "
              f"{r['projection']['projected_8']:.0f} / {r['projection']['projected_64']:.0f} | {r['peak_rss'] / 2**20:.0f} | {results['answers'][parts]} |")
    os.makedirs(f"{ROOT}/bench/out", exist_ok=True)
    with open(f"{ROOT}/bench/out/spark_build-{a.scale:g}.json", "w") as f:
        json.dump(results, f, indent=2, default=str)


if __name__ == "__main__":
    main()
