"""Spark SQL's file sources as DuckDB's readers, so that one statement reads the same files on both engines.

Spark reads files in two ways that DuckDB does not know:

- a path as a table of a format: ``SELECT * FROM parquet.`/data/events.parquet` `` (also ``csv`` and ``json``);
- a temporary view over a data source: ``CREATE TEMPORARY VIEW v USING csv OPTIONS (path '/data/*.csv',
  header 'true')``.

``to_duckdb_readers`` turns both into ``read_parquet``, ``read_csv`` and ``read_json`` calls with the meaning Spark
gives them: JSON lines; CSV without a header row unless ``header`` says so, every column a string unless
``inferSchema`` says otherwise, and headerless columns named ``_c0``, ``_c1``... as Spark names them. Globs pass
through (both engines expand ``*``). An engine that reads Spark's forms itself says so with the adapter flag
``READS_SPARK_FILE_SOURCES``, and the session leaves its statements alone.

What still differs: Spark orders the columns of a JSON file by name, DuckDB as the file has them (list the columns
instead of ``*``), and a directory needs a glob on DuckDB (``/data/events/*.parquet``).
"""
from __future__ import annotations

from sqlglot import exp

from seqdedup.errors import RewriteError, at

#: format -> DuckDB's reader
READERS = {"parquet": "read_parquet", "csv": "read_csv", "json": "read_json"}

#: format -> Spark option (lower case) -> DuckDB parameter; options with a meaning of their own are handled below.
OPTIONS = {
    "parquet": {"mergeschema": "union_by_name"},
    "csv": {"sep": "delim", "delimiter": "delim", "quote": "quote", "escape": "escape", "nullvalue": "nullstr",
            "comment": "comment", "dateformat": "dateformat", "timestampformat": "timestampformat",
            "encoding": "encoding"},
    "json": {"dateformat": "dateformat", "timestampformat": "timestampformat"},
}
SPECIAL = {"csv": {"header", "inferschema"}, "json": {"multiline"}, "parquet": set()}

#: DuckDB names headerless CSV columns column0, column1 (column00 ... when there are ten or more); Spark _c0, _c1.
_HEADERLESS = r"^column0*(\d+)$", r"_c\1"


def _truth(value: str) -> bool:
    return value.strip().lower() == "true"


def reader(fmt: str, path: str, options: dict[str, str] | None = None, where: exp.Expression | None = None) -> exp.Query:
    r"""The DuckDB query that reads ``path`` as Spark reads format ``fmt`` with ``options`` (names in any case).

    Example:
        >>> print(reader("csv", "/data/*.csv", {"header": "true", "sep": ";"}).sql("duckdb"))
        SELECT * FROM READ_CSV('/data/*.csv', header = TRUE, all_varchar = TRUE, delim = ';')
        >>> print(reader("csv", "/data/x.csv").sql("duckdb"))     # no header row: Spark's column names
        SELECT COLUMNS('^column0*(\d+)$') AS "_c\1" FROM READ_CSV('/data/x.csv', header = FALSE, all_varchar = TRUE)
    """
    fmt = fmt.lower()
    options = {k.lower(): str(v) for k, v in (options or {}).items()}
    unknown = sorted(set(options) - set(OPTIONS[fmt]) - SPECIAL[fmt])
    if unknown:
        known = sorted(set(OPTIONS[fmt]) | SPECIAL[fmt])
        raise RewriteError(f"the {fmt} option{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} cannot be read on "
                           f"this engine{at(where) if where is not None else ''}; the {fmt} options it reads are: "
                           f"{', '.join(known) or 'none'} (or read the file with the engine's own functions)")
    parameters: list[tuple[str, exp.Expression]] = []
    header = True
    if fmt == "csv":
        header = _truth(options.get("header", "false"))
        parameters += [("header", exp.Boolean(this=header)),
                       ("all_varchar", exp.Boolean(this=not _truth(options.get("inferschema", "false"))))]
    if fmt == "json":
        parameters.append(("format", exp.Literal.string(
            "auto" if _truth(options.get("multiline", "false")) else "newline_delimited")))
    for option, value in options.items():
        if option in OPTIONS[fmt]:
            parameters.append((OPTIONS[fmt][option], exp.Boolean(this=_truth(value))
                               if option == "mergeschema" else exp.Literal.string(value)))
    call = exp.Anonymous(this=READERS[fmt], expressions=[exp.Literal.string(path)] + [
        exp.EQ(this=exp.column(name), expression=value) for name, value in parameters])
    columns = exp.Star() if header else exp.alias_(
        exp.Columns(this=exp.Literal.string(_HEADERLESS[0])), _HEADERLESS[1], quoted=True)
    return exp.select(columns).from_(exp.Table(this=call))


def _is_path(table: exp.Table) -> bool:
    """Whether a table is written ``format.`path```."""
    fmt = table.db.lower() if table.args.get("db") is not None else ""
    return fmt in READERS and not table.catalog and isinstance(table.this, exp.Identifier) and table.this.quoted


def _using_view(create: exp.Create) -> exp.Create | None:
    """``CREATE TEMPORARY VIEW v USING format OPTIONS (path ...)`` as a view over the reader, or None."""
    properties = create.args.get("properties")
    if create.kind != "VIEW" or properties is None or create.expression is not None:
        return None
    fmt = next((p.this.name.lower() for p in properties.expressions if isinstance(p, exp.FileFormatProperty)), None)
    if fmt is None:
        return None
    if fmt not in READERS:
        raise RewriteError(f"USING {fmt} cannot be read on this engine{at(create)}; it reads "
                           f"{', '.join(READERS)} files")
    options = {}
    for prop in properties.expressions:
        if isinstance(prop, exp.OptionsProperty):
            for option in prop.expressions:
                value = option.args.get("value")
                options[option.name.lower()] = value.name if isinstance(value, exp.Literal) else value.sql().lower()
    path = options.pop("path", None)
    if not path:
        raise RewriteError(f"USING {fmt} needs the file: OPTIONS (path '/data/file.{fmt}'){at(create)}")
    kept = [p for p in properties.expressions if not isinstance(p, (exp.FileFormatProperty, exp.OptionsProperty))]
    view = create.copy()
    view.set("properties", exp.Properties(expressions=[p.copy() for p in kept]) if kept else None)
    view.set("expression", reader(fmt, path, options, where=create))
    return view


def to_duckdb_readers(tree: exp.Expression) -> exp.Expression:
    """Spark's file sources in ``tree`` as DuckDB readers (see the module's text); anything else untouched.

    Example:
        >>> import sqlglot
        >>> to_duckdb_readers(sqlglot.parse_one("SELECT * FROM parquet.`/data/*.parquet` AS e", read="spark")).sql("duckdb")
        "SELECT * FROM (SELECT * FROM READ_PARQUET('/data/*.parquet')) AS e"
        >>> to_duckdb_readers(sqlglot.parse_one("CREATE TEMPORARY VIEW v USING json OPTIONS (path '/data/e.json')",
        ...                                     read="spark")).sql("duckdb")
        "CREATE TEMPORARY VIEW v AS SELECT * FROM READ_JSON('/data/e.json', format = 'newline_delimited')"
    """
    if isinstance(tree, exp.Create):
        view = _using_view(tree)
        if view is not None:
            return view
    if not any(_is_path(table) for table in tree.find_all(exp.Table)):
        return tree      # every statement passes here: no copy unless there is something to translate
    tree = tree.copy()
    for table in [t for t in tree.find_all(exp.Table) if _is_path(t)]:
        table.replace(reader(table.db, table.name, where=table).subquery(table.alias or table.name))
    return tree
