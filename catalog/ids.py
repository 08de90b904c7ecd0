"""The shape of a topic's sequence ids (R19), spelled once for every layer: an integer (BIGINT, the default), or a
composite id of one to three parts, each an unsigned 64-bit integer compared in order (a CDC source's position:
(lsn, event index), (binlog file, position, row), (partition, offset)).

A composite id is stored as text: each part as a letter that says how many digits it has (``a`` one, ``b`` two, ...
``t`` twenty: 2^64 - 1 has 20), then its digits, the parts concatenated. Text order is then tuple order: of two
parts, the one with more digits is larger and its letter sorts later; with as many digits, the digits decide; each
part says where it ends, so the next one is compared from the same place. Every rule, plan and catalog query that
compares, orders or takes the max of ids therefore works on the text unchanged, on every engine and for any integer
type of the parts (2^64 - 1 fits neither Spark's BIGINT nor DuckDB's; it fits a DECIMAL(20, 0)). The text is as
short as the parts allow: (23803720, 2), an LSN and an event index, takes 11 characters where 20 digits a part took
40, which the engines hash, sort, shuffle and write (DuckDB keeps a string of up to 12 bytes inside the row). The shape
is fixed when the topic is created (``Session.create_topic(..., id_parts=2)``): its table's id columns take their
type then.

Inside a statement an engine may work on a composite id in a form of its own, made from the parts as the statement
reads them and spelled as the text where it leaves the statement (written to the topic, the ledger, the outcome):
DuckDB's UHUGEINT holds one or two parts exactly, ``(a << 64) | b``, and costs what a BIGINT costs to make, group and
compare, where the text costs half as much again (docs/performance.md). The forms are nodes of their own
(``Working``, ``Stored``, ``FromStored``), which each dialect renders (``sql.dialects``); the text is the form
wherever the engine has no other, and the only one anything outside a statement sees.

    >>> encoded((0x16B3748, 2)), decoded(encoded((2**64 - 1, 0)))
    ('h23803720a2', (18446744073709551615, 0))
    >>> encoded((7, 2**64 - 1)) < encoded((8, 0)) < encoded((10, 0)), encoded((0, 5)) < encoded((0, 10))
    (True, True)
    >>> decoded("00000000000000000007")
    Traceback (most recent call last):
    ...
    ValueError: '00000000000000000007' is not the text of a composite id (each part: a letter from 'a' to 't' that counts its digits, then the digits); a topic whose ids are 20 digits a part was written before 2026-12-02 and must be made again
"""
from __future__ import annotations

import numbers

from sqlglot import exp

from seqdedup.errors import TopicError
from seqdedup.udfs.reference import MAX_PARTS, PART_LIMIT      # (the rule's bounds: parts, each below 2^64)

#: The letter before a part's digits is this code point plus their number: ``a`` (97) for one digit.
BEFORE_LETTERS = 96
#: The most digits a part has: 2^64 - 1 has 20 (letter ``t``).
LONGEST = len(str(PART_LIMIT - 1))


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


def spelled(part: exp.Expression) -> exp.Expression:
    """SQL: the text of one in-range part: its digits' count as a letter, then its digits. The parts are integers or
    DECIMALs of scale 0, whose text is their digits alone. (Cheaper than the 40 digits it replaced: 5M two-part
    ids made and their max taken, DuckDB 0.72 s, or 1.19 s with 13-digit first parts, against 1.75 s for one
    ``printf``; Spark 1.9 s against 2.2 s for an ``lpad`` a part.)

    Example:
        >>> spelled(exp.column("lsn")).sql("spark")
        'CHR(CAST(96 + LENGTH(CAST(lsn AS STRING)) AS INT)) || CAST(lsn AS STRING)'
    """
    digits = exp.cast(part.copy(), "text")
    letter = exp.Chr(expressions=[exp.cast(exp.Add(this=exp.convert(BEFORE_LETTERS),
                                                   expression=exp.Length(this=digits.copy())), "int")])
    return exp.DPipe(this=letter, expression=digits)


def encode(parts: list[exp.Expression]) -> exp.Expression:
    """SQL: the text of a composite id of ``parts``; NULL where a part is NULL, negative or above 2^64 - 1, so that
    the entry is refused as one without an id (R4). The parts are integers or DECIMALs of scale 0 (the statement's
    check refuses other types before it runs: ``seqdedup.core.checks``).

    Example:
        >>> print(encode([exp.column("lsn")]).sql("duckdb"))
        CASE WHEN NOT lsn BETWEEN 0 AND 18446744073709551615 THEN NULL ELSE CHR(CAST(96 + LENGTH(CAST(lsn AS TEXT)) AS INT)) || CAST(lsn AS TEXT) END
    """
    fits = _in_range(parts)
    text = spelled(parts[0])
    for part in parts[1:]:
        text = exp.DPipe(this=text, expression=spelled(part))
    return exp.Case(ifs=[exp.If(this=exp.not_(fits), true=exp.null())], default=text)


def part_digits(text: exp.Expression, parts: int) -> list[exp.Expression]:
    """SQL: the digits of each of the ``parts`` parts of a composite id's ``text``, in order, as text. Each part
    starts where the one before it ends: one character after its letter, as many digits as the letter says.

    Example:
        >>> [d.sql("duckdb") for d in part_digits(exp.column("t"), 2)][1]
        'SUBSTRING(t, 1 + 1 + (ASCII(SUBSTRING(t, 1, 1)) - 96) + 1, ASCII(SUBSTRING(t, 1 + 1 + (ASCII(SUBSTRING(t, 1, 1)) - 96), 1)) - 96)'
    """
    digits, start = [], exp.convert(1)
    for _ in range(parts):
        count = exp.Sub(this=exp.func("ascii", exp.Substring(this=text.copy(), start=start.copy(),
                                                              length=exp.convert(1))),
                        expression=exp.convert(BEFORE_LETTERS))
        digits.append(exp.Substring(this=text.copy(), start=exp.Add(this=start.copy(), expression=exp.convert(1)),
                                    length=count))
        start = exp.Add(this=exp.Add(this=start, expression=exp.convert(1)), expression=exp.paren(count.copy()))
    return digits


def encoded(value: tuple[int, ...]) -> str:
    """Python: the text of the composite id ``value`` (a tuple of integers checked by the caller)."""
    return "".join(chr(BEFORE_LETTERS + len(str(part))) + str(part) for part in value)


def decoded(text: str | None) -> tuple[int, ...] | None:
    """Python: the composite id whose text is ``text`` (None stays None)."""
    if text is None:
        return None
    parts, at = [], 0
    while at < len(text):
        count = ord(text[at]) - BEFORE_LETTERS
        digits = text[at + 1:at + 1 + count]
        if not 1 <= count <= LONGEST or len(digits) != count or not digits.isdigit():
            raise ValueError(f"{text!r} is not the text of a composite id (each part: a letter from 'a' to 't' that "
                             "counts its digits, then the digits); a topic whose ids are 20 digits a part was written "
                             "before 2026-12-02 and must be made again")
        parts.append(int(digits))
        at += 1 + count
    return tuple(parts)


class Working(exp.Expression, exp.Func):
    """A composite id made from its parts (``expressions``), in the form the engine works on inside a statement;
    NULL where a part is NULL or out of range (as ``encode``)."""
    arg_types = {"expressions": True}
    is_var_len_args = True


class Stored(exp.Expression, exp.Func):
    """A composite id of ``parts`` parts in the working form (``this``), as its stored text."""
    arg_types = {"this": True, "parts": True}


class FromStored(exp.Expression, exp.Func):
    """A composite id of ``parts`` parts as stored text (``this``: a mark), in the working form."""
    arg_types = {"this": True, "parts": True}


def working(parts: list[exp.Expression]) -> exp.Expression:
    """SQL: the composite id of ``parts`` in the engine's working form (``Working``)."""
    return Working(expressions=[p.copy() for p in parts])


def stored(value: exp.Expression, parts: int | None) -> exp.Expression:
    """SQL: an id in the working form as the topic stores it (an integer id is its own)."""
    return value if parts is None else Stored(this=value, parts=exp.convert(parts))


def from_stored(value: exp.Expression, parts: int | None) -> exp.Expression:
    """SQL: an id as the topic stores it in the working form (an integer id is its own)."""
    return value if parts is None else FromStored(this=value, parts=exp.convert(parts))


#: The most parts a 128-bit integer holds (DuckDB's UHUGEINT: 2^128 - 1 at most, two parts below 2^64).
WIDE_PARTS = 2
#: The low part of a UHUGEINT of two: its 64 low bits.
LOW_BITS = exp.cast(exp.convert(PART_LIMIT - 1), "uhugeint")
UBIGINT = exp.DataType(this=exp.DataType.Type.UBIGINT)


def as_text(node: exp.Func) -> exp.Expression:
    """SQL: ``node`` (``Working``, ``Stored``, ``FromStored``) where the working form is the text itself.

    Example:
        >>> as_text(Stored(this=exp.column("x"), parts=exp.convert(2))).sql()
        'x'
    """
    return encode(node.expressions) if isinstance(node, Working) else node.this


def as_uhugeint(node: exp.Func) -> exp.Expression:
    """SQL: ``node`` (``Working``, ``Stored``, ``FromStored``) where the working form of one or two parts is a
    UHUGEINT (DuckDB's), the first part in its high 64 bits; three parts stay text (``as_text``).

    Example:
        >>> as_uhugeint(Working(expressions=[exp.column("a"), exp.column("b")])).sql("duckdb")
        'CASE WHEN NOT (a BETWEEN 0 AND 18446744073709551615 AND b BETWEEN 0 AND 18446744073709551615) THEN NULL ELSE (CAST(a AS UINT128) << 64) | CAST(b AS UINT128) END'
        >>> import duckdb
        >>> made = as_uhugeint(Working(expressions=[exp.convert(2**64 - 1), exp.convert(5)]))
        >>> duckdb.sql(f"SELECT {as_uhugeint(Stored(this=made, parts=exp.convert(2))).sql('duckdb')}").fetchall()
        [('t18446744073709551615a5',)]
    """
    count = len(node.expressions) if isinstance(node, Working) else int(node.args["parts"].name)
    if count > WIDE_PARTS:
        return as_text(node)
    if isinstance(node, Working):
        return exp.Case(ifs=[exp.If(this=exp.not_(_in_range(node.expressions)), true=exp.null())],
                        default=_joined([exp.cast(p.copy(), "uhugeint") for p in node.expressions]))
    if isinstance(node, Stored):
        # (each part made a UBIGINT before its digits: a UHUGEINT's text costs a 128-bit division a digit, 5M
        # two-part ids 1.40 s against 0.30 s. A letter found by comparing the part with powers of ten costs half of
        # its length's, 0.10 s against 0.22 s, but DuckDB takes 1.3 ms to bind the search: a small statement's time)
        value = node.this
        if count == 1:
            return spelled(exp.cast(value.copy(), UBIGINT))
        high = exp.BitwiseRightShift(this=value.copy(), expression=exp.convert(64))
        low = exp.BitwiseAnd(this=value.copy(), expression=LOW_BITS.copy())
        return exp.DPipe(this=spelled(exp.cast(high, UBIGINT)),
                         expression=spelled(exp.cast(low, UBIGINT)))
    return _joined([exp.cast(d, "uhugeint") for d in part_digits(node.this, count)])


def packed(value: tuple[int, ...]) -> int:
    """Python: a composite id of one or two parts as the integer ``as_uhugeint`` makes of it (of three, the same
    reading past 128 bits: ``sql.plan.spread.composite_bounds``).

    Example:
        >>> packed((1, 2)) == 2**64 + 2, packed((7,))
        (True, 7)
    """
    whole = 0
    for part in value:
        whole = (whole << 64) | part
    return whole


def _joined(parts: list[exp.Expression]) -> exp.Expression:
    """One or two UHUGEINT parts as one: the first in the high 64 bits."""
    if len(parts) == 1:
        return parts[0]
    return exp.BitwiseOr(this=exp.BitwiseLeftShift(this=parts[0], expression=exp.convert(64)), expression=parts[1])


def _in_range(parts: list[exp.Expression]) -> exp.Expression:
    """SQL: every part is from 0 to 2^64 - 1."""
    return exp.and_(*[exp.Between(this=p.copy(), low=exp.convert(0), high=exp.convert(PART_LIMIT - 1))
                      for p in parts])


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


__all__ = ["MAX_PARTS", "PART_LIMIT", "FromStored", "Stored", "Working", "arrow_type", "as_text", "as_uhugeint",
           "check_parts", "decoded", "decoded_rows", "encode", "encoded", "from_stored", "id_type", "packed",
           "part_digits", "shape", "spelled", "stored", "working"]
