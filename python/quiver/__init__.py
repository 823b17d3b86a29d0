"""Quiver: a property-graph database that gets data in fast.

>>> import quiver
>>> con = quiver.connect("social.qdb")
>>> con.import_graph(nodes={"User": users_df}, relationships={"FOLLOWS": follows_df})
>>> con.execute("MATCH (u:User)-->(f) RETURN u.region AS region, count(*) AS n").df()

A connection runs one statement at a time (statements of several threads take turns);
open one connection per thread for concurrent reads. Results of ``execute`` are held
whole, column by column; ``.arrow()``, ``.df()`` and ``.pl()`` hand the columns to Arrow
without making Python objects. ``stream`` hands a result over in parts as the statement
makes them, so that a result larger than memory never sits whole in it:

>>> for batch in con.stream("MATCH (u:User) RETURN u.id, u.age").record_batches():
...     handle(batch)
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from ._quiver import (  # noqa: F401
    Connection as _Connection,
    QueryResult as _QueryResult,
    ResultStream as _ResultStream,
    Node,
    Relationship,
    Path,
    Duration,
    QuiverError,
    CypherSyntaxError,
    CypherTypeError,
    ConstraintError,
    TransactionConflict,
    MemoryLimitExceeded,
    QueryCancelled,
    ImportFailed,
    DatabaseError,
    __version__,
)

__all__ = [
    "connect",
    "Connection",
    "Result",
    "ResultStream",
    "Transaction",
    "Node",
    "Relationship",
    "Path",
    "Duration",
    "QuiverError",
    "CypherSyntaxError",
    "CypherTypeError",
    "ConstraintError",
    "TransactionConflict",
    "MemoryLimitExceeded",
    "QueryCancelled",
    "ImportFailed",
    "DatabaseError",
]


def connect(
    path: Union[str, "os.PathLike[str]"],
    *,
    mode: str = "mapped",
    memory_limit: Union[int, str, None] = None,
    query_memory_limit: Union[int, str, None] = None,
    create: bool = True,
) -> "Connection":
    """Opens the database at ``path`` (an empty one is created there unless
    ``create=False``).

    ``mode``: ``"mapped"`` (segments memory-mapped, the default), ``"loaded"`` (read
    into memory at open) or ``"offline"`` (read on demand). ``memory_limit``: what the
    database may hold (the committed changes, open transactions and queries), as bytes or
    a size such as ``"2GiB"``; ``query_memory_limit``: what one query's operators may hold.
    """
    return Connection(
        _Connection(
            str(path),
            mode=mode,
            memory_limit=memory_limit,
            query_memory_limit=query_memory_limit,
            create=create,
        )
    )


def _is_json_field(field) -> bool:
    md = field.metadata or {}
    return md.get(b"quiver.json") == b"1"


class Result:
    """The rows of one statement.

    Iterate it (tuples), or take it whole: ``fetchall()``, ``df()`` (pandas), ``pl()``
    (polars), ``arrow()`` (a ``pyarrow.Table``), ``networkx()``.
    """

    def __init__(self, native: _QueryResult):
        self._r = native

    @property
    def columns(self) -> List[str]:
        """The column names."""
        return list(self._r.columns)

    @property
    def summary(self) -> Dict[str, Any]:
        """What the statement wrote (``nodes_created``, ...) and ``elapsed_ms``."""
        return self._r.summary

    @property
    def message(self) -> Optional[str]:
        """What a command said (``CHECKPOINT``, ``CREATE INDEX``...)."""
        return self._r.message

    def __len__(self) -> int:
        return len(self._r)

    def __iter__(self) -> Iterator[Tuple[Any, ...]]:
        return iter(self._r)

    def fetchone(self) -> Optional[Tuple[Any, ...]]:
        """The next row, or ``None`` after the last."""
        return self._r.fetchone()

    def fetchmany(self, size: int = 1) -> List[Tuple[Any, ...]]:
        """The next ``size`` rows."""
        return self._r.fetchmany(size)

    def fetchall(self) -> List[Tuple[Any, ...]]:
        """The rows not fetched yet."""
        return self._r.fetchall()

    def scalar(self) -> Any:
        """The first column of the next row (``None`` when there is none)."""
        row = self._r.fetchone()
        return None if row is None else row[0]

    def __arrow_c_stream__(self, requested_schema=None):
        """The Arrow PyCapsule interface (so ``pyarrow.table(result)`` works)."""
        return self._r.__arrow_c_stream__(requested_schema)

    def arrow(self):
        """The whole result as a ``pyarrow.Table``. Nodes, relationships, paths, maps
        and columns of mixed types are JSON text (their field's metadata says
        ``quiver.json``)."""
        import pyarrow as pa

        return pa.RecordBatchReader.from_stream(self._r).read_all()

    def record_batches(self):
        """The result as a ``pyarrow.RecordBatchReader`` of batches of 65,536 rows."""
        import pyarrow as pa

        return pa.RecordBatchReader.from_stream(self._r)

    def df(self):
        """The result as a pandas DataFrame. Columns of nodes, relationships, paths
        and maps hold ``Node`` / ``Relationship`` / ``Path`` objects and dicts."""
        t = self.arrow()
        df = t.to_pandas()
        for i, f in enumerate(t.schema):
            if _is_json_field(f):
                df[f.name] = self._r.column(i)
        return df

    def pl(self):
        """The result as a polars DataFrame (JSON text for graph values)."""
        import polars as pl

        return pl.from_arrow(self.arrow())

    def networkx(self, directed: bool = True):
        """The nodes, relationships and paths of the result as a NetworkX
        ``MultiDiGraph`` (``MultiGraph`` when ``directed=False``): node keys are node
        ids, with ``labels`` and the properties as attributes; edges carry ``type``,
        ``element_id`` and the properties."""
        import networkx as nx

        g = nx.MultiDiGraph() if directed else nx.MultiGraph()
        seen_edges = set()

        def add_node(n: Node):
            g.add_node(n.id, labels=list(n.labels), **dict(n.properties))

        def add_rel(r: Relationship):
            if r.element_id in seen_edges:
                return
            seen_edges.add(r.element_id)
            for end in (r.start, r.end):
                if end not in g:
                    g.add_node(end)
            g.add_edge(r.start, r.end, key=r.element_id, type=r.type, element_id=r.element_id, **dict(r.properties))

        def walk(v):
            if isinstance(v, Node):
                add_node(v)
            elif isinstance(v, Relationship):
                add_rel(v)
            elif isinstance(v, Path):
                for n in v.nodes:
                    add_node(n)
                for r in v.relationships:
                    add_rel(r)
            elif isinstance(v, (list, tuple)):
                for x in v:
                    walk(x)
            elif isinstance(v, dict):
                for x in v.values():
                    walk(x)

        for row in self._r.fetchall():
            for v in row:
                walk(v)
        return g

    def __repr__(self) -> str:
        return f"<quiver.Result columns={self.columns} rows={len(self)}>"


class ResultStream:
    """The rows of a statement as it makes them (:meth:`Connection.stream`): iterate
    it for tuples, or take its record batches once (``record_batches()``,
    ``pyarrow.RecordBatchReader.from_stream(stream)``, ``polars.from_arrow``). A column's
    Arrow type is fixed by the first batch; a later value that does not fit it raises
    rather than being dropped. The connection runs nothing else until the stream is
    read to its end or closed (``with con.stream(...) as s:`` closes it)."""

    def __init__(self, native: _ResultStream):
        self._s = native

    @property
    def columns(self) -> List[str]:
        return list(self._s.columns)

    def __iter__(self) -> Iterator[Tuple[Any, ...]]:
        return iter(self._s)

    def __arrow_c_stream__(self, requested_schema=None):
        return self._s.__arrow_c_stream__(requested_schema)

    def record_batches(self):
        """The rows not read yet as a ``pyarrow.RecordBatchReader`` (streaming)."""
        import pyarrow as pa

        return pa.RecordBatchReader.from_stream(self._s)

    def close(self) -> None:
        """Stops the statement if it still runs and frees the connection."""
        self._s.close()

    def __enter__(self) -> "ResultStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<quiver.ResultStream columns={self.columns}>"


def _as_arrow(x):
    """A pandas or polars frame as something with ``__arrow_c_stream__``; paths and
    Arrow objects as they are."""
    mod = type(x).__module__
    if mod.startswith("pandas"):
        import pyarrow as pa

        return pa.Table.from_pandas(x, preserve_index=False)
    if mod.startswith("polars"):
        if hasattr(x, "collect") and not hasattr(x, "to_arrow"):  # a LazyFrame
            x = x.collect()
        return x.to_arrow()
    return x


class Transaction:
    """An explicit transaction (``with con.transaction() as tx:``): commits at the end of
    the block, rolls back if it raises."""

    def __init__(self, con: "Connection"):
        self._con = con
        self.closed = False

    def execute(self, query: str, parameters: Optional[Mapping[str, Any]] = None) -> Result:
        if self.closed:
            raise QuiverError("the transaction is over")
        return self._con.execute(query, parameters)

    def commit(self) -> None:
        if not self.closed:
            self.closed = True
            self._con.execute("COMMIT")

    def rollback(self) -> None:
        if not self.closed:
            self.closed = True
            if self._con.in_transaction:
                self._con.execute("ROLLBACK")


class Connection:
    """An open database. See :func:`connect`."""

    def __init__(self, native: _Connection):
        self._c = native

    @property
    def path(self) -> str:
        return str(self._c.path)

    def execute(self, query: str, parameters: Optional[Mapping[str, Any]] = None) -> Result:
        """Runs one statement with ``parameters`` (a dict of Python values: ``None``,
        bool, int, float, str, bytes, lists, dicts, ``datetime`` types) and returns its
        rows. Writes outside a transaction commit when the statement ends."""
        return Result(self._c.execute(query, dict(parameters) if parameters else None))

    def query(self, query: str, parameters: Optional[Mapping[str, Any]] = None) -> Result:
        """Same as :meth:`execute`."""
        return self.execute(query, parameters)

    def stream(
        self,
        query: str,
        parameters: Optional[Mapping[str, Any]] = None,
        batch_rows: int = 65536,
    ) -> ResultStream:
        """Runs one statement on a thread of its own and hands its rows over in parts of
        about ``batch_rows`` as they are made (two parts in flight at most): memory holds
        a few parts, not the result. Errors of the statement raise here or while
        reading."""
        return ResultStream(
            self._c.stream(query, dict(parameters) if parameters else None, batch_rows)
        )

    def sql(self, *_args, **_kwargs):  # pragma: no cover - a helpful error, not an API
        raise QuiverError("Quiver speaks Cypher: use execute('MATCH (n) RETURN n LIMIT 5')")

    @contextmanager
    def transaction(self):
        """``with con.transaction() as tx: tx.execute(...)``: one transaction, committed
        when the block ends, rolled back if it raises."""
        self._c.execute("BEGIN", None)
        tx = Transaction(self)
        try:
            yield tx
        except BaseException:
            tx.rollback()
            raise
        else:
            tx.commit()

    @property
    def in_transaction(self) -> bool:
        return self._c.in_transaction

    def import_graph(
        self,
        nodes: Optional[Mapping[str, Any]] = None,
        relationships: Optional[Mapping[str, Any]] = None,
        **options: Any,
    ) -> Dict[str, Any]:
        """Bulk-imports nodes and relationships; returns the import's summary.

        ``nodes`` maps a label (``"User"``, or ``"User:Person"`` for two) to an input,
        ``relationships`` a type to an input. An input is a pandas or polars DataFrame,
        a pyarrow Table or RecordBatchReader (anything with ``__arrow_c_stream__``), a
        path (CSV, CSV.gz, Parquet, or a folder of Parquet parts), or a list of paths.

        Column names follow Neo4j's import convention (``id:ID(User)``, ``:START_ID``,
        ``age:int``) or are plain names: then the id column is ``id`` (or
        ``<label>_id``), a relationship's ends are ``src``/``dst`` (``source``/``target``,
        ``from``/``to``, ``start``/``end``) or its first two columns, and the types come
        from the frame's schema. Integer ids stay integers.

        Options (as the command line's): ``memory_budget`` ("512MiB"), ``threads``,
        ``id_type`` ("integer" / "string"), ``delimiter``, ``array_delimiter``, ``quote``,
        ``skip_bad_rows``, ``rejects`` (a path), ``null_markers`` (a list),
        ``id_columns`` / ``start_columns`` / ``end_columns`` ({label or type: column}),
        ``column_names`` ({label or type: [names]}: headers for a frame's columns).

        Into an empty database this is a new import; into one that has data, an append.
        A failed import leaves the database as it was.
        """
        nodes = {k: _as_arrow(v) for k, v in (nodes or {}).items()}
        relationships = {k: _as_arrow(v) for k, v in (relationships or {}).items()}
        return self._c.import_graph(nodes=nodes, relationships=relationships, **options)

    def close(self) -> None:
        """Closes the database; an open transaction is rolled back."""
        self._c.close()

    @property
    def closed(self) -> bool:
        return self._c.closed

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<quiver.Connection {self.path!r}{' closed' if self.closed else ''}>"

