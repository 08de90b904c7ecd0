"""The SQL dialects seqdedup reads and writes.

Spark 4 runs in ANSI mode (a bad cast or an overflow raises), but sqlglot's stock ``spark`` dialect assumes the
old non-ANSI behaviour and would turn ``CAST`` into DuckDB's ``TRY_CAST`` and ``a / b`` into a division by
``NULLIF(b, 0)``: errors would silently become NULLs. ``spark`` here means Spark 4 with ANSI on.
"""
from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.dialects.duckdb import DuckDB
from sqlglot.dialects.spark import Spark
from sqlglot.parsers.spark import SparkParser
from sqlglot.tokens import TokenType

from seqdedup.catalog import ids
from seqdedup.errors import SeqdedupError

#: A composite id's forms inside a statement (``catalog.ids``) where the engine works on the text itself.
TEXT_IDS = {node: lambda self, e: self.sql(ids.as_text(e)) for node in (ids.Working, ids.Stored, ids.FromStored)}


class SparkAnsi(Spark):
    """Spark SQL as Spark 4 runs it: ANSI mode on. ``RESET [key]`` is Spark's statement (sqlglot would read the
    word as a column).

    Example:
        >>> import sqlglot
        >>> sqlglot.parse_one("RESET seqdedup.deduplication_enabled", read=SparkAnsi).sql(SparkAnsi)
        'RESET seqdedup.deduplication_enabled'
    """

    SAFE_DIVISION = False

    class Tokenizer(Spark.Tokenizer):
        KEYWORDS = {**Spark.Tokenizer.KEYWORDS, "RESET": TokenType.COMMAND}

    class Parser(SparkParser):
        STRICT_CAST = True

    class Generator(Spark.Generator):
        TRANSFORMS = {**Spark.Generator.TRANSFORMS, **TEXT_IDS}


class DuckDBExplicit(DuckDB):
    """DuckDB SQL whose every ORDER BY says its direction and where its NULLs go.

    DuckDB's settings ``default_order`` and ``default_null_order`` change what an ORDER BY that says neither means;
    the SQL seqdedup generates (its own queries, and the Spark SQL it reads, whose ORDER BY is ascending) means one
    order whatever a session sets.

    Example:
        >>> import sqlglot
        >>> sqlglot.parse_one("SELECT a FROM t ORDER BY a, b DESC", read="spark").sql(DuckDBExplicit)
        'SELECT a FROM t ORDER BY a ASC NULLS FIRST, b DESC NULLS LAST'
    """

    class Generator(DuckDB.Generator):
        # (a composite id of one or two parts is a UHUGEINT inside a statement: ``catalog.ids``)
        TRANSFORMS = {**DuckDB.Generator.TRANSFORMS, **{node: lambda self, e: self.sql(ids.as_uhugeint(e))
                                                         for node in TEXT_IDS}}

        def ordered_sql(self, expression: exp.Ordered) -> str:
            desc = bool(expression.args.get("desc"))
            nulls_first = expression.args.get("nulls_first")
            if nulls_first is None:         # DuckDB's own default: NULLs last, either way
                nulls_first = False
            return (f"{self.sql(expression, 'this')} {'DESC' if desc else 'ASC'} "
                    f"NULLS {'FIRST' if nulls_first else 'LAST'}")


#: The dialects users may write statements in, by name.
DIALECTS: dict[str, type[Dialect] | str] = {"spark": SparkAnsi, "duckdb": "duckdb"}


def read_dialect(name: str) -> type[Dialect] | str:
    """The sqlglot dialect for a dialect name a user gave (``spark`` or ``duckdb``)."""
    try:
        return DIALECTS[name.lower()]
    except KeyError:
        raise SeqdedupError(f"unknown SQL dialect {name!r}; use one of: {', '.join(DIALECTS)}") from None
