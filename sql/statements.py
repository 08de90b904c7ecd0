"""Parsing user SQL, and the catalog statements seqdedup understands besides INSERT ... is_not_dup.

Topics and policies are set with Spark's own DDL, so a Spark SQL user needs nothing new:

- ``CREATE TABLE events (payload STRING) TBLPROPERTIES ('seqdedup.deduplication_enabled' = 'true')`` creates a topic
  (any ``seqdedup.*`` property makes the table a topic);
- ``ALTER TABLE events SET TBLPROPERTIES ('seqdedup.snapshot_interval_entries' = '3')`` and
  ``ALTER TABLE events UNSET TBLPROPERTIES ('seqdedup.deduplication_enabled')`` set and unset topic policies;
- ``ALTER {DATABASE|SCHEMA|NAMESPACE} ns SET|UNSET DBPROPERTIES (...)`` the namespace's;
- ``SET seqdedup.deduplication_enabled = false`` and ``RESET seqdedup.deduplication_enabled`` the global ones.
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import Iterator

import sqlglot
from sqlglot import exp
from sqlglot.tokens import Tokenizer, TokenType

from seqdedup.catalog.policies import PROPERTY_PREFIX
from seqdedup.errors import RewriteError
from seqdedup.kept import Kept


#: How deep a statement may nest (parentheses, subqueries, operators): sqlglot and seqdedup walk trees recursively,
#: and a deeper tree would end in a RecursionError somewhere between parsing and the engine.
MAX_DEPTH = 200


@contextlib.contextmanager
def _quiet_parser() -> Iterator[None]:
    """sqlglot logs a warning for every statement it keeps as a raw command (``SHOW TABLES``): not the user's news."""
    logger = logging.getLogger("sqlglot")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def depth(tree: exp.Expression) -> int:
    """How deep a tree nests, counted without recursion. A chain of one operator (``a OR b OR c ...``) counts once:
    sqlglot walks those without recursing.

    Example:
        >>> [depth(sqlglot.parse_one(q)) for q in ("SELECT 1", "SELECT ((1))", "SELECT 1 + 1 + 1 + 1")]
        [2, 4, 3]
    """
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level if isinstance(child, exp.Binary) and type(child) is type(node) else level + 1)
                     for child in node.iter_expressions())
    return deepest


#: The trees of the texts ``parse`` read, by text (at most 256 texts).
_PARSED: Kept[list[exp.Expression]] = Kept(256)
#: The longest text whose trees are kept: a statement sent again and again is short, and a long one (a VALUES list of
#: a million rows) would hold its trees in memory after it ran.
PARSED_KEPT_CHARS = 10_000


def parse(text: str, read) -> list[exp.Expression]:
    """The statements of ``text``; a RewriteError pointing at the line and column sqlglot could not parse.

    A text parsed before is not parsed again: a producer sending one entry after another, or a stream's
    micro-batches, send the same text each time, and parsing it cost twice what copying its trees does (about
    0.2 ms of a 11 ms statement on DuckDB). Each call gets copies, so a caller may change its trees.

    Example:
        >>> changed = parse("SELECT 1 AS x", "spark")[0]
        >>> _ = changed.expressions[0].set("alias", exp.to_identifier("y"))
        >>> changed.sql(), parse("SELECT 1 AS x", "spark")[0].sql()
        ('SELECT 1 AS y', 'SELECT 1 AS x')
    """
    if len(text) > PARSED_KEPT_CHARS:
        return _parse(text, read)
    return [tree.copy() for tree in _PARSED.made((text, read), lambda: _parse(text, read))]


def _parse(text: str, read) -> list[exp.Expression]:
    too_deep = RewriteError("the SQL nests too deeply for seqdedup to read (parentheses, subqueries or expressions "
                            "inside one another, a few dozen levels or more); write it flatter, for example with a "
                            "WITH clause or a temporary view")
    try:
        with _quiet_parser():
            trees = sqlglot.parse(text, read=read)
    except RecursionError:
        raise too_deep from None
    except sqlglot.errors.ParseError as error:
        first = error.errors[0] if error.errors else {}
        where = f" at line {first.get('line')}, column {first.get('col')}" if first else ""
        raise RewriteError(f"cannot parse the SQL{where}: {first.get('description', error)}") from None
    except sqlglot.errors.TokenError as error:
        raise RewriteError(f"cannot read the SQL: {error}") from None
    trees = [t for t in trees if t is not None]
    if not trees:
        raise RewriteError("no SQL statement given")
    for tree in trees:      # a word sqlglot does not know as a statement (START TRANSACTION) reads as a bare name
        if isinstance(tree, (exp.Alias, exp.Column, exp.Identifier)):
            words = f"{tree.this.sql('spark')} {tree.alias}" if isinstance(tree, exp.Alias) else tree.sql("spark")
            raise RewriteError(f"cannot read {words!r} as a SQL statement (seqdedup reads Spark SQL: "
                               "queries, INSERT, DDL, SET)")
    if any(depth(tree) > MAX_DEPTH for tree in trees):
        raise too_deep
    return trees


def returns_rows(tree: exp.Expression) -> bool:
    """Whether a statement answers with rows: a query, DESCRIBE, SHOW, EXPLAIN (not DDL or a write).

    Example:
        >>> [returns_rows(parse(q, "spark")[0]) for q in ("SELECT 1", "DESCRIBE t", "SHOW TABLES", "DROP VIEW v")]
        [True, True, True, False]
    """
    if isinstance(tree, (exp.Query, exp.Describe, exp.Show, exp.Pragma)):
        return True
    return isinstance(tree, exp.Command) and str(tree.this).upper() in ("SHOW", "DESCRIBE", "DESC", "EXPLAIN")


def written_tables(tree: exp.Expression) -> list[exp.Table]:
    """The tables a statement writes, drops or changes (none for a query).

    Example:
        >>> [t.sql() for t in written_tables(parse("DELETE FROM ns.events WHERE x = 1", "spark")[0])]
        ['ns.events']
        >>> [t.sql() for t in written_tables(parse("TRUNCATE TABLE a", "spark")[0])], written_tables(parse("SELECT 1", "spark")[0])
        (['a'], [])
        >>> [[t.sql() for t in written_tables(parse(q, "spark")[0])] for q in (
        ...     "COPY a FROM 'x.csv'", "COPY a TO 'x.csv'", "CREATE INDEX i ON a (x)", "CREATE TEMPORARY TABLE a (x INT)")]
        [['a'], [], ['a'], ['a']]
    """
    if isinstance(tree, exp.Query) or not isinstance(tree, (exp.Insert, exp.Update, exp.Delete, exp.Merge, exp.Alter,
                                                           exp.Create, exp.Drop, exp.TruncateTable, exp.Copy)):
        return []
    if isinstance(tree, exp.Copy):      # COPY t FROM a file writes t; COPY t TO a file reads it
        return [tree.this] if tree.args.get("kind") and isinstance(tree.this, exp.Table) else []
    if isinstance(tree, exp.Create) and tree.kind == "INDEX":    # an index (a UNIQUE one refuses rows) on a table
        table = tree.this.args.get("table") if isinstance(tree.this, exp.Index) else None
        return [table] if isinstance(table, exp.Table) else []
    temporary = any(isinstance(p, exp.TemporaryProperty) for p in (tree.args.get("properties") or exp.Properties(
        expressions=[])).expressions)
    if isinstance(tree, exp.Create) and not (tree.args.get("replace") or tree.kind != "TABLE" or temporary):
        return []          # a new table (a topic is created through create_topic; see catalog_command)
    if isinstance(tree, exp.TruncateTable):
        return [t for t in tree.expressions if isinstance(t, exp.Table)]
    if isinstance(tree, exp.Drop):
        return [t for t in tree.args.get("tables") or [] if isinstance(t, exp.Table)]
    target = tree.this
    if isinstance(target, exp.Schema):
        target = target.this
    return [target] if isinstance(target, exp.Table) else []


@dataclass
class CatalogCommand:
    """A topic creation or a policy change, read from DDL."""

    action: str                                  # create_topic | set_policies
    scope: str                                   # topic | namespace | global
    target: str                                  # topic name as written, namespace name, or "" for global
    policies: dict[str, object] = field(default_factory=dict)   # policy -> value (None unsets)
    columns: dict[str, exp.DataType] = field(default_factory=dict)
    if_not_exists: bool = False
    id_parts: object = None                      # create_topic: 'seqdedup.id_parts' (R19), as written


#: The table property of a topic's composite ids (R19): a fact of its creation, not a policy.
ID_PARTS = f"{PROPERTY_PREFIX}id_parts"


def _properties(properties: exp.Properties | None) -> dict[str, object]:
    found = {}
    for prop in (properties.expressions if properties else []):
        if isinstance(prop, exp.Property):
            key = prop.name if isinstance(prop.this, exp.Literal) else prop.this.sql()
            value = prop.args.get("value")
            found[key] = value.name if isinstance(value, exp.Literal) else (value.sql() if value else None)
    return found


def _ours(properties: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in properties.items() if k.lower().startswith(PROPERTY_PREFIX)}


def catalog_command(tree: exp.Expression) -> CatalogCommand | None:
    """The catalog command a statement is, or None when it is an ordinary statement."""
    if isinstance(tree, exp.Create) and tree.kind == "TABLE" and isinstance(tree.this, exp.Schema):
        ours = _ours(_properties(tree.args.get("properties")))
        if ours:
            columns = {c.name: c.args["kind"] for c in tree.this.expressions if isinstance(c, exp.ColumnDef)}
            parts = next((ours.pop(k) for k in list(ours) if k.lower() == ID_PARTS), None)
            return CatalogCommand("create_topic", "topic", tree.this.this.sql("spark"), ours, columns,
                                  bool(tree.args.get("exists")), parts)
    if isinstance(tree, exp.Alter) and tree.args.get("kind") == "TABLE":
        for action in tree.args.get("actions") or []:
            if isinstance(action, exp.AlterSet):
                ours = {}
                for props in action.expressions:
                    ours.update(_ours(_properties(props)) if isinstance(props, exp.Properties) else {})
                if ours:
                    return CatalogCommand("set_policies", "topic", tree.this.sql("spark"), ours)
    if isinstance(tree, exp.Set):
        ours = {}
        for item in tree.expressions:
            eq = item.this if isinstance(item, exp.SetItem) else None
            if isinstance(eq, exp.EQ) and eq.this.sql().lower().startswith(PROPERTY_PREFIX):
                value = eq.expression
                ours[eq.this.sql().lower()] = value.name if isinstance(value, (exp.Literal, exp.Column)) else value.sql()
        if ours:
            return CatalogCommand("set_policies", "global", "", ours)
    if isinstance(tree, exp.Command):
        return _command(tree)
    return None


def _command(tree: exp.Command) -> CatalogCommand | None:
    """UNSET TBLPROPERTIES, SET/UNSET DBPROPERTIES and RESET: sqlglot keeps these as raw commands; read their tokens."""
    tokens = Tokenizer(dialect="spark").tokenize(f"{tree.this} {tree.expression.sql() if isinstance(tree.expression, exp.Expression) else tree.expression or ''}")
    words = [t.text.upper() if t.token_type not in (TokenType.STRING,) else None for t in tokens]
    if words[:1] == ["RESET"]:
        keys = "".join(t.text for t in tokens[1:])
        return CatalogCommand("set_policies", "global", "", {keys: None}) if keys.lower().startswith(PROPERTY_PREFIX) else None
    if words[:1] != ["ALTER"] or len(tokens) < 4:
        return None
    kind = words[1]
    # the name runs until SET or UNSET
    end = next((i for i, w in enumerate(words) if w in ("SET", "UNSET") and i > 2), None)
    if end is None or end + 1 >= len(words) or words[end + 1] not in ("TBLPROPERTIES", "DBPROPERTIES", "PROPERTIES"):
        return None
    name = "".join(t.text if t.token_type != TokenType.IDENTIFIER else f"`{t.text}`" for t in tokens[2:end])
    unset = words[end] == "UNSET"
    literals = [t.text for t in tokens[end + 2:] if t.token_type == TokenType.STRING]
    if unset:
        policies = {k: None for k in literals}
    else:
        if len(literals) % 2:
            raise RewriteError("properties must be given as 'key' = 'value' pairs")
        policies = dict(zip(literals[::2], literals[1::2]))
    ours = _ours(policies)
    if not ours:
        return None
    if kind == "TABLE":
        return CatalogCommand("set_policies", "topic", name, ours)
    if kind in ("DATABASE", "SCHEMA", "NAMESPACE"):
        return CatalogCommand("set_policies", "namespace", name.strip("`"), ours)
    return None
