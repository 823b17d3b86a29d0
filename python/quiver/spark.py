"""Build a Quiver database with Spark.

Spark does the shuffles, the joins and the scheduling; each task turns its share of the
graph into Quiver's segment files through this package, and the driver publishes them
as one database:

1. **Nodes**, a label at a time: rows with a null or repeated id are rejected (the first
   of a repeated id is kept, as ``quiver import`` keeps it); the rest are numbered
   densely in input order (per-partition counts, then offsets: nothing is collected but
   a count a partition); each task writes its partition's rows as a node table part and
   gives back (id, node) pairs.
2. **The id index**: those pairs sorted by id by Spark, written by one task.
3. **Relationships**, a type at a time: endpoints resolved by joins with the pairs
   (rows whose endpoint is missing are rejected); the relationships are split into
   ``partitions`` ranges of source nodes, sorted by Spark, and each range becomes an out
   CSR part and a property part (edge ids are positions in that order); the (target,
   source, edge id) triples they give back are split again by target and become the in
   CSR parts.
4. **Publish**, on the driver: the parts' descriptions (small JSON files beside them)
   are read, empty ranges get empty parts, and ``quiver._quiver.publish_parts`` moves
   every part into a new generation, opens it to check that the parts fit, and writes
   the manifest. A failed build leaves the output as it was.

The output folder and the parts folder beside it must be on storage every executor
and the driver see at the same path (a local disk for ``local[*]``, NFS or another
shared POSIX mount for a cluster).

Inputs are Parquet files or folders (typed by their schema), CSV files with a header
(typed by Spark's inference), or DataFrames. Column rules follow ``quiver import``'s for
plain headers: the node id is the column ``id`` (any case) unless ``id_column`` names
another; a relationship's endpoints are ``src``/``dst``, ``source``/``target``,
``from``/``to`` or ``start``/``end`` (any case), else its first two columns; other
columns are properties. Every label shares one id space.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import threading
import time
import uuid
from dataclasses import dataclass, field
from functools import reduce
from typing import Dict, List, Optional, Union

from . import _quiver

_ENDPOINT_PAIRS = [("src", "dst"), ("source", "target"), ("from", "to"), ("start", "end")]


@dataclass
class BuildResult:
    """What a build made: counts, where, how long each stage took, and the rejected
    rows (a DataFrame of the input's columns as text plus ``reason``, or None)."""

    path: str
    nodes: int
    relationships: int
    files: int
    bytes: int
    rejected: int
    rejects: Optional[object] = None
    rejects_path: Optional[str] = None
    seconds: Dict[str, float] = field(default_factory=dict)
    #: Seconds tasks spent inside Quiver's part writers, summed, and how many parts.
    writer_seconds: float = 0.0
    tasks: int = 0


def _read(spark, src):
    from pyspark.sql import DataFrame

    if isinstance(src, DataFrame):
        return src
    path = str(src)
    low = path.lower()
    if low.endswith(".csv") or low.endswith(".csv.gz"):
        # Read with the delimiter and quote `quiver import` would choose for the file.
        sep, quote = _quiver.csv_dialect(path)
        return (spark.read.option("header", True).option("inferSchema", True)
                .option("sep", sep).option("quote", quote).csv(path))
    return spark.read.parquet(path)


def _column(df, name: str, what: str) -> str:
    for c in df.columns:
        if c.lower() == name.lower():
            return c
    raise ValueError(f"{what}: no column {name!r} among {df.columns}")


def _endpoints(df, start: Optional[str], end: Optional[str], what: str):
    if start or end:
        if not (start and end):
            raise ValueError(f"{what}: give both start_column and end_column")
        return _column(df, start, what), _column(df, end, what)
    lower = {c.lower(): c for c in df.columns}
    for a, b in _ENDPOINT_PAIRS:
        if a in lower and b in lower:
            return lower[a], lower[b]
    if len(df.columns) < 2:
        raise ValueError(f"{what}: a relationship needs two endpoint columns")
    return df.columns[0], df.columns[1]


def _check_live(parts_dir: str) -> None:
    """A task that writes parts runs only while its build does (not when Spark
    recomputes a stage after the publish)."""
    if not os.path.isdir(parts_dir):
        raise RuntimeError(f"{parts_dir} is gone: the build that wrote these parts has ended")


def _write_sidecar(parts_dir: str, info_json: str) -> None:
    """The part's description beside it (with the seconds its writer worked)."""
    info = json.loads(info_json)
    path = os.path.join(parts_dir, info["file"] + ".json")
    tmp = path + f".{uuid.uuid4().hex}.tmp"
    with open(tmp, "w") as f:
        f.write(info_json)
    os.replace(tmp, path)


def _read_sidecars(parts_dir: str) -> Dict[str, dict]:
    out = {}
    for name in os.listdir(parts_dir):
        if name.endswith(".seg.json"):
            with open(os.path.join(parts_dir, name)) as f:
                info = json.load(f)
            out[info["file"]] = info
    return out


def _lo(k: int, n: int, parts: int) -> int:
    """First node of range ``k`` of ``parts`` over ``n`` nodes: the nodes whose
    ``node * parts // n`` is ``k``."""
    return (k * n + parts - 1) // parts


class _PartWriter:
    """One part's writer on a thread of its own, fed batches as they come (through a
    queue of four and an Arrow stream), so a task holds a few batches, not its
    partition."""

    def __init__(self, schema, call):
        import pyarrow as pa

        self.q = queue.Queue(maxsize=4)
        self.result = None
        self.error = None

        def batches():
            while True:
                b = self.q.get()
                if b is None:
                    return
                yield b

        def run():
            try:
                self.result = call(pa.RecordBatchReader.from_batches(schema, batches()))
            except BaseException as e:  # handed to the producer
                self.error = e

        self.t = threading.Thread(target=run, daemon=True)
        self.t.start()

    def put(self, batch):
        while True:
            if self.error is not None:
                raise self.error
            try:
                self.q.put(batch, timeout=0.5)
                return
            except queue.Full:
                continue

    def close(self):
        self.put(None)
        self.t.join()
        if self.error is not None:
            raise self.error
        return self.result


def _finish_part(parts_dir: str, writer: "_PartWriter") -> None:
    """Ends a part's writer and writes the descriptions of what it wrote."""
    _write_sidecar(parts_dir, writer.close())


def _by_part(df, part_col: str, parts: int):
    """``df`` with each value ``k`` of ``part_col`` (0 .. parts-1) in Spark partition
    ``k`` exactly: a range partitioner samples, and with few distinct values it can put
    two parts in one task and leave another idle (at 2 ranges, every row in one task).
    Spark's hash partitioning sends a row to ``pmod(hash(key), parts)``, so each part
    gets a key whose hash lands on its number."""
    from pyspark.sql import functions as F

    spark = df.sparkSession
    key_of = {}
    n = 16 * parts
    while len(key_of) < parts:
        rows = spark.range(0, n).select("id", F.expr(f"pmod(hash(id), {parts})").alias("p")).collect()
        for r in rows:
            key_of.setdefault(r["p"], r["id"])
        n *= 4
    # (Long keys, as spark.range's: an int's hash differs from the same long's.)
    keys = F.array(*[F.lit(key_of[k]).cast("long") for k in range(parts)])
    return df.withColumn("_key", F.element_at(keys, F.col(part_col) + 1)).repartition(parts, "_key")


def _with_reason(df, reason_col: str = "reason"):
    from pyspark.sql import functions as F

    cols = [F.col(f"`{c}`").cast("string").alias(c) for c in df.columns if c not in ("_ord", "_reason")]
    return df.select(*cols, F.col("_reason").alias(reason_col))


def build(
    spark,
    nodes: Dict[str, Union[str, object]],
    relationships: Optional[Dict[str, Union[str, object]]] = None,
    out: str = "graph.qdb",
    partitions: Optional[int] = None,
    id_column: Optional[str] = None,
    start_column: Optional[str] = None,
    end_column: Optional[str] = None,
    overwrite: bool = False,
    rejects_path: Optional[str] = None,
    broadcast_ids: int = 20_000_000,
) -> BuildResult:
    """Builds the database ``out`` from ``nodes`` (label -> path or DataFrame, in the
    order their node ids are given) and ``relationships`` (type -> path or DataFrame).

    ``partitions`` (default: Spark's default parallelism) is how many ranges of nodes
    the relationships are split into: the CSR parts each way and the tasks that write
    them. Rejected rows are written as CSV under ``rejects_path`` (default
    ``<out>.rejects``) and returned as ``BuildResult.rejects``. Up to ``broadcast_ids``
    nodes, relationship endpoints are resolved by broadcast joins (each executor holds
    the ids, about 50 bytes a node); past it, by shuffle joins.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F
    import numpy as np
    import pyarrow as pa

    relationships = relationships or {}
    out = os.path.abspath(str(out))
    if os.path.exists(os.path.join(out, "CURRENT")) and not overwrite:
        raise _quiver.ImportFailed(f"{out} is already a database; pass overwrite=True to replace it")
    parent, name = os.path.split(out.rstrip("/"))
    parts_dir = os.path.join(parent, f".{name}.parts-{uuid.uuid4().hex[:12]}")
    os.makedirs(parts_dir)
    P = int(partitions or spark.sparkContext.defaultParallelism)
    if P < 1:
        raise ValueError("partitions must be at least 1")
    seconds: Dict[str, float] = {}
    persisted = []
    rejected_frames = []
    try:
        # 1. Nodes.
        t0 = time.perf_counter()
        id_frames = []
        labels = []
        first_node = 0
        for li, (label, src) in enumerate(nodes.items()):
            df = _read(spark, src)
            idc = _column(df, id_column or "id", f"nodes {label}")
            df = df.withColumn("_ord", F.monotonically_increasing_id())
            missing = df.filter(F.col(f"`{idc}`").isNull()).withColumn("_reason", F.lit("missing id"))
            dups = (
                df.filter(F.col(f"`{idc}`").isNotNull())
                .groupBy(F.col(f"`{idc}`").alias("_id"))
                .agg(F.count(F.lit(1)).alias("_n"), F.min("_ord").alias("_keep"))
                .filter("_n > 1")
            )
            dup_rows = (
                df.join(F.broadcast(dups), F.col(f"`{idc}`") == F.col("_id"))
                .filter(F.col("_ord") != F.col("_keep"))
                .drop("_id", "_n", "_keep")
                .withColumn("_reason", F.lit("duplicate id"))
            )
            bad = missing.unionByName(dup_rows)
            bad_ords = bad.select("_ord").persist(StorageLevel.MEMORY_AND_DISK)
            persisted.append(bad_ords)
            if bad_ords.count() > 0:
                rejected_frames.append(_with_reason(bad.withColumn("label", F.lit(label))))
            # Each row keeps the partition it was counted in: the numbering rests on
            # those counts, whatever partitions a later stage runs in.
            kept = (
                df.join(F.broadcast(bad_ords), "_ord", "left_anti")
                .withColumn("_pid", F.spark_partition_id())
                .persist(StorageLevel.MEMORY_AND_DISK)
            )
            persisted.append(kept)
            counts = dict((r[0], r[1]) for r in kept.groupBy("_pid").count().collect())
            offsets = {}
            acc = first_node
            for pid in sorted(counts):
                offsets[pid] = acc
                acc += counts[pid]
            n_label = acc - first_node
            columns = [c for c in kept.columns if c not in ("_ord", "_pid")]
            id_type = dict(kept.dtypes)[idc]

            def write_nodes(batches, li=li, offsets=offsets, columns=columns, idc=idc):
                batches = list(batches)
                if not batches:
                    return
                _check_live(parts_dir)
                table = pa.Table.from_batches(batches)
                pids = table.column("_pid").to_numpy()
                cuts = [0, *(np.flatnonzero(np.diff(pids)) + 1).tolist(), len(pids)]
                for a, b in zip(cuts, cuts[1:]):
                    pid = int(pids[a])
                    sub = table.slice(a, b - a).select(columns)
                    info = _quiver.write_table_part(parts_dir, f"nodes-{li:04}-{pid:06}.seg", sub)
                    _write_sidecar(parts_dir, info)
                    base = offsets[pid]
                    node = pa.array(np.arange(base, base + sub.num_rows, dtype=np.int64))
                    yield pa.RecordBatch.from_arrays([sub.column(idc).combine_chunks(), node], names=["id", "node"])

            ids = kept.mapInArrow(write_nodes, f"id {id_type}, node long").persist(StorageLevel.MEMORY_AND_DISK)
            persisted.append(ids)
            written = ids.count()
            if written != n_label:
                raise _quiver.ImportFailed(f"label {label}: {written} nodes written, {n_label} counted")
            id_frames.append(ids)
            labels.append((label, idc, li))
            first_node = acc
        n_nodes = first_node
        seconds["nodes"] = time.perf_counter() - t0

        # 2. The id index, sorted by Spark, written by one task.
        t0 = time.perf_counter()
        all_ids = reduce(lambda a, b: a.unionByName(b), id_frames) if id_frames else None

        def write_index(batches, n_nodes=n_nodes):
            # Streamed into the writer (which holds the keys, 12 bytes an integer id).
            it = iter(batches)
            first = next(it, None)
            if first is None:
                return
            _check_live(parts_dir)

            def chain():
                yield first
                yield from it

            reader = pa.RecordBatchReader.from_batches(first.schema, chain())
            info = _quiver.write_id_index_part(parts_dir, "ids.seg", n_nodes, reader)
            _write_sidecar(parts_dir, info)
            yield pa.RecordBatch.from_arrays([pa.array([json.loads(info)["rows"]], pa.int64())], names=["n"])

        if all_ids is not None:
            all_ids.repartition(1).sortWithinPartitions("id").mapInArrow(write_index, "n long").collect()
        seconds["id index"] = time.perf_counter() - t0

        # 3. Relationships.
        t0 = time.perf_counter()
        rel_specs = []
        # Endpoints resolve against the ids by a broadcast join while they fit an
        # executor's memory (the edges then never shuffle for the join), else by a
        # shuffle join whose result is kept (its order must not change between passes).
        broadcast = n_nodes <= broadcast_ids
        for ti, (rtype, src) in enumerate(relationships.items()):
            df = _read(spark, src)
            s, e = _endpoints(df, start_column, end_column, f"relationships {rtype}")
            prop_cols = [c for c in df.columns if c not in (s, e)]
            key_type = dict(all_ids.dtypes)["id"] if all_ids is not None else "long"
            src_ids = all_ids.select(F.col("id").alias("_sk"), F.col("node").alias("_src"))
            dst_ids = all_ids.select(F.col("id").alias("_dk"), F.col("node").alias("_dst"))
            if broadcast:
                src_ids, dst_ids = F.broadcast(src_ids), F.broadcast(dst_ids)
            j = (
                df.join(src_ids, F.col(f"`{s}`").cast(key_type) == F.col("_sk"), "left")
                .join(dst_ids, F.col(f"`{e}`").cast(key_type) == F.col("_dk"), "left")
                .drop("_sk", "_dk")
            )
            if not broadcast:
                j = j.persist(StorageLevel.MEMORY_AND_DISK)
                persisted.append(j)
            bad = j.filter(F.col("_src").isNull() | F.col("_dst").isNull()).withColumn(
                "_reason",
                F.when(F.col("_src").isNull(), F.lit("missing start node")).otherwise(F.lit("missing end node")),
            )
            # Edge ids in input order, as `quiver import` numbers them: a partition's
            # first id from the counts of those before it, then its rows in order. The
            # same pass counts the rejected rows.
            ok = F.col("_src").isNotNull() & F.col("_dst").isNotNull()
            tally = j.groupBy(F.spark_partition_id().alias("_pid"), ok.alias("_ok")).count().collect()
            counts = {r["_pid"]: r["count"] for r in tally if r["_ok"]}
            if any(not r["_ok"] for r in tally):
                rejected_frames.append(_with_reason(bad.drop("_src", "_dst").withColumn("type", F.lit(rtype))))
            resolved = j.filter(ok).withColumn("_pid", F.spark_partition_id())
            offsets, acc = [], 0
            for pid in range(max(counts, default=-1) + 1):
                offsets.append(acc)
                acc += counts.get(pid, 0)
            m_edges = acc
            first_id = F.element_at(F.array(*[F.lit(o) for o in offsets] or [F.lit(0)]), F.col("_pid") + 1)
            numbered = resolved.withColumn(
                "_eid", first_id + F.expr("monotonically_increasing_id() & 8589934591")
            )

            if prop_cols:
                # The property rows, in edge-id order: each input partition writes its
                # own, as they come; nothing of them is shuffled.
                def write_props(batches, ti=ti, offsets=offsets, prop_cols=prop_cols):
                    writer, pid, expect = None, None, 0
                    for batch in batches:
                        _check_live(parts_dir)
                        p0 = batch.column("_pid")[0].as_py() if batch.num_rows else pid
                        if p0 != pid:
                            if writer is not None:
                                _finish_part(parts_dir, writer)
                            pid, expect = p0, offsets[p0]
                            sub0 = batch.select(prop_cols)
                            writer = _PartWriter(
                                sub0.schema,
                                lambda r, pid=pid: _quiver.write_table_part(
                                    parts_dir, f"rels-{ti:04}-props-{pid:06}.seg", r
                                ),
                            )
                        eids = batch.column("_eid").to_numpy()
                        pids = batch.column("_pid").to_numpy()
                        if len(eids) and (
                            (pids != pid).any() or eids[0] != expect or (np.diff(eids) != 1).any()
                        ):
                            raise RuntimeError(
                                "the relationships' partitions changed between two passes "
                                "(is the input deterministic?)"
                            )
                        expect += len(eids)
                        writer.put(batch.select(prop_cols))
                    if writer is not None:
                        _finish_part(parts_dir, writer)
                    yield pa.RecordBatch.from_arrays([pa.array([0], pa.int64())], names=["n"])

                numbered.select("_pid", "_eid", *[F.col(f"`{c}`") for c in prop_cols]).mapInArrow(
                    write_props, "n long"
                ).collect()

            # A type with properties keeps its edge ids (input order, its property rows'
            # order) both ways; one without numbers its edges by out-CSR position, as
            # `quiver import` does, and stores none (the in side's k-th parallel entry
            # is the out side's k-th).
            with_ids = bool(prop_cols)
            cols = ["_a", "_b", "_eid"] if with_ids else ["_a", "_b"]

            def write_csr(batches, ti=ti, m_edges=m_edges, side="out", with_ids=with_ids, cols=cols):
                # One range a task (`_by_part`), streamed into its writer, which sorts.
                # (Should a task get rows of several ranges, each gets a writer.)
                writers = {}
                for batch in batches:
                    _check_live(parts_dir)
                    if not batch.num_rows:
                        continue
                    part = batch.column("_part").to_numpy()
                    for k in np.unique(part).tolist():
                        sub = batch if part[0] == part[-1] == k else batch.filter(pa.array(part == k))
                        sub = sub.select(cols)
                        if k not in writers:
                            lo, hi = _lo(k, n_nodes, P), _lo(k + 1, n_nodes, P)
                            writers[k] = _PartWriter(
                                sub.schema,
                                lambda r, k=k, lo=lo, hi=hi: _quiver.write_csr_part(
                                    parts_dir, f"rels-{ti:04}-{side}-{k:06}.seg", lo, hi - lo, n_nodes, m_edges,
                                    with_ids, r,
                                ),
                            )
                        writers[k].put(sub)
                for w in writers.values():
                    _finish_part(parts_dir, w)
                yield pa.RecordBatch.from_arrays([pa.array([len(writers)], pa.int64())], names=["n"])

            for side, a_col, b_col in (("out", "_src", "_dst"), ("in", "_dst", "_src")):
                ends = (numbered if with_ids else resolved).select(
                    F.col(a_col).alias("_a"),
                    F.col(b_col).alias("_b"),
                    *(["_eid"] if with_ids else []),
                    F.expr(f"cast(({a_col} * {P}) div {max(n_nodes, 1)} as int)").alias("_part"),
                )
                _by_part(ends, "_part", P).mapInArrow(
                    lambda it, side=side, f=write_csr: f(it, side=side), "n long"
                ).collect()
            rel_specs.append((ti, rtype, prop_cols, m_edges))
        seconds["relationships"] = time.perf_counter() - t0

        # 4. Publish.
        t0 = time.perf_counter()
        infos = _read_sidecars(parts_dir)
        spec_labels = []
        for label, idc, li in labels:
            prefix = f"nodes-{li:04}-"
            parts = sorted((v for k, v in infos.items() if k.startswith(prefix)), key=lambda v: v["file"])
            spec_labels.append({"label": label, "id_column": idc, "parts": parts})
        spec_rels = []
        empty = pa.table({"a": pa.array([], pa.int64()), "b": pa.array([], pa.int64()), "c": pa.array([], pa.int64())})
        for ti, rtype, prop_cols, m_edges in rel_specs:
            sides = {}
            for side in ("out", "in"):
                parts = []
                for k in range(P):
                    fname = f"rels-{ti:04}-{side}-{k:06}.seg"
                    if fname not in infos:
                        # A range of nodes no relationship starts (or ends) at.
                        lo, hi = _lo(k, n_nodes, P), _lo(k + 1, n_nodes, P)
                        with_ids = bool(prop_cols)
                        infos[fname] = json.loads(
                            _quiver.write_csr_part(
                                parts_dir, fname, lo, hi - lo, n_nodes, m_edges, with_ids,
                                empty if with_ids else empty.select(["a", "b"]),
                            )
                        )
                    parts.append(infos[fname])
                sides[side] = parts
            props = []
            if prop_cols:
                prefix = f"rels-{ti:04}-props-"
                props = sorted((v for k, v in infos.items() if k.startswith(prefix)), key=lambda v: v["file"])
            spec_rels.append({"name": rtype, "out": sides["out"], "in": sides["in"], "props": props})
        id_index = infos.get("ids.seg")
        spec = {"labels": spec_labels, "id_index": id_index, "rel_types": spec_rels}
        done = json.loads(_quiver.publish_parts(out, parts_dir, json.dumps(spec), overwrite))
        seconds["publish"] = time.perf_counter() - t0

        rejects = None
        n_rejected = 0
        rpath = None
        if rejected_frames:
            rejects = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), rejected_frames)
            n_rejected = rejects.count()
            rpath = rejects_path or out + ".rejects"
            rejects.coalesce(1).write.mode("overwrite").option("header", True).csv(rpath)
            # Read back from the file: the frame must not lead back to the stages that
            # wrote parts (unpersisted below, they would run again).
            rejects = spark.read.option("header", True).csv(rpath)
        return BuildResult(
            path=out,
            nodes=done["nodes"],
            relationships=done["relationships"],
            files=done["files"],
            bytes=done["bytes"],
            rejected=n_rejected,
            rejects=rejects,
            rejects_path=rpath,
            seconds=seconds,
            writer_seconds=sum(i.get("seconds", 0.0) for i in infos.values()),
            tasks=len(infos),
        )
    finally:
        for d in persisted:
            try:
                d.unpersist()
            except Exception:
                pass
        shutil.rmtree(parts_dir, ignore_errors=True)
