"""Client data into the engine: rows, a pandas or Spark DataFrame, or any table that offers the Arrow PyCapsule
interface (``__arrow_c_stream__``: polars, pyarrow, a DuckDB relation, ...) becomes a temporary table whose column
``ARRIVAL`` numbers the rows from 0 in the order they were given (the arrival order of their entries); or, by name, a
temporary table a statement reads (``session.register("staging", df)``, ``session.sql(text, staging=df)``)."""
from __future__ import annotations

import contextlib
import re
import sys
from typing import Iterator

from sqlglot import exp

from seqdedup.catalog.names import ARRIVAL
from seqdedup.catalog.schema import CATALOG_TABLES
from seqdedup.errors import TopicError


def load(adapter, name: str, data, columns: list[str], *, held: bool = False) -> exp.Table:
    """The temporary table ``name`` of ``data``; tuples are read in ``columns`` order. ``held``: read until dropped,
    by name only (a send's rows: ``EngineAdapter.hold_arrow``), which an engine may read where the rows lie."""
    if hasattr(data, "sparkSession"):
        return adapter.load_dataframe(name, data)
    import pyarrow as pa

    table = to_arrow(data, columns)
    table = table.append_column(ARRIVAL, pa.array(range(table.num_rows), pa.int64()))
    return (adapter.hold_arrow if held else adapter.load_arrow)(name, table)


def to_arrow(data, columns: list[str]):
    """A pyarrow Table of rows (dicts, or tuples in ``columns`` order), a pandas DataFrame, or a table offered through
    the Arrow PyCapsule interface (polars, pyarrow, a DuckDB relation: ``__arrow_c_stream__``, or
    ``__arrow_c_array__`` for one record batch). Arrow's view types (polars' strings) become plain ones, which every
    engine reads.

    Example:
        >>> import pyarrow as pa
        >>> class Stream:        # anything that hands out an Arrow stream of a table
        ...     def __arrow_c_stream__(self, requested_schema=None):
        ...         return pa.table({"s": pa.array(["a"], pa.string_view())}).__arrow_c_stream__(requested_schema)
        >>> to_arrow(Stream(), []).schema
        s: large_string
    """
    import pyarrow as pa

    if isinstance(data, pa.RecordBatch):
        data = pa.Table.from_batches([data])
    if isinstance(data, pa.Table):
        return _plain(data)
    if _is_pandas(data):       # (its own Arrow stream would carry a filtered frame's index as a column)
        return _plain(pa.Table.from_pandas(data, preserve_index=False))
    if hasattr(data, "__arrow_c_stream__") or hasattr(data, "__arrow_c_array__"):
        try:
            if hasattr(data, "__arrow_c_stream__"):
                return _plain(pa.RecordBatchReader.from_stream(data).read_all())
            return _plain(pa.Table.from_batches([pa.record_batch(data)]))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as error:
            raise TopicError(f"the {type(data).__name__} given offers Arrow data that is no table ({error}); give "
                             "a table of named columns, such as a polars or pandas DataFrame") from None
    rows = list(data)
    if rows and not isinstance(rows[0], dict):
        if any(len(row) != len(columns) for row in rows):
            raise TopicError(f"rows given as tuples need one value per column {columns}; give dicts to name "
                             "the columns")
        rows = [dict(zip(columns, row)) for row in rows]
    try:
        return pa.Table.from_pylist(rows) if rows else pa.table({c: pa.array([], pa.null()) for c in columns})
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        raise TopicError(f"the rows cannot form a table: {error}; give each column values of one type") from None


def _plain(table):
    """The table with Arrow's view types (``string_view``, ``binary_view``, at any depth) as their large
    counterparts, which Spark reads (it refuses a view type) and DuckDB reads the same; the table itself when it has
    none."""
    import pyarrow as pa

    def plain(kind):
        if pa.types.is_string_view(kind):
            return pa.large_string()
        if pa.types.is_binary_view(kind):
            return pa.large_binary()
        if pa.types.is_list(kind) or pa.types.is_large_list(kind):
            element = kind.value_field.with_type(plain(kind.value_type))
            return pa.list_(element) if pa.types.is_list(kind) else pa.large_list(element)
        if pa.types.is_struct(kind):
            return pa.struct([field.with_type(plain(field.type)) for field in kind])
        return kind

    schema = pa.schema([field.with_type(plain(field.type)) for field in table.schema], metadata=table.schema.metadata)
    return table if schema.equals(table.schema) else table.cast(schema)


def register(session, name: str, data) -> exp.Table:
    """A DataFrame (pandas, polars or Spark), a pyarrow Table or any table with the Arrow PyCapsule interface as the
    temporary table ``name``, which statements read by that name on either engine. It replaces a temporary table or view of that name; a topic's name is refused
    (the frame would hide the topic from every query of the session)."""
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise TopicError(f"{name!r} cannot name a DataFrame in SQL; use letters, digits and _ (not first)")
    ref = session.ref(name)
    if name.lower() in CATALOG_TABLES:
        raise TopicError(f"{name!r} is a seqdedup catalog table; register the DataFrame under another name")
    # (the topic list only when a table has the name: it is a job on Spark, where the table's lookup is not)
    if session.adapter.columns(ref.table) and ref.key in session.topics():
        raise TopicError(f"{name!r} is a topic; register the DataFrame under another name")
    if hasattr(data, "sparkSession"):
        return session.adapter.load_dataframe(name, data, numbered=False)
    if not _is_frame(data):
        lazy = "; collect() it first" if hasattr(data, "collect") else ""
        raise TopicError(f"cannot register {type(data).__name__} as {name!r}{lazy}: give a pandas, polars or Spark "
                         "DataFrame, a pyarrow Table, or any table with the Arrow PyCapsule interface "
                         "(__arrow_c_stream__, as a DuckDB relation has)")
    return session.adapter.load_arrow(name, to_arrow(data, []))


@contextlib.contextmanager
def registered(session, frames: dict) -> Iterator[None]:
    """The frames registered by name while the block runs, then dropped."""
    names: list[str] = []
    try:
        for name, data in frames.items():
            register(session, name, data)
            names.append(name)
        yield
    finally:
        for name in names:
            session.adapter.drop_temp_table(name)


def _is_frame(data) -> bool:
    import pyarrow as pa

    return (isinstance(data, (pa.Table, pa.RecordBatch)) or _is_pandas(data) or hasattr(data, "__arrow_c_stream__")
            or hasattr(data, "__arrow_c_array__"))


def _is_pandas(data) -> bool:
    """Whether ``data`` is a pandas DataFrame (pandas is imported only by whoever made one)."""
    pandas = sys.modules.get("pandas")
    return pandas is not None and isinstance(data, pandas.DataFrame)
