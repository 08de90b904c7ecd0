"""The shape of a topic's sequence ids (R19), spelled once for every layer: an integer (BIGINT, the default), or a
composite id of one to three parts, each an unsigned 64-bit integer compared in order (a CDC source's position:
(lsn, event index), (binlog file, position, row), (partition, offset)).

A composite id is stored as text: each part as 20 decimal digits, zero-padded, the parts concatenated. Text order
is then tuple order, so every rule, plan and catalog query that compares, orders or takes the max of ids works on it
unchanged, on every engine and for any integer type of the parts (2^64 - 1 fits neither Spark's BIGINT nor
DuckDB's; it fits a DECIMAL(20, 0), and its digits fit 20 characters). The shape is fixed when the topic is created
(``Session.create_topic(..., id_parts=2)``): its table's id columns take their type then.

    >>> encoded((0x16B3748, 2)), decoded(encoded((2**64 - 1, 0)))
    ('0000000000002380372000000000000000000002', (18446744073709551615, 0))
    >>> encoded((7, 2**64 - 1)) < encoded((8, 0))
    True
"""
from __future__ import annotations

import numbers

from sqlglot import exp

from seqdedup.errors import TopicError
from seqdedup.udfs.reference import MAX_PARTS, PART_LIMIT      # (the rule's bounds: parts, each below 2^64)

#: The digits of a part in the encoding: 2^64 - 1 has 20.
DIGITS = 20


def id_type(parts: int | None) -> exp.DataType:
    """The SQL type of the ids of a topic whose ids have ``parts`` parts (None: integer ids)."""
    return exp.DataType.build("bigint" if parts is None else "text")


def arrow_type(parts: int | None):
    """The Arrow type of those ids, as the state holds them in memory."""
    import pyarrow as pa

    return pa.int64() if parts is None else pa.string()


def check_parts(parts: object) -> int | None:
    """``parts`` as a topic's id shape: None (integer ids) or 1 to MAX_PARTS; anything else refused, with the fix."""
    if parts is None:
        return None
    if isinstance(parts, str) and parts.strip().isdigit():     # (a table property's value, a command line's)
        parts = int(parts)
    if isinstance(parts, bool) or not isinstance(parts, numbers.Integral) or not 1 <= parts <= MAX_PARTS:
        raise TopicError(f"id_parts {parts!r} is not a number of parts from 1 to {MAX_PARTS}; a composite id is a "
                         f"tuple of 1 to {MAX_PARTS} unsigned 64-bit integers (leave it out for BIGINT ids)")
    return int(parts)


class ComposedText(exp.Expression, exp.Func):
    """SQL: the text of a composite id whose parts are known to lie from 0 to 2^64 - 1 (``encode`` checks them), in
    the form that costs its engine least: each dialect seqdedup runs renders it (``sql.dialects``) as ``printed``
    (DuckDB) or ``padded`` (Spark); the text is the same. A dialect that does not know it names it as a function."""

    arg_types = {"expressions": True}
    is_var_len_args = True


def padded(parts: list[exp.Expression]) -> exp.Expression:
    """SQL: the text of in-range ``parts``, each part's digits padded to ``DIGITS``: Spark's cheapest (5M two-part
    ids on ``local[2]``: 2.1 s, against 4.1 s for ``printf``, which formats by Java's ``String.format``). The parts
    are integers or DECIMALs of scale 0, whose text is their digits alone.

    Example:
        >>> padded([exp.column("lsn"), exp.column("idx")]).sql("spark")
        "LPAD(CAST(lsn AS STRING), 20, '0') || LPAD(CAST(idx AS STRING), 20, '0')"
    """
    joined = None
    for part in parts:
        text = exp.func("lpad", exp.cast(part.copy(), "text"), exp.convert(DIGITS), exp.Literal.string("0"))
        joined = text if joined is None else exp.DPipe(this=joined, expression=text)
    return joined


def printed(parts: list[exp.Expression]) -> exp.Expression:
    """SQL: the text of in-range ``parts`` by one ``printf`` where they fit a BIGINT (nearly always), else
    ``padded`` (``printf`` takes no DECIMAL): DuckDB's cheapest (5M two-part ids: 0.42 s, against 0.87 s padded;
    its ``lpad`` is the slow step there).

    Example:
        >>> printed([exp.column("lsn")]).sql("duckdb")
        "CASE WHEN lsn <= 9223372036854775807 THEN PRINTF('%020d', CAST(lsn AS BIGINT)) ELSE LPAD(CAST(lsn AS TEXT), 20, '0') END"
    """
    small = exp.and_(*[p.copy() <= exp.convert(2**63 - 1) for p in parts])
    text = exp.Anonymous(this="printf", expressions=[exp.Literal.string(f"%0{DIGITS}d" * len(parts)),
                                                     *[exp.cast(p.copy(), "bigint") for p in parts]])
    return exp.Case(ifs=[exp.If(this=small, true=text)], default=padded(parts))


def encode(parts: list[exp.Expression]) -> exp.Expression:
    """SQL: the text of a composite id of ``parts``; NULL where a part is NULL, negative or above 2^64 - 1, so that
    the entry is refused as one without an id (R4). The parts are integers or DECIMALs of scale 0 (the statement's
    check refuses other types before it runs: ``seqdedup.core.checks``). The text is made as the engine makes it
    cheapest (``ComposedText``).

    Example:
        >>> from seqdedup.sql.dialects import SparkAnsi
        >>> print(encode([exp.column("lsn")]).sql(SparkAnsi))
        CASE WHEN NOT lsn BETWEEN 0 AND 18446744073709551615 THEN NULL ELSE LPAD(CAST(lsn AS STRING), 20, '0') END
    """
    fits = exp.and_(*[exp.Between(this=p.copy(), low=exp.convert(0), high=exp.convert(PART_LIMIT - 1))
                      for p in parts])
    return exp.Case(ifs=[exp.If(this=exp.not_(fits), true=exp.null())],
                    default=ComposedText(expressions=[p.copy() for p in parts]))


def encoded(value: tuple[int, ...]) -> str:
    """Python: the text of the composite id ``value`` (a tuple of integers checked by the caller)."""
    return "".join(f"{part:0{DIGITS}d}" for part in value)


def decoded(text: str | None) -> tuple[int, ...] | None:
    """Python: the composite id whose text is ``text`` (None stays None)."""
    if text is None:
        return None
    return tuple(int(text[i:i + DIGITS]) for i in range(0, len(text), DIGITS))


def shape(parts: int | None) -> str:
    """A topic's id shape as messages name it.

    Example:
        >>> shape(None), shape(2)
        ('integer ids', 'ids of 2 parts')
    """
    return "integer ids" if parts is None else f"ids of {parts} parts"


def decoded_rows(rows: list[tuple], at: list[int]) -> list[tuple]:
    """``rows`` with the composite ids' texts in the columns ``at`` (their places) as tuples.

    Example:
        >>> decoded_rows([("p", encoded((5, 1)), 7)], [1])
        [('p', (5, 1), 7)]
    """
    return [tuple(decoded(value) if i in at else value for i, value in enumerate(row)) for row in rows]


__all__ = ["MAX_PARTS", "PART_LIMIT", "ComposedText", "arrow_type", "check_parts", "decoded", "decoded_rows", "encode",
           "encoded", "id_type", "padded", "printed", "shape"]
