"""What a session refuses to run besides ``is_not_dup`` statements: a transaction around statements, and a write
around seqdedup into a topic or a catalog table (``Session.run``)."""
from __future__ import annotations

from sqlglot import exp

from seqdedup.catalog.schema import CATALOG_TABLES
from seqdedup.errors import RewriteError
from seqdedup.sql import statements

from .broker import Broker


def refuse(broker: Broker, tree: exp.Expression) -> None:
    """A RewriteError for ``BEGIN``, ``COMMIT`` and ``ROLLBACK``, and for a statement that writes around seqdedup
    (``refuse_writes_around``); nothing for the others."""
    if isinstance(tree, (exp.Transaction, exp.Commit, exp.Rollback)):
        said = {exp.Transaction: "BEGIN", exp.Commit: "COMMIT", exp.Rollback: "ROLLBACK"}[type(tree)]
        raise RewriteError(f"{said} through a seqdedup session is refused: each statement is one "
                           "commit of its own (all of it or none), and a transaction around several would hold "
                           "seqdedup's marks in the dark; run the statements one by one (a failed one changes "
                           "nothing), or write them into a staging table and insert from it in one statement")
    refuse_writes_around(broker, tree)


def refuse_writes_around(broker: Broker, tree: exp.Expression) -> None:
    """A topic is written only through is_not_dup, and the catalog only by seqdedup: a statement that inserts
    into, updates, deletes from, replaces or drops one is refused (names matched as the engines match them, case
    and quotes aside). ``seqdedup topic drop`` deletes a topic on purpose."""
    written = [table for table in statements.written_tables(tree) if table.name]
    if not written:             # (a query: no read of the topic list, which costs Spark a job)
        return
    topics = {key.lower() for key in broker.topics()}
    for table in written:
        ref = broker.ref(table)
        what = tree.key.upper() if not isinstance(tree, exp.Create) else f"CREATE {tree.kind}"
        if isinstance(tree, exp.Copy):
            what = "COPY ... FROM"
        if ref.key.lower() in topics:
            if isinstance(tree, exp.Insert):
                raise RewriteError(f"INSERT INTO topic {ref.key} must filter with WHERE is_not_dup(producer, "
                                   "sequence_id): seqdedup assigns its positions and keeps its marks")
            raise RewriteError(f"{what} on topic {ref.key} is refused: a topic is written only through INSERT ... "
                               "WHERE is_not_dup(...), so that each entry is there once with its position; "
                               "to delete a topic on purpose, run seqdedup topic drop (Session.drop_topic)")
        if ref.namespace.lower() == broker.adapter.DEFAULT_NAMESPACE.lower() and ref.name.lower() in CATALOG_TABLES:
            raise RewriteError(f"{what} on {ref.name} is refused: the catalog tables are written by seqdedup only "
                               "(a change by hand can make seqdedup drop new entries or write one twice)")


__all__ = ["refuse", "refuse_writes_around"]
