"""A send's data staged for its statement: loaded as a temporary table and checked against the topic before
anything is sent (its columns, the type of its explicit ids, every value's cast), so that data no retry could write
is refused once, with an error that names what is wrong."""
from __future__ import annotations

import functools
import numbers

import sqlglot
from sqlglot import exp

from seqdedup.catalog.names import ARRIVAL
from seqdedup.errors import InvalidEntryError, TopicError

from .frames import load, to_arrow

#: The highest sequence id (R4: ids are signed 64-bit).
MAX_ID = 2**63 - 1


def id_columns(column: str | tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
    """The columns of a send's explicit ids: one name, or the parts of a composite id (R19); none for automatic."""
    return () if column is None else (column,) if isinstance(column, str) else tuple(column)


def stage(adapter, topic, name: str, data, column: str | tuple[str, ...] | None) -> tuple[exp.Table, int]:
    """``data`` as the temporary table ``name``, and its number of rows, once it fits ``topic``; ``column`` names
    the column of explicit ids, or the columns of a composite id's parts (R19; None: automatic ones). Dropped again
    when a check refuses it."""
    table, rows = _load(adapter, topic, name, data, column)
    try:
        # (the columns of a query over the table: bound, where the engine can, not looked up in its catalog)
        types = {c: kind for c, kind in adapter.query_columns(exp.select("*").from_(table.copy())) if c != ARRIVAL}
        _check_columns(topic, list(types), column)
        for part in id_columns(column):
            _check_id_type(adapter, part, types, composite=topic.id_parts is not None)
        return table, _count_fitting(adapter, topic, table, types, rows)
    except BaseException:
        adapter.drop_temp_table(name)
        raise


def _load(adapter, topic, name: str, data, column: str | None) -> tuple[exp.Table, int | None]:
    """The data as the send's staged table, and its number of rows where it was known before loading (not a
    Spark DataFrame's). A Python integer outside signed 64-bit (rows, or a pandas column of objects) cannot be
    loaded: an InvalidEntryError naming it (the sequence id column) or a TopicError."""
    columns = [c for c, _ in topic.user_columns]
    if hasattr(data, "sparkSession"):
        return load(adapter, name, data, columns), None
    if not hasattr(data, "schema") and not hasattr(data, "columns"):
        data = list(data)          # (rows: read once, and again to name a value that does not fit)
    try:
        table = to_arrow(data, columns)
        return load(adapter, name, table, columns, held=True), table.num_rows
    except OverflowError:
        found = _beyond_64_bits(data, columns)
        if found is None:
            raise
    index, where, value = found
    if where.lower() in {c.lower() for c in id_columns(column)} and topic.id_parts is None:
        raise InvalidEntryError(
            f"entry {index} has sequence id {value} in column {where!r}, which is "
            f"{'below 0' if value < 0 else f'above {MAX_ID}'}: sequence ids are signed 64-bit, 0 to {MAX_ID}. "
            "Give every entry an id in that range. Nothing was sent") from None
    raise TopicError(f"entry {index} has the value {value} in column {where!r}, which does not fit a signed "
                     f"64-bit integer (-{MAX_ID + 1} to {MAX_ID}); give values in that range, or send the column "
                     "as a string or a decimal. Nothing was sent") from None


def _beyond_64_bits(data, columns: list[str]) -> tuple[int, str, int] | None:
    """The first integer of ``data`` outside signed 64-bit, as (entry, column, value); None if there is none. Read
    only once the data failed to load: rows (dicts, or tuples in ``columns`` order), or a pandas frame's values.

    Example:
        >>> _beyond_64_bits([("a", 1), ("b", 2**64)], ["payload", "id"])
        (1, 'id', 18446744073709551616)
        >>> _beyond_64_bits([{"id": -2**63}], [])
    """
    if hasattr(data, "to_dict") and hasattr(data, "columns"):      # pandas
        rows = data.to_dict("records")
    elif isinstance(data, list):
        rows = [row if isinstance(row, dict) else dict(zip(columns, row)) for row in data]
    else:
        return None
    for index, row in enumerate(rows):
        for name, value in row.items():
            if isinstance(value, numbers.Integral) and not isinstance(value, bool) and \
                    not -MAX_ID - 1 <= value <= MAX_ID:
                return index, name, int(value)
    return None


def _check_columns(topic, present: list[str], column: str | tuple[str, ...] | None) -> None:
    wanted = {c.lower() for c, _ in topic.user_columns}
    have = {c.lower() for c in present}
    for part in id_columns(column):
        if part.lower() not in have:
            raise TopicError(f"the data has no column {part!r} for the sequence ids; its columns are {present}")
    extra = sorted(have - wanted - {c.lower() for c in id_columns(column)})
    missing = sorted(wanted - have)
    if extra or missing:
        raise TopicError(f"the data does not fit topic {topic.ref.key}: "
                         + "; ".join(part for part in (f"unknown columns {extra}" if extra else "",
                                                       f"missing columns {missing}" if missing else "") if part)
                         + f". The topic's columns are {[c for c, _ in topic.user_columns]}")


def _check_id_type(adapter, column: str, types: dict[str, str], composite: bool = False) -> None:
    """Explicit ids are integers (a composite id's parts, R19, also DECIMALs of scale 0, for values of 2^63 and
    above); the error names the column (the statement's would name is_not_dup's argument)."""
    written = next(k for c, k in types.items() if c.lower() == column.lower())
    kind = written.split("(")[0].strip('"').upper()
    whole = composite and kind == "DECIMAL" and written.replace(" ", "").endswith(",0)")
    if kind not in adapter.INTEGER_TYPES | adapter.NULL_TYPES and not whole:
        raise InvalidEntryError(f"the sequence id column {column!r} has type {kind}; sequence ids are integers "
                                f"(64-bit signed, 0 to {MAX_ID}{'; a composite id part may be a DECIMAL(20, 0)' if composite else ''}): "
                                "give the column integer values. Nothing was sent")


def _count_fitting(adapter, topic, table: exp.Table, types: dict[str, str], rows: int | None) -> int:
    """The staged rows, once every value is known to cast to its topic column's type: a value that does not would
    fail the statement on every retry, so it is refused here, before anything is sent. A column staged with its
    topic column's own type fits whatever its values; where all do and the number of ``rows`` is known, the engine
    is not asked (a send of one entry: a query of about 1 ms, and as much again to build it)."""
    staged = {c.lower(): c for c in types}
    checks, unsure = [], False
    for name, kind in topic.user_columns:
        value = exp.column(staged[name.lower()], quoted=True)
        to = _built(kind, adapter.DIALECT)
        if to is None or _same_scalar(kind, types[staged[name.lower()]], adapter.DIALECT):
            checks.append(exp.Literal.number(0))     # (None: a type sqlglot cannot read; the statement judges it)
            continue
        unsure = True
        cast = exp.TryCast(this=value.copy(), to=to.copy(), safe=True)
        checks.append(exp.Count(this=exp.Case().when(
            exp.and_(exp.not_(value.is_(exp.null())), cast.is_(exp.null())), exp.Literal.number(1))))
    if not unsure and rows is not None:
        return rows
    count, *unfit = adapter.fetchall(exp.select(exp.Count(this=exp.Star()), *checks).from_(table.copy()))[0]
    bad = [f"{n} value(s) of column {name!r} ({types[staged[name.lower()]]}) do not cast to {kind}"
           for (name, kind), n in zip(topic.user_columns, unfit) if n]
    if bad:
        raise TopicError(f"the data does not fit topic {topic.ref.key}: {'; '.join(bad)}. Nothing was sent")
    return count


@functools.lru_cache(maxsize=256)
def _built(kind: str, dialect: str) -> exp.DataType | None:
    """The type ``kind`` as sqlglot reads it in ``dialect`` (None: it cannot), kept: a send of one entry would
    otherwise parse each of its columns' types twice. Shared: copied where it goes into a tree."""
    try:
        return exp.DataType.build(kind, dialect=dialect)
    except sqlglot.errors.ParseError:
        return None


@functools.lru_cache(maxsize=256)
def _same_scalar(kind: str, staged: str, dialect: str) -> bool:
    """Whether a value ``staged`` as this type is one of type ``kind``: the same type, written the same in the
    engine's dialect (``STRING`` and ``VARCHAR`` are DuckDB's ``TEXT``), and no nested one, whose fields' names and
    order a cast may change. Kept, as the types are: a send asks it of the same types each time.

    Example:
        >>> _same_scalar("STRING", "VARCHAR", "duckdb"), _same_scalar("BIGINT", "INTEGER", "duckdb")
        (True, False)
    """
    to, given = _built(kind, dialect), _built(staged, dialect)
    return to is not None and given is not None and not to.is_type(*exp.DataType.NESTED_TYPES) and \
        to.sql(dialect) == given.sql(dialect)
