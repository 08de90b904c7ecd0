"""Client data into the engine: rows, pandas, Arrow or a Spark DataFrame become a temporary table whose column
``ARRIVAL`` numbers the rows from 0 in the order they were given (the arrival order of their entries)."""
from __future__ import annotations

from sqlglot import exp

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
