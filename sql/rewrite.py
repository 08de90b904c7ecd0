"""Rewriting ``INSERT INTO topic SELECT ... WHERE is_not_dup(producer, seq[, highest])`` into set-based SQL.

A statement runs as a short plan of engine-neutral trees (see ``seqdedup.session``):

1. ``keys``: the user's SELECT without ``is_not_dup``, its other conditions kept, reduced to each entry's
   producer, lowest and highest id, and the values of its ``ORDER BY`` (the arrival order; without one, arrival
   is (producer, sequence id, highest sequence id)). Narrow, so deciding never moves the payload around.
2. ``decisions``: each entry joined to its producer's recovered mark, then decided by windows over the earlier
   entries of its producer. A running ``max`` over every earlier entry is exact for single messages, but a
   rejected batch entry that straddles the mark must not raise it (R2). So, when the statement has batch
   entries, each round bounds the mark from below (earlier lowest ids, and highest ids of earlier accepted
   entries) and from above (highest ids of every earlier entry not known rejected), decides the entries the
   bounds settle, and the next round sees those decisions. The first undecided entry of each producer is always
   settled in the next round, so this ends; without batch entries one round decides everything.
   Without ``ORDER BY`` and without batch entries there is nothing to order: the new entries are the distinct
   (producer, id) above the mark, a hash aggregate (``aggregate_decisions``).
3. ``accepted``: the new entries, and one INSERT that reads the values again, matches them to the accepted keys
   and numbers their positions.

The decision never reads the topic itself: only the recovered state (one row per producer) and the statement's
own entries, so its cost does not grow with the topic.
"""
from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from seqdedup.errors import RewriteError, at

#: The functions seqdedup gives meaning to; anywhere else in a statement they are errors, never ignored.
FUNCTIONS = ("is_not_dup", "dup_status", "last_sequence_id", "producer_state", "kafka_producer_name")

# Columns of the key, decision and accepted tables. The prefix keeps them apart from the user's columns.
PRODUCER, SEQUENCE_ID, HIGHEST = "__sd_producer", "__sd_sequence_id", "__sd_highest"
MARK, ACCEPTED, PEERS, POSITION = "__sd_mark", "__sd_accepted", "__sd_peers", "__sd_position"
#: The system columns every entry is written with, in the order the INSERT gives them.
SYSTEM = ["_producer", "_sequence_id", "_highest_sequence_id", "_position", "_publish_time", "_commit"]


def calls(tree: exp.Expression, name: str) -> list[exp.Anonymous]:
    """Every call of the function ``name`` in ``tree`` (sqlglot parses unknown functions as Anonymous)."""
    return [f for f in tree.find_all(exp.Anonymous) if f.name.lower() == name]


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

    @property
    def ordered(self) -> bool:
        """The statement says its arrival order (ORDER BY); else entries arrive in (producer, id) order."""
        return len(self.order) > 2


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


def _refuse_clauses(insert: exp.Insert, select: exp.Select) -> None:
    """A RewriteError for a clause of the INSERT or its SELECT that the plan cannot keep (see INSERT_PARTS and
    SELECT_PARTS), and for an aggregate or window over the rows (it would count the duplicates too)."""
    target = insert.this.this if isinstance(insert.this, exp.Schema) else insert.this
    extra = [a for a, v in insert.args.items() if v and a not in INSERT_PARTS]
    extra += [a for a, v in target.args.items() if v and a not in ("this", "db", "catalog")]
    if extra:
        raise RewriteError(
            f"INSERT ... {_clause(extra[0])}{at(insert.args.get(extra[0]) or target)} cannot be used with is_not_dup: "
            "a topic is append-only and seqdedup writes its columns; write INSERT INTO <topic> [(columns)] SELECT ..."
        )
    for arg in (a for a, v in select.args.items() if v and a not in SELECT_PARTS):
        clause = f"{_clause(arg)}{at(select.args[arg])}"
        if arg in ("sort", "cluster", "distribute"):
            raise RewriteError(f"{clause} does not give an arrival order; use ORDER BY to say in which order entries "
                               "arrive, or leave it out for (producer, sequence id) order")
        raise RewriteError(f"is_not_dup decides one entry per row, so its SELECT cannot have {clause}; aggregate, "
                           "limit or sample in a subquery in FROM instead")
    order = select.args.get("order") or exp.Order()
    for place, parts, what, types in (("SELECT list", select.expressions, "aggregate or use a window",
                                       (exp.Window, exp.AggFunc)),
                                      ("ORDER BY", order.expressions, "aggregate", (exp.AggFunc,))):
        for offender in filter(None, (_outside_subqueries(part, *types) for part in parts)):
            raise RewriteError(
                f"is_not_dup decides one entry per row, so its {place} cannot {what} ({offender.sql()[:60]}"
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
    if not isinstance(tree, exp.Insert) or not isinstance(tree.expression, exp.Select):
        raise RewriteError(
            f"is_not_dup{at(call)} works only in INSERT INTO <topic> SELECT ... WHERE is_not_dup(producer, sequence_id); "
            "write the statement in that form"
        )
    select = tree.expression
    if not 2 <= len(call.expressions) <= 3:
        raise RewriteError(
            f"is_not_dup takes (producer, sequence_id[, highest_sequence_id]); got {len(call.expressions)} "
            f"arguments{at(call)}"
        )
    # Walk up from the call: only ANDs (and parentheses) may stand between it and the SELECT's WHERE.
    node = call
    while not isinstance(node.parent, exp.Where):
        parent = node.parent
        if parent is None:
            raise RewriteError(f"is_not_dup{at(call)} must be a condition of the statement's WHERE clause")
        if not isinstance(parent, (exp.And, exp.Paren)):
            place = {exp.Or: "inside OR", exp.Not: "inside NOT", exp.Case: "inside CASE", exp.If: "inside CASE",
                     exp.Join: "in a join condition",
                     exp.Having: "in HAVING", exp.Select: "in a SELECT list", exp.Subquery: "in a subquery"}
            where = next((v for k, v in place.items() if isinstance(parent, k)), f"inside {parent.key.upper()}")
            raise RewriteError(
                f"is_not_dup must be a condition of the WHERE clause joined by AND, not {where}{at(call)}; "
                "move it to the top level of the WHERE of INSERT ... SELECT"
            )
        node = parent
    if node.parent.parent is not select:
        raise RewriteError(
            f"is_not_dup{at(call)} must be in the WHERE of the INSERT's own SELECT, not in a subquery or CTE"
        )
    _refuse_clauses(tree, select)
    for name in ("dup_status", "last_sequence_id", "producer_state"):
        for other in calls(tree, name):
            raise RewriteError(
                f"{name}{at(other)} cannot be used in the statement that calls is_not_dup: it would read the state "
                "the statement is changing; read it in a query of its own before the INSERT"
            )
    for argument in call.expressions:
        if argument.find(exp.AggFunc, exp.Window, exp.Subquery) or calls(argument, "is_not_dup"):
            raise RewriteError(f"is_not_dup's arguments must be plain row expressions{at(argument)}")
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


def expand_is_not_dup(tree: exp.Insert) -> DedupInsert:
    """Split a validated INSERT into its target, the narrow key query and the values query (plan step 1).

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
    highest = exp.func("coalesce", rest[0], sequence_id.copy()) if rest else sequence_id.copy()
    user_order = _arrival_order(select)

    # Drop the call from WHERE; the other conditions stay, so a row they filter out is not an entry at all.
    select_call = calls(select, "is_not_dup")[0]
    remaining = [c for c in _conjuncts(select.args["where"].this) if c is not select_call]
    select.set("where", exp.Where(this=exp.and_(*remaining)) if remaining else None)
    select.set("order", None)
    arguments = select.copy()
    arguments.set("expressions", [exp.alias_(a.copy(), name) for a, name in
                                  zip(call.expressions, (PRODUCER, SEQUENCE_ID, HIGHEST))])

    keys = [exp.alias_(producer, PRODUCER), exp.alias_(sequence_id, SEQUENCE_ID), exp.alias_(highest, HIGHEST)]
    keys += [exp.alias_(o.this.copy(), f"__sd_o{i}") for i, o in enumerate(user_order)]
    order = [_with(o, exp.column(f"__sd_o{i}")) for i, o in enumerate(user_order)]
    order += [exp.Ordered(this=exp.column(c), nulls_first=True) for c in (SEQUENCE_ID, HIGHEST)]
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
                       key_columns=[k.alias for k in keys], arguments=arguments, call=call)


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


# --- plan step 2: decisions -------------------------------------------------------------------------------------

def _earlier(order: list[exp.Ordered], *, peers: bool = False) -> exp.WindowSpec:
    """The frame of a producer's earlier entries in arrival order (or, with ``peers``, its equal-ordered ones)."""
    if peers:
        return exp.WindowSpec(kind="RANGE", start="CURRENT ROW", end="CURRENT ROW")
    return exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="1", end_side="PRECEDING")


def _over(function: exp.Expression, order: list[exp.Ordered], *, peers: bool = False) -> exp.Window:
    return exp.Window(this=function, partition_by=[exp.column(PRODUCER)],
                      order=exp.Order(expressions=[o.copy() for o in order]), spec=_earlier(order, peers=peers))


def _greatest(*values: exp.Expression) -> exp.Greatest:
    return exp.Greatest(this=values[0], expressions=list(values[1:]), ignore_nulls=True)


def first_decisions(keys: exp.Table, state: exp.Table, key_columns: list[str]) -> exp.Select:
    """Round 0 of the decisions: every entry with its producer's mark; none decided yet."""
    c, s = "c", "s"
    columns = [exp.column(k, table=c) for k in key_columns]
    return (
        exp.select(*columns, exp.alias_(exp.column("sequence_id", table=s), MARK),
                   exp.alias_(exp.cast(exp.null(), "boolean"), ACCEPTED))
        .from_(keys.as_(c))
        .join(state.as_(s), on=exp.EQ(this=exp.column("producer", table=s), expression=exp.column(PRODUCER, table=c)),
              join_type="left")
    )


def decision_round(previous: exp.Expression, key_columns: list[str], order: list[exp.Ordered], *,
                   batches: bool, first: bool) -> exp.Select:
    """One round of decisions over ``previous`` (a table, or ``first_decisions``).

    Keep what is decided; accept an entry whose lowest id is above every mark its producer can have, reject one
    at or below a mark the producer surely has. The bounds are sound, so a decision never changes once made.
    Without batch entries (``batches`` false) the two bounds are equal and this one round decides everything.
    The first round also counts each entry's peers (entries of the producer equal in arrival order and ids).
    """
    s, h, mark, accepted = (exp.column(c) for c in (SEQUENCE_ID, HIGHEST, MARK, ACCEPTED))
    above = s > exp.func("coalesce", _greatest(mark, _over(exp.Max(this=h.copy()) if not batches else exp.Max(
        this=exp.Case(ifs=[exp.If(this=exp.or_(accepted.is_(exp.null()), accepted.copy()), true=h.copy())])),
        order)), exp.convert(-1))
    if batches:
        below = s.copy() <= _greatest(
            mark.copy(), _over(exp.Max(this=s.copy()), order),
            _over(exp.Max(this=exp.Case(ifs=[exp.If(this=accepted.copy(), true=h.copy())])), order))
        decide = exp.Case(ifs=[exp.If(this=above, true=exp.true()), exp.If(this=below, true=exp.false())])
    else:
        decide = exp.Case(ifs=[exp.If(this=above, true=exp.true())], default=exp.false())
    peers = (_over(exp.Count(this=exp.Star()), order, peers=True) if first else exp.column(PEERS))
    source = previous.subquery("previous") if isinstance(previous, exp.Query) else previous.as_("previous")
    return exp.select(*key_columns, MARK, exp.alias_(peers, PEERS),
                      exp.alias_(exp.func("coalesce", accepted.copy(), decide), ACCEPTED)).from_(source)


def undecided(decisions: exp.Table) -> exp.Select:
    return exp.select(exp.Count(this=exp.Star())).from_(decisions.copy()).where(exp.column(ACCEPTED).is_(exp.null()))


def aggregate_decisions(keys: exp.Table, state: exp.Table) -> exp.Select:
    """The fast path: without ``ORDER BY`` and without batch entries, entries arrive in id order, so the new ones are
    the distinct (producer, sequence id) above the producer's mark: a hash aggregate, no sort.

    Each group is one accepted entry; ``__sd_peers`` counts the rows that sent it (all but one are duplicates).
    """
    c, s = "c", "s"
    select = (exp.select(*[exp.column(k, table=c) for k in (PRODUCER, SEQUENCE_ID, HIGHEST)],
                         exp.alias_(exp.Count(this=exp.Star()), PEERS))
              .from_(keys.as_(c)).group_by(*[exp.column(k, table=c) for k in (PRODUCER, SEQUENCE_ID, HIGHEST)]))
    return select.join(state.as_(s), join_type="left", on=exp.EQ(
        this=exp.column("producer", table=s), expression=exp.column(PRODUCER, table=c))).where(
        exp.column(SEQUENCE_ID, table=c) > exp.func("coalesce", exp.column("sequence_id", table=s), exp.convert(-1)))


# --- plan step 3: insert, per-producer counts ---------------------------------------------------------------------

def _row_number(order: list[str] | None) -> exp.Window:
    """row_number() in no particular order, or by ``order`` for engines that require one."""
    return exp.Window(this=exp.RowNumber(), order=exp.Order(
        expressions=[exp.Ordered(this=exp.column(c), nulls_first=True) for c in order]) if order else None)


def unchecked_rows(value_columns: list[str], values: exp.Select, base_position: int, *,
                   order: list[str] | None = None) -> exp.Select:
    """Deduplication disabled: every entry, numbered with its position; nothing is checked (R10)."""
    position = exp.Add(this=exp.convert(base_position), expression=_row_number(order))
    return exp.select(*value_columns, PRODUCER, SEQUENCE_ID, HIGHEST, exp.alias_(position, POSITION)).from_(
        values.subquery("c"))


def insert_rows(topic: exp.Table, user_columns: list[str], value_columns: list[str], rows: exp.Table,
                publish_time: exp.Expression, commit: int) -> exp.Insert:
    """``INSERT INTO topic`` of rows that already carry their keys and positions (see ``unchecked_rows``)."""
    keys = [PRODUCER, SEQUENCE_ID, HIGHEST, POSITION]
    body = exp.select(*value_columns, *keys, publish_time.copy(), exp.convert(commit)).from_(rows.copy())
    return exp.insert(body, topic.copy(), columns=[exp.to_identifier(c, quoted=True) for c in user_columns + SYSTEM])


def numbered(accepted: exp.Select, key_columns: list[str], base_position: int, *,
             order: list[str] | None = None) -> exp.Select:
    """The accepted entries with their positions: dense after ``base_position``, in the order the engine numbers
    them. A statement commits as one unit, so its entries need no order among themselves; numbering the narrow
    keys here (not the rows in the INSERT) keeps the INSERT free of a window that would serialize it."""
    position = exp.Add(this=exp.convert(base_position), expression=_row_number(order))
    return exp.select(*key_columns, PEERS, exp.alias_(position, POSITION)).from_(accepted.subquery("accepted"))


def accepted_entries(decisions: exp.Table, key_columns: list[str]) -> exp.Select:
    """The new entries of the decisions."""
    return exp.select(*key_columns, PEERS).from_(decisions.copy()).where(exp.column(ACCEPTED))


def insert_accepted(topic: exp.Table, user_columns: list[str], value_columns: list[str], values: exp.Select,
                    key_columns: list[str], accepted: exp.Table, publish_time: exp.Expression, commit: int, *,
                    ties: bool) -> exp.Insert:
    """``INSERT INTO topic (user columns, system columns) SELECT ...`` of the accepted entries (see ``numbered``).

    The values are read once more and matched to the accepted keys. Entries that are equal in every key (the same
    id sent twice at the same arrival) are interchangeable: with ``ties`` one of each group is kept.
    """
    c, a = "c", "a"
    nullable = set(key_columns) - {PRODUCER, SEQUENCE_ID, HIGHEST}     # validated: only ORDER BY values can be NULL
    on = exp.and_(*[(exp.NullSafeEQ if k in nullable else exp.EQ)(this=exp.column(k, table=c),
                                                                   expression=exp.column(k, table=a))
                    for k in key_columns])
    keys = [PRODUCER, SEQUENCE_ID, HIGHEST, POSITION]

    def matched(peers_condition: exp.Expression) -> exp.Select:
        return (
            exp.select(*[exp.column(v, table=c) for v in value_columns], *[exp.column(k, table=a) for k in keys])
            .from_(values.subquery(c))
            .join(exp.select("*").from_(accepted.copy()).where(peers_condition).subquery(a), on=on.copy())
        )

    peers = exp.column(PEERS)
    body = matched(peers.eq(1) if ties else exp.true())
    if ties:
        tied = matched(peers > 1).qualify(exp.Window(       # any one of the interchangeable rows
            this=exp.RowNumber(), partition_by=[exp.column(POSITION, table=a)],
            order=exp.Order(expressions=[exp.Ordered(this=exp.column(POSITION, table=a))])).eq(1))
        body = exp.union(body, tied, distinct=False)
    rows = exp.select(*value_columns, *keys, publish_time.copy(), exp.convert(commit)).from_(body.subquery("accepted"))
    return exp.insert(rows, topic.copy(), columns=[exp.to_identifier(c, quoted=True) for c in user_columns + SYSTEM])


def producer_counts(keys: exp.Table, accepted: exp.Table) -> exp.Select:
    """Per producer: entries written, dropped as duplicates, the first and last position and highest id written (R5)."""
    return sqlglot.parse_one(
        """
        SELECT k.producer, coalesce(a.written, 0) AS written, k.sent - coalesce(a.written, 0) AS duplicates,
               a.first_position, a.last_position, a.highest
        FROM (SELECT __sd_producer AS producer, count(*) AS sent FROM keys GROUP BY __sd_producer) AS k
        LEFT JOIN (SELECT __sd_producer AS producer, count(*) AS written, min(__sd_position) AS first_position,
                          max(__sd_position) AS last_position, max(__sd_highest) AS highest
                   FROM accepted GROUP BY __sd_producer) AS a ON a.producer = k.producer
        """,
        read="spark",
    ).transform(lambda n: _rename_table(n, keys=keys, accepted=accepted))


def _rename_table(node: exp.Expression, **tables: exp.Table) -> exp.Expression:
    if isinstance(node, exp.Table) and node.name in tables and not node.db:
        table = tables[node.name].copy()
        if node.alias:
            table.set("alias", exp.TableAlias(this=exp.to_identifier(node.alias)))
        return table
    return node
