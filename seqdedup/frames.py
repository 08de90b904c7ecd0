"""Client data into the engine: rows, pandas, Arrow or a Spark DataFrame become a temporary table whose column
``ARRIVAL`` numbers the rows from 0 in the order they were given (the arrival order of their entries); or, by name, a
temporary table a statement reads (``session.register("staging", df)``, ``session.sql(text, staging=df)``)."""
from __future__ import annotations

import contextlib
import re
from typing import Iterator

from sqlglot import exp

from seqdedup.catalog.schema import CATALOG_TABLES
from seqdedup.errors import TopicError
from seqdedup.extensions.base import ARRIVAL


def load(adapter, name: str, data, columns: list[str]) -> exp.Table:
    """The temporary table ``name`` of ``data``; tuples are read in ``columns`` order."""
    if hasattr(data, "sparkSession"):
        return adapter.load_dataframe(name, data)
    import pyarrow as pa

    table = to_arrow(data, columns)
    return adapter.load_arrow(name, table.append_column(ARRIVAL, pa.array(range(table.num_rows), pa.int64())))


def to_arrow(data, columns: list[str]):
    """A pyarrow Table of rows (dicts, or tuples in ``columns`` order), a pandas DataFrame or an Arrow table."""
    import pyarrow as pa

    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if hasattr(data, "to_numpy") and hasattr(data, "columns"):      # pandas
        return pa.Table.from_pandas(data, preserve_index=False)
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


def register(session, name: str, data) -> exp.Table:
    """A pandas DataFrame, a pyarrow Table or a Spark DataFrame as the temporary table ``name``, which statements
    read by that name on either engine. It replaces a temporary table or view of that name; a topic's name is refused
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
        raise TopicError(f"cannot register {type(data).__name__} as {name!r}: give a pandas DataFrame, a pyarrow "
                         "Table or a Spark DataFrame")
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

    return isinstance(data, (pa.Table, pa.RecordBatch)) or (hasattr(data, "to_numpy") and hasattr(data, "columns"))
