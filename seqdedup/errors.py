"""The one error tree of seqdedup.

Every error says what is wrong and how to fix it. Errors about the user's SQL carry the line and column of the
offending expression when sqlglot knows them. This module imports nothing, so every layer may raise these.
"""
from __future__ import annotations


class SeqdedupError(Exception):
    """Root of every error seqdedup raises on purpose."""


class InvalidEntryError(SeqdedupError):
    """An entry's producer or ids are invalid (NULL, negative, highest below lowest); nothing was written."""


class SequenceGapError(SeqdedupError):
    """A statement would write an id that leaves a hole after its producer's mark, and the topic's ``gap_policy`` is
    ``refuse`` (R17); nothing was written."""


class PayloadConflictError(SeqdedupError):
    """A statement would drop an entry whose (producer, id) the topic holds with a different payload, and the topic's
    ``payload_conflicts`` policy is ``refuse`` (R18); nothing was written."""


class RewriteError(SeqdedupError):
    """User SQL cannot be rewritten: is_not_dup in a place it cannot mean anything, wrong arity, no INSERT target."""


class TopicError(SeqdedupError):
    """A topic is unknown, already exists, or has a shape that does not fit the statement."""


class PolicyError(SeqdedupError):
    """A policy name or value is not valid."""


class CatalogError(SeqdedupError):
    """The catalog tables are missing, damaged, or written by a newer seqdedup."""


class EngineError(SeqdedupError):
    """The engine refused or failed the work (locked file, read-only database, engine error)."""


class CommitConflict(EngineError):
    """Another writer of the table (a driver on the same metastore) published the commit number this one took: this
    one is not published, and what it decided must be decided again on the new state (a statement does so itself)."""


def already_exists(error: Exception | str) -> bool:
    """Whether an engine's error (or its text) says that what was created exists already (another process created
    it first).

    Example:
        >>> already_exists(EngineError("Spark: AlreadyExistsException(message:Table events already exists)"))
        True
    """
    text = str(error).lower()
    return any(words in text for words in ("already exist", "alreadyexist", "already_exist", "duplicate key value"))


class ProducerError(SeqdedupError):
    """A producer is used wrongly: a name already connected to the topic (R14), mixed explicit and automatic ids."""


class OutcomeUnknownError(SeqdedupError):
    """A send could not be settled before its timeout; its entries stay pending, with their ids, and the next
    ``send`` or ``flush`` retries them (never under new ids). A statement raises it when the engine failed as it
    wrote, so that it may or may not have been written (DuckDB: a checkpoint after the commit, with the disk full):
    reconnect and retry it with the same producer names and sequence ids, which seqdedup deduplicates."""


class SeqdedupWarning(UserWarning):
    """A use that works as specified but is probably not what was meant."""


class NotRewrittenError(SeqdedupError):
    """A seqdedup function reached the engine without the rewrite; run the statement through seqdedup."""


def at(expression) -> str:
    """' at line L, column C' for a sqlglot expression that remembers where it was parsed, else ''.

    sqlglot keeps positions on identifiers, literals and function calls; for any other node (a column, a GROUP
    BY, a condition) the position is that of the first token under it that has one.
    """
    walk = getattr(expression, "walk", None)
    nodes = walk() if walk else [expression]
    known = [m for m in (getattr(n, "meta", None) or {} for n in nodes) if "line" in m and "col" in m]
    if not known:
        return ""
    meta = min(known, key=lambda m: (m["line"], m.get("start", 0)))
    return f" at line {meta['line']}, column {meta['col']}"
