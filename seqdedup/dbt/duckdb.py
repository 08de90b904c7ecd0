"""The dbt-duckdb bridge: a plugin, in the profile as ``plugins: [{module: seqdedup.dbt.duckdb}]``.

dbt-duckdb runs its plugins in dbt's own process, with the database dbt opened. This one

- refuses every statement dbt runs on those cursors that calls ``is_not_dup`` (a view, table or incremental model),
  before it runs, with the way to write the model as a topic: a view would otherwise be created and fail only when
  read. dbt-duckdb gives plugins no hook on statements, so the plugin wraps the ``execute`` of dbt-duckdb's cursor
  wrapper (the one way dbt's statements reach DuckDB), for the cursors the plugin configured; seqdedup's guards,
  registered on every connection and cursor, are the net under it (never "function does not exist", never a weaker
  meaning);
- serves the dbt package's requests (a topic model's run, ``producer_state``, ``last_sequence_id``), which the
  materialization hands over through dbt-duckdb's ``adapter.store_relation`` (the hook dbt-duckdb gives plugins
  that write a model's relation), the request being its ``config`` and the answer written back into it.

seqdedup runs on a cursor of its own, in a transaction of its own: dbt's cursor may be inside dbt's transaction
("cannot start a transaction within a transaction"), and closing a cursor dbt owns would close dbt's connection.
Every cursor of one database file shares seqdedup's writer lock, so ``dbt run --threads 4`` writes one topic
statement at a time, without write-write conflicts.
"""
from __future__ import annotations

import contextlib
import functools
import weakref
from typing import Any, Iterator

from dbt.adapters.duckdb.plugins import BasePlugin
from sqlglot import exp

import seqdedup
from seqdedup.errors import EngineError
from seqdedup.extensions.duckdb import register_functions

from .bridge import refuse_is_not_dup, serve
from .model import Target, engine_type

#: How long a topic statement waits for another thread's (seconds), unless the profile's plugin config says.
LOCK_TIMEOUT = 600.0

#: The DuckDB cursors dbt-duckdb runs dbt's statements on, configured by this plugin (its guards are on them).
_GUARDED: "weakref.WeakSet[Any]" = weakref.WeakSet()


def refusing(execute):
    """dbt-duckdb's cursor wrapper's ``execute``, which first refuses a statement that calls is_not_dup on a cursor
    this plugin configured (``refuse_is_not_dup``)."""
    @functools.wraps(execute)
    def guarded(wrapper, sql, bindings=None):
        cursor = wrapper._cursor
        cursor = getattr(cursor, "_cursor", cursor)       # (under dbt-duckdb's RetryableCursor, when it retries)
        if cursor in _GUARDED:
            refuse_is_not_dup(sql, "duckdb")
        return execute(wrapper, sql, bindings)

    guarded.seqdedup_refusing = True
    return guarded


def refuse_is_not_dup_statements() -> None:
    """Put ``refusing`` on dbt-duckdb's cursor wrapper, once per process (dbt-duckdb 1.11's local environment)."""
    from dbt.adapters.duckdb.environments import local

    if not getattr(local.DuckDBCursorWrapper.execute, "seqdedup_refusing", False):
        local.DuckDBCursorWrapper.execute = refusing(local.DuckDBCursorWrapper.execute)


class DuckDBTarget(Target):
    DIALECT = "duckdb"

    def __init__(self, plugin: "Plugin"):
        self.plugin = plugin

    @contextlib.contextmanager
    def cursor(self) -> Iterator[Any]:
        connection = self.plugin.connection
        if connection is None:
            raise EngineError("the seqdedup plugin has no DuckDB connection yet: dbt-duckdb did not open the database "
                              "through it; check that the profile lists it under plugins")
        cursor = connection.cursor()
        try:
            yield cursor
        finally:
            cursor.close()

    @contextlib.contextmanager
    def session(self) -> Iterator[Any]:
        with self.cursor() as cursor:
            session = seqdedup.connect(cursor, lock_timeout=self.plugin.lock_timeout)
            try:
                yield session
            finally:
                session.close()

    def describe(self, query: exp.Query) -> list[tuple[str, exp.DataType]]:
        with self.cursor() as cursor:
            rows = cursor.execute(exp.Describe(this=query.copy()).sql(dialect=self.DIALECT)).fetchall()
        return [(name, engine_type(name, kind, "duckdb")) for name, kind, *_ in rows]


class Plugin(BasePlugin):
    """seqdedup's dbt-duckdb plugin (config: ``lock_timeout``, seconds a statement waits for another thread's)."""

    def initialize(self, plugin_config: dict[str, Any]) -> None:
        self.connection = None     # the database connection dbt-duckdb opened (set again if it reopens it)
        self.lock_timeout = float(plugin_config.get("lock_timeout", LOCK_TIMEOUT))
        self.target = DuckDBTarget(self)
        refuse_is_not_dup_statements()

    def configure_connection(self, conn) -> None:
        self.connection = conn
        register_functions(conn)

    def configure_cursor(self, cursor) -> None:
        register_functions(cursor)     # temporary macros belong to one cursor: every cursor gets the guards
        _GUARDED.add(cursor)

    def store(self, target_config) -> None:
        request = target_config.config
        request["answer"] = serve(self.target, request)
