"""Setting up the catalog on a database: a catalog this seqdedup cannot use refused before anything is written
(another version, a table or column missing or of another type), and the tables made, or completed where a
creation was cut short or an older catalog lacks what was added since."""
from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp

from seqdedup.errors import CatalogError, EngineError, already_exists

from .schema import ADDED_COLUMNS, ADDED_TABLES, CATALOG_TABLES, CATALOG_VERSION, META, arrow_schema, catalog_table
from .state import literal


@functools.lru_cache(maxsize=1024)
def _engine_type(kind: str | exp.DataType, dialect) -> object:
    """A column type as the engine reads it back (VARCHAR and STRING both TEXT), to compare types (each
    ``connect`` compares every catalog column's)."""
    text = kind.sql(dialect=dialect) if isinstance(kind, exp.DataType) else kind
    try:
        return exp.DataType.build(text, dialect=dialect).this
    except (sqlglot.errors.ParseError, ValueError):
        return text.upper()


def shape_problem(present: list[tuple[str, str]], wanted: dict[str, exp.DataType], dialect) -> str | None:
    """What keeps a table with columns ``present`` (name, engine type) from holding the columns ``wanted``, their
    types compared as the engine (``dialect``) reads them back."""
    types = {name.lower(): kind for name, kind in present}
    missing = [name for name in wanted if name.lower() not in types]
    if missing:
        return f"it lacks the column{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
    for name, kind in wanted.items():
        if _engine_type(types[name.lower()], dialect) != _engine_type(kind, dialect):
            return (f"its column {name} has the type {types[name.lower()]}, where seqdedup needs "
                    f"{kind.sql(dialect=dialect)}")
    return None


class CatalogSetup:
    """The set-up of the catalog tables, through an executor (``catalog.Executor``)."""

    def __init__(self, executor):
        self.executor = executor

    def _described(self) -> dict[str, list[tuple[str, str]]]:
        """Each catalog table's columns (none: the table is missing), read in one round trip."""
        return dict(zip(CATALOG_TABLES, self.executor.tables_columns([catalog_table(n) for n in CATALOG_TABLES])))

    def check_version(self) -> bool:
        """Refuse, before anything is written, a catalog this seqdedup cannot use: written by another version, a
        table missing, a column missing or of another type. A CatalogError says what is wrong and how to fix it.
        True when the catalog is complete (every table and column there): ``create`` has nothing left to do.

        A catalog whose creation was cut short is not damaged: its tables are there but the version row is not (on
        Spark, where each CREATE is its own catalog operation, a process stopped during its first ``connect``).
        With every catalog table still empty, a writable session finishes it (``create``)."""
        if not self.executor.columns(catalog_table("seqdedup_meta")):    # a new database (one look-up)
            return False
        version = exp.select("value").from_(catalog_table("seqdedup_meta")).where(
            exp.column("key").eq(literal("catalog_version")))
        read = self.executor.alongside(lambda: self.executor.fetchall(version))    # (where the engine allows)
        described = self._described()
        rows = read.result()
        if not rows:
            if not self._unfinished(described):
                raise CatalogError(
                    "the seqdedup catalog has no catalog_version row in seqdedup_meta, though its other tables hold "
                    "rows: it is damaged. Restore seqdedup_meta from a backup (if this seqdedup, catalog version "
                    f"{CATALOG_VERSION}, wrote the catalog, the missing row is ('catalog_version', "
                    f"'{CATALOG_VERSION}'))")
            if self.executor.read_only:
                raise CatalogError("the seqdedup catalog was never finished (a process stopped while creating it); "
                                   "connect once without read_only=True to finish it")
            self._check_tables(described, missing_ok=True)    # create() adds the missing tables and the version row
            return False
        version = int(rows[0][0])
        if version < CATALOG_VERSION:
            raise CatalogError(f"this catalog was written by an older seqdedup (catalog version {version}; this one "
                               f"needs {CATALOG_VERSION}, which records a commit number on every row); start a new "
                               "database, or keep using the older seqdedup with this one")
        if version > CATALOG_VERSION:
            raise CatalogError(f"this catalog was written by a newer seqdedup (catalog version {version}, this "
                               f"seqdedup reads up to {CATALOG_VERSION}); upgrade seqdedup to use it")
        return self._check_tables(described)

    def _check_tables(self, described: dict[str, list[tuple[str, str]]], *, missing_ok: bool = False) -> bool:
        """Every catalog table is there with every column, of its type (a table in ADDED_TABLES, or any table when
        ``missing_ok``, may be missing, and a column in ADDED_COLUMNS: ``create`` adds them). True when nothing is
        missing."""
        complete = True
        for name, columns in CATALOG_TABLES.items():
            present = described[name]
            if not present:
                complete = False
                if missing_ok or name in ADDED_TABLES:
                    continue
                raise CatalogError(f"the catalog table {name} is missing (dropped outside seqdedup?); restore it "
                                   "from a backup of this database: seqdedup cannot rebuild it, and refuses to run "
                                   "without it")
            added = set(ADDED_COLUMNS.get(name, ()))
            kept = {c: t for c, t in columns.items() if c not in added}
            problem = shape_problem(present, kept, self.executor.DIALECT)
            if problem:
                raise CatalogError(f"the catalog table {name} is damaged: {problem} (changed outside seqdedup?); "
                                   "restore it from a backup of this database")
            complete = complete and shape_problem(present, columns, self.executor.DIALECT) is None
        return complete

    def _unfinished(self, described: dict[str, list[tuple[str, str]]]) -> bool:
        """No catalog table holds a row: a creation cut short before its version row, never used."""
        for name in CATALOG_TABLES:
            table = catalog_table(name)
            if described[name] and self.executor.fetchall(exp.select(literal(1)).from_(table).limit(1)):
                return False
        return True

    def create(self) -> None:
        """Create the catalog tables (idempotent). A table that was there already (a creation cut short, an older
        catalog, another driver first) gets the columns added since; one made now has them all."""
        made = set()
        for name, columns in CATALOG_TABLES.items():
            if self._create_once(lambda: self.executor.storage.create_catalog_table(catalog_table(name), columns)):
                made.add(name)
                continue
            present = {column.lower() for column, _ in self.executor.columns(catalog_table(name))}
            for column in ADDED_COLUMNS.get(name, ()):
                if column not in present:     # a catalog written before the column was added: add it, NULL in old rows
                    self._create_once(lambda: self.executor.execute(exp.Alter(
                        this=catalog_table(name), kind="TABLE",
                        actions=[exp.ColumnDef(this=exp.to_identifier(column), kind=columns[column].copy())])))
        if made:        # a new catalog (or one from before a table): the guards beside it, for other sessions
            self.executor.keep_guards()
        if "seqdedup_meta" in made or not self.executor.fetchall(exp.select("key").from_(catalog_table("seqdedup_meta"))):
            import pyarrow as pa

            self.executor.append_rows(catalog_table("seqdedup_meta"), pa.Table.from_pylist(
                [{"key": "catalog_version", "value": str(CATALOG_VERSION)}], schema=arrow_schema(META)))

    def _create_once(self, create) -> bool:
        """Create a table or column: ``create()``, which says whether it made one, unless another process (a driver
        on the same metastore) just did: then False."""
        try:
            return bool(create())
        except EngineError as error:
            if not already_exists(error):
                raise
            return False
