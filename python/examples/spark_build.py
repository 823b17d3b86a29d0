"""Builds a Quiver database with Spark (see quiver.spark).

    spark-submit python/examples/spark_build.py \
        --nodes User=users.parquet --relationships FOLLOWS=follows.parquet \
        --out /shared/social.qdb --partitions 64

Without spark-submit, ``python3 python/examples/spark_build.py ... --master local[2]``
starts a local Spark. Prints what was built and how long each stage took.
"""

import argparse
import json
import sys
import time


def pairs(values, what):
    out = {}
    for v in values or []:
        name, sep, path = v.partition("=")
        if not sep or not name or not path:
            sys.exit(f"--{what} {v!r}: give NAME=PATH (a Parquet file or folder, or a CSV file)")
        out[name] = path
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", action="append", required=True, metavar="LABEL=PATH")
    p.add_argument("--relationships", action="append", metavar="TYPE=PATH")
    p.add_argument("--out", required=True, help="the database folder (on storage every executor sees)")
    p.add_argument("--partitions", type=int, help="node ranges of the CSR parts (default: Spark's parallelism)")
    p.add_argument("--id-column")
    p.add_argument("--start-column")
    p.add_argument("--end-column")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--master", help="Spark master when not run by spark-submit (e.g. local[2])")
    p.add_argument("--driver-memory", default="2g")
    a = p.parse_args()

    from pyspark.sql import SparkSession

    import quiver.spark

    b = SparkSession.builder.appName("quiver-build").config("spark.ui.enabled", "false")
    if a.master:
        b = b.master(a.master).config("spark.driver.memory", a.driver_memory)
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    t0 = time.perf_counter()
    r = quiver.spark.build(
        spark,
        pairs(a.nodes, "nodes"),
        pairs(a.relationships, "relationships"),
        out=a.out,
        partitions=a.partitions,
        id_column=a.id_column,
        start_column=a.start_column,
        end_column=a.end_column,
        overwrite=a.overwrite,
    )
    wall = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "path": r.path,
                "nodes": r.nodes,
                "relationships": r.relationships,
                "files": r.files,
                "bytes": r.bytes,
                "rejected": r.rejected,
                "rejects": r.rejects_path,
                "seconds": {k: round(v, 3) for k, v in r.seconds.items()},
                "wall_seconds": round(wall, 3),
            },
            indent=2,
        )
    )
    spark.stop()


if __name__ == "__main__":
    main()
