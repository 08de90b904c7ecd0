"""Reading ``INSERT INTO topic SELECT ... WHERE is_not_dup(producer, seq[, highest])``: where ``is_not_dup`` may
stand, what the statement's parts are, and their split into what the plan needs (``expand_is_not_dup``):

- ``keys``: the user's SELECT without ``is_not_dup``, its other conditions kept, reduced to each entry's producer,
  lowest and highest id, and the values of its ``ORDER BY`` (the arrival order; without one, arrival is (producer,
  sequence id, highest sequence id)). Narrow, so deciding never moves the payload around;
- ``values``: the same rows with the values to write beside the keys;
- ``order``: the arrival order inside a producer, over the key columns, with NULL ordering made explicit.

The steps that decide and write are in ``sql.plan``.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Callable

import sqlglot
from sqlglot import exp

from seqdedup.catalog import ids
from seqdedup.catalog.names import HIGHEST, PRODUCER, SEQUENCE_ID
from seqdedup.errors import RewriteError, at

#: The functions seqdedup gives meaning to; anywhere else in a statement they are errors, never ignored.
FUNCTIONS = ("is_not_dup", "is_new", "dup_status", "last_sequence_id", "producer_state", "kafka_producer_name")

#: The calls that make an INSERT a topic's statement: by producer and id, or by key (R20, sql/key_window.py).
DEDUP_CALLS = ("is_not_dup", "is_new")

#: is_not_dup's arguments as written (the type check reads them before a COALESCE could convert them).
ARGUMENTS = ("__sd_arg_producer", "__sd_arg_sequence_id", "__sd_arg_highest")
#: The parts of a composite id as written (R19), numbered from 0 after this stem.
PART = "__sd_arg_part"


def composite_parts(argument: exp.Expression) -> list[exp.Expression] | None:
    """The parts of a composite id (R19) as the user wrote it: ``(a, b)``, ``struct(a, b)`` or ``named_struct``
    (Spark), ``row(a, b)`` or ``{'a': a, 'b': b}`` (DuckDB); None for any other expression (an integer id).

    Example:
        >>> [p.sql() for p in composite_parts(sqlglot.parse_one("struct(lsn AS l, idx)", read="spark"))]
        ['lsn', 'idx']
    """
    if isinstance(argument, exp.Tuple) or (isinstance(argument, exp.Anonymous) and argument.name.lower() == "row"):
        return list(argument.expressions)
    if isinstance(argument, exp.Struct):
        return [e.expression if isinstance(e, (exp.PropertyEQ, exp.Slice)) else e.unalias()
                for e in argument.expressions]
    return None


def written_parts(argument: exp.Expression, one_part: bool = False) -> list[exp.Expression] | None:
    """The parts of a composite id as written (``composite_parts``); where the topic's ids have ``one_part``, a plain
    expression is that part; None for an integer id."""
    return composite_parts(argument) or ([argument] if one_part else None)


def calls(tree: exp.Expression, name: str) -> list[exp.Anonymous]:
    """Every call of the function ``name`` in ``tree`` (sqlglot parses unknown functions as Anonymous)."""
    return [f for f in tree.find_all(exp.Anonymous) if f.name.lower() == name]


def id_keys(id_parts: int | None) -> tuple[str, ...]:
    """The key columns that end a statement's arrival order, after its ORDER BY's: an integer id and its highest id,
    or a composite id alone, which is its own highest id (R19: no batch entries)."""
    return (SEQUENCE_ID,) if id_parts is not None else (SEQUENCE_ID, HIGHEST)


@dataclass
class DedupInsert:
    """A validated ``INSERT ... WHERE is_not_dup(...)``, split into what the plan needs."""

    target: exp.Table               # the topic's table, as the user wrote it
    columns: list[str] | None       # the INSERT's column list, if it had one
    keys: exp.Select                # plan step 1: each entry's producer, ids and arrival-order values, nothing else
    values: exp.Select              # the entries' values beside the same keys, read once more by the final INSERT
    order: list[exp.Ordered]        # arrival order inside a producer, over the key columns
    key_columns: list[str]          # every column of `keys`, in order
    arguments: exp.Select           # is_not_dup's arguments as written (no COALESCE), to check their types first
    call: exp.Anonymous             # the is_not_dup call as the user wrote it, for the line and column in errors
    source: exp.Insert              # the statement as the user wrote it, for errors about it
    id_parts: int | None = None     # the parts of its composite ids (R19, catalog.ids); None: integer ids

    @functools.cached_property
    def text(self) -> str:
        """The statement as the user wrote it, generated once (what the steps kept from one statement to the next are
        keyed by)."""
        return self.source.sql()

    @property
    def ordered(self) -> bool:
        """The statement says its arrival order (ORDER BY); else entries arrive in (producer, id) order."""
        return len(self.order) > len(id_keys(self.id_parts))

    @property
    def keyed(self) -> bool:
        """The user wrote is_new(key) (sql/key_window.py): every entry's producer is the digest of its key."""
        return self.call.meta.get("written") == "is_new"

    @property
    def batched(self) -> bool:
        """is_not_dup has a highest id (a third argument), so its entries may be batch entries; without one, every
        entry's highest id is its id."""
        return len(self.call.expressions) > 2

    def over(self, rows: exp.Table) -> "DedupInsert":
        """The same statement over ``rows``, a table of its ``values`` read once: every later read sees the same
        entries, whatever its SELECT does when read again.

        Example:
            >>> d = expand_is_not_dup(sqlglot.parse_one("INSERT INTO t SELECT x FROM s WHERE is_not_dup(p, q)"))
            >>> once = d.over(exp.table_("v"))
            >>> once.keys.sql(), once.values.sql()
            ('SELECT __sd_producer, __sd_sequence_id, __sd_highest FROM v', 'SELECT * FROM v')
        """
        return dataclasses.replace(self, keys=exp.select(*self.key_columns).from_(rows.copy()),
                                   values=exp.select("*").from_(rows.copy()))


#: What an INSERT with is_not_dup may have besides its target and SELECT. Anything else sqlglot parsed (OVERWRITE,
#: PARTITION, BY NAME, RETURNING, ON CONFLICT, ...) is an error: a clause the plan would silently drop.
INSERT_PARTS = {"this", "expression", "with_", "hint"}
#: What its SELECT may have. The rest (GROUP BY, LIMIT, SORT BY, ...) is an error, for the same reason.
SELECT_PARTS = {"expressions", "from_", "joins", "laterals", "where", "order", "with_", "hint"}
#: Clause names as users write them, for the messages.
CLAUSES = {"group": "GROUP BY", "windows": "WINDOW", "sort": "SORT BY", "cluster": "CLUSTER BY",
           "distribute": "DISTRIBUTE BY", "by_name": "BY NAME", "conflict": "ON CONFLICT", "alternative": "OR ...",
           "where": "REPLACE WHERE", "sample": "TABLESAMPLE", "locks": "FOR UPDATE"}


def _clause(arg: str) -> str:
    return CLAUSES.get(arg, arg.rstrip("_").upper())


def _outside_subqueries(node: exp.Expression, *types: type) -> exp.Expression | None:
    """The first node of one of ``types`` in ``node``, not looking into subqueries (they are rows of their own)."""
    return next((n for n in node.walk(prune=lambda n: isinstance(n, exp.Query) and n is not node)
                 if isinstance(n, types)), None)


def _refuse_clauses(insert: exp.Insert, select: exp.Select, name: str) -> None:
    """A RewriteError for a clause of the INSERT or its SELECT that the plan cannot keep (see INSERT_PARTS and
    SELECT_PARTS), and for an aggregate or window over the rows (it would count the duplicates too)."""
    target = insert.this.this if isinstance(insert.this, exp.Schema) else insert.this
    extra = [a for a, v in insert.args.items() if v and a not in INSERT_PARTS]
    extra += [a for a, v in target.args.items() if v and a not in ("this", "db", "catalog")]
    if extra:
        raise RewriteError(
            f"INSERT ... {_clause(extra[0])}{at(insert.args.get(extra[0]) or target)} cannot be used with {name}: "
            "a topic is append-only and seqdedup writes its columns; write INSERT INTO <topic> [(columns)] SELECT ..."
        )
    for arg in (a for a, v in select.args.items() if v and a not in SELECT_PARTS):
        clause = f"{_clause(arg)}{at(select.args[arg])}"
        if arg in ("sort", "cluster", "distribute"):
            raise RewriteError(f"{clause} does not give an arrival order; use ORDER BY to say in which order entries "
                               "arrive, or leave it out for (producer, sequence id) order")
        raise RewriteError(f"{name} decides one entry per row, so its SELECT cannot have {clause}; aggregate, "
                           "limit or sample in a subquery in FROM instead")
    order = select.args.get("order") or exp.Order()
    for place, parts, what, types in (("SELECT list", select.expressions, "aggregate or use a window",
                                       (exp.Window, exp.AggFunc)),
                                      ("ORDER BY", order.expressions, "aggregate", (exp.AggFunc,))):
        for offender in filter(None, (_outside_subqueries(part, *types) for part in parts)):
            raise RewriteError(
                f"{name} decides one entry per row, so its {place} cannot {what} ({offender.sql()[:60]}"
                f"{at(offender)}): it would see the duplicates too; compute it in a subquery in FROM instead"
            )


def validate_is_not_dup(tree: exp.Expression) -> exp.Anonymous:
    """The single ``is_not_dup`` call of an INSERT, or a RewriteError saying why it cannot mean anything there.

    Example:
        >>> validate_is_not_dup(sqlglot.parse_one("INSERT INTO t SELECT p, s FROM x WHERE is_not_dup(p, s) AND s > 0")).sql()
        'IS_NOT_DUP(p, s)'
        >>> validate_is_not_dup(sqlglot.parse_one("INSERT INTO t SELECT p, s FROM x WHERE is_not_dup(p, s) OR s > 0"))
        Traceback (most recent call last):
        seqdedup.errors.RewriteError: is_not_dup must be a condition of the WHERE clause joined by AND, not inside OR; ...
        >>> validate_is_not_dup(sqlglot.parse_one("INSERT INTO t SELECT p FROM x WHERE is_not_dup(p, s) SORT BY s", read="spark"))
        Traceback (most recent call last):
        seqdedup.errors.RewriteError: SORT BY at line 1, column 58 does not give an arrival order; ...
    """
    found = calls(tree, "is_not_dup")
    if len(found) != 1:
        raise RewriteError(f"a statement may call is_not_dup once; this one calls it {len(found)} times{at(found[1])}")
    call = found[0]
    name = call.meta.get("written", "is_not_dup")     # is_new(key) is is_not_dup of the key (sql/key_window.py)
    if not isinstance(tree, exp.Insert) or not isinstance(tree.expression, exp.Select):
        raise RewriteError(
            f"{name}{at(call)} works only in INSERT INTO <topic> SELECT ... WHERE "
            f"{'is_new(key)' if name == 'is_new' else 'is_not_dup(producer, sequence_id)'}; "
            "write the statement in that form"
        )
    select = tree.expression
    if not 2 <= len(call.expressions) <= 3:
        raise RewriteError(
            f"{name} takes (producer, sequence_id[, highest_sequence_id]); got {len(call.expressions)} "
            f"arguments{at(call)}"
        )
    # Walk up from the call: only ANDs (and parentheses) may stand between it and the SELECT's WHERE.
    node = call
    while not isinstance(node.parent, exp.Where):
        parent = node.parent
        if parent is None:
            raise RewriteError(f"{name}{at(call)} must be a condition of the statement's WHERE clause")
        if not isinstance(parent, (exp.And, exp.Paren)):
            place = {exp.Or: "inside OR", exp.Not: "inside NOT", exp.Case: "inside CASE", exp.If: "inside CASE",
                     exp.Join: "in a join condition",
                     exp.Having: "in HAVING", exp.Select: "in a SELECT list", exp.Subquery: "in a subquery"}
            where = next((v for k, v in place.items() if isinstance(parent, k)), f"inside {parent.key.upper()}")
            raise RewriteError(
                f"{name} must be a condition of the WHERE clause joined by AND, not {where}{at(call)}; "
                "move it to the top level of the WHERE of INSERT ... SELECT"
            )
        node = parent
    if node.parent.parent is not select:
        raise RewriteError(
            f"{name}{at(call)} must be in the WHERE of the INSERT's own SELECT, not in a subquery or CTE"
        )
    _refuse_clauses(tree, select, name)
    for reader in ("dup_status", "last_sequence_id", "producer_state"):
        for other in calls(tree, reader):
            raise RewriteError(
                f"{reader}{at(other)} cannot be used in the statement that calls is_not_dup: it would read the state "
                "the statement is changing; read it in a query of its own before the INSERT"
            )
    for argument in call.expressions:
        if argument.find(exp.AggFunc, exp.Window, exp.Subquery) or calls(argument, "is_not_dup"):
            raise RewriteError(f"{name}'s arguments must be plain row expressions{at(argument)}")
    return call


def _arrival_order(select: exp.Select) -> list[exp.Ordered]:
    """The SELECT's ORDER BY, with output aliases and ordinals replaced by the expressions they name."""
    order = select.args.get("order")
    if not order:
        return []
    projections = select.expressions
    aliases = {p.alias: p.this for p in projections if isinstance(p, exp.Alias)}
    resolved = []
    for ordered in order.expressions:
        if not isinstance(ordered, exp.Ordered):      # a tree built in code may order by a bare expression
            ordered = exp.Ordered(this=ordered.copy())
        key = ordered.this
        if isinstance(key, exp.Literal) and key.is_int:
            index = int(key.name) - 1
            if not 0 <= index < len(projections) or isinstance(projections[index], exp.Star):
                raise RewriteError(f"ORDER BY {key.name}{at(key)} does not name a column of the SELECT")
            key = projections[index].unalias()
        elif isinstance(key, exp.Column) and not key.table and key.name in aliases:
            key = aliases[key.name]
        copy = ordered.copy()
        copy.set("this", key.copy())
        resolved.append(copy)
    return resolved


def expand_is_not_dup(tree: exp.Insert, binary: Callable[[exp.Expression], exp.Expression] | None = None,
                      one_part: bool = False) -> DedupInsert:
    """Split a validated INSERT into its target, the narrow key query and the values query (plan step 1).
    ``binary`` (the engine's ``EngineAdapter.binary``) makes the producer compare byte for byte. A composite id
    (``composite_parts``) is encoded as its text (``catalog.ids``); ``one_part``: the topic's ids have one part,
    so an id written as a plain expression is one too.

    Example:
        >>> d = expand_is_not_dup(sqlglot.parse_one(
        ...     "INSERT INTO t SELECT p, x FROM staging WHERE is_not_dup(p, s) AND x > 0 ORDER BY a DESC", read="spark"))
        >>> d.keys.sql("spark")
        'SELECT p AS __sd_producer, s AS __sd_sequence_id, s AS __sd_highest, a AS __sd_o0 FROM staging WHERE x > 0'
        >>> d.values.sql("spark")
        'SELECT p AS __sd_v0, x AS __sd_v1, p AS __sd_producer, s AS __sd_sequence_id, s AS __sd_highest, a AS __sd_o0 FROM staging WHERE x > 0'
        >>> [o.sql("spark") for o in d.order]
        ['__sd_o0 DESC', '__sd_sequence_id', '__sd_highest']
    """
    call = validate_is_not_dup(tree)
    select: exp.Select = tree.expression.copy()
    if tree.args.get("with_"):      # WITH ... INSERT INTO t SELECT: the CTEs belong to the SELECT the plan reads
        ctes = tree.args["with_"].copy()
        ctes.set("expressions", ctes.expressions + (select.args["with_"].expressions if select.args.get("with_") else []))
        select.set("with_", ctes)
    producer, sequence_id, *rest = [a.copy() for a in call.expressions]
    if binary is not None:      # producer names compare byte for byte, whatever collation the source declares
        producer = binary(producer)
    parts = written_parts(sequence_id, one_part)
    if parts is not None:
        if rest:
            raise RewriteError(f"a composite id has no batch entries, so is_not_dup takes no highest_sequence_id with "
                               f"one{at(call.expressions[2])}: send each event with its own position")
        if not 1 <= len(parts) <= ids.MAX_PARTS:
            raise RewriteError(f"a composite id has 1 to {ids.MAX_PARTS} parts; this one has {len(parts)}"
                               f"{at(call.expressions[1])}")
        sequence_id = ids.working(parts)      # (the engine's form inside the statement: catalog.ids)
    highest = exp.func("coalesce", rest[0], sequence_id.copy()) if rest else sequence_id.copy()
    user_order = _arrival_order(select)

    # Drop the call from WHERE; the other conditions stay, so a row they filter out is not an entry at all.
    select_call = calls(select, "is_not_dup")[0]
    remaining = [c for c in _conjuncts(select.args["where"].this) if c is not select_call]
    select.set("where", exp.Where(this=exp.and_(*remaining)) if remaining else None)
    select.set("order", None)
    arguments = select.copy()
    written = list(zip(call.expressions, ARGUMENTS))
    if parts is not None:
        written = written[:1] + [(part, f"{PART}{i}") for i, part in enumerate(parts)]
    arguments.set("expressions", [exp.alias_(a.copy(), name) for a, name in written])

    keys = [exp.alias_(producer, PRODUCER), exp.alias_(sequence_id, SEQUENCE_ID), exp.alias_(highest, HIGHEST)]
    keys += [exp.alias_(o.this.copy(), f"__sd_o{i}") for i, o in enumerate(user_order)]
    order = [_with(o, exp.column(f"__sd_o{i}")) for i, o in enumerate(user_order)]
    # (a composite id is ordered by once: a second key of the same text, when it was 40 characters, cost Spark's
    # sort about 0.5 s over 5M entries)
    order += [exp.Ordered(this=exp.column(c), nulls_first=True) for c in id_keys(None if parts is None else len(parts))]
    for ordered in order:     # one statement, one order on every engine: NULLs placed as Spark SQL places them
        if ordered.args.get("nulls_first") is None:
            ordered.set("nulls_first", not ordered.args.get("desc"))
    values = []
    for i, projection in enumerate(select.expressions):
        star = isinstance(projection, exp.Star) or (isinstance(projection, exp.Column) and projection.is_star)
        values.append(projection if star else exp.alias_(projection.unalias(), f"__sd_v{i}"))
    key_select = select.copy()
    key_select.set("expressions", [k.copy() for k in keys])
    value_select = select.copy()
    value_select.set("expressions", values + keys)
    target = tree.this.this if isinstance(tree.this, exp.Schema) else tree.this
    columns = [c.name for c in tree.this.expressions] if isinstance(tree.this, exp.Schema) else None
    return DedupInsert(target=target.copy(), columns=columns, keys=key_select, values=value_select, order=order,
                       key_columns=[k.alias for k in keys], arguments=arguments, call=call, source=tree,
                       id_parts=None if parts is None else len(parts))


def _conjuncts(condition: exp.Expression) -> list[exp.Expression]:
    """The conditions an AND chain joins, through parentheses: ``(a AND (b)) AND c`` gives ``[a, b, c]``.

    Example:
        >>> [c.sql() for c in _conjuncts(sqlglot.parse_one("((f(x)) AND (y > 0 OR z)) AND w"))]
        ['F(x)', 'y > 0 OR z', 'w']
    """
    condition = condition.unnest()
    if isinstance(condition, exp.And):
        return _conjuncts(condition.this) + _conjuncts(condition.expression)
    return [condition]


def _with(ordered: exp.Ordered, this: exp.Expression) -> exp.Ordered:
    copy = ordered.copy()
    copy.set("this", this)
    return copy
