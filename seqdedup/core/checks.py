"""The checks of a statement that need no rows (its types and shape, read from its SELECT without running it),
and the errors that name the entry or the expression at fault: R4's invalid entries, and a computation that fails
(the user's expression, or, on a valid statement, seqdedup's own)."""
from __future__ import annotations

import re

from sqlglot import exp

from seqdedup.catalog.ids import PART_LIMIT
from seqdedup.catalog.names import HIGHEST, PRODUCER, RESERVED, SEQUENCE_ID
from seqdedup.catalog.schema import SYSTEM_COLUMNS
from seqdedup.errors import EngineError, InvalidEntryError, RewriteError, TopicError, at
from seqdedup.sql import plan, rewrite

from .topic_state import TopicState

#: The words of an engine error about computing a value (not a full disk, a lost file or a lock).
COMPUTING = re.compile(r"overflow|out of range|cast|conver|divi|arithmetic|invalid input|numeric", re.IGNORECASE)


def id_shape(run, topic) -> None:
    """R19: the statement's ids have the shape of the topic's (an integer, or a composite id of so many parts), or
    a RewriteError says how to write them; a plain id on a topic of one-part ids is read as that part."""
    statement, parts = run.statement, topic.id_parts
    if parts == 1 and statement.id_parts is None and not statement.keyed and not statement.batched:
        run.statement = run.written = rewrite.expand_is_not_dup(statement.source, run.adapter.binary, one_part=True)
        return
    if statement.id_parts == parts:
        return
    where = at(statement.call)
    if statement.keyed:
        raise RewriteError(f"is_new{where} decides by keys, whose only id is the integer 0, but topic "
                           f"{topic.ref.key} takes composite ids of {parts} parts: write keys into a topic of integer "
                           "ids (created without id_parts)")
    if parts is None:
        raise RewriteError(f"topic {topic.ref.key} takes integer sequence ids (BIGINT), but is_not_dup{where} gives a "
                           f"composite id of {statement.id_parts} parts: give one integer, or create the topic with "
                           f"id_parts={statement.id_parts}")
    raise RewriteError(f"topic {topic.ref.key} takes composite ids of {parts} parts (R19), but is_not_dup{where} "
                       f"gives {'an integer id' if statement.id_parts is None else f'{statement.id_parts} parts'}: "
                       f"write its id as a tuple of {parts}, is_not_dup(producer, ({', '.join('abc'[:parts])}))")


def check(run, state: TopicState) -> tuple[list[str], list[str]]:
    """Types and shape, read from the SELECT without running it: the producer a string, ids integers, the
    values fitting the topic's columns, no column named like seqdedup's own. Returns (targets, value columns)."""
    statement, adapter = run.statement, run.adapter
    try:     # one look at the SELECT: the values, then is_not_dup's arguments as written (before any COALESCE)
        both = adapter.query_columns(described(run))
        count = len(statement.arguments.expressions)
        columns, types = both[:-count], dict(both[-count:])
    except EngineError:     # one part at a time, for the error about the part that fails
        columns, types = None, dict(describe(run, run.kept("arguments", lambda: statement.arguments)))
    ids = "an integer: CAST it to BIGINT (sequence ids are signed 64-bit, 0 to 9223372036854775807)"
    checks = ((rewrite.ARGUMENTS[0], "producer", adapter.STRING_TYPES, "a string: CAST it to STRING"),
              (rewrite.ARGUMENTS[1], "sequence_id", adapter.INTEGER_TYPES, ids),
              (rewrite.ARGUMENTS[2], "highest_sequence_id", adapter.INTEGER_TYPES, ids))
    parts = f"an integer: CAST it to BIGINT, or to DECIMAL(20, 0) for values of 2^63 and above (each part is 0 to " \
            f"{PART_LIMIT - 1})"
    checks += tuple((name, f"sequence_id's part {name[len(rewrite.PART):]}", adapter.INTEGER_TYPES | {"DECIMAL"},
                     parts) for name in types if name.startswith(rewrite.PART))
    for column, role, allowed, fix in checks:
        kind = types.get(column)
        if kind is None:
            continue
        base = re.split(r"[( ]", kind.strip('"'), maxsplit=1)[0].upper()    # STRING COLLATE UTF8_LCASE: STRING
        whole = base != "DECIMAL" or re.search(r",\s*0\s*\)", kind)     # (a DECIMAL's scale 0: whole numbers)
        if base not in allowed | adapter.NULL_TYPES or not whole:
            raise InvalidEntryError(f"is_not_dup's {role} argument has type {kind.upper()}; it must be {fix}")
    if columns is None:
        columns = describe(run, run.kept("values", lambda: statement.values))
    names = [name for name, _ in columns]
    ours = {e.alias for e in statement.values.expressions if isinstance(e, exp.Alias)}
    clash = [n for n in names if (n.lower().startswith(RESERVED) and n not in ours) or names.count(n) > 1]
    if clash:
        raise RewriteError(f"the SELECT gives the column {clash[0]!r}; names starting with {RESERVED} are "
                           "seqdedup's own: rename it (AS ...)")
    values = [n for n in names if n not in statement.key_columns]
    return _targets(run, state, values), values


def described(run) -> exp.Select:
    """The statement's values, then is_not_dup's arguments as written: what ``check`` reads the types of."""
    return run.kept("described", lambda: run.statement.values.select(*run.statement.arguments.expressions))


def describe(run, query: exp.Select) -> list[tuple[str, str]]:
    """The columns of a part of the statement, read without running it. The engine's error about it (a typo in
    a column or table name) speaks of the user's statement: its first sentence, where the name stands in the
    user's SQL, and that SQL; never the rewritten query, whose names the user never wrote."""
    try:
        return run.adapter.query_columns(query)
    except EngineError as error:
        lines = str(error).split("\n")
        said = lines[0]
        for noise in (" SQLSTATE", "; line "):
            said = said.split(noise)[0]
        hint = next((line.strip() for line in lines[1:3] if line.startswith(("Candidate", "Did you mean"))), "")
        words = set(re.findall(r"[\w$]+", said))
        named = [n for n in run.statement.source.find_all(exp.Column, exp.Table) if n.name in words]
        where = at(named[0]) if named else ""
        raise EngineError(f"{said.rstrip('.!')}{where}{' (' + hint.rstrip('.') + ')' if hint else ''}, in the "
                          f"statement: {run.statement.source.sql(dialect=run.dialect)}") from None


def _targets(run, state: TopicState, values: list[str]) -> list[str]:
    topic, statement = state.topic, run.statement
    user_columns = [name for name, _ in topic.user_columns]
    if statement.columns is None:
        targets = user_columns
    else:
        lowered = {c.lower(): c for c in user_columns}
        unknown = [c for c in statement.columns if c.lower() not in lowered]
        if unknown:
            raise TopicError(f"topic {topic.ref.key} has no columns {unknown}; its columns are {user_columns} "
                             f"(system columns {list(SYSTEM_COLUMNS)} are written by seqdedup)")
        targets = [lowered[c.lower()] for c in statement.columns]
        repeated = sorted({c for c in targets if targets.count(c) > 1})
        if repeated:
            raise TopicError(f"the INSERT lists the columns {repeated} more than once; list each column once")
    if len(values) != len(targets):
        raise TopicError(f"the SELECT gives {len(values)} values per entry but topic {topic.ref.key} takes "
                         f"{len(targets)} ({', '.join(targets)}); list the columns to write, in order")
    return targets


def refuse_invalid(run) -> None:
    """R4: NULL producer or ids, negative ids, highest below lowest: an InvalidEntryError naming the first such
    entry (run when a plan found some; reads the keys again, which only an error pays for)."""
    p, s, h = (exp.column(c) for c in (PRODUCER, SEQUENCE_ID, HIGHEST))
    problems = [
        (p.is_(exp.null()), "a NULL producer", "give every entry a producer name"),
        (s.is_(exp.null()), "a NULL sequence_id", "give every entry a sequence id"),
        (exp.or_(s < 0, h < 0), "a negative sequence id", "sequence ids are 0 or more (64-bit signed)"),
        (exp.or_(s > plan.MAX_ID, h > plan.MAX_ID), "a sequence id above 9223372036854775807",
         "sequence ids are signed 64-bit"),
        (h < s, "highest_sequence_id below sequence_id",
         "a batch entry's highest id must be at least its lowest id"),
    ]
    if run.statement.id_parts is not None:     # (R19: an id of a part out of range is encoded as NULL)
        problems[1:] = [(s.is_(exp.null()), "a composite sequence_id with a part that is NULL, negative, not a "
                         f"whole number, or above {PART_LIMIT - 1}",
                         "each part of a composite id is an unsigned 64-bit integer")]
    keys = run.statement.keys.subquery("k")
    if run.statement.keyed:     # (is_new: the producer is the key's digest, NULL only for a NULL key of one part)
        nulls = run.adapter.fetchall(exp.select(exp.func("count_if", p.is_(exp.null()))).from_(keys.copy()))[0][0]
        if nulls:
            raise InvalidEntryError(
                f"{nulls} entr{'y has' if nulls == 1 else 'ies have'} a NULL key{at(run.statement.call)}; give every "
                "entry a key (filter the NULLs out, or COALESCE them), or a key of several parts, which may have "
                "NULL parts. Nothing was written")
    counts = run.adapter.fetchall(exp.select(*[exp.func("count_if", c.copy()) for c, _, _ in problems]).from_(
        keys.copy()))[0]
    for (condition, what, fix), count in zip(problems, counts):
        if count:
            example = run.adapter.fetchall(
                exp.select(p, s, h).from_(keys.copy()).where(condition).order_by(p, s).limit(1))[0]
            raise InvalidEntryError(
                f"{count} entr{'y has' if count == 1 else 'ies have'} {what} (first: producer={example[0]!r}, "
                f"sequence_id={example[1]}, highest_sequence_id={example[2]}); {fix}. Nothing was written")
    raise InvalidEntryError("an entry is invalid (NULL producer or id, negative id, or highest below lowest), "
                            "but the source gave none when read again; materialize it first. Nothing was written")


def failing(run, error: EngineError) -> EngineError:
    """An engine error while computing the entries (after the commit was rolled back): one of the user's
    expressions failing on some row (an overflow, a bad cast, a division by zero), and the error says where to
    look; or, where the user's expressions alone compute on every row, one of seqdedup's own, and the error says
    so (never "fix your arguments" for a valid statement). A plan's query that met an invalid entry (R4, ``REFUSED``)
    is named as such: the statement's keys are read again (``refuse_invalid``)."""
    if plan.REFUSED in str(error):
        run.statement = run.written     # (a table of the rows read once went with the rollback)
        refuse_invalid(run)
    if not own_expressions_fail(run):
        if not COMPUTING.search(str(error)):     # the engine failed otherwise (a full disk): as it said
            return error
        return EngineError(
            f"seqdedup's own query failed on a valid statement: {str(error).rstrip('.!')}. This is a defect of "
            "seqdedup, not of the statement: please report it with this message. Nothing was written")
    return EngineError(
        f"could not compute the statement's entries: {str(error).rstrip('.!')}. Fix the expression that fails, "
        f"among is_not_dup's arguments{at(run.statement.call)}, the WHERE conditions and the ORDER BY (sequence "
        "ids must fit signed 64-bit: 0 to 9223372036854775807). Nothing was written")


def own_expressions_fail(run) -> bool:
    """Whether the statement's own expressions (its values, is_not_dup's arguments, its WHERE and ORDER BY),
    computed alone on every row, fail: one aggregate that needs every column of every row (a hash of them)."""
    values = run.written.values
    columns = [exp.column(s.alias_or_name) for s in values.selects]
    try:
        run.adapter.fetchall(exp.select(exp.Max(this=exp.func(run.adapter.KEY_HASH, *columns))).from_(
            values.subquery("v")))
    except EngineError:
        return True
    return False
