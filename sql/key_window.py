"""``is_new(key[, key2[, key3]])``: the key window (R20) for sources that cannot send the same id twice.

A key is a producer whose only id is 0. ``WHERE is_new(k)`` becomes ``WHERE is_not_dup('key:' || md5(k), 0)``, so
every rule, plan and guarantee of producers serves keys unchanged: the first copy of a key is written and its mark
set (0), a later copy is at the mark and dropped (a retry, or a repeat within the statement), the marks are
snapshotted in the statement's commit and recovered by snapshot + replay, and a key leaves the window, as an idle
producer leaves the state, once ``producer_inactivity_timeout`` has passed since it was written (R11, with R11's
clock). The state holds the keys written within the window, whatever the topic's size.

The digest is an MD5 of the key's parts as text, each spelled ``v<length>:<text>`` (or ``n`` for a NULL part) and
joined by commas: two keys share a digest only if their parts' texts are equal (or by a 128-bit collision). A key
of one part that is NULL has no digest, and the statement is refused as an entry with no producer would be (R4).
"""
from __future__ import annotations

from sqlglot import exp

from seqdedup.errors import RewriteError, at

from .rewrite import calls

#: The producer name of a keyed entry starts with this; the rest is the digest's 32 hexadecimal digits.
KEY_PREFIX = "key:"


def digest(parts: list[exp.Expression]) -> exp.Expression:
    """The producer name of a key of one to three ``parts``: NULL where a key of one part is NULL.

    The spelled text is one ``CONCAT`` of every piece, each part's guarded by a CASE: DuckDB joins ``a || b || c``
    a pair at a time, a new string each, where ``CONCAT`` makes one (5M two-part keys spelled: 1.3 to 1.4 CPU s
    against 1.9 to 2.2 s). No piece is NULL where ``CONCAT`` sees it, so where the engines' meanings of a NULL
    argument differ (Spark: the whole is NULL; DuckDB: the piece is empty) never comes into play.

    Example:
        >>> print(digest([exp.column("k")]).sql("spark"))
        'key:' || MD5(CASE WHEN k IS NULL THEN NULL ELSE CONCAT('v', CAST(LENGTH(CAST(k AS STRING)) AS STRING), ':', \
CAST(k AS STRING)) END)
    """
    pieces: list[exp.Expression] = []
    for part in parts:
        text = exp.cast(part.copy(), "text")
        spelled = exp.Anonymous(this="CONCAT", expressions=[
            exp.Literal.string("v"), exp.cast(exp.Length(this=text.copy()), "text"), exp.Literal.string(":"), text])
        # (a tuple's NULL part is a value of its own, so that (NULL, 1) is one key wherever it comes from)
        null = exp.null() if len(parts) == 1 else exp.Literal.string("n")
        if pieces:
            pieces.append(exp.Literal.string(","))
        pieces.append(exp.case().when(part.copy().is_(exp.null()), null).else_(spelled))
    joined = pieces[0] if len(pieces) == 1 else exp.Anonymous(this="CONCAT", expressions=pieces)
    return exp.DPipe(this=exp.Literal.string(KEY_PREFIX), expression=exp.MD5(this=joined))


def expand_is_new(tree: exp.Expression) -> exp.Expression:
    """``tree`` with its ``is_new(...)`` call in the WHERE replaced by the ``is_not_dup`` of its key (the call keeps
    its place, so that the checks of ``rewrite.validate_is_not_dup`` speak of where the user wrote it); a tree
    without one, as it is.

    Example:
        >>> import sqlglot
        >>> print(expand_is_new(sqlglot.parse_one("INSERT INTO t SELECT x FROM s WHERE is_new(id, src)")).sql()[:60])
        INSERT INTO t SELECT x FROM s WHERE IS_NOT_DUP('key:' || MD5
    """
    found = calls(tree, "is_new")
    if not found:
        return tree
    if calls(tree, "is_not_dup"):
        raise RewriteError(f"a statement calls is_new or is_not_dup, not both{at(found[0])}: is_new(key) decides by "
                           "the key alone, is_not_dup(producer, sequence_id) by the producer's ids")
    if len(found) > 1:
        raise RewriteError(f"a statement may call is_new once; this one calls it {len(found)} times{at(found[1])}")
    call = found[0]
    if not 1 <= len(call.expressions) <= 3:
        raise RewriteError(f"is_new takes a key of one to three parts, is_new(key[, key2[, key3]]); got "
                           f"{len(call.expressions)} arguments{at(call)}. For more, give a hash of them "
                           "(md5 of their concatenation)")
    tree = tree.copy()
    call = calls(tree, "is_new")[0]
    keyed = exp.Anonymous(this="is_not_dup", expressions=[digest(call.expressions), exp.Literal.number(0)])
    keyed.meta.update(call.meta, written="is_new")
    call.replace(keyed)
    return tree
