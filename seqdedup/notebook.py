"""seqdedup in Jupyter and IPython: ``%load_ext seqdedup``, then cells of SQL (docs/guides/notebook.md).

    %load_ext seqdedup
    %seqdedup connect events.duckdb

    %%seqdedup
    INSERT INTO events SELECT payload FROM staging WHERE is_not_dup(producer, seq)

A ``%%seqdedup`` cell runs its statements (one or more, separated by ``;``) through ``Session.sql_all`` and its
value is the last one's result, shown as a table: what a statement wrote and dropped per producer, a query's rows,
or what a catalog statement did (``_.to_pandas()`` in the next cell has it as a DataFrame). A seqdedup error fails
the cell with its message in one line, so that "Run all" stops there.

Which session a cell runs on:

1. ``%%seqdedup NAME``: the one in the notebook's variable NAME, a seqdedup Session or a SparkSession (classic or
   Spark Connect);
2. else the one of the last ``%seqdedup connect [NAME | PATH]``: a variable as in 1, else a DuckDB file
   (``seqdedup.duckdb`` when none is given, ``:memory:`` for none at all);
3. else the notebook's variable ``session``, then ``spark``, where it holds one of these (a ``session`` that is
   something else, such as a requests Session, is passed over);
4. else the DuckDB file ``seqdedup.duckdb`` in the working folder, opened with a note that says so.

``%seqdedup close`` closes what the magic opened (a DuckDB file stays locked to other processes while it is open);
a Session of the notebook's own is the notebook's to close, and a SparkSession stays up. Once the extension is
loaded, the results of ``session.sql(...)`` in Python cells show as the same tables. IPython is imported by this
module only, which ``%load_ext seqdedup`` loads: ``import seqdedup`` does not.
"""
from __future__ import annotations

import html as _html
import os
import shlex
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

from .errors import SeqdedupError
from .core.results import Done, QueryResult, StatementResult, text_table

#: The rows a table shows at most; the result itself has them all (``to_pandas()``).
ROWS_SHOWN = 50

#: Where a cell runs when nothing else says (rule 4), in the working folder: the default of ``seqdedup.connect``.
DEFAULT_DATABASE = "seqdedup.duckdb"

#: The notebook variables a cell without a name falls back to (rule 3).
SESSION_VARIABLE, SPARK_VARIABLE = "session", "spark"

USAGE = ("%seqdedup connect [NAME | PATH]: later cells run on the seqdedup Session or SparkSession in variable NAME, "
         "else on the DuckDB file PATH (default seqdedup.duckdb); %seqdedup close: close what the magic opened; "
         "%%seqdedup [NAME]: a cell of SQL statements")


def _count(number: int, word: str) -> str:
    return f"{number} {word}" if number == 1 else f"{number} {word[:-1]}ies" if word.endswith("y") else \
        f"{number} {word}s"


def summary(result: StatementResult) -> str:
    """A statement's outcome in a line, topic first.

    Example:
        >>> from seqdedup.core.results import ProducerCount
        >>> summary(StatementResult("main.events", "s1", [ProducerCount("p1", 2, 1, 0, 1)], snapshot_id=3))
        'main.events: wrote 2 entries, dropped 1 duplicate, took snapshot 3'
    """
    said = f"{result.topic}: wrote {_count(result.written, 'entry')}, dropped {_count(result.duplicates, 'duplicate')}"
    if result.out_of_order:
        said += f" ({result.out_of_order} of them out of order)"
    if result.payload_conflicts:
        said += f" ({_count(result.payload_conflicts, 'payload conflict')})"
    return said + (f", took snapshot {result.snapshot_id}" if result.snapshot_id is not None else "")


def shown(result: StatementResult | QueryResult | Done) -> tuple[str | None, list[str], list[tuple]]:
    """What a result shows: a line said above its table (or alone), the table's columns and its rows.

    Example:
        >>> shown(QueryResult(["producer", "mark"], [("p1", 4)]))
        (None, ['producer', 'mark'], [('p1', 4)])
        >>> shown(Done("created topic main.events"))
        ('created topic main.events', [], [])
    """
    if isinstance(result, StatementResult):      # the columns and rows of its to_pandas(): one row per producer
        return summary(result), *result.columns_and_rows()
    if isinstance(result, QueryResult):
        return (None if result.columns else "done (the statement returns no rows)"), result.columns, result.rows
    return result.message, [], []


def _cell(value: object) -> str:
    return "NULL" if value is None else str(value)


def _more(rows: list[tuple]) -> str | None:
    if len(rows) > ROWS_SHOWN:
        return f"{len(rows)} rows in all, the first {ROWS_SHOWN} shown (the result's to_pandas() has them all)"
    return None


def as_html(result: StatementResult | QueryResult | Done) -> str:
    """A result as an HTML table, under its line when it has one.

    Example:
        >>> print(as_html(QueryResult(["producer", "mark"], [("p<1>", None)])))
        <table><thead><tr><th>producer</th><th>mark</th></tr></thead><tbody>
        <tr><td>p&lt;1&gt;</td><td>NULL</td></tr>
        </tbody></table>
    """
    said, columns, rows = shown(result)
    parts = [f"<p>{_html.escape(said)}</p>"] if said else []
    if columns:
        parts.append("<table><thead><tr>" + "".join(f"<th>{_html.escape(c)}</th>" for c in columns)
                     + "</tr></thead><tbody>")
        parts += ["<tr>" + "".join(f"<td>{_html.escape(_cell(v))}</td>" for v in row) + "</tr>"
                  for row in rows[:ROWS_SHOWN]]
        parts.append("</tbody></table>")
        more = _more(rows)
        parts += [f"<p>{_html.escape(more)}</p>"] if more else []
    return "\n".join(parts)


def as_text(result: StatementResult | QueryResult | Done) -> str:
    """A result as text, for a terminal or a frontend without HTML: its line, then its table in aligned columns.

    Example:
        >>> from seqdedup.core.results import ProducerCount
        >>> print(as_text(StatementResult("main.events", "s1", [ProducerCount("p1", 2, 1, 0, 1)])))
        main.events: wrote 2 entries, dropped 1 duplicate
        producer  written  duplicates  first_position  last_position  out_of_order  payload_conflicts
        --------  -------  ----------  --------------  -------------  ------------  -----------------
        p1        2        1           0               1              0             0
    """
    said, columns, rows = shown(result)
    lines = [said] if said else []
    if columns:
        lines += [text_table(columns, rows[:ROWS_SHOWN])] + ([_more(rows)] if _more(rows) else [])
    return "\n".join(lines)


def _one_line(error: SeqdedupError) -> SeqdedupError:
    """``error``, shown by IPython as its class and message on one line in place of a traceback: the message says
    what is wrong and how to fix it, and the frames would be seqdedup's, not the notebook's."""
    error._render_traceback_ = lambda: [f"{type(error).__name__}: {error}"]     # IPython's hook for this
    return error


def _is_spark(value: object) -> bool:
    """Whether ``value`` is a SparkSession, classic or Spark Connect (without importing pyspark)."""
    return type(value).__name__ == "SparkSession" and type(value).__module__.startswith("pyspark.sql")


@magics_class
class SeqdedupMagics(Magics):
    """``%seqdedup connect|close`` and ``%%seqdedup [NAME]`` cells (see the module's docstring)."""

    def __init__(self, shell) -> None:
        super().__init__(shell)
        self.connected = None      # the Session of the last %seqdedup connect (or of rule 4): cells without a name
                                   # run on it; None until then, and after %seqdedup close
        self.opened = None         # the Session the magic opened on a DuckDB file (closed by close, or by the next
                                   # connect); a session of the notebook's is never the magic's to close
        self.on_spark = {}         # id(SparkSession) -> (that SparkSession, the seqdedup Session on it): made once
                                   # for each SparkSession a cell names (it reads the catalog: seconds on Spark)

    @line_cell_magic
    def seqdedup(self, line: str, cell: str | None = None) -> Any:
        words = shlex.split(line)
        if cell is None:
            return self._command(words)
        if len(words) > 1:
            raise UsageError(f"%%seqdedup takes at most one name, of a variable holding a session; {USAGE}")
        session = self._variable(words[0], required=True) if words else self._default()
        try:
            results = session.sql_all(cell)
        except SeqdedupError as error:
            raise _one_line(error) from None
        return results[-1]

    def _command(self, words: list[str]) -> None:
        if words[:1] == ["connect"] and len(words) <= 2:
            target = words[1] if len(words) == 2 else DEFAULT_DATABASE
            self._close_opened()     # (the sessions on SparkSessions stay: connecting to one again costs seconds)
            if target.isidentifier() and target in self.shell.user_ns:
                self.connected = self._variable(target, required=True)
                print(f"seqdedup: cells run on the session in {target}")
            else:
                self.connected = self.opened = self._open(target)
                print(f"seqdedup: cells run on the DuckDB database {self._where(target)}")
        elif words == ["close"]:
            self.close()
        else:
            raise UsageError(USAGE)

    def _variable(self, name: str, *, required: bool = False):
        """The seqdedup session of the notebook's variable ``name`` (a seqdedup Session, or one made on a
        SparkSession); None when it holds neither, unless ``required``."""
        from .session import Session

        if name not in self.shell.user_ns:
            if required:
                raise UsageError(f"the notebook has no variable {name!r}; give the name of one that holds a seqdedup "
                                 "Session or a SparkSession")
            return None
        value = self.shell.user_ns[name]
        if isinstance(value, Session):
            return value
        if _is_spark(value):
            if id(value) not in self.on_spark:
                import seqdedup

                self.on_spark[id(value)] = (value, seqdedup.connect(value))
            return self.on_spark[id(value)][1]
        if required:
            kind = type(value).__qualname__ if type(value).__module__ == "builtins" else \
                f"{type(value).__module__}.{type(value).__qualname__}"
            raise UsageError(f"{name} holds an object of type {kind}, not a seqdedup Session or a SparkSession")
        return None

    def _default(self):
        """The session of a cell that names none: rules 2 to 4 of the module's docstring."""
        if self.connected is not None:
            return self.connected
        for name in (SESSION_VARIABLE, SPARK_VARIABLE):
            session = self._variable(name)       # (None where it holds something else: a requests.Session)
            if session is not None:
                return session
        self.connected = self.opened = self._open(DEFAULT_DATABASE)
        print(f"seqdedup: no session named: cells run on the DuckDB database {self._where(DEFAULT_DATABASE)} "
              "(%seqdedup connect NAME or PATH, or %%seqdedup NAME, chooses another)")
        return self.connected

    @staticmethod
    def _open(path: str):
        import seqdedup

        try:
            return seqdedup.connect(path)
        except SeqdedupError as error:
            raise _one_line(error) from None

    @staticmethod
    def _where(path: str) -> str:
        return path if path == ":memory:" else os.path.abspath(path)

    def _close_opened(self) -> None:
        """Forget the connected session, closing it where the magic opened it on a DuckDB file."""
        opened, self.connected, self.opened = self.opened, None, None
        if opened is not None:
            opened.close()

    def close(self) -> None:
        """Close the sessions the magic opened: its DuckDB file (released to other processes), and those it made
        on SparkSessions (which stay up)."""
        self._close_opened()
        on_spark, self.on_spark = self.on_spark, {}
        for _, session in on_spark.values():
            session.close()


def _text(result: object, printer: Any, cycle: bool) -> None:
    printer.text(as_text(result))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext seqdedup``: the magics, and seqdedup's results shown as tables."""
    ipython.register_magics(SeqdedupMagics)
    formatters = ipython.display_formatter.formatters
    for kind in (StatementResult, QueryResult, Done):
        formatters["text/plain"].for_type(kind, _text)
    for kind in (StatementResult, QueryResult):
        formatters["text/html"].for_type(kind, as_html)
