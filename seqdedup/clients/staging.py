"""A send's data staged for its statement: loaded as a temporary table and checked against the topic before
anything is sent (its columns, the type of its explicit ids, every value's cast), so that data no retry could write
is refused once, with an error that names what is wrong."""
from __future__ import annotations

import numbers

import sqlglot
from sqlglot import exp

from seqdedup.catalog.names import ARRIVAL
from seqdedup.errors import InvalidEntryError, TopicError

from .frames import load

#: The highest sequence id (R4: ids are signed 64-bit).
MAX_ID = 2**63 - 1


def id_columns(column: str | tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
    """The columns of a send's explicit ids: one name, or the parts of a composite id (R19); none for automatic."""
    return () if column is None else (column,) if isinstance(column, str) else tuple(column)


def stage(adapter, topic, name: str, data, column: str | tuple[str, ...] | None) -> tuple[exp.Table, int]:
    """``data`` as the temporary table ``name``, and its number of rows, once it fits ``topic``; ``column`` names
    the column of explicit ids, or the columns of a composite id's parts (R19; None: automatic ones). Dropped again
    when a check refuses it."""
    table = _load(adapter, topic, name, data, column)
    try:
        # (the columns of a query over the table: bound, where the engine can, not looked up in its catalog)
        types = {c: kind for c, kind in adapter.query_columns(exp.select("*").from_(table.copy())) if c != ARRIVAL}
        _check_columns(topic, list(types), column)
        for part in id_columns(column):
            _check_id_type(adapter, part, types, composite=topic.id_parts is not None)
        return table, _count_fitting(adapter, topic, table, types)
    except BaseException:
        adapter.drop_temp_table(name)
        raise


def _load(adapter, topic, name: str, data, column: str | None) -> exp.Table:
    """The data as the send's staged table. A Python integer outside signed 64-bit (rows, or a pandas column of
    objects) cannot be loaded: an InvalidEntryError naming it (the sequence id column) or a TopicError."""
    columns = [c for c, _ in topic.user_columns]
    if not hasattr(data, "sparkSession") and not hasattr(data, "schema") and not hasattr(data, "columns"):
        data = list(data)          # (rows: read once, and again to name a value that does not fit)
    try:
        return load(adapter, name, data, columns)
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


def _count_fitting(adapter, topic, table: exp.Table, types: dict[str, str]) -> int:
    """The staged rows, once every value is known to cast to its topic column's type: a value that does not would
    fail the statement on every retry, so it is refused here, before anything is sent."""
    staged = {c.lower(): c for c in types}
    checks = []
    for name, kind in topic.user_columns:
        value = exp.column(staged[name.lower()], quoted=True)
        try:
            to = exp.DataType.build(kind, dialect=adapter.DIALECT)
        except sqlglot.errors.ParseError:     # a type sqlglot cannot read: the statement will judge its values
            checks.append(exp.Literal.number(0))
            continue
        cast = exp.TryCast(this=value.copy(), to=to, safe=True)
        checks.append(exp.Count(this=exp.Case().when(
            exp.and_(exp.not_(value.is_(exp.null())), cast.is_(exp.null())), exp.Literal.number(1))))
    count, *unfit = adapter.fetchall(exp.select(exp.Count(this=exp.Star()), *checks).from_(table.copy()))[0]
    bad = [f"{n} value(s) of column {name!r} ({types[staged[name.lower()]]}) do not cast to {kind}"
           for (name, kind), n in zip(topic.user_columns, unfit) if n]
    if bad:
        raise TopicError(f"the data does not fit topic {topic.ref.key}: {'; '.join(bad)}. Nothing was sent")
    return count
