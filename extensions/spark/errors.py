"""Spark's errors as seqdedup's: each names the problem and the fix (a full disk, a warehouse this process may not
write, a partition another tool registered, a catalog another metastore holds), and the few that mean another
driver changed a topic's partitions under this one."""
from __future__ import annotations

import contextlib
import re

from sqlglot import exp

from seqdedup.errors import CatalogError, EngineError

#: What a Java cause of a failed write says when the disk is full (ENOSPC, EFBIG past a file size limit, EDQUOT),
#: and when this process may not write where the warehouse is (EACCES, EROFS, or Hadoop's own words for them).
DISK_FULL = ("No space left on device", "File too large", "Disk quota exceeded")
NOT_WRITABLE = ("Permission denied", "Read-only file system", "Mkdirs failed", "unable to create one")


def causes(error: Exception) -> list[str]:
    """The first line of a Spark error, then of every Java exception behind it, outermost first (a full disk is
    often several causes deep, under a generic task or job failure)."""
    texts = [str(error)]
    java = getattr(error, "java_exception", None) or getattr(error, "_origin", None)
    with contextlib.suppress(Exception):    # a JVM that is gone answers nothing more
        while java is not None and len(texts) < 30:
            texts.append(str(java.toString()))
            java = java.getCause()
    return [text.strip().splitlines()[0] if text.strip() else type(error).__name__ for text in texts]


def engine_error(error: Exception) -> EngineError:
    """An EngineError that names the problem and the fix, for a PySpark error or a failed Java job.

    Example:
        >>> text = str(engine_error(Exception("[PARTITIONS_ALREADY_EXIST] Cannot ADD or RENAME TO partition(s) "
        ...                                    "PARTITION (`_commit` = 3) in table `db`.`events`")))
        >>> text.split(":")[0], "Nothing was published; run the statement again" in text
        ('the commit could not be published', True)
    """
    chain = causes(error)
    for cause in reversed(chain):           # the innermost cause says it best
        if any(words in cause for words in DISK_FULL):
            return EngineError(f"the disk is full: Spark could not write a file ({cause}); free space (or raise the "
                               "file size limit, ulimit -f), then run the statement again: seqdedup publishes a "
                               "commit only once all its files are written, so a retry writes each entry once")
    for cause in reversed(chain):
        if any(words in cause for words in NOT_WRITABLE):
            return EngineError(f"Spark may not write to the warehouse ({cause}); make its folder writable by this "
                               "user, or connect with read_only=True to only read")
    if "PARTITIONS_ALREADY_EXIST" in chain[0] and "_commit" in chain[0]:
        return EngineError(f"the commit could not be published: its partition exists already ({chain[0]}), "
                           "registered by a tool other than this seqdedup session (an INSERT into the topic's table "
                           "on Spark itself, or another writer). Nothing was published; run the statement again: "
                           "seqdedup recovers the topic and numbers the commit past that partition (docs/engines/"
                           "spark.md, foreign rows)")
    # A failed Java job (a Py4JJavaError) says only which call failed; its Java exception says why.
    return EngineError(f"Spark: {chain[1] if hasattr(error, 'java_exception') and len(chain) > 1 else chain[0]}")

#: What Hive's metastore says when another driver drops or moves a topic's partitions while this one lists or drops
#: them (a compaction): a partition gone between Spark's look and Hive's drop, a partition whose rows vanished
#: while listed (``Table.createSpec`` on an empty list), a row deleted under a metastore transaction.
MOVED_UNDER = ("Partition or table doesn't exist", "NoSuchObjectException", "No such database row",
               "IndexOutOfBoundsException: Index 0 out of bounds for length 0")
#: Tries of a listing that another driver changed meanwhile, and the most seconds between them.
MOVED_TRIES, MOVED_WAIT = 5, 0.5


def moved_under(error: Exception) -> bool:
    """Whether ``error`` is one of MOVED_UNDER.

    Example:
        >>> moved_under(EngineError("Spark: org.apache.hadoop.hive.ql.metadata.HiveException: Partition or table "
        ...                          "doesn't exist."))
        True
    """
    return any(words in str(error) for words in MOVED_UNDER)


def unregistered_catalog(table: exp.Table, error: EngineError) -> CatalogError:
    """The warehouse holds a catalog table's files that this session's metastore does not know: the home's tables
    were registered in another metastore (a shared one), or its own metastore_db was deleted."""
    folder = re.search(r"location [`']?(?:file:)?(.+?)[`']? already exists", str(error))
    return CatalogError(
        f"the warehouse holds seqdedup's catalog table {table.name} ({folder[1] if folder else 'its folder'}), but "
        "this session's metastore does not know it: the tables were registered in another metastore. Where the "
        "drivers share one, give it: --metastore URL (or SEQDEDUP_METASTORE) on the command line, "
        "local_session(home, metastore=URL) in Python. Where this home's own metastore_db was deleted or not copied, "
        "restore it; the files alone do not make a catalog")


def not_found(error, table: exp.Table) -> bool:
    """Whether a Spark error says that ``table`` itself does not exist (not a table or view it reads)."""
    return error.getCondition() == "TABLE_OR_VIEW_NOT_FOUND" and \
        _names(error.getMessageParameters().get("relationName", ""), table)


def _names(relation: str, table: exp.Table) -> bool:
    """Whether a relation's name as Spark's errors write it is ``table``'s (Hive names are letters, digits and _).

    Example:
        >>> _names("`default`.`Events`", exp.to_table("default.events")), _names("`default`.`t`", exp.to_table("u"))
        (True, False)
    """
    parts = [part.name.lower() for part in table.parts]
    return relation.replace("`", "").lower().split(".")[-len(parts):] == parts

