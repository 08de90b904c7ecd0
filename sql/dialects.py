"""The SQL dialects seqdedup reads and writes.

Spark 4 runs in ANSI mode (a bad cast or an overflow raises), but sqlglot's stock ``spark`` dialect assumes the
old non-ANSI behaviour and would turn ``CAST`` into DuckDB's ``TRY_CAST`` and ``a / b`` into a division by
``NULLIF(b, 0)``: errors would silently become NULLs. ``spark`` here means Spark 4 with ANSI on.
"""
from __future__ import annotations

from sqlglot.dialects.dialect import Dialect
from sqlglot.dialects.spark import Spark
from sqlglot.parsers.spark import SparkParser

from seqdedup.errors import SeqdedupError


class SparkAnsi(Spark):
    """Spark SQL as Spark 4 runs it: ANSI mode on."""

    SAFE_DIVISION = False

    class Parser(SparkParser):
        STRICT_CAST = True


#: The dialects users may write statements in, by name.
DIALECTS: dict[str, type[Dialect] | str] = {"spark": SparkAnsi, "duckdb": "duckdb"}


def read_dialect(name: str) -> type[Dialect] | str:
    """The sqlglot dialect for a dialect name a user gave (``spark`` or ``duckdb``)."""
    try:
        return DIALECTS[name.lower()]
    except KeyError:
        raise SeqdedupError(f"unknown SQL dialect {name!r}; use one of: {', '.join(DIALECTS)}") from None
